package record

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRecords is 100 records of 1 KiB values that compress about as well
// as typical JSON events (~3-4x): words from a small vocabulary plus random
// ids.
func benchRecords() []Record {
	rng := rand.New(rand.NewPCG(1, 1))
	words := []string{"user", "event", "click", "view", "session", "page", "true", "false", "null", "id", "ts", "region"}
	recs := make([]Record, 100)
	for i := range recs {
		v := make([]byte, 0, 1024)
		for len(v) < 1024 {
			v = fmt.Appendf(v, `"%s":%d,`, words[rng.IntN(len(words))], rng.Uint32())
		}
		recs[i] = Record{
			Timestamp: 1_700_000_000_000 + int64(i),
			Key:       fmt.Appendf(nil, "user-%d", rng.IntN(1_000_000)),
			Value:     v[:1024],
			Headers:   []Header{{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}},
		}
	}
	return recs
}

func benchBatches(b *testing.B) map[Codec][]byte {
	recs := benchRecords()
	out := map[Codec][]byte{}
	for _, c := range allCodecs {
		out[c] = build(b, BuilderOptions{Codec: c, Producer: &Producer{ID: 1, Epoch: 0, BaseSequence: 0}}, recs)
	}
	return out
}

// uncompressedSize is what SetBytes reports, so MB/s compares codecs on the
// data they carry.
func uncompressedSize(batches map[Codec][]byte) int64 { return int64(len(batches[CodecNone])) }

func BenchmarkValidate(b *testing.B) {
	batches := benchBatches(b)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			batch := batches[c]
			b.SetBytes(uncompressedSize(batches))
			b.ReportAllocs()
			for b.Loop() {
				if err := Validate(batch, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(batch)), "batch-bytes")
		})
	}
}

func BenchmarkIterate(b *testing.B) {
	batches := benchBatches(b)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			batch := batches[c]
			it := NewIterator(Limits{})
			b.SetBytes(uncompressedSize(batches))
			b.ReportAllocs()
			for b.Loop() {
				if err := it.Reset(batch); err != nil {
					b.Fatal(err)
				}
				n := 0
				for it.Next() {
					n += len(it.Record().Value)
				}
				if it.Err() != nil || n != 100*1024 {
					b.Fatal(it.Err(), n)
				}
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	recs := benchRecords()
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			bl, err := NewBuilder(BuilderOptions{Codec: c})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(build(b, BuilderOptions{}, recs))))
			b.ReportAllocs()
			for b.Loop() {
				for i := range recs {
					if err := bl.Append(&recs[i]); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := bl.Build(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The read path's header accessors and offset assignment are free.
func BenchmarkSetBaseOffsetAndRead(b *testing.B) {
	batch := benchBatches(b)[CodecZstd]
	var sum int64
	for b.Loop() {
		SetBaseOffset(batch, sum)
		bt := Batch(batch)
		sum += bt.BaseOffset() + int64(bt.RecordCount()) + bt.MaxTimestamp() + bt.ProducerID()
	}
	_ = sum
}

// Verify is what the fetch path runs on bytes read back from storage.
func BenchmarkVerify(b *testing.B) {
	batch := benchBatches(b)[CodecNone]
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if err := Verify(batch); err != nil {
			b.Fatal(err)
		}
	}
}
