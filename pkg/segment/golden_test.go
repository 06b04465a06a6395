package segment

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.hex")

const goldenPath = "testdata/golden.hex"

// goldenBatches are five small uncompressed batches (uncompressed so the
// bytes do not depend on a compressor's version) in three entries: offsets
// 100-101, 102, 103, 104, then a gap to 120; timestamps that go back and
// plateau, so the time index skips a boundary.
func goldenBatches(t testing.TB) (entries [][]byte, batches []record.Batch) {
	const t0 = 1_700_000_000_000
	specs := []struct {
		base int64
		ts   []int64
	}{
		{100, []int64{t0, t0 + 5}},
		{102, []int64{t0 + 3}},
		{103, []int64{t0 + 1}},
		{104, []int64{t0 + 2}},
		{120, []int64{t0 + 1000}},
	}
	b, err := record.NewBuilder(record.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range specs {
		for j, ts := range s.ts {
			if err := b.Append(&record.Record{Timestamp: ts, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d.%d", i, j)}); err != nil {
				t.Fatal(err)
			}
		}
		bt, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		record.SetBaseOffset(bt, s.base)
		record.SetPartitionLeaderEpoch(bt, 1)
		batches = append(batches, bt)
	}
	entries = [][]byte{
		append(append([]byte(nil), batches[0]...), batches[1]...),
		batches[2],
		append(append([]byte(nil), batches[3]...), batches[4]...),
	}
	return entries, batches
}

func goldenOptions() WriterOptions {
	return WriterOptions{LedgerID: 7, TopicID: "t-1", Partition: 3, IndexIntervalBytes: 120, MaxSegmentBytes: 1 << 20, MaxIndexEntries: 1 << 15}
}

// The golden file pins the bytes of a tiny segment, one field or batch per
// line with its meaning, so a format change cannot slip through and the
// file doubles as a worked example of the layout in doc.go. The writer must
// reproduce it, and the pinned bytes must read back as the batches.
func TestGolden(t *testing.T) {
	entries, batches := goldenBatches(t)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, goldenOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	seg := buf.Bytes()
	if *update {
		if err := os.WriteFile(goldenPath, []byte(annotate(t, seg)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := readHexFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(seg, want) {
		t.Fatalf("segment bytes changed; if on purpose, bump Version and run with -update.\ngot  %x\nwant %x", seg, want)
	}

	// The pinned bytes, read independently of the Writer.
	r := mustOpen(t, want)
	info := r.Info()
	wantInfo := Info{
		Version: 1, LedgerID: 7, TopicID: "t-1", Partition: 3,
		FirstOffset: 100, LastOffset: 120, RecordCount: 6, BatchCount: 5, MaxTimestamp: 1_700_000_001_000,
		Size: int64(len(want)), Data: Range{HeaderSize, HeaderSize + int64(len(bytes.Join(entries, nil)))},
		IndexEntries: 3, TimeIndexEntries: 2,
	}
	if info != wantInfo {
		t.Fatalf("info %+v\nwant %+v", info, wantInfo)
	}
	// Intervals: batches 0-1 (offsets ..102), 2-3 (..104), 4 (..120); the
	// running max timestamp is t0+5 after the first two intervals, so the
	// time index has entries for the first and the last only.
	wantIdx := []int64{102, 104, 120}
	for i, e := range r.index {
		if e.last != wantIdx[i] {
			t.Fatalf("offset index %d: last %d, want %d", i, e.last, wantIdx[i])
		}
	}
	if r.times[0] != (timeEntry{1_700_000_000_005, 102}) || r.times[1] != (timeEntry{1_700_000_001_000, 120}) {
		t.Fatalf("time index %+v", r.times)
	}
	if err := r.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range batches {
		if !bytes.Equal(got[i], batches[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	for offset, interval := range map[int64]int{0: 0, 101: 0, 102: 0, 103: 1, 104: 1, 105: 2, 119: 2, 120: 2} {
		if rng, err := r.Find(offset); err != nil || rng != r.Interval(interval) {
			t.Errorf("Find(%d) = %v, %v; want interval %d", offset, rng, err, interval)
		}
	}
	for ts, interval := range map[int64]int{0: 0, 1_700_000_000_005: 0, 1_700_000_000_006: 2, 1_700_000_001_000: 2} {
		if rng, err := r.FindTime(ts); err != nil || rng != r.Interval(interval) {
			t.Errorf("FindTime(%d) = %v, %v; want interval %d", ts, rng, err, interval)
		}
	}
}

// annotate renders a segment as commented hex, a line per field or batch.
func annotate(t *testing.T, seg []byte) string {
	var sb strings.Builder
	pos := 0
	line := func(n int, format string, args ...any) {
		fmt.Fprintf(&sb, "%-40x # %s\n", seg[pos:pos+n], fmt.Sprintf(format, args...))
		pos += n
	}
	// Batches are too long for one line: 32 bytes a line, note on the first.
	long := func(n int, note string) {
		for i := 0; i < n; i += 32 {
			m := min(32, n-i)
			if i == 0 {
				fmt.Fprintf(&sb, "%-64x # %s\n", seg[pos:pos+m], note)
			} else {
				fmt.Fprintf(&sb, "%x\n", seg[pos:pos+m])
			}
			pos += m
		}
	}
	sb.WriteString("# Golden segment, format version 1; see doc.go. Little-endian except inside batches.\n")
	sb.WriteString("# Regenerate: go test ./pkg/segment -run Golden -update (only with a version bump)\n")
	sb.WriteString("# header\n")
	line(8, `magic "SLCSEGM\x00"`)
	line(2, "version 1")
	line(2, "reserved")
	line(4, "crc of header [0,12)")
	r := mustOpen(t, seg)
	sb.WriteString("# data: batches as stored (Kafka RecordBatch v2, big-endian)\n")
	for i := range r.Intervals() {
		rng := r.Interval(i)
		it := r.Batches(rng, seg[rng.Start:rng.End])
		for it.Next() {
			b := it.Batch()
			long(len(b), fmt.Sprintf("interval %d: batch offsets %d-%d, %d records, maxTimestamp %d", i, b.BaseOffset(), b.LastOffset(), b.RecordCount(), b.MaxTimestamp()))
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	sb.WriteString("# offset index: last offset i64, end u64, interval crc u32\n")
	for i, e := range r.index {
		line(OffsetEntrySize, "interval %d: last offset %d, ends at %d", i, e.last, e.end)
	}
	sb.WriteString("# time index: running max timestamp i64, offset i64\n")
	for _, e := range r.times {
		line(TimeEntrySize, "timestamp %d, offset %d", e.ts, e.offset)
	}
	f := &r.f
	sb.WriteString("# footer\n")
	for _, fl := range []struct {
		n    int
		note string
	}{
		{8, fmt.Sprintf("ledger id %d", f.ledgerID)},
		{4, fmt.Sprintf("partition %d", f.partition)},
		{2, fmt.Sprintf("topic id length %d", len(f.topicID))},
		{2, "reserved"},
		{8, fmt.Sprintf("first offset %d", f.firstOffset)},
		{8, fmt.Sprintf("last offset %d", f.lastOffset)},
		{8, fmt.Sprintf("record count %d", f.recordCount)},
		{8, fmt.Sprintf("batch count %d", f.batchCount)},
		{8, fmt.Sprintf("max timestamp %d", f.maxTimestamp)},
		{8, fmt.Sprintf("data pos %d", f.dataPos)},
		{8, fmt.Sprintf("data length %d", f.dataLen)},
		{8, fmt.Sprintf("offset index pos %d", f.offIdxPos)},
		{8, fmt.Sprintf("time index pos %d", f.timeIdxPos)},
		{4, fmt.Sprintf("offset index entries %d", f.offIdxCount)},
		{4, fmt.Sprintf("time index entries %d", f.timeIdxCount)},
		{4, "data crc"},
		{4, "offset index crc"},
		{4, "time index crc"},
		{len(f.topicID), fmt.Sprintf("topic id %q", f.topicID)},
	} {
		line(fl.n, "%s", fl.note)
	}
	sb.WriteString("# trailer\n")
	line(4, "footer length %d", f.size())
	line(2, "version 1")
	line(2, "reserved")
	line(4, "footer crc")
	line(4, "trailer crc of [0,12)")
	line(8, `magic "SLCSEGE\x00"`)
	if pos != len(seg) {
		t.Fatalf("annotate covered %d of %d bytes", pos, len(seg))
	}
	return sb.String()
}

// readHexFile reads hex digits, ignoring whitespace and # comments.
func readHexFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var digits strings.Builder
	for line := range strings.Lines(string(data)) {
		line, _, _ = strings.Cut(line, "#")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return hex.DecodeString(digits.String())
}
