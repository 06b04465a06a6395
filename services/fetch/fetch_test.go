package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sluicemq/sluice/internal/cluster"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/ingest"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var h2c = func() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}()

// env is an in-process cluster with clients.
type env struct {
	c     *cluster.Cluster
	admin sluicev1connect.AdminServiceClient
	prod  sluicev1connect.ProducerServiceClient
	cons  sluicev1connect.ConsumerServiceClient
	url   string
}

func startCluster(t testing.TB, cfg cluster.Config) *env {
	t.Helper()
	cfg.Dir, cfg.Addr = t.TempDir(), "127.0.0.1:0"
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cluster Run: %v", err)
		}
	})
	url := "http://" + c.Addr()
	return &env{c: c, url: url,
		admin: sluicev1connect.NewAdminServiceClient(h2c, url, connect.WithGRPC()),
		prod:  sluicev1connect.NewProducerServiceClient(h2c, url, connect.WithGRPC()),
		cons:  sluicev1connect.NewConsumerServiceClient(h2c, url, connect.WithGRPC()),
	}
}

// smallLedgers rolls ledgers every few KiB so reads cross many ledgers.
func smallLedgers() cluster.Config {
	return cluster.Config{Ingest: ingest.Config{Writer: partition.Config{RollBytes: 16 << 10, MaxEntryBytes: 16 << 10}}}
}

func (e *env) createTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	if _, err := e.admin.CreateTopic(context.Background(), connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: partitions})); err != nil {
		t.Fatal(err)
	}
}

// produce writes n records "v<i>" (i from first) to a partition in
// requests of batch records and returns their offsets.
func (e *env) produce(t testing.TB, topic string, partition int32, first, n, batch int) []int64 {
	t.Helper()
	var offs []int64
	for i := first; i < first+n; i += batch {
		var recs []*sluicev1.Record
		for j := i; j < min(i+batch, first+n); j++ {
			recs = append(recs, &sluicev1.Record{Key: []byte("k" + strconv.Itoa(j)), Value: []byte(fmt.Sprintf("v%d", j)), Timestamp: int64(1_000_000 + j)})
		}
		resp, err := e.prod.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: topic, Partition: &partition, Records: recs}))
		if err != nil {
			t.Fatalf("produce %d..: %v", i, err)
		}
		for _, r := range resp.Msg.Results {
			offs = append(offs, r.Offset)
		}
	}
	return offs
}

// Fetch reads everything back in order across many ledgers, pages by
// max_records and max_bytes, resolves EARLIEST/LATEST/TIMESTAMP, and
// answers OUT_OF_RANGE with the valid range beyond the end.
func TestFetchReadsAcrossLedgers(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "t", 2)
	const n = 3000
	offs := e.produce(t, "t", 1, 0, n, 50)
	for i, o := range offs {
		if o != int64(i) {
			t.Fatalf("record %d got offset %d", i, o)
		}
	}
	p, err := e.c.Catalog.GetPartition(context.Background(), "t", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ledgers) < 3 {
		t.Fatalf("want several ledgers for the test to mean something, got %d", len(p.Ledgers))
	}
	ctx := context.Background()
	next, got := int64(0), 0
	for next < n {
		resp, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 1, Offset: next, MaxRecords: 137}))
		if err != nil {
			t.Fatalf("fetch at %d: %v", next, err)
		}
		m := resp.Msg
		if len(m.Records) == 0 || len(m.Records) > 137 {
			t.Fatalf("fetch at %d returned %d records", next, len(m.Records))
		}
		for _, r := range m.Records {
			if r.Offset != next || string(r.Value) != fmt.Sprintf("v%d", next) || r.Timestamp != 1_000_000+next {
				t.Fatalf("at %d got offset %d value %q ts %d", next, r.Offset, r.Value, r.Timestamp)
			}
			next++
			got++
		}
		// The high watermark may lag (the tail's LAC as last learned) but
		// never passes the end nor falls behind what was returned.
		if m.NextOffset != next || m.HighWatermark < next || m.HighWatermark > n {
			t.Fatalf("next_offset %d (want %d), high watermark %d (want %d..%d)", m.NextOffset, next, m.HighWatermark, next, n)
		}
	}
	// A read starting mid-ledger (binary search, no cursor hint).
	resp, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 1, Offset: 1234, MaxRecords: 1}))
	if err != nil || len(resp.Msg.Records) != 1 || resp.Msg.Records[0].Offset != 1234 {
		t.Fatalf("fetch at 1234: %v %v", resp, err)
	}
	// max_bytes: each value is ~5 bytes, key ~5: 100 bytes hold few records.
	resp, err = e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 1, Offset: 2000, MaxBytes: 100}))
	if err != nil || len(resp.Msg.Records) == 0 || len(resp.Msg.Records) > 10 {
		t.Fatalf("max_bytes 100: %d records, %v", len(resp.Msg.Records), err)
	}
	for _, tc := range []struct {
		name string
		req  *sluicev1.FetchRequest
		want int64
	}{
		{"earliest", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_EARLIEST}, 0},
		{"timestamp", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 1_000_000 + 2500}, 2500},
		{"timestamp before all", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 5}, 0},
	} {
		tc.req.Topic, tc.req.Partition, tc.req.MaxRecords = "t", 1, 1
		resp, err := e.cons.Fetch(ctx, connect.NewRequest(tc.req))
		if err != nil || len(resp.Msg.Records) != 1 || resp.Msg.Records[0].Offset != tc.want {
			t.Fatalf("%s: want offset %d, got %v %v", tc.name, tc.want, resp, err)
		}
	}
	resp, err = e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 1, Start: sluicev1.StartPosition_START_POSITION_LATEST}))
	if err != nil || len(resp.Msg.Records) != 0 || resp.Msg.NextOffset != n {
		t.Fatalf("latest: %v %v", resp, err)
	}
	resp, err = e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 1, Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 9_000_000}))
	if err != nil || resp.Msg.NextOffset != n {
		t.Fatalf("timestamp after all: %v %v", resp, err)
	}
	// Beyond the end: OUT_OF_RANGE with the range in ErrorInfo.
	_, err = e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 1, Offset: n + 10}))
	if connect.CodeOf(err) != connect.CodeOutOfRange {
		t.Fatalf("beyond the end: want OUT_OF_RANGE, got %v", err)
	}
	var ce *connect.Error
	errors.As(err, &ce)
	found := false
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok && ei.Reason == fetch.ReasonOutOfRange && ei.Metadata["high_watermark"] == strconv.Itoa(n) && ei.Metadata["log_start_offset"] == "0" {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("OUT_OF_RANGE without the range in ErrorInfo: %v", ce.Details())
	}
	// The empty partition: at its end, no error.
	resp, err = e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 0}))
	if err != nil || len(resp.Msg.Records) != 0 || resp.Msg.HighWatermark != 0 {
		t.Fatalf("empty partition: %v %v", resp, err)
	}
}

// Fetch validates its input and names the field.
func TestFetchValidation(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 1)
	ctx := context.Background()
	for _, tc := range []struct {
		req   *sluicev1.FetchRequest
		code  connect.Code
		field string
	}{
		{&sluicev1.FetchRequest{Topic: "t", Partition: -1}, connect.CodeInvalidArgument, "partition"},
		{&sluicev1.FetchRequest{Topic: "t", Partition: 1}, connect.CodeInvalidArgument, "partition"},
		{&sluicev1.FetchRequest{Topic: "t", Offset: -5}, connect.CodeInvalidArgument, "offset"},
		{&sluicev1.FetchRequest{Topic: "t", MaxRecords: 10_001}, connect.CodeInvalidArgument, "max_records"},
		{&sluicev1.FetchRequest{Topic: "t", MaxWaitMs: 30_001}, connect.CodeInvalidArgument, "max_wait_ms"},
		{&sluicev1.FetchRequest{Topic: "t", MaxBytes: 17 << 20}, connect.CodeInvalidArgument, "max_bytes"},
		{&sluicev1.FetchRequest{Topic: "t", Start: 9}, connect.CodeInvalidArgument, "start"},
		{&sluicev1.FetchRequest{Topic: "", Partition: 0}, connect.CodeInvalidArgument, "topic"},
		{&sluicev1.FetchRequest{Topic: "nope", Partition: 0}, connect.CodeNotFound, ""},
	} {
		_, err := e.cons.Fetch(ctx, connect.NewRequest(tc.req))
		if connect.CodeOf(err) != tc.code {
			t.Errorf("%v: want %v, got %v", tc.req, tc.code, err)
			continue
		}
		if tc.field != "" {
			var ce *connect.Error
			if errors.As(err, &ce) && !containsField(ce.Message(), tc.field) {
				t.Errorf("%v: message %q does not name %s", tc.req, ce.Message(), tc.field)
			}
		}
	}
}

func containsField(msg, field string) bool {
	return len(msg) >= len(field) && (msg[:len(field)] == field || contains(msg, field+":") || contains(msg, field+" "))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A long-polling Fetch at the tail returns as soon as a record is
// produced, and several waiting consumers share one tail.
// Acknowledged means readable at once, from a fetch without wait at the
// end of a partition that was empty when last read: its first ledger is
// new since, which only the catalog shows (the chain was cached up to
// ChainTTL, 30 s, and such a fetch returned nothing until it expired).
func TestFetchAtEndSeesTheFirstLedgerAtOnce(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 1)
	ctx := context.Background()
	fetch := func() *sluicev1.FetchResponse {
		t.Helper()
		r, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t"}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg
	}
	if got := fetch(); len(got.GetRecords()) != 0 || got.GetHighWatermark() != 0 {
		t.Fatalf("empty partition: %v", got)
	}
	e.produce(t, "t", 0, 0, 2, 2)
	if got := fetch(); len(got.GetRecords()) != 2 || got.GetHighWatermark() != 2 {
		t.Fatalf("right after 2 records were acknowledged: %d records, high watermark %d; want 2 and 2", len(got.GetRecords()), got.GetHighWatermark())
	}
}

// A fetch without wait at the end sees a record acknowledged in a ledger
// that a roll-over added after the fetch service cached the partition's
// chain: the tail it cached was sealed, which a poll of its bookies tells
// (the writer fences the ledger it closed), and a sealed tail sends the
// read to the catalog for its successor. No tail watcher runs here (no
// long poll, no session), so nothing else would refresh the chain for a
// second.
func TestFetchAtEndSeesANewLedgerAtOnce(t *testing.T) {
	cfg := smallLedgers()
	cfg.Ingest.Writer.RollBytes, cfg.Ingest.Writer.MaxEntryBytes = 4<<10, 4<<10
	e := startCluster(t, cfg)
	e.createTopic(t, "t", 1)
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 3<<10) // every record fills most of a ledger
	p := int32(0)
	for i := range 20 {
		resp, err := e.prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p, Records: []*sluicev1.Record{{Value: big}}}))
		if err != nil {
			t.Fatal(err)
		}
		if off := resp.Msg.Results[0].Offset; off != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, off)
		}
		r, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Offset: int64(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Msg.Records) != 1 || r.Msg.HighWatermark != int64(i)+1 {
			t.Fatalf("a fetch right after record %d was acknowledged: %d records, high watermark %d; want it, and %d",
				i, len(r.Msg.Records), r.Msg.HighWatermark, i+1)
		}
	}
	if ls, err := e.c.Catalog.GetPartition(ctx, "t", 0); err != nil || len(ls.Ledgers) < 10 {
		t.Fatalf("%d ledgers (%v): the test meant a roll-over between most records", len(ls.Ledgers), err)
	}
}

// A fetch from a time finds a record acknowledged just before it, though
// the fetch service had read the partition earlier (its tail's LAC as it
// knew it was older): the end it answers with when nothing it knows of
// qualifies is never past a record that does.
func TestFetchFromATimeSeesARecordJustAcknowledged(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 1)
	ctx := context.Background()
	for i := range 10 {
		e.produce(t, "t", 0, 2*i, 1, 1) // timestamp 1_000_000 + 2i
		if _, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Offset: int64(i)})); err != nil {
			t.Fatal(err)
		}
		e.produce(t, "t", 0, 2*i+1, 1, 1) // acknowledged: the next fetch must see it
		r, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t",
			Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 1_000_000 + int64(2*i+1)}))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Msg.Records) == 0 || r.Msg.Records[0].Offset != int64(2*i+1) {
			t.Fatalf("round %d: a fetch from the time of the record just acknowledged at offset %d returned %d records from offset %d",
				i, 2*i+1, len(r.Msg.Records), r.Msg.Offset)
		}
	}
}

func TestFetchLongPollWakesOnProduce(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 1)
	e.produce(t, "t", 0, 0, 10, 10)
	ctx := context.Background()
	const waiters = 5
	type result struct {
		resp *connect.Response[sluicev1.FetchResponse]
		err  error
		at   time.Time
	}
	results := make(chan result, waiters)
	var started sync.WaitGroup
	for range waiters {
		started.Add(1)
		go func() {
			started.Done()
			resp, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Offset: 10, MaxWaitMs: 10_000}))
			results <- result{resp, err, time.Now()}
		}()
	}
	started.Wait()
	time.Sleep(300 * time.Millisecond) // let them park
	sent := time.Now()
	e.produce(t, "t", 0, 10, 1, 1)
	acked := time.Now()
	for range waiters {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.resp.Msg.Records) != 1 || r.resp.Msg.Records[0].Offset != 10 {
			t.Fatalf("got %v", r.resp.Msg.Records)
		}
		if r.at.Before(sent) {
			t.Fatalf("a waiting fetch returned before the produce")
		}
		t.Logf("woke %v after the ack (%v after the send)", r.at.Sub(acked), r.at.Sub(sent))
	}
	// Without new data the wait runs out and returns empty.
	start := time.Now()
	resp, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Offset: 11, MaxWaitMs: 300}))
	if err != nil || len(resp.Msg.Records) != 0 || resp.Msg.NextOffset != 11 {
		t.Fatalf("empty wait: %v %v", resp, err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("returned after %v, before max_wait_ms", el)
	}
}

// A follower long-polling the tail keeps up across ledger roll-overs: every
// record arrives, in order, and the wait a roll-over adds stays bounded by
// the tail watcher's chain check.
func TestFetchFollowsTailAcrossRollOvers(t *testing.T) {
	cfg := smallLedgers()
	cfg.Ingest.Writer.RollBytes, cfg.Ingest.Writer.MaxEntryBytes = 2<<10, 2<<10
	if os.Getenv("FETCH_DEBUG") != "" {
		cfg.Fetch.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e := startCluster(t, cfg)
	e.createTopic(t, "roll", 1)
	const n = 400
	got := make(chan int64, n)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		next := int64(0)
		for next < n {
			resp, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "roll", Offset: next, MaxWaitMs: 5000}))
			if err != nil {
				errc <- err
				return
			}
			for _, r := range resp.Msg.Records {
				if r.Offset != next || string(r.Value) != fmt.Sprintf("v%d", next) {
					errc <- fmt.Errorf("at %d got offset %d value %q", next, r.Offset, r.Value)
					return
				}
				got <- r.Offset
				next++
			}
		}
		// Done: no send on errc, which only carries failures (a nil there
		// raced with the last record in the select below).
	}()
	var worst time.Duration
	for i := range n {
		start := time.Now()
		e.produce(t, "roll", 0, i, 1, 1)
		select {
		case o := <-got:
			if o != int64(i) {
				t.Fatalf("got %d, want %d", o, i)
			}
		case err := <-errc:
			t.Fatal(err)
		case <-time.After(5 * time.Second):
			t.Fatalf("record %d not fetched within 5 s", i)
		}
		worst = max(worst, time.Since(start))
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	p, err := e.c.Catalog.GetPartition(context.Background(), "roll", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ledgers) < 5 {
		t.Fatalf("only %d ledgers: the test did not roll over", len(p.Ledgers))
	}
	t.Logf("%d records over %d ledgers; worst produce-to-fetch %v", n, len(p.Ledgers), worst)
}

// A Fetch whose client id header is over MaxClientIDLength is refused
// with INVALID_ARGUMENT naming the limit (the id keys a quota bucket).
func TestFetchClientIDBounded(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 1)
	req := connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", MaxRecords: 1})
	req.Header().Set("Sluice-Client-Id", strings.Repeat("c", fetch.MaxClientIDLength+1))
	if _, err := e.cons.Fetch(t.Context(), req); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "Sluice-Client-Id") {
		t.Fatalf("an over-long client id: %v; want INVALID_ARGUMENT naming the header", err)
	}
	req.Header().Set("Sluice-Client-Id", strings.Repeat("c", fetch.MaxClientIDLength))
	if _, err := e.cons.Fetch(t.Context(), req); err != nil {
		t.Fatalf("a client id at the bound: %v", err)
	}
}
