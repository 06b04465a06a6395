package segment

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

// benchLedger is ~16 MiB of 1 KiB records in ~64 KiB entries, as ingest
// writes them (one batch per entry), zstd-compressed or not.
func benchLedger(b *testing.B, codec record.Codec) ledger {
	return genLedger(b, 1, genOpts{entries: 256, maxBatches: 1, maxRecords: 128, maxValue: 1024, codecs: []record.Codec{codec}})
}

// Write throughput: Append every entry of a ledger and Finish, into a
// discarding writer (the object store's upload is not measured).
func BenchmarkWrite(b *testing.B) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			l := benchLedger(b, codec)
			b.SetBytes(int64(len(l.data())))
			b.ReportAllocs()
			for b.Loop() {
				w, err := NewWriter(io.Discard, WriterOptions{TopicID: "t", IndexIntervalBytes: DefaultIndexIntervalBytes})
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range l.entries {
					if err := w.Append(e); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := w.Finish(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Read throughput of the fetch path: Open, then every interval as one
// ranged read, checked by the Iterator (bytes.Reader stands in for S3).
func BenchmarkRead(b *testing.B) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			l := benchLedger(b, codec)
			seg, info := writeSegment(b, WriterOptions{TopicID: "t"}, l)
			b.SetBytes(info.Data.Len())
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				r, err := Open(bytes.NewReader(seg), int64(len(seg)), ReaderOptions{})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for rng, ok := r.Interval(0), true; ok; rng, ok = r.Next(rng) {
					if buf, err = r.ReadRange(rng, buf); err != nil {
						b.Fatal(err)
					}
					for it := r.Batches(rng, buf); it.Next(); {
						n++
					}
				}
				if n != len(l.batches) {
					b.Fatalf("%d batches", n)
				}
			}
		})
	}
}

// Verify throughput: the whole-object check the offloader runs.
func BenchmarkVerify(b *testing.B) {
	l := benchLedger(b, record.CodecNone)
	seg, info := writeSegment(b, WriterOptions{TopicID: "t"}, l)
	r := mustOpen(b, seg)
	b.SetBytes(info.Data.Len())
	for b.Loop() {
		if err := r.Verify(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// Find on a segment with 64Ki intervals: a binary search, no I/O.
func BenchmarkFind(b *testing.B) {
	l := genLedger(b, 2, genOpts{entries: 64 << 10, maxRecords: 1})
	seg, info := writeSegment(b, testWriterOptions(1), l)
	r := mustOpen(b, seg)
	span := info.LastOffset - info.FirstOffset + 1
	var o int64
	for b.Loop() {
		o = (o + 7919) % span
		if _, err := r.Find(info.FirstOffset + o); err != nil {
			b.Fatal(err)
		}
	}
}
