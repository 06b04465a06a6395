package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

var allCodecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

// genOpts shapes a generated ledger.
type genOpts struct {
	entries     int            // ledger entries
	maxBatches  int            // batches per entry: 1..maxBatches
	maxRecords  int            // records per batch: 1..maxRecords
	maxValue    int            // value bytes: 0..maxValue
	codecs      []record.Codec // chosen per batch; nil: none
	gaps        bool           // leave offset gaps between batches (as compaction does)
	firstOffset int64
}

// ledger is a generated ledger: its entries' payloads, its batches in
// order, and the records each batch was built from.
type ledger struct {
	entries [][]byte
	batches []record.Batch
	records [][]record.Record
}

func (l *ledger) data() []byte { return bytes.Join(l.entries, nil) }

// genLedger builds a ledger's worth of batches with pkg/record's Builder.
// Timestamps mostly grow but jump back and far ahead now and then, so the
// time index has both growth and plateaus.
func genLedger(t testing.TB, seed uint64, g genOpts) ledger {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x5e9))
	g.maxBatches, g.maxRecords = max(g.maxBatches, 1), max(g.maxRecords, 1)
	if len(g.codecs) == 0 {
		g.codecs = []record.Codec{record.CodecNone}
	}
	var l ledger
	next := g.firstOffset
	ts := int64(1_700_000_000_000)
	b, err := record.NewBuilder(record.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range g.entries {
		var entry []byte
		for range 1 + rng.IntN(g.maxBatches) {
			if err := b.Reset(record.BuilderOptions{Codec: g.codecs[rng.IntN(len(g.codecs))]}); err != nil {
				t.Fatal(err)
			}
			recs := make([]record.Record, 1+rng.IntN(g.maxRecords))
			for i := range recs {
				switch rng.IntN(20) {
				case 0:
					ts -= int64(rng.IntN(5000)) // clock went back
				case 1:
					ts += int64(rng.IntN(1_000_000)) // a pause
				default:
					ts += int64(rng.IntN(10))
				}
				r := &recs[i]
				r.Timestamp = max(ts, 0)
				r.Key = fmt.Appendf(nil, "key-%d", rng.IntN(100))
				if rng.IntN(10) > 0 {
					r.Value = bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(g.maxValue+1))
					if rng.IntN(3) == 0 { // incompressible
						for j := range r.Value {
							r.Value[j] = byte(rng.Uint32())
						}
					}
				}
				if err := b.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			bt, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if g.gaps && rng.IntN(3) == 0 {
				next += int64(1 + rng.IntN(50))
			}
			record.SetBaseOffset(bt, next)
			record.SetPartitionLeaderEpoch(bt, int32(rng.IntN(5)))
			next = record.Batch(bt).NextOffset()
			for i := range recs {
				recs[i].Offset = record.Batch(bt).BaseOffset() + int64(i)
			}
			l.batches = append(l.batches, bt)
			l.records = append(l.records, recs)
			entry = append(entry, bt...)
		}
		l.entries = append(l.entries, entry)
	}
	return l
}

func testWriterOptions(interval int) WriterOptions {
	return WriterOptions{
		LedgerID: 42, TopicID: "0123456789abcdef0123456789abcdef", Partition: 7,
		IndexIntervalBytes: interval,
		MaxSegmentBytes:    min(1<<30, int64(MaxIndexEntriesLimit-1)*int64(max(interval, minBatchSize))),
		MaxIndexEntries:    MaxIndexEntriesLimit,
	}
}

// writeSegment writes a segment of l's entries, one Append each.
func writeSegment(t testing.TB, opts WriterOptions, l ledger) ([]byte, Info) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range l.entries {
		if err := w.Append(e); err != nil {
			t.Fatalf("append entry %d: %v", i, err)
		}
	}
	info, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(buf.Len()) || w.Size() != info.Size {
		t.Fatalf("Finish says %d bytes, Size %d, wrote %d", info.Size, w.Size(), buf.Len())
	}
	return buf.Bytes(), info
}

func mustOpen(t testing.TB, seg []byte) *Reader {
	t.Helper()
	r, err := Open(bytes.NewReader(seg), int64(len(seg)), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readAll reads every interval, one range each, and returns the batches.
func readAll(r *Reader) ([]record.Batch, error) {
	var out []record.Batch
	var buf []byte
	for i := range r.Intervals() {
		rng := r.Interval(i)
		data, err := r.ReadRange(rng, buf)
		if err != nil {
			return nil, err
		}
		it := r.Batches(rng, data)
		for it.Next() {
			out = append(out, append(record.Batch(nil), it.Batch()...))
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		buf = data
	}
	return out, nil
}

// countingReaderAt counts reads and the bytes they asked for.
type countingReaderAt struct {
	ra           io.ReaderAt
	reads, bytes int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	c.bytes += len(p)
	return c.ra.ReadAt(p, off)
}

// isTyped reports whether err is one of the errors a damaged object may
// produce.
func isTyped(err error) bool {
	var ce *CorruptError
	return errors.As(err, &ce) && errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrLimit)
}

func firstWithLast(batches []record.Batch, offset int64) int {
	for i, b := range batches {
		if b.LastOffset() >= offset {
			return i
		}
	}
	return -1
}

func firstWithTime(batches []record.Batch, ts int64) int {
	for i, b := range batches {
		if b.MaxTimestamp() >= ts {
			return i
		}
	}
	return -1
}
