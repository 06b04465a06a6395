package bookie

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/bookkeeper/storage"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []addRecord{
		{ledger: 1, entry: 0, lac: -1, checksum: 7, masterKey: []byte("k"), payload: nil},
		{ledger: 1 << 40, entry: 1 << 33, lac: 1<<33 - 1, checksum: 0xfffffff0, recovery: true, masterKey: bytes.Repeat([]byte{9}, storage.MaxMasterKeySize), payload: []byte("payload")},
	} {
		got, err := decodeRecord(appendRecord(nil, r))
		if err != nil {
			t.Fatal(err)
		}
		if got.ledger != r.ledger || got.entry != r.entry || got.lac != r.lac || got.checksum != r.checksum ||
			got.recovery != r.recovery || !bytes.Equal(got.masterKey, r.masterKey) || !bytes.Equal(got.payload, r.payload) {
			t.Fatalf("round trip: %+v -> %+v", r, got)
		}
	}
}

// The bytes of version 1 are fixed: a change here is a format change that
// needs a new version (see record.go).
func TestRecordGolden(t *testing.T) {
	got := hex.EncodeToString(appendRecord(nil, addRecord{ledger: 2, entry: 3, lac: 1, checksum: 0xdeadbeef, recovery: true, masterKey: []byte("key"), payload: []byte("data")}))
	const want = "0101010003000000020000000000000003000000000000000100000000000000efbeadde6b657964617461"
	if got != want {
		t.Fatalf("record bytes\n got %s\nwant %s", got, want)
	}
}

func TestRecordDecodeRejects(t *testing.T) {
	good := appendRecord(nil, addRecord{ledger: 1, entry: 2, lac: 1, masterKey: []byte("key"), payload: []byte("p")})
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, b := range map[string][]byte{
		"short":          good[:recordHeaderSize-1],
		"version":        mutate(func(b []byte) []byte { b[0] = 2; return b }),
		"type":           mutate(func(b []byte) []byte { b[1] = 9; return b }),
		"flags":          mutate(func(b []byte) []byte { b[2] = 0x80; return b }),
		"reserved":       mutate(func(b []byte) []byte { b[6] = 1; return b }),
		"empty key":      mutate(func(b []byte) []byte { b[4], b[5] = 0, 0; return b }),
		"key past end":   mutate(func(b []byte) []byte { b[4], b[5] = 0xff, 0x03; return b }),
		"negative entry": mutate(func(b []byte) []byte { b[23] = 0x80; return b }),
		"lac below -1":   mutate(func(b []byte) []byte { copy(b[24:32], bytes.Repeat([]byte{0xfe}, 8)); return b }),
	} {
		if _, err := decodeRecord(b); !errors.Is(err, storage.ErrCorrupt) {
			t.Errorf("%s: decode = %v; want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, addRecord{ledger: 1, entry: 2, lac: 1, masterKey: []byte("key"), payload: []byte("p")}))
	f.Add([]byte{1, 1, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if again := appendRecord(nil, r); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
	})
}
