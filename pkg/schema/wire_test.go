package schema

import (
	"bytes"
	"errors"
	"testing"
)

func TestParseWire(t *testing.T) {
	b := AppendWire(nil, 258, []byte{7, 8})
	if !bytes.Equal(b, []byte{0, 0, 0, 1, 2, 7, 8}) {
		t.Fatalf("AppendWire: %x", b)
	}
	id, p, err := ParseWire(b)
	if err != nil || id != 258 || !bytes.Equal(p, []byte{7, 8}) {
		t.Fatalf("ParseWire: %d %x %v", id, p, err)
	}
	if id, p, err := ParseWire([]byte{0, 0, 0, 0, 1}); err != nil || id != 1 || len(p) != 0 {
		t.Fatalf("an empty payload: %d %x %v", id, p, err)
	}
	for name, b := range map[string][]byte{
		"empty":        nil,
		"short":        {0, 0, 0, 1},
		"magic 1":      {1, 0, 0, 0, 1},
		"plain JSON":   []byte(`{"id":"o-1"}`),
		"schema id 0":  {0, 0, 0, 0, 0, 9},
		"id past 2^31": {0, 0x80, 0, 0, 0, 9},
	} {
		if _, _, err := ParseWire(b); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("%s: %v, want ErrInvalidPayload", name, err)
		}
	}
}

// FuzzParseWire: ParseWire never panics; what it accepts re-frames to the
// same bytes.
func FuzzParseWire(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 2})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, p, err := ParseWire(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("ParseWire: %v", err)
			}
			return
		}
		if got := AppendWire(nil, id, p); !bytes.Equal(got, b) {
			t.Fatalf("re-framed %x, want %x", got, b)
		}
	})
}
