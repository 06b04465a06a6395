package record

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var kgoCodecs = map[Codec]kgo.CompressionCodec{
	CodecNone:   kgo.NoCompression(),
	CodecGzip:   kgo.GzipCompression(),
	CodecSnappy: kgo.SnappyCompression(),
	CodecLZ4:    kgo.Lz4Compression(),
	CodecZstd:   kgo.ZstdCompression(),
}

// toKgo converts our records to kgo's, for partition 0 of topic t.
func toKgo(recs []Record) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: "t", Key: r.Key, Value: r.Value, Timestamp: time.UnixMilli(r.Timestamp)}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		out[i] = kr
	}
	return out
}

// Batches written by franz-go's real producer (idempotent, every codec)
// pass our Validate and decode to exactly the records produced.
func TestInteropKgoProducerToUs(t *testing.T) {
	for codec, kc := range kgoCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			broker := newFakeBroker(t, "t")
			cl, err := kgo.NewClient(
				kgo.SeedBrokers("fake:9092"),
				kgo.Dialer(broker.dial),
				kgo.ProducerBatchCompression(kc),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerLinger(20*time.Millisecond),
			)
			if err != nil {
				t.Fatal(err)
			}
			want := sampleRecords(300, 11)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = cl.ProduceSync(ctx, toKgo(want)...).FirstErr()
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}

			var got []Record
			seq := int32(0)
			for _, batch := range broker.captured() {
				if err := Validate(batch, Limits{}); err != nil {
					t.Fatalf("kgo batch fails Validate: %v", err)
				}
				b := Batch(batch)
				if b.ProducerID() != 4242 || b.ProducerEpoch() != 7 || b.BaseSequence() != seq {
					t.Fatalf("producer fields %d/%d/%d, want 4242/7/%d", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), seq)
				}
				if codec != CodecNone && b.Codec() != codec {
					t.Fatalf("kgo wrote codec %v, want %v", b.Codec(), codec)
				}
				seq += b.RecordCount()
				recs, err := Parse(batch, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range recs {
					recs[i].Offset = int64(len(got))
					got = append(got, recs[i])
				}
			}
			checkRecords(t, got, want, 0)
		})
	}
}

// Batches we build are read by franz-go's consumer-side decoding
// (ProcessFetchPartition, which checks the CRC), for every codec.
func TestInteropUsToKgoConsumer(t *testing.T) {
	for codec := range kgoCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := sampleRecords(200, 5)
			prod := &Producer{ID: 99, Epoch: 4, BaseSequence: 10}
			first := build(t, BuilderOptions{Codec: codec, Producer: prod}, want[:120])
			prod.BaseSequence += 120
			second := build(t, BuilderOptions{Codec: codec, Producer: prod}, want[120:])
			SetBaseOffset(first, 1000)
			SetBaseOffset(second, 1120)

			rp := &kmsg.FetchResponseTopicPartition{
				HighWatermark: 1200,
				RecordBatches: append(append([]byte(nil), first...), second...),
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"}, rp, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				t.Fatal(fp.Err)
			}
			if len(fp.Records) != len(want) {
				t.Fatalf("kgo decoded %d records, want %d", len(fp.Records), len(want))
			}
			got := make([]Record, len(fp.Records))
			for i, kr := range fp.Records {
				if kr.ProducerID != 99 || kr.ProducerEpoch != 4 {
					t.Fatalf("record %d producer %d/%d", i, kr.ProducerID, kr.ProducerEpoch)
				}
				got[i] = Record{Offset: kr.Offset - 1000, Timestamp: kr.Timestamp.UnixMilli(), Key: kr.Key, Value: kr.Value}
				for _, h := range kr.Headers {
					got[i].Headers = append(got[i].Headers, Header{Key: h.Key, Value: h.Value})
				}
			}
			checkKgoRecords(t, got, want)

			// kgo checks the CRC: a flipped payload byte is refused.
			bad := append([]byte(nil), first...)
			bad[len(bad)-1] ^= 1
			rp.RecordBatches = bad
			if fp, _ = kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"}, rp, kgo.DefaultDecompressor(), nil); fp.Err == nil {
				t.Fatal("kgo accepted a batch with a bad CRC")
			}
		})
	}
}

// checkKgoRecords is checkRecords, except that kgo's decoder returns empty
// keys, values and header values as nil; everything else must match exactly.
func checkKgoRecords(t *testing.T, got, want []Record) {
	t.Helper()
	norm := func(b []byte) []byte {
		if b != nil && len(b) == 0 {
			return nil
		}
		return b
	}
	w := make([]Record, len(want))
	for i, r := range want {
		w[i] = Record{Timestamp: r.Timestamp, Key: norm(r.Key), Value: norm(r.Value)}
		for _, h := range r.Headers {
			w[i].Headers = append(w[i].Headers, Header{Key: h.Key, Value: norm(h.Value)})
		}
	}
	for i := range got {
		got[i].Key, got[i].Value = norm(got[i].Key), norm(got[i].Value)
		for j := range got[i].Headers {
			got[i].Headers[j].Value = norm(got[i].Headers[j].Value)
		}
	}
	checkRecords(t, got, w, 0)
}

// kmsg's record encoder and ours agree byte for byte, so the two encodings
// are interchangeable.
func TestInteropKmsgRecordBytes(t *testing.T) {
	for i, r := range sampleRecords(50, 8) {
		kr := kmsg.Record{TimestampDelta64: 12345, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		ours := rawRecord(r, 12345, int32(i))
		// kmsg wants the length filled in; take it from ours, then compare
		// the rest.
		length, _, _ := readVarint(ours)
		kr.Length = length
		theirs := kr.AppendTo(nil)
		if string(ours) != string(theirs) {
			t.Fatalf("record %d:\nours   %x\nkmsg   %x", i, ours, theirs)
		}
		var back kmsg.Record
		if err := back.ReadFrom(ours); err != nil || string(back.Key) != string(r.Key) || string(back.Value) != string(r.Value) || len(back.Headers) != len(r.Headers) {
			t.Fatalf("kmsg reads our record %d as %+v, %v", i, back, err)
		}
	}
}
