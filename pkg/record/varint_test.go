package record

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestVarintBounds(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 20, math.MaxInt32, math.MinInt32} {
		b := appendVarint(nil, v)
		if len(b) != varintLen(v) {
			t.Fatalf("varintLen(%d) = %d, encoded %d bytes", v, varintLen(v), len(b))
		}
		got, n, ok := readVarint(b)
		if !ok || n != len(b) || int64(got) != v {
			t.Fatalf("readVarint(%d) = %d, %d, %v", v, got, n, ok)
		}
	}
	for _, v := range []int64{math.MaxInt64, math.MinInt64, math.MaxInt32 + 1, -1 << 40} {
		b := appendVarint(nil, v)
		if got, n, ok := readVarlong(b); !ok || n != len(b) || got != v {
			t.Fatalf("readVarlong(%d) = %d, %d, %v", v, got, n, ok)
		}
		if _, _, ok := readVarint(b); ok {
			t.Fatalf("readVarint accepted %d, outside int32", v)
		}
	}
	// Kafka's bounds: a varint takes at most 5 bytes, a varlong 10.
	if _, _, ok := readVarint([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0}); ok {
		t.Fatal("6-byte varint accepted")
	}
	if _, _, ok := readVarlong([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0}); ok {
		t.Fatal("11-byte varlong accepted")
	}
	if _, _, ok := readVarlong(binary.AppendUvarint(nil, math.MaxUint64)[:9]); ok {
		t.Fatal("truncated varlong accepted")
	}
	if _, _, ok := readVarlong([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}); ok {
		t.Fatal("varlong past 64 bits accepted")
	}
}

// The defaults are the limits documented in proto/sluice/v1/record.proto.
func TestDefaultLimitsMatchAPI(t *testing.T) {
	d := DefaultLimits()
	if d.MaxKeyBytes != 64<<10 || d.MaxValueBytes != 1<<20 || d.MaxHeaders != 64 || d.MaxHeaderKeyBytes != 256 ||
		d.MaxHeaderValueBytes != 16<<10 || d.MaxBatchBytes != 4<<20 || d.MaxRecords != 10_000 {
		t.Fatalf("defaults drifted from record.proto: %+v", d)
	}
	if (Limits{}).WithDefaults() != d {
		t.Fatal("zero Limits do not take the defaults")
	}
}
