package record

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// sampleRecords returns n records mixing the cases a format gets wrong:
// nil vs empty keys and values (tombstones), headers with nil and empty
// values, non-ASCII header keys, timestamps that go back in time, and
// compressible and incompressible payloads.
func sampleRecords(n int, seed uint64) []Record {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	const t0 = 1_700_000_000_000
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.Timestamp = t0 + int64(rng.IntN(5000)) - 1000
		switch i % 5 {
		case 0: // nil key
		case 1:
			r.Key = []byte{} // empty, not nil
		default:
			r.Key = fmt.Appendf(nil, "key-%d", i)
		}
		switch i % 7 {
		case 3: // tombstone
		case 4:
			r.Value = []byte{}
		case 5: // incompressible
			r.Value = make([]byte, rng.IntN(300))
			for j := range r.Value {
				r.Value[j] = byte(rng.Uint32())
			}
		default:
			r.Value = bytes.Repeat(fmt.Appendf(nil, "value %d ", i), 1+rng.IntN(20))
		}
		if i%3 == 0 {
			r.Headers = []Header{
				{Key: "trace", Value: []byte("00-abc-01")},
				{Key: "", Value: nil},
				{Key: "ключ", Value: []byte{}},
			}
		}
	}
	return recs
}

func build(t testing.TB, opts BuilderOptions, recs []Record) []byte {
	t.Helper()
	out, err := buildErr(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustBuild(opts BuilderOptions, recs []Record) []byte {
	out, err := buildErr(opts, recs)
	if err != nil {
		panic(err)
	}
	return out
}

func buildErr(opts BuilderOptions, recs []Record) ([]byte, error) {
	b, err := NewBuilder(opts)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if err := b.Append(&recs[i]); err != nil {
			return nil, fmt.Errorf("append record %d: %w", i, err)
		}
	}
	return b.Build()
}

// sameBytes is bytes.Equal that also tells nil from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// checkRecords compares decoded records with what was built; offsets are
// base+i.
func checkRecords(t testing.TB, got, want []Record, base int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := &got[i], &want[i]
		if g.Offset != base+int64(i) || g.Timestamp != w.Timestamp || !sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) {
			t.Fatalf("record %d: got off=%d ts=%d key=%q value=%.20q, want off=%d ts=%d key=%q value=%.20q (nil key %v/%v, nil value %v/%v)",
				i, g.Offset, g.Timestamp, g.Key, g.Value, base+int64(i), w.Timestamp, w.Key, w.Value, g.Key == nil, w.Key == nil, g.Value == nil, w.Value == nil)
		}
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %q=%q, want %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
}

func maxTimestamp(recs []Record) int64 {
	m := int64(-1)
	for _, r := range recs {
		m = max(m, r.Timestamp)
	}
	return m
}
