package record

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// FuzzParse: no input panics, Parse and Validate always agree, and nothing
// is accepted unless its CRC-32C (computed here independently) matches.
func FuzzParse(f *testing.F) {
	for i, c := range allCodecs {
		f.Add(mustBuild(BuilderOptions{Codec: c, Producer: &Producer{ID: 3, Epoch: 1, BaseSequence: 9}}, sampleRecords(1+i*4, uint64(i))))
	}
	f.Add(mustBuild(BuilderOptions{}, []Record{{}}))
	f.Add(mustBuild(BuilderOptions{Producer: &Producer{ID: 5}, Transactional: true, Control: true}, []Record{{Key: []byte{0, 0, 0, 1}}}))
	f.Add(rawBatch(1, 0, 100, 100, 0, []byte{16, 0, 0, 0, 1, 1, 2, 1, 1}))
	f.Add(rawBatch(0, -1, 0, 0, 0, nil))
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))

	lim := Limits{MaxDecompressedBytes: 1 << 20, MaxBatchBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, in []byte) {
		b := append([]byte(nil), in...) // the fuzzer's input must not be modified
		// Half the time, repair the CRC so the fuzzer explores what lies
		// behind it; a flag in the input decides, so runs are reproducible.
		if len(b) >= HeaderSize && b[len(b)-1]&1 == 1 {
			binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[crcStart:], crc32.MakeTable(crc32.Castagnoli)))
		}
		recs, perr := Parse(b, lim)
		verr := Validate(b, lim)
		if (perr == nil) != (verr == nil) || perr != nil && perr.Error() != verr.Error() {
			t.Fatalf("Parse = %v, Validate = %v", perr, verr)
		}
		decoded, derr := Decode(b, lim)
		if perr != nil {
			return
		}
		// Accepted: the CRC matches, and the records are what the header says.
		if len(b) < HeaderSize || binary.BigEndian.Uint32(b[offCRC:]) != crc32.Checksum(b[crcStart:], crc32.MakeTable(crc32.Castagnoli)) {
			t.Fatal("accepted a batch whose CRC does not match")
		}
		bt := Batch(b)
		if derr != nil || len(decoded) != len(recs) || len(recs) != int(bt.RecordCount()) {
			t.Fatalf("Decode = %d records, %v; Parse = %d; recordCount %d", len(decoded), derr, len(recs), bt.RecordCount())
		}
		maxTs := int64(-1)
		for i, r := range recs {
			if r.Offset != bt.BaseOffset()+int64(i) || r.Timestamp < 0 {
				t.Fatalf("record %d: offset %d timestamp %d", i, r.Offset, r.Timestamp)
			}
			maxTs = max(maxTs, r.Timestamp)
		}
		if maxTs != bt.MaxTimestamp() {
			t.Fatalf("maxTimestamp %d, records say %d", bt.MaxTimestamp(), maxTs)
		}
		// Offsets can be assigned to anything accepted without breaking it.
		SetBaseOffset(b, 1<<40)
		if err := Validate(b, lim); err != nil {
			t.Fatalf("SetBaseOffset broke an accepted batch: %v", err)
		}
	})
}

// FuzzBuildParse: whatever records the Builder accepts come back unchanged,
// with every codec.
func FuzzBuildParse(f *testing.F) {
	f.Add([]byte("key"), []byte("value"), "h", []byte("hv"), int64(1_700_000_000_000), int64(-5), uint8(0), uint8(3))
	f.Add([]byte{}, []byte(nil), "", []byte(nil), int64(0), int64(0), uint8(4), uint8(0))
	f.Fuzz(func(t *testing.T, key, value []byte, hkey string, hval []byte, ts, tsStep int64, codec, n uint8) {
		c := Codec(codec % 5)
		var recs []Record
		for i := range int(n%8) + 1 {
			r := Record{Timestamp: ts + int64(i)*tsStep, Key: key, Value: value}
			if i%2 == 1 {
				r.Key, r.Value = nil, nil
			}
			if i%3 == 0 {
				r.Headers = []Header{{Key: hkey, Value: hval}}
			}
			recs = append(recs, r)
		}
		b, err := NewBuilder(BuilderOptions{Codec: c})
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			if err := b.Append(&recs[i]); err != nil {
				return // refused input (negative timestamp, bad UTF-8, limits): nothing to round-trip
			}
		}
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(batch, Limits{})
		if err != nil {
			t.Fatalf("Builder output fails Parse: %v", err)
		}
		checkRecords(t, got, recs, 0)
	})
}
