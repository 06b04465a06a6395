package record

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var update = flag.Bool("update", false, "rewrite testdata/*.hex golden files")

const goldenPath = "testdata/golden_uncompressed.hex"

// goldenRecords covers a key with a header, a tombstone with a null key, and
// an empty key and value with a timestamp before the first record's.
func goldenRecords() []Record {
	return []Record{
		{Timestamp: 1_700_000_000_000, Key: []byte("k1"), Value: []byte("hello"), Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Timestamp: 1_700_000_000_005},
		{Timestamp: 1_699_999_999_999, Key: []byte{}, Value: []byte{}},
	}
}

func goldenBatch(t *testing.T) []byte {
	batch := build(t, BuilderOptions{Producer: &Producer{ID: 1000, Epoch: 2, BaseSequence: 7}}, goldenRecords())
	SetBaseOffset(batch, 42)
	SetPartitionLeaderEpoch(batch, 3)
	return batch
}

// The golden file pins the exact bytes of one small uncompressed batch, one
// field or record per line with its name, so a format change cannot slip
// through and the file doubles as a worked example of the layout.
func TestGoldenUncompressed(t *testing.T) {
	batch := goldenBatch(t)
	if *update {
		if err := os.WriteFile(goldenPath, []byte(annotate(t, batch)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := readHexFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(batch, want) {
		t.Fatalf("encoding changed (run with -update only if that is intended):\ngot  %x\nwant %x", batch, want)
	}
	// The pinned bytes decode to the records, independently of the Builder.
	got, err := Parse(want, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, goldenRecords(), 42)

	// And franz-go, an independent implementation that checks the CRC,
	// reads the same bytes the same way.
	rp := &kmsg.FetchResponseTopicPartition{HighWatermark: 45, RecordBatches: want}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"}, rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil || len(fp.Records) != 3 {
		t.Fatalf("kgo: %d records, %v", len(fp.Records), fp.Err)
	}
	r0 := fp.Records[0]
	if r0.Offset != 42 || string(r0.Key) != "k1" || string(r0.Value) != "hello" || r0.ProducerID != 1000 ||
		r0.LeaderEpoch != 3 || r0.Timestamp.UnixMilli() != 1_700_000_000_000 || len(r0.Headers) != 1 {
		t.Fatalf("kgo reads record 0 as %+v", r0)
	}
	if fp.Records[1].Value != nil || fp.Records[2].Offset != 44 || fp.Records[2].Timestamp.UnixMilli() != 1_699_999_999_999 {
		t.Fatalf("kgo reads records 1-2 as %+v %+v", fp.Records[1], fp.Records[2])
	}
}

// annotate renders a batch as commented hex: each header field, then each
// record, on its own line.
func annotate(t *testing.T, batch []byte) string {
	var sb strings.Builder
	sb.WriteString("# Golden RecordBatch v2 (magic 2), uncompressed, 3 records; see doc.go.\n")
	sb.WriteString("# Regenerate: go test ./pkg/record -run Golden -update\n")
	fields := []struct {
		name     string
		off, end int
	}{
		{"baseOffset = 42", offBaseOffset, offBatchLength},
		{"batchLength", offBatchLength, offLeaderEpoch},
		{"partitionLeaderEpoch = 3", offLeaderEpoch, offMagic},
		{"magic = 2", offMagic, offCRC},
		{"crc (CRC-32C of attributes..end)", offCRC, offAttributes},
		{"attributes = 0 (no codec, CreateTime)", offAttributes, offLastOffsetDelta},
		{"lastOffsetDelta = 2", offLastOffsetDelta, offBaseTimestamp},
		{"baseTimestamp = 1700000000000", offBaseTimestamp, offMaxTimestamp},
		{"maxTimestamp = 1700000000005", offMaxTimestamp, offProducerID},
		{"producerId = 1000", offProducerID, offProducerEpoch},
		{"producerEpoch = 2", offProducerEpoch, offBaseSequence},
		{"baseSequence = 7", offBaseSequence, offRecordCount},
		{"recordCount = 3", offRecordCount, HeaderSize},
	}
	for _, f := range fields {
		fmt.Fprintf(&sb, "%-24x # %s\n", batch[f.off:f.end], f.name)
	}
	notes := []string{
		`key "k1", value "hello", header h="v", tsDelta 0`,
		"null key, null value (tombstone), tsDelta +5",
		"empty key, empty value, tsDelta -1",
	}
	rest := batch[HeaderSize:]
	for i, r := range goldenRecords() {
		enc := rawRecord(r, r.Timestamp-goldenRecords()[0].Timestamp, int32(i))
		if !bytes.HasPrefix(rest, enc) {
			t.Fatalf("record %d is not where annotate expects it", i)
		}
		fmt.Fprintf(&sb, "%-24x # record %d: %s\n", enc, i, notes[i])
		rest = rest[len(enc):]
	}
	if len(rest) != 0 {
		t.Fatal("bytes left after the records")
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
