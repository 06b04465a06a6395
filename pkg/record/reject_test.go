package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fixCRC recomputes the CRC after a test edits covered bytes, so the check
// under test is reached rather than the CRC check.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], computeCRC(b))
	return b
}

// rawBatch frames an encoded (possibly deliberately broken) records section.
func rawBatch(count, lastDelta int32, baseTs, maxTs int64, attrs Attributes, records []byte) []byte {
	rb := kmsg.RecordBatch{
		Length: int32(HeaderSize - 12 + len(records)), PartitionLeaderEpoch: -1, Magic: 2,
		Attributes: int16(attrs), LastOffsetDelta: lastDelta, FirstTimestamp: baseTs, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: records,
	}
	return fixCRC(rb.AppendTo(nil))
}

// rawRecord encodes r with the given deltas, without any checks.
func rawRecord(r Record, tsDelta int64, offsetDelta int32) []byte {
	body := recordBodySize(&r, tsDelta, offsetDelta)
	return appendRecord(nil, &r, tsDelta, offsetDelta, body)
}

// good returns a valid 3-record uncompressed batch to break.
func good() []byte {
	return mustBuild(BuilderOptions{Producer: &Producer{ID: 1, Epoch: 0, BaseSequence: 0}}, sampleRecords(3, 1))
}

func edit(f func(b []byte) []byte) []byte { return f(good()) }

func put32(off int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return fixCRC(b) }
}

func put64(off int, v int64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], uint64(v)); return fixCRC(b) }
}

func put16(off int, v int16) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], uint16(v)); return fixCRC(b) }
}

func TestValidateRejects(t *testing.T) {
	ok := Record{Timestamp: 100, Key: []byte("k"), Value: []byte("v")}
	cases := []struct {
		name  string
		batch []byte
		lim   Limits
		field string
		class error
	}{
		// Framing and checksum.
		{"crc byte flipped", edit(func(b []byte) []byte { b[offCRC] ^= 1; return b }), Limits{}, "crc", ErrCorrupt},
		{"payload byte flipped", edit(func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b }), Limits{}, "crc", ErrCorrupt},
		{"attributes flipped without crc", edit(func(b []byte) []byte { b[offAttributes+1] ^= 1; return b }), Limits{}, "crc", ErrCorrupt},
		{"truncated by one byte", edit(func(b []byte) []byte { return b[:len(b)-1] }), Limits{}, "batchLength", ErrInvalid},
		{"shorter than the header", edit(func(b []byte) []byte { return b[:40] }), Limits{}, "batchLength", ErrInvalid},
		{"empty", []byte{}, Limits{}, "batchLength", ErrInvalid},
		{"trailing byte", edit(func(b []byte) []byte { return append(b, 0) }), Limits{}, "batchLength", ErrInvalid},
		{"length field below header", edit(put32(offBatchLength, 10)), Limits{}, "batchLength", ErrInvalid},
		{"length field negative", edit(put32(offBatchLength, -1)), Limits{}, "batchLength", ErrInvalid},
		{"magic 1", edit(func(b []byte) []byte { b[offMagic] = 1; return b }), Limits{}, "magic", ErrInvalid},
		{"magic 3", edit(func(b []byte) []byte { b[offMagic] = 3; return b }), Limits{}, "magic", ErrInvalid},
		{"batch over MaxBatchBytes", good(), Limits{MaxBatchBytes: 100}, "batchLength", ErrLimit},

		// Attributes.
		{"codec 5", edit(put16(offAttributes, 5)), Limits{}, "attributes", ErrInvalid},
		{"codec 7", edit(put16(offAttributes, 7)), Limits{}, "attributes", ErrInvalid},
		{"unknown attribute bit", edit(put16(offAttributes, 1<<9)), Limits{}, "attributes", ErrInvalid},
		{"LogAppendTime from client", edit(put16(offAttributes, int16(AttrLogAppendTime))), Limits{}, "attributes", ErrInvalid},
		{"delete horizon", edit(put16(offAttributes, int16(AttrDeleteHorizon))), Limits{}, "attributes", ErrInvalid},
		{"gzip garbage", rawBatch(1, 0, 100, 100, Attributes(CodecGzip), []byte("not gzip at all")), Limits{}, "records", ErrInvalid},
		{"lz4 garbage", rawBatch(1, 0, 100, 100, Attributes(CodecLZ4), []byte("not lz4 at all")), Limits{}, "records", ErrInvalid},
		{"zstd garbage", rawBatch(1, 0, 100, 100, Attributes(CodecZstd), []byte("not zstd at all")), Limits{}, "records", ErrInvalid},
		{"snappy garbage", rawBatch(1, 0, 100, 100, Attributes(CodecSnappy), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), Limits{}, "records", ErrInvalid},

		// Counts and offsets.
		{"count +1", edit(put32(offRecordCount, 4)), Limits{}, "lastOffsetDelta", ErrInvalid},
		{"count and delta +1", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 3)
			return put32(offRecordCount, 4)(b)
		}), Limits{}, "recordCount", ErrInvalid},
		{"count and delta -1", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 1)
			return put32(offRecordCount, 2)(b)
		}), Limits{}, "recordCount", ErrInvalid},
		{"count 0", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff)
			return put32(offRecordCount, 0)(b)
		}), Limits{}, "recordCount", ErrInvalid},
		{"count negative", edit(put32(offRecordCount, -5)), Limits{}, "recordCount", ErrInvalid},
		{"count huge", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 9998)
			return put32(offRecordCount, 9999)(b)
		}), Limits{}, "recordCount", ErrInvalid},
		{"count over MaxRecords", good(), Limits{MaxRecords: 2}, "recordCount", ErrLimit},
		{"lastOffsetDelta too large", edit(put32(offLastOffsetDelta, 5)), Limits{}, "lastOffsetDelta", ErrInvalid},
		{"offset delta gap", rawBatch(2, 1, 100, 100, 0, append(rawRecord(ok, 0, 0), rawRecord(ok, 0, 2)...)), Limits{}, "records[1].offsetDelta", ErrInvalid},
		{"offset delta repeated", rawBatch(2, 1, 100, 100, 0, append(rawRecord(ok, 0, 0), rawRecord(ok, 0, 0)...)), Limits{}, "records[1].offsetDelta", ErrInvalid},
		{"trailing bytes after records", rawBatch(1, 0, 100, 100, 0, append(rawRecord(ok, 0, 0), 0, 0, 0, 0, 0, 0, 0)), Limits{}, "recordCount", ErrInvalid},

		// Timestamps.
		{"maxTimestamp too large", edit(put64(offMaxTimestamp, 1<<50)), Limits{}, "maxTimestamp", ErrInvalid},
		{"maxTimestamp too small", rawBatch(1, 0, 100, 99, 0, rawRecord(ok, 0, 0)), Limits{}, "maxTimestamp", ErrInvalid},
		{"baseTimestamp negative", rawBatch(1, 0, -1, 4, 0, rawRecord(ok, 5, 0)), Limits{}, "baseTimestamp", ErrInvalid},
		{"record timestamp negative", rawBatch(1, 0, 5, 5, 0, rawRecord(ok, -10, 0)), Limits{}, "records[0].timestampDelta", ErrInvalid},
		{"timestamp overflow", rawBatch(1, 0, 1<<62, 1<<62, 0, rawRecord(ok, 1<<62+1<<61, 0)), Limits{}, "records[0].timestampDelta", ErrInvalid},

		// Producer fields.
		{"producerId -2", edit(put64(offProducerID, -2)), Limits{}, "producerId", ErrInvalid},
		{"producerEpoch negative", edit(put16(offProducerEpoch, -1)), Limits{}, "producerEpoch", ErrInvalid},
		{"baseSequence negative", edit(put32(offBaseSequence, -1)), Limits{}, "baseSequence", ErrInvalid},
		{"transactional without producer", rawBatch(1, 0, 100, 100, AttrTransactional, rawRecord(ok, 0, 0)), Limits{}, "producerId", ErrInvalid},

		// Records.
		{"key over limit", good(), Limits{MaxKeyBytes: 3}, "records[2].key", ErrLimit},
		{"value over limit", good(), Limits{MaxValueBytes: 5}, "records[0].value", ErrLimit},
		{"too many headers", good(), Limits{MaxHeaders: 2}, "records[0].headers", ErrLimit},
		{"header key over limit", good(), Limits{MaxHeaderKeyBytes: 4}, "records[0].headers[0].key", ErrLimit},
		{"header value over limit", good(), Limits{MaxHeaderValueBytes: 8}, "records[0].headers[0].value", ErrLimit},
		{"records over MaxDecompressedBytes", good(), Limits{MaxDecompressedBytes: 50}, "records", ErrLimit},
		{"header key not UTF-8", rawBatch(1, 0, 100, 100, 0, rawRecord(Record{Headers: []Header{{Key: "\xc3\x28"}}}, 0, 0)), Limits{}, "records[0].headers[0].key", ErrInvalid},
		{"null header key", rawBatch(1, 0, 100, 100, 0, []byte{16, 0, 0, 0, 1, 1, 2, 1, 1}), Limits{}, "records[0].headers[0].key", ErrInvalid},
		{"record attributes set", rawBatch(1, 0, 100, 100, 0, func() []byte { r := rawRecord(ok, 0, 0); r[1] = 1; return r }()), Limits{}, "records[0].attributes", ErrInvalid},
		{"record length too long", rawBatch(1, 0, 100, 100, 0, func() []byte { r := rawRecord(ok, 0, 0); r[0] += 2; return r }()), Limits{}, "records[0].length", ErrInvalid},
		{"record length too short", rawBatch(1, 0, 100, 100, 0, func() []byte { r := rawRecord(ok, 0, 0); r[0] -= 2; return append(r, 0, 0) }()), Limits{}, "records[0]", ErrInvalid},
		{"record length tiny", rawBatch(1, 0, 100, 100, 0, []byte{2, 0, 0, 0, 0, 0, 0}), Limits{}, "records[0].length", ErrInvalid},
		{"key length -2", rawBatch(1, 0, 100, 100, 0, []byte{12, 0, 0, 0, 3, 2, 0}), Limits{}, "records[0].key", ErrInvalid},
		{"key runs past record", rawBatch(1, 0, 100, 100, 0, []byte{12, 0, 0, 0, 20, 1, 0}), Limits{}, "records[0].key", ErrInvalid},
		{"negative header count", rawBatch(1, 0, 100, 100, 0, []byte{12, 0, 0, 0, 1, 1, 1}), Limits{}, "records[0].headers", ErrInvalid},
		{"varint too long", rawBatch(1, 0, 100, 100, 0, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0}), Limits{}, "records[0].length", ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.batch, c.lim)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *FormatError for %s", err, c.field)
			}
			if !strings.HasPrefix(fe.Field, c.field) || !errors.Is(err, c.class) {
				t.Fatalf("Validate = %v (field %q), want field %q class %v", err, fe.Field, c.field, c.class)
			}
			// Parse must agree with Validate on every input.
			if _, perr := Parse(c.batch, c.lim); perr == nil || perr.Error() != err.Error() {
				t.Fatalf("Parse = %v, Validate = %v", perr, err)
			}
		})
	}
}

// compressedBomb compresses n zero bytes with c the way a hostile client
// would: no content size announced up front where the format allows that.
func compressedBomb(t *testing.T, c Codec, n int) []byte {
	t.Helper()
	zeros := make([]byte, n)
	var buf bytes.Buffer
	switch c {
	case CodecGzip:
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		w.Write(zeros)
		w.Close()
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(zeros)
		w.Close()
	case CodecZstd:
		w, _ := zstd.NewWriter(&buf) // streaming: no frame content size
		w.Write(zeros)
		w.Close()
	case CodecSnappy:
		// xerial framing, 32 KiB chunks: the per-chunk sizes are honest, the
		// total is what must be bounded.
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		chunk := snappy.Encode(nil, zeros[:32<<10])
		for range n / (32 << 10) {
			binary.Write(&buf, binary.BigEndian, uint32(len(chunk)))
			buf.Write(chunk)
		}
	}
	return buf.Bytes()
}

// A decompression bomb is refused with ErrLimit, and decoding it allocates
// about the limit, not the bomb's size.
func TestDecompressionBomb(t *testing.T) {
	const bombSize = 256 << 20
	// MaxBatchBytes is raised so the snappy bomb (snappy compresses at most
	// ~21:1) reaches the decompressor.
	lim := Limits{MaxDecompressedBytes: 1 << 20, MaxBatchBytes: 64 << 20}
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			payload := compressedBomb(t, c, bombSize)
			batch := rawBatch(1, 0, 100, 100, Attributes(c), payload)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := Validate(batch, lim)
			runtime.ReadMemStats(&after)
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Field != "records" || !errors.Is(err, ErrLimit) {
				t.Fatalf("Validate(%d KiB %v bomb) = %v, want records/ErrLimit", len(payload)>>10, c, err)
			}
			// Decoders stop one read past the limit; codec state (lz4's 4 MiB
			// blocks, zstd's window of at most 8 MiB, both pooled) comes on
			// top.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Fatalf("decoding a %d MiB bomb allocated %d MiB", bombSize>>20, alloc>>20)
			}
		})
	}
}

// The same payloads within the limit are accepted up to the count check:
// the limit, not the codec, refused them above.
func TestDecompressionWithinLimit(t *testing.T) {
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		payload := compressedBomb(t, c, 64<<10)
		out, err := decompress(nil, c, payload, 64<<10)
		if err != nil || len(out) != 64<<10 {
			t.Fatalf("%v: %d bytes, %v", c, len(out), err)
		}
		if _, err := decompress(nil, c, payload, 64<<10-1); !errors.Is(err, errDecompressedTooLarge) {
			t.Fatalf("%v one byte over the limit: %v", c, err)
		}
	}
}

// Snappy: both the raw block format and xerial framing decode.
func TestSnappyXerialAndRaw(t *testing.T) {
	src := bytes.Repeat([]byte("sluice "), 10000)
	raw := snappy.Encode(nil, src)
	var x bytes.Buffer
	x.Write(xerialMagic)
	x.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
	for p := 0; p < len(src); p += 32 << 10 {
		chunk := snappy.Encode(nil, src[p:min(p+32<<10, len(src))])
		binary.Write(&x, binary.BigEndian, uint32(len(chunk)))
		x.Write(chunk)
	}
	for name, in := range map[string][]byte{"raw": raw, "xerial": x.Bytes()} {
		out, err := decompress(nil, CodecSnappy, in, 1<<20)
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := decompress(nil, CodecSnappy, x.Bytes()[:x.Len()-1], 1<<20); err == nil {
		t.Fatal("truncated xerial accepted")
	}
	if _, err := decompress(nil, CodecSnappy, append(x.Bytes(), 0, 0), 1<<20); err == nil {
		t.Fatal("xerial with a partial chunk length accepted")
	}
}

// The Iterator is strict about structure but not about client rules.
func TestIteratorAcceptsWriterBatches(t *testing.T) {
	ok := Record{Timestamp: 100, Value: []byte("v")}
	// LogAppendTime: every record takes maxTimestamp.
	b := rawBatch(2, 1, 100, 555, AttrLogAppendTime, append(rawRecord(ok, 0, 0), rawRecord(ok, 7, 1)...))
	recs, err := Decode(b, Limits{})
	if err != nil || len(recs) != 2 || recs[0].Timestamp != 555 || recs[1].Timestamp != 555 {
		t.Fatalf("LogAppendTime: %+v, %v", recs, err)
	}
	// Compacted: offset deltas with gaps, lastOffsetDelta past the last record.
	b = rawBatch(2, 9, 100, 100, 0, append(rawRecord(ok, 0, 2), rawRecord(ok, 0, 5)...))
	SetBaseOffset(b, 10)
	recs, err = Decode(b, Limits{})
	if err != nil || recs[0].Offset != 12 || recs[1].Offset != 15 {
		t.Fatalf("gapped offsets: %+v, %v", recs, err)
	}
	// Empty batch (all records compacted away).
	if recs, err = Decode(rawBatch(0, 3, 100, 100, 0, nil), Limits{}); err != nil || len(recs) != 0 {
		t.Fatalf("empty batch: %v", err)
	}
	// But never a CRC mismatch.
	b[len(b)-1] ^= 1
	if _, err := Decode(b, Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt batch: %v", err)
	}
}
