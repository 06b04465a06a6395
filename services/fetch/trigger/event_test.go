package trigger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicemq/sluice/pkg/record"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.golden.json")

// goldenRecords covers every field's corner: a null key, a null value, an
// empty value, binary bytes (negative in Lambda's signed header bytes), a
// null header value, repeated header names, non-ASCII and HTML characters.
func goldenRecords() []record.Record {
	return []record.Record{
		{Offset: 41, Timestamp: 1_700_000_000_123, Key: []byte("k1"), Value: []byte("hello"),
			Headers: []record.Header{{Key: "trace", Value: []byte{0x76, 0xdc, 0x00, 0x7f, 0x80}}, {Key: "trace", Value: []byte("b")}}},
		{Offset: 42, Timestamp: 1_700_000_000_124, Key: nil, Value: []byte("fail"),
			Headers: []record.Header{{Key: "null-header", Value: nil}}},
		{Offset: 44, Timestamp: 0, Key: []byte{0xff, 0x00}, Value: nil},
		{Offset: 45, Timestamp: 1_700_000_000_200, Key: []byte("<k&>"), Value: []byte{},
			Headers: []record.Header{{Key: "ünï<&>", Value: []byte("ü")}}},
	}
}

func mustEncoder(t *testing.T, maxRecords, maxBytes int) *Encoder {
	t.Helper()
	e, err := NewEncoder("fetch-0.sluice:9092", maxRecords, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEventGolden(t *testing.T) {
	recs := goldenRecords()
	batch, payload, err := mustEncoder(t, 100, MaxPayloadBytes).Take("orders", 3, recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Records) != len(recs) {
		t.Fatalf("took %d records, want %d", len(batch.Records), len(recs))
	}
	// The piecewise payload is exactly the events types' encoding.
	whole, err := json.Marshal(Event("fetch-0.sluice:9092", batch))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(payload, whole) {
		t.Fatalf("Take payload differs from json.Marshal(Event):\n%s\n%s", payload, whole)
	}

	var pretty bytes.Buffer
	if err := json.Indent(&pretty, payload, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "event.golden.json")
	if *rewrite {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Fatalf("event differs from %s (run with -rewrite if intended):\n%s", path, pretty.Bytes())
	}
}

// TestEventDecodesAsLambdaKafkaEvent decodes the golden file as a handler
// would (events.KafkaEvent) and gets every record field back.
func TestEventDecodesAsLambdaKafkaEvent(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "event.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.KafkaEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.EventSource != "SelfManagedKafka" || ev.BootstrapServers != "fetch-0.sluice:9092" || len(ev.Records) != 1 {
		t.Fatalf("event = %+v", ev)
	}
	got := ev.Records["orders-3"]
	want := goldenRecords()
	if len(got) != len(want) {
		t.Fatalf("records[orders-3] has %d records, want %d", len(got), len(want))
	}
	for i, kr := range got {
		w := want[i]
		if kr.Topic != "orders" || kr.Partition != 3 || kr.Offset != w.Offset || kr.TimestampType != "CREATE_TIME" {
			t.Errorf("record %d = %+v", i, kr)
		}
		if ms := kr.Timestamp.UnixMilli(); ms != w.Timestamp {
			t.Errorf("record %d timestamp %d, want %d", i, ms, w.Timestamp)
		}
		key, _ := base64.StdEncoding.DecodeString(kr.Key)
		value, _ := base64.StdEncoding.DecodeString(kr.Value)
		if !bytes.Equal(key, w.Key) || !bytes.Equal(value, w.Value) {
			t.Errorf("record %d key/value %q %q, want %q %q", i, key, value, w.Key, w.Value)
		}
		if len(kr.Headers) != len(w.Headers) {
			t.Fatalf("record %d has %d headers, want %d", i, len(kr.Headers), len(w.Headers))
		}
		for j, h := range kr.Headers {
			if v, ok := h[w.Headers[j].Key]; len(h) != 1 || !ok || !bytes.Equal(v, w.Headers[j].Value) {
				t.Errorf("record %d header %d = %v, want %q=%v", i, j, h, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
	// And it encodes back to the same bytes.
	again, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, compact.Bytes()) {
		t.Fatalf("decode+encode changed the event:\n%s\n%s", again, compact.Bytes())
	}
}

func seqRecords(n, valueSize int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(100 + i), Timestamp: 1_700_000_000_000, Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, valueSize)}
	}
	return recs
}

func TestTakeBatchSize(t *testing.T) {
	recs := seqRecords(25, 10)
	e := mustEncoder(t, 10, MaxPayloadBytes)
	var sizes []int
	next := int64(100)
	for len(recs) > 0 {
		b, _, err := e.Take("t", 0, recs)
		if err != nil {
			t.Fatal(err)
		}
		if b.FirstOffset() != next {
			t.Fatalf("batch starts at %d, want %d", b.FirstOffset(), next)
		}
		next = b.LastOffset() + 1
		sizes = append(sizes, len(b.Records))
		recs = recs[len(b.Records):]
	}
	if want := []int{10, 10, 5}; !equalInts(sizes, want) {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
}

// TestTakeByteBound: the bound is on the encoded payload, exactly: a bound
// of the size of k records' event takes k, one byte less takes k-1.
func TestTakeByteBound(t *testing.T) {
	recs := seqRecords(8, 1000)
	full := mustEncoder(t, 100, MaxPayloadBytes)
	for k := 1; k <= len(recs); k++ {
		_, exact, err := full.Take("t", 0, recs[:k])
		if err != nil {
			t.Fatal(err)
		}
		b, payload, err := mustEncoder(t, 100, len(exact)).Take("t", 0, recs)
		if err != nil || len(b.Records) != k || len(payload) != len(exact) {
			t.Fatalf("bound %d: took %d records (%d bytes, err %v), want %d", len(exact), len(b.Records), len(payload), err, k)
		}
		if k > 1 {
			b, payload, err = mustEncoder(t, 100, len(exact)-1).Take("t", 0, recs)
			if err != nil || len(b.Records) != k-1 || len(payload) > len(exact)-1 {
				t.Fatalf("bound %d: took %d records (%d bytes, err %v), want %d", len(exact)-1, len(b.Records), len(payload), err, k-1)
			}
		}
	}
}

func TestTakeRecordTooLarge(t *testing.T) {
	recs := seqRecords(3, 10)
	recs[0].Value = bytes.Repeat([]byte{'x'}, 2000)
	_, _, err := mustEncoder(t, 100, 1000).Take("orders", 7, recs)
	var tooLarge *RecordTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Offset != 100 || tooLarge.Partition != 7 || tooLarge.Max != 1000 || tooLarge.Bytes <= 1000 {
		t.Fatalf("err = %v, want a RecordTooLargeError for orders-7 offset 100", err)
	}
	if !strings.Contains(err.Error(), "orders-7 offset 100") {
		t.Fatalf("error %q does not name the record", err)
	}
	// Behind a smaller record, the large one ends the batch instead.
	b, _, err := mustEncoder(t, 100, 1000).Take("orders", 7, append(seqRecords(1, 10), recs[0]))
	if err != nil || len(b.Records) != 1 {
		t.Fatalf("took %d records, err %v; want 1", len(b.Records), err)
	}
}

// TestTakeLambdaLimit: a record of ~4.4 MB (base64 grows it to 6 MB - a bit)
// fits alone under Lambda's limit, not with a second.
func TestTakeLambdaLimit(t *testing.T) {
	recs := seqRecords(2, MaxPayloadBytes/4*3-1000)
	b, payload, err := mustEncoder(t, 100, MaxPayloadBytes).Take("t", 0, recs)
	if err != nil || len(b.Records) != 1 || len(payload) > MaxPayloadBytes {
		t.Fatalf("took %d records of %d bytes, err %v", len(b.Records), len(payload), err)
	}
}

func TestNewEncoderBounds(t *testing.T) {
	for _, c := range []struct{ records, bytes int }{{0, 100}, {1, 0}, {1, MaxPayloadBytes + 1}} {
		if _, err := NewEncoder("", c.records, c.bytes); err == nil {
			t.Errorf("NewEncoder(%d, %d) accepted", c.records, c.bytes)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTakeTimestampBound: a timestamp the events types would encode wrong
// (past 2262) is refused by name, or ends the batch before it.
func TestTakeTimestampBound(t *testing.T) {
	recs := seqRecords(3, 1)
	recs[0].Timestamp = MaxEventTimestampMs
	recs[1].Timestamp = MaxEventTimestampMs + 1
	e := mustEncoder(t, 100, MaxPayloadBytes)
	b, payload, err := e.Take("t", 0, recs)
	if err != nil || len(b.Records) != 1 {
		t.Fatalf("took %d records, err %v; want 1", len(b.Records), err)
	}
	var ev events.KafkaEvent
	if err := json.Unmarshal(payload, &ev); err != nil || ev.Records["t-0"][0].Timestamp.UnixMilli() != MaxEventTimestampMs {
		t.Fatalf("largest timestamp did not round-trip: %s (%v)", payload, err)
	}
	if _, _, err := e.Take("t", 0, recs[1:]); err == nil || !strings.Contains(err.Error(), "t-0 offset 101") {
		t.Fatalf("err = %v, want one naming t-0 offset 101", err)
	}
}
