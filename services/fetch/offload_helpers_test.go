package fetch_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/pkg/segment"
	"github.com/sluicemq/sluice/services/fetch"
)

// The compactor (services/compactor) is written elsewhere; these tests
// offload by hand, doing what it does: write the ledger's segment, point
// the catalog at it (CLOSED → OFFLOADED, compare-and-set), then delete the
// ledger from its bookies.

// memBucket opens an in-memory object store closed with the test.
func memBucket(t testing.TB) *blob.Bucket {
	t.Helper()
	b, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// testIntervalBytes: small index intervals, so one ledger of the tests
// (16 KiB) is many intervals and reads cross their boundaries.
const testIntervalBytes = 1024

// segmentOf builds the segment object of a sealed ledger from its entries
// (those keep accepts; nil keeps all: a key compaction leaves gaps).
func (e *env) segmentOf(t testing.TB, id catalog.LedgerID, keep func(entry int) bool) (catalog.LedgerMetadata, []byte) {
	t.Helper()
	ctx := context.Background()
	m, err := e.c.Catalog.GetLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != catalog.LedgerClosed || m.LastEntry < 0 {
		t.Fatalf("ledger %d is %v with last entry %d: only a closed ledger with entries is offloaded", id, m.State, m.LastEntry)
	}
	ents, err := e.c.Ledgers.ReadEntries(ctx, id, 0, m.LastEntry)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, segment.WriterOptions{LedgerID: int64(id), TopicID: string(m.TopicID), Partition: int32(m.Partition), IndexIntervalBytes: testIntervalBytes, MaxSegmentBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ents {
		if keep != nil && !keep(i) {
			continue
		}
		if err := w.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return m, buf.Bytes()
}

// offload offloads a sealed ledger by hand; damage, if set, alters the
// object's bytes before the upload (the catalog then points at a corrupt
// object).
func (e *env) offload(t testing.TB, b *blob.Bucket, id catalog.LedgerID, damage func([]byte)) string {
	t.Helper()
	return e.offloadSome(t, b, id, nil, damage)
}

// offloadSome is offload of the entries keep accepts (nil: all).
func (e *env) offloadSome(t testing.TB, b *blob.Bucket, id catalog.LedgerID, keep func(entry int) bool, damage func([]byte)) string {
	t.Helper()
	ctx := context.Background()
	m, obj := e.segmentOf(t, id, keep)
	if damage != nil {
		damage(obj)
	}
	key := fmt.Sprintf("segments/%s/%d/%d.seg", m.TopicID, m.Partition, id)
	if err := b.WriteAll(ctx, key, obj, nil); err != nil {
		t.Fatal(err)
	}
	m.State, m.Location = catalog.LedgerOffloaded, key
	if _, err := e.c.Catalog.UpdateLedger(ctx, m); err != nil {
		t.Fatalf("mark ledger %d offloaded: %v", id, err)
	}
	for _, bk := range e.c.Bookies {
		if err := bk.DeleteLedger(int64(id)); err != nil {
			t.Fatalf("delete ledger %d from a bookie: %v", id, err)
		}
	}
	return key
}

// sealedLedgers returns the ledgers of a partition's chain but the tail.
func (e *env) sealedLedgers(t testing.TB, topic string, partition int) (catalog.Partition, []catalog.LedgerRef) {
	t.Helper()
	p, err := e.c.Catalog.GetPartition(context.Background(), topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ledgers) < 3 {
		t.Fatalf("want several ledgers for the test to mean something, got %d", len(p.Ledgers))
	}
	return p, p.Ledgers[:len(p.Ledgers)-1]
}

// objectCopy is a fetch copy that reads offloaded ledgers from b (nil:
// none), served on its own address. Not the cluster's copy: that one reads
// the cluster's own object store, where the compactor (not these tests)
// puts segments.
func (e *env) objectCopy(t testing.TB, cfg fetch.Config, b *blob.Bucket) (*fetch.Service, sluicev1connect.ConsumerServiceClient) {
	t.Helper()
	return e.fetchCopy(t, cfg, fetch.Deps{Catalog: e.c.Catalog, Ledgers: e.c.Ledgers, Bookkeeping: e.c.Bookkeeping, Objects: b})
}

// fetchCopy is a fetch copy with the given dependencies, served on its own
// address.
func (e *env) fetchCopy(t testing.TB, cfg fetch.Config, d fetch.Deps) (*fetch.Service, sluicev1connect.ConsumerServiceClient) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Address = ln.Addr().String()
	svc, err := fetch.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rpcserver.New(rpcserver.Config{}, telemetry.Discard())
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle(svc.Handler(srv.HandlerOptions()...))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	ran := make(chan error, 1)
	go func() { ran <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-served; <-ran })
	return svc, sluicev1connect.NewConsumerServiceClient(h2c, "http://"+ln.Addr().String(), connect.WithGRPC())
}

// readAll fetches a partition from offset from to the end in pages of max
// records and checks every record is the one produce wrote there: in
// order, no gap, no duplicate.
func readAll(t testing.TB, cons sluicev1connect.ConsumerServiceClient, topic string, partition int32, from, end int64, max int32) {
	t.Helper()
	ctx := context.Background()
	for next := from; next < end; {
		resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Partition: partition, Offset: next, MaxRecords: max}))
		if err != nil {
			t.Fatalf("fetch at %d: %v", next, err)
		}
		if len(resp.Msg.Records) == 0 {
			t.Fatalf("fetch at %d returned no record (next %d, high watermark %d)", next, resp.Msg.NextOffset, resp.Msg.HighWatermark)
		}
		for _, r := range resp.Msg.Records {
			checkRecord(t, r, next)
			next++
		}
		if resp.Msg.NextOffset != next {
			t.Fatalf("next_offset %d, want %d", resp.Msg.NextOffset, next)
		}
	}
}

func checkRecord(t testing.TB, r *sluicev1.ConsumedRecord, want int64) {
	t.Helper()
	if r.Offset != want || string(r.Value) != fmt.Sprintf("v%d", want) || string(r.Key) != "k"+strconv.FormatInt(want, 10) || r.Timestamp != 1_000_000+want {
		t.Fatalf("at %d got offset %d key %q value %q ts %d", want, r.Offset, r.Key, r.Value, r.Timestamp)
	}
}

// warnRecorder is a slog.Handler keeping warnings and errors (a session
// retries a failed read after logging it, so "no error" is "no warning")
// and counting switches of a ledger from the bookies to its object.
type warnRecorder struct {
	mu       sync.Mutex
	msgs     []string
	switched int
}

func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnRecorder) WithGroup(string) slog.Handler                { return w }

func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		if r.Message == "reading an offloaded ledger from its object" {
			w.mu.Lock()
			w.switched++
			w.mu.Unlock()
		}
		return nil
	}
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
	return nil
}

func (w *warnRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

func (w *warnRecorder) switches() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.switched
}
