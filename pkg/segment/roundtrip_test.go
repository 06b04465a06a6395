package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

// Many ledgers, every codec, small and large intervals: the data section
// is the entries byte for byte, every batch comes back through the ranged
// read path and through Verify, the records decode to what was built, and
// the footer's totals are right.
func TestRoundTrip(t *testing.T) {
	for ledgerNo := range 20 {
		g := genOpts{
			entries:     20 + ledgerNo*6,
			maxBatches:  1 + ledgerNo%4,
			maxRecords:  1 + ledgerNo%30,
			maxValue:    []int{0, 10, 200, 1000}[ledgerNo%4],
			codecs:      [][]record.Codec{{record.CodecNone}, allCodecs, {allCodecs[1+ledgerNo%4]}}[ledgerNo%3],
			gaps:        ledgerNo%2 == 1,
			firstOffset: int64(ledgerNo) * 1_000_003,
		}
		interval := []int{1, 500, 4096, 64 << 10, 1 << 20}[ledgerNo%5]
		t.Run(fmt.Sprintf("ledger%d-interval%d", ledgerNo, interval), func(t *testing.T) {
			l := genLedger(t, uint64(ledgerNo), g)
			opts := testWriterOptions(interval)
			opts.LedgerID = int64(1000 + ledgerNo)
			seg, info := writeSegment(t, opts, l)
			data := l.data()
			if !bytes.Equal(seg[HeaderSize:HeaderSize+len(data)], data) {
				t.Fatal("data section is not the entries byte for byte")
			}
			r := mustOpen(t, seg)
			if got := r.Info(); got != info {
				t.Fatalf("reader info %+v\nwriter info %+v", got, info)
			}
			checkInfo(t, info, l, opts)
			if err := r.Verify(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, err := readAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(l.batches) {
				t.Fatalf("%d batches, want %d", len(got), len(l.batches))
			}
			it := record.NewIterator(record.Limits{})
			for i, b := range got {
				if !bytes.Equal(b, l.batches[i]) {
					t.Fatalf("batch %d differs", i)
				}
				if err := it.Reset(b); err != nil {
					t.Fatal(err)
				}
				for it.Next() {
					want := l.records[i][it.Index()]
					r := it.Record()
					if r.Offset != want.Offset || r.Timestamp != want.Timestamp || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) {
						t.Fatalf("batch %d record %d: %+v, want %+v", i, it.Index(), r, want)
					}
				}
				if it.Err() != nil {
					t.Fatal(it.Err())
				}
			}
			// The whole data section in one range reads the same.
			all, err := r.ReadRange(r.All(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			for it := r.Batches(r.All(), all); it.Next(); n++ {
				if !bytes.Equal(it.Batch(), l.batches[n]) || it.Pos() != HeaderSize+int64(offsetOf(l.batches, n)) {
					t.Fatalf("batch %d differs or is not at %d", n, it.Pos())
				}
			}
			if n != len(l.batches) {
				t.Fatalf("All: %d batches", n)
			}
		})
	}
}

func offsetOf(batches []record.Batch, n int) int {
	pos := 0
	for _, b := range batches[:n] {
		pos += len(b)
	}
	return pos
}

func checkInfo(t *testing.T, info Info, l ledger, opts WriterOptions) {
	t.Helper()
	var records int64
	maxTs := int64(math.MinInt64)
	for _, b := range l.batches {
		records += int64(b.RecordCount())
		maxTs = max(maxTs, b.MaxTimestamp())
	}
	last := l.batches[len(l.batches)-1]
	dataLen := int64(len(l.data()))
	want := Info{
		Version: Version, LedgerID: opts.LedgerID, TopicID: opts.TopicID, Partition: opts.Partition,
		FirstOffset: l.batches[0].BaseOffset(), LastOffset: last.LastOffset(),
		RecordCount: records, BatchCount: int64(len(l.batches)), MaxTimestamp: maxTs,
		Size: info.Size, Data: Range{HeaderSize, HeaderSize + dataLen},
		IndexEntries: info.IndexEntries, TimeIndexEntries: info.TimeIndexEntries,
	}
	if info != want {
		t.Fatalf("info %+v\nwant %+v", info, want)
	}
	wantSize := HeaderSize + dataLen + int64(info.IndexEntries*OffsetEntrySize+info.TimeIndexEntries*TimeEntrySize+FooterFixedSize+len(opts.TopicID)+TrailerSize)
	if info.Size != wantSize {
		t.Fatalf("size %d, want %d", info.Size, wantSize)
	}
	// Every interval but the last holds at least IndexIntervalBytes, and
	// would not without its last batch.
	if maxEntries := dataLen/int64(opts.IndexIntervalBytes) + 1; int64(info.IndexEntries) > maxEntries {
		t.Fatalf("%d index entries for %d bytes at interval %d", info.IndexEntries, dataLen, opts.IndexIntervalBytes)
	}
}

// Open costs one read when the indexes fit the tail read, two otherwise;
// Find costs none, and a range one.
func TestReadsAreFewAndRanged(t *testing.T) {
	l := genLedger(t, 1, genOpts{entries: 3000, maxBatches: 2, maxRecords: 5, maxValue: 100})
	seg, info := writeSegment(t, testWriterOptions(512), l)
	idxBytes := info.IndexEntries*OffsetEntrySize + info.TimeIndexEntries*TimeEntrySize
	for _, tc := range []struct {
		tail, reads int
	}{
		{tail: DefaultTailReadBytes, reads: 1}, // the whole object fits
		{tail: idxBytes + MaxFooterBytes + TrailerSize, reads: 1},
		{tail: MinTailReadBytes, reads: 2},
	} {
		c := &countingReaderAt{ra: bytes.NewReader(seg)}
		r, err := Open(c, int64(len(seg)), ReaderOptions{TailReadBytes: tc.tail})
		if err != nil {
			t.Fatal(err)
		}
		if c.reads != tc.reads || c.bytes > tc.tail+idxBytes {
			t.Fatalf("tail %d: Open made %d reads of %d bytes, want %d", tc.tail, c.reads, c.bytes, tc.reads)
		}
		c.reads, c.bytes = 0, 0
		mid := (info.FirstOffset + info.LastOffset) / 2
		rng, err := r.Find(mid)
		if err != nil || c.reads != 0 {
			t.Fatalf("Find: %v, %d reads", err, c.reads)
		}
		data, err := r.ReadRange(rng, nil)
		if err != nil || c.reads != 1 || c.bytes != int(rng.Len()) {
			t.Fatalf("ReadRange: %v, %d reads of %d bytes", err, c.reads, c.bytes)
		}
		found := false
		for it := r.Batches(rng, data); it.Next(); {
			found = found || it.Batch().BaseOffset() <= mid && mid <= it.Batch().LastOffset()
		}
		if !found {
			t.Fatal("the range does not hold the offset")
		}
		if rng.Len() > 512+int64(maxBatchLen(l)) {
			t.Fatalf("range of %d bytes for a 512-byte interval", rng.Len())
		}
	}
}

func maxBatchLen(l ledger) int {
	n := 0
	for _, b := range l.batches {
		n = max(n, len(b))
	}
	return n
}

// Next walks the intervals; Extend groups them up to a byte budget.
func TestNextAndExtend(t *testing.T) {
	l := genLedger(t, 2, genOpts{entries: 400, maxRecords: 3, maxValue: 50})
	seg, _ := writeSegment(t, testWriterOptions(300), l)
	r := mustOpen(t, seg)
	n := 0
	for rng, ok := r.Interval(0), true; ok; rng, ok = r.Next(rng) {
		if rng != r.Interval(n) {
			t.Fatalf("Next gave %v, interval %d is %v", rng, n, r.Interval(n))
		}
		n++
	}
	if n != r.Intervals() {
		t.Fatalf("Next walked %d of %d intervals", n, r.Intervals())
	}
	if _, ok := r.Next(Range{r.All().Start, r.All().End - 1}); ok {
		t.Fatal("Next accepted an unaligned range")
	}
	for _, budget := range []int64{0, 100, 1000, 10_000, 1 << 30} {
		var total []byte
		for rng, ok := r.Interval(0), true; ok; rng, ok = r.Next(rng) {
			rng = r.Extend(rng, budget)
			if rng.Len() > budget && rng != r.Interval(sortIntervalOf(r, rng.Start)) {
				t.Fatalf("budget %d: extended to %d bytes", budget, rng.Len())
			}
			if next, ok := r.Next(rng); ok && rng.Len()+next.Len() <= budget {
				t.Fatalf("budget %d: stopped at %d bytes with a %d-byte interval next", budget, rng.Len(), next.Len())
			}
			data, err := r.ReadRange(rng, nil)
			if err != nil {
				t.Fatal(err)
			}
			for it := r.Batches(rng, data); it.Next(); {
				total = append(total, it.Batch()...)
			}
		}
		if !bytes.Equal(total, l.data()) {
			t.Fatalf("budget %d: reading by extended ranges lost or changed data", budget)
		}
	}
}

func sortIntervalOf(r *Reader, start int64) int {
	for i := range r.Intervals() {
		if r.Interval(i).Start == start {
			return i
		}
	}
	return -1
}

// Ranges that are not runs of intervals, and data of the wrong length,
// are the caller's mistake: ErrInvalid, not ErrCorrupt.
func TestBadRanges(t *testing.T) {
	l := genLedger(t, 3, genOpts{entries: 50, maxValue: 20})
	seg, _ := writeSegment(t, testWriterOptions(200), l)
	r := mustOpen(t, seg)
	all := r.All()
	for _, rng := range []Range{
		{all.Start + 1, all.End}, {all.Start, all.End - 1}, {all.End, all.End}, {all.Start, all.Start},
		{r.Interval(1).End, r.Interval(0).End}, {0, all.End}, {all.Start, int64(len(seg))},
	} {
		if _, err := r.ReadRange(rng, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("ReadRange(%v): %v", rng, err)
		}
		if it := r.Batches(rng, make([]byte, max(rng.Len(), 0))); it.Next() || !errors.Is(it.Err(), ErrInvalid) {
			t.Errorf("Batches(%v): %v", rng, it.Err())
		}
	}
	if it := r.Batches(all, seg[HeaderSize:]); it.Next() || !errors.Is(it.Err(), ErrInvalid) {
		t.Errorf("Batches with too much data: %v", it.Err())
	}
}

func TestWriterRefuses(t *testing.T) {
	l := genLedger(t, 4, genOpts{entries: 3, maxValue: 20, maxRecords: 5})
	b0, b1 := l.batches[0], l.batches[1]
	multi := b0 // a batch of several records
	for _, b := range l.batches {
		if b.LastOffsetDelta() > 0 {
			multi = b
		}
	}
	if multi.LastOffsetDelta() == 0 {
		t.Fatal("the ledger has no batch of several records")
	}
	corrupt := append([]byte(nil), b0...)
	corrupt[len(corrupt)-1] ^= 1
	withBase := func(b []byte, base int64) []byte {
		c := append([]byte(nil), b...)
		record.SetBaseOffset(c, base)
		return c
	}
	newW := func() *Writer {
		w, err := NewWriter(io.Discard, testWriterOptions(100))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for name, tc := range map[string]struct {
		first, second []byte
	}{
		"empty":            {second: nil},
		"garbage":          {second: []byte("not a batch")},
		"bad crc":          {second: corrupt},
		"trailing bytes":   {second: append(append([]byte(nil), b0...), 1, 2, 3)},
		"negative base":    {second: withBase(b0, -5)},
		"overflow":         {second: withBase(multi, math.MaxInt64)},
		"same offsets":     {first: b0, second: b0},
		"offsets go back":  {first: withBase(b1, 100), second: withBase(b0, 50)},
		"overlap":          {first: withBase(b0, 100), second: withBase(b1, record.Batch(b0).LastOffset()+100)},
		"bad in the entry": {second: append(append([]byte(nil), b0...), corrupt...)},
	} {
		w := newW()
		if tc.first != nil {
			if err := w.Append(tc.first); err != nil {
				t.Fatalf("%s: first append: %v", name, err)
			}
		}
		size := w.Size()
		if err := w.Append(tc.second); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if w.Size() != size {
			t.Errorf("%s: a refused append changed the size", name)
		}
	}
	if err := newW().Append(corrupt); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("bad crc: %v does not name record.ErrCorrupt", err)
	}
	if _, err := newW().Finish(); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty segment: %v", err)
	}

	// MaxSegmentBytes: a refused append leaves a segment that still finishes.
	opts := testWriterOptions(100)
	data := l.data()
	opts.MaxSegmentBytes = int64(HeaderSize + len(b0) + 2*(OffsetEntrySize+TimeEntrySize) + FooterFixedSize + len(opts.TopicID) + TrailerSize)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(b0); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(data[len(b0):]); !errors.Is(err, ErrLimit) {
		t.Fatalf("append past MaxSegmentBytes: %v", err)
	}
	info, err := w.Finish()
	if err != nil || info.Size > opts.MaxSegmentBytes || info.BatchCount != 1 {
		t.Fatalf("finish after a refused append: %+v, %v", info, err)
	}
	mustOpen(t, buf.Bytes())
	if err := w.Append(b1); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Finish: %v", err)
	}
	if _, err := w.Finish(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Finish twice: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (WriterOptions{TopicID: "t"}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := (ReaderOptions{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	err := WriterOptions{LedgerID: -1, Partition: -1, IndexIntervalBytes: -1, MaxSegmentBytes: 1, MaxIndexEntries: -1}.Validate()
	for _, field := range []string{"LedgerID", "TopicID", "Partition", "IndexIntervalBytes", "MaxSegmentBytes", "MaxIndexEntries"} {
		if !strings.Contains(fmt.Sprint(err), field) {
			t.Errorf("writer options: %q not reported in %v", field, err)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("not ErrInvalid: %v", err)
	}
	// An index that could overflow is refused up front.
	err = WriterOptions{TopicID: "t", IndexIntervalBytes: 1024, MaxSegmentBytes: 1 << 30, MaxIndexEntries: 1 << 19}.Validate()
	if !strings.Contains(fmt.Sprint(err), "MaxIndexEntries") {
		t.Errorf("undersized index accepted: %v", err)
	}
	err = ReaderOptions{MaxSegmentBytes: -1, MaxIndexEntries: MaxIndexEntriesLimit + 1, TailReadBytes: 10}.Validate()
	for _, field := range []string{"MaxSegmentBytes", "MaxIndexEntries", "TailReadBytes"} {
		if !strings.Contains(fmt.Sprint(err), field) {
			t.Errorf("reader options: %q not reported in %v", field, err)
		}
	}
	if _, err := NewWriter(io.Discard, WriterOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewWriter with no topic: %v", err)
	}
}

// A failed write closes the Writer for good.
func TestWriteFailure(t *testing.T) {
	l := genLedger(t, 5, genOpts{entries: 10, maxValue: 20})
	boom := errors.New("boom")
	for failAt := range 4 {
		fw := &failingWriter{left: failAt, err: boom}
		w, err := NewWriter(fw, testWriterOptions(100))
		if err != nil {
			t.Fatal(err)
		}
		var got error
		for _, e := range l.entries {
			if got = w.Append(e); got != nil {
				break
			}
		}
		if got == nil {
			_, got = w.Finish()
		}
		if !errors.Is(got, boom) {
			t.Fatalf("fail at write %d: %v", failAt, got)
		}
		if err := w.Append(l.entries[0]); !errors.Is(err, ErrClosed) || !errors.Is(err, boom) {
			t.Fatalf("append after failure: %v", err)
		}
		if _, err := w.Finish(); !errors.Is(err, ErrClosed) {
			t.Fatalf("finish after failure: %v", err)
		}
	}
}

type failingWriter struct {
	left int
	err  error
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.left == 0 {
		return 0, f.err
	}
	f.left--
	return len(p), nil
}

// A segment from a newer build reads as ErrUnsupportedVersion, not as
// corruption; a damaged version reads as corruption.
func TestVersions(t *testing.T) {
	l := genLedger(t, 6, genOpts{entries: 5})
	seg, _ := writeSegment(t, testWriterOptions(100), l)
	newer := append([]byte(nil), seg...)
	tr := newer[len(newer)-TrailerSize:]
	le.PutUint16(tr[4:6], Version+1)
	le.PutUint32(tr[12:16], checksum(tr[0:12]))
	_, err := Open(bytes.NewReader(newer), int64(len(newer)), ReaderOptions{})
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("newer version: %v", err)
	}
	damaged := append([]byte(nil), seg...)
	damaged[len(damaged)-TrailerSize+4] ^= 2
	_, err = Open(bytes.NewReader(damaged), int64(len(damaged)), ReaderOptions{})
	if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("damaged version: %v", err)
	}
}

// Reader limits: a bigger object or index than configured is ErrLimit,
// and the ReaderAt's own errors come back wrapped, not as corruption.
func TestReaderLimitsAndIOErrors(t *testing.T) {
	l := genLedger(t, 7, genOpts{entries: 200, maxValue: 50})
	seg, info := writeSegment(t, testWriterOptions(100), l)
	if _, err := Open(bytes.NewReader(seg), int64(len(seg)), ReaderOptions{MaxSegmentBytes: int64(len(seg) - 1)}); !errors.Is(err, ErrLimit) {
		t.Fatalf("MaxSegmentBytes: %v", err)
	}
	if _, err := Open(bytes.NewReader(seg), int64(len(seg)), ReaderOptions{MaxIndexEntries: info.IndexEntries - 1}); !errors.Is(err, ErrLimit) {
		t.Fatalf("MaxIndexEntries: %v", err)
	}
	boom := errors.New("network down")
	if _, err := Open(errReaderAt{boom}, int64(len(seg)), ReaderOptions{}); !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("read error: %v", err)
	}
	// The object is shorter than the size given: corruption (truncated).
	if _, err := Open(bytes.NewReader(seg[:len(seg)-1]), int64(len(seg)), ReaderOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short object: %v", err)
	}
	if _, err := Open(bytes.NewReader(seg), -1, ReaderOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative size: %v", err)
	}
}

type errReaderAt struct{ err error }

func (e errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, e.err }

// One Reader serves many goroutines at once (run with -race).
func TestConcurrentReads(t *testing.T) {
	l := genLedger(t, 9, genOpts{entries: 300, maxRecords: 4, maxValue: 60, gaps: true})
	seg, info := writeSegment(t, testWriterOptions(400), l)
	r := mustOpen(t, seg)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			errs <- func() error {
				for o := info.FirstOffset + int64(g); o <= info.LastOffset; o += 13 {
					rng, err := r.Find(o)
					if err != nil {
						return err
					}
					data, err := r.ReadRange(rng, nil)
					if err != nil {
						return err
					}
					want := firstWithLast(l.batches, o)
					found := false
					for it := r.Batches(rng, data); it.Next(); {
						found = found || bytes.Equal(it.Batch(), l.batches[want])
					}
					if !found {
						return fmt.Errorf("offset %d: batch %d not in %v", o, want, rng)
					}
				}
				return r.Verify(context.Background())
			}()
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Verify stops when its context ends.
func TestVerifyContext(t *testing.T) {
	l := genLedger(t, 8, genOpts{entries: 50})
	seg, _ := writeSegment(t, testWriterOptions(100), l)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := mustOpen(t, seg).Verify(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify with a cancelled context: %v", err)
	}
}
