package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

// batchAt builds a batch of n records (values v<offset>) at base.
func batchAt(t *testing.T, base int64, n int, opts record.BuilderOptions) []byte {
	t.Helper()
	b, err := record.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := bytes.Repeat(fmt.Appendf(nil, "v%d;", base+int64(i)), 20)
		if err := b.Append(&record.Record{Key: []byte("k"), Value: v, Timestamp: 1_000}); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(batch, base)
	return batch
}

func join(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func batchLimits(recs, bytes int) Limits {
	return Limits{Batches: true, MaxRecords: recs, MaxBytes: bytes}
}

func TestAppendBatches(t *testing.T) {
	b0 := batchAt(t, 0, 10, record.BuilderOptions{})
	b1 := batchAt(t, 10, 10, record.BuilderOptions{Codec: record.CodecZstd})
	b2 := batchAt(t, 20, 10, record.BuilderOptions{})
	payload := join(b0, b1, b2)
	it := record.NewIterator(record.Limits{})

	t.Run("whole batches from mid-batch, one run aliasing the payload", func(t *testing.T) {
		var res Result
		next := int64(5)
		full, err := appendPayload(it, payload, &next, batchLimits(100, 1<<20), &res)
		if err != nil || full {
			t.Fatalf("full %v err %v", full, err)
		}
		if len(res.Batches) != 1 || !bytes.Equal(res.Batches[0], payload) || &res.Batches[0][0] != &payload[0] {
			t.Fatalf("want the payload itself as one run, got %d runs", len(res.Batches))
		}
		// Offsets 5..29: 5 of the first batch, then 20.
		if res.Count != 25 || res.Bytes != len(payload) || next != 30 || res.Records != nil {
			t.Fatalf("count %d bytes %d next %d records %d", res.Count, res.Bytes, next, len(res.Records))
		}
	})
	t.Run("a batch crossing the soft limits is left for the next read", func(t *testing.T) {
		for _, lim := range []Limits{batchLimits(15, 1<<20), batchLimits(100, len(b0)+1)} {
			var res Result
			next := int64(0)
			full, err := appendPayload(it, payload, &next, lim, &res)
			if err != nil || !full {
				t.Fatalf("%+v: full %v err %v", lim, full, err)
			}
			if len(res.Batches) != 1 || !bytes.Equal(res.Batches[0], b0) || res.Count != 10 || next != 10 {
				t.Fatalf("%+v: runs %d count %d next %d", lim, len(res.Batches), res.Count, next)
			}
		}
	})
	t.Run("a first batch beyond the hard limits comes as records", func(t *testing.T) {
		for _, lim := range []Limits{
			{Batches: true, MaxRecords: 4, MaxBytes: 1 << 20},
			{Batches: true, MaxRecords: 100, MaxBytes: 1 << 20, HardMaxRecords: 4},
			{Batches: true, MaxRecords: 4, MaxBytes: 1 << 20, HardMaxBytes: 1 << 20},
		} {
			var res Result
			next := int64(10) // the compressed batch
			full, err := appendPayload(it, payload, &next, lim, &res)
			if err != nil || !full {
				t.Fatalf("%+v: full %v err %v", lim, full, err)
			}
			if res.Batches != nil || len(res.Records) != 4 || res.Count != 4 || next != 14 || res.Records[0].Offset != 10 {
				t.Fatalf("%+v: runs %d records %d count %d next %d", lim, len(res.Batches), len(res.Records), res.Count, next)
			}
		}
		var res Result
		next := int64(0)
		lim := Limits{Batches: true, MaxRecords: 100, MaxBytes: 1 << 20, HardMaxBytes: len(b0) - 1}
		if _, err := appendPayload(it, payload, &next, lim, &res); err != nil {
			t.Fatal(err)
		}
		if res.Batches != nil || len(res.Records) == 0 || res.Bytes > len(b0)-1 || res.Count != len(res.Records) {
			t.Fatalf("byte-bound fallback: runs %d records %d bytes %d", len(res.Batches), len(res.Records), res.Bytes)
		}
	})
	t.Run("control batches are not sent and split the runs", func(t *testing.T) {
		pid := &record.Producer{ID: 7, Epoch: 1, BaseSequence: 0}
		ctl := batchAt(t, 10, 1, record.BuilderOptions{Producer: pid, Transactional: true, Control: true})
		after := batchAt(t, 11, 3, record.BuilderOptions{})
		p := join(b0, ctl, after)
		var res Result
		next := int64(0)
		if _, err := appendPayload(it, p, &next, batchLimits(100, 1<<20), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Batches) != 2 || !bytes.Equal(res.Batches[0], b0) || !bytes.Equal(res.Batches[1], after) {
			t.Fatalf("runs %d", len(res.Batches))
		}
		if res.Count != 13 || res.Bytes != len(b0)+len(after) || next != 14 {
			t.Fatalf("count %d bytes %d next %d", res.Count, res.Bytes, next)
		}
	})
	t.Run("a corrupt batch is an error, never sent", func(t *testing.T) {
		bad := join(b0, b2)
		bad[len(b0)+record.HeaderSize+5] ^= 0xff
		var res Result
		next := int64(0)
		_, err := appendPayload(it, bad, &next, batchLimits(100, 1<<20), &res)
		var fe *record.FormatError
		if !errors.As(err, &fe) || !errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("want a CRC error, got %v", err)
		}
	})
	t.Run("records mode counts what it returns", func(t *testing.T) {
		var res Result
		next := int64(3)
		if _, err := appendPayload(it, payload, &next, Limits{MaxRecords: 12, MaxBytes: 1 << 20}, &res); err != nil {
			t.Fatal(err)
		}
		if res.Batches != nil || len(res.Records) != 12 || res.Count != 12 || next != 15 {
			t.Fatalf("runs %d records %d count %d next %d", len(res.Batches), len(res.Records), res.Count, next)
		}
	})
}
