package compactor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"
	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is an in-process ledger tier for the compactor: real bookies on
// in-memory filesystems behind loopback h2c servers, an embedded catalog
// in memory, the ledger client, a mem:// bucket, and a clock the test
// moves.
type env struct {
	t       testing.TB
	cat     *catalog.Catalog
	bookies []*bookie.Bookie
	ledgers *client.Client
	bucket  *blob.Bucket
	now     atomic.Int64 // the compactor's clock offset from the wall clock, ns
	// repl is the replication of the ledgers ledger() writes (zero: E3,
	// Qw2, Qa2).
	repl catalog.Replication

	mu      sync.Mutex
	written map[catalog.LedgerID][][]byte // payloads per entry, as appended
	lease   map[string]catalog.WriterLease
	stops   map[string]func() // per bookie id: stop its server and close it (once)
	byID    map[string]*bookie.Bookie
}

func newEnv(t testing.TB) *env {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, cat: cat, written: map[catalog.LedgerID][][]byte{}, lease: map[string]catalog.WriterLease{}, stops: map[string]func(){}, byID: map[string]*bookie.Bookie{}}
	t.Cleanup(func() {
		if err := cat.Close(); err != nil {
			t.Errorf("close catalog: %v", err)
		}
	})
	for i := 1; i <= 3; i++ {
		e.startBookie(fmt.Sprintf("b%d", i))
	}
	e.ledgers, err = client.New(client.Config{
		Ledgers: cat, Bookies: cat, ReadTimeout: 2 * time.Second, FenceTimeout: 2 * time.Second,
		TickInterval: 2 * time.Millisecond, RetryBackoff: 5 * time.Millisecond, MaxEntryBytes: 1 << 20,
		DamageConfirmDelay: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.ledgers.Close() })
	e.bucket, err = objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.bucket.Close() })
	if _, err := cat.HeartbeatOwner(context.Background(), "writer", "127.0.0.1:1", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) startBookie(id string) {
	b, err := bookie.Open(bookie.Config{
		ID: id, InstanceID: "test", Dir: "/data", FS: vfs.NewMem(),
		MaxEntryBytes: 1 << 20, MaxReadBytes: 4 << 20, WriteBufferBytes: 4 << 20,
		CheckpointInterval: time.Hour, DiskCheckInterval: time.Hour, GCInterval: -1,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(b.Handler())
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	stop := sync.OnceFunc(func() {
		srv.CloseClientConnections()
		srv.Close()
		if err := b.Close(); err != nil {
			e.t.Errorf("close bookie %s: %v", id, err)
		}
	})
	e.t.Cleanup(stop)
	e.mu.Lock()
	e.stops[id] = stop
	e.byID[id] = b
	e.mu.Unlock()
	e.bookies = append(e.bookies, b)
	if _, err := e.cat.HeartbeatBookie(context.Background(), catalog.Bookie{
		ID: id, Address: srv.Listener.Addr().String(), FreeBytes: 1 << 30, TotalBytes: 1 << 31,
	}, 10*time.Minute); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// clock is the compactor's Now: the wall clock plus what advance added.
func (e *env) clock() time.Time { return time.Now().Add(time.Duration(e.now.Load())) }

func (e *env) advance(d time.Duration) { e.now.Add(int64(d)) }

// compactor builds a compactor over the env with test-sized settings.
func (e *env) compactor(mod func(*Config, *Deps)) *Compactor {
	e.t.Helper()
	cfg := Config{
		OffloadAge: time.Minute, BookieDeleteGrace: time.Minute, DeleteGrace: time.Minute,
		OrphanGrace: time.Hour, Workers: 3, Now: e.clock,
	}
	deps := Deps{Catalog: e.cat, Ledgers: e.ledgers, Objects: e.bucket}
	if mod != nil {
		mod(&cfg, &deps)
	}
	c, err := New(cfg, deps)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// topic creates a topic with one partition and takes its writer lease.
func (e *env) topic(name string, cfg catalog.TopicConfig) catalog.Topic {
	e.t.Helper()
	tp, err := e.cat.CreateTopic(e.ctx(), name, 1, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := e.cat.AcquireWriter(e.ctx(), name, 0, "writer")
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.lease[name] = p.Lease()
	e.mu.Unlock()
	return tp
}

// batch builds one record batch of n records at base offset base.
func batch(t testing.TB, base int64, n int, tag string) []byte {
	t.Helper()
	b, err := record.NewBuilder(record.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		off := base + int64(i)
		if err := b.Append(&record.Record{Timestamp: 1_700_000_000_000 + off, Key: fmt.Appendf(nil, "k%d", off%7), Value: fmt.Appendf(nil, "%s-%d", tag, off)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(out, base)
	return out
}

// ledger writes a sealed ledger of entries×perEntry records to topic's
// partition 0, starting at first, appends it to the chain and returns it.
func (e *env) ledger(topic string, first int64, entries, perEntry int) catalog.LedgerMetadata {
	e.t.Helper()
	var payloads [][]byte
	off := first
	for range entries {
		payloads = append(payloads, batch(e.t, off, perEntry, topic))
		off += int64(perEntry)
	}
	return e.ledgerOf(topic, first, off-1, payloads)
}

// ledgerOf writes a sealed ledger of the given entry payloads (batches for
// offsets first..last) to topic's partition 0 and appends it to the chain;
// on the given ensemble if any, else on one the client picks.
func (e *env) ledgerOf(topic string, first, last int64, payloads [][]byte, ensemble ...string) catalog.LedgerMetadata {
	e.t.Helper()
	e.mu.Lock()
	l := e.lease[topic]
	e.mu.Unlock()
	repl := e.repl
	if repl == (catalog.Replication{}) {
		repl = catalog.Replication{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}
	}
	w, err := e.ledgers.CreateLedger(e.ctx(), catalog.LedgerSpec{
		Topic: topic, TopicID: l.TopicID, Partition: 0, Replication: repl,
		FirstOffset: first, WriterOwner: l.Owner, WriterEpoch: l.Epoch, Ensemble: ensemble,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.cat.AppendLedger(e.ctx(), l, catalog.LedgerRef{ID: w.ID(), FirstOffset: first}); err != nil {
		e.t.Fatal(err)
	}
	for _, p := range payloads {
		if _, err := w.Append(e.ctx(), p); err != nil {
			e.t.Fatal(err)
		}
	}
	m, err := w.Close(e.ctx(), last)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.written[m.ID] = payloads
	e.mu.Unlock()
	return m
}

func (e *env) get(id catalog.LedgerID) catalog.LedgerMetadata {
	e.t.Helper()
	m, err := e.cat.GetLedger(e.ctx(), id)
	if err != nil {
		e.t.Fatalf("ledger %d: %v", id, err)
	}
	return m
}

// onBookies reports how many bookies still hold ledger id's entry 0.
func (e *env) onBookies(id catalog.LedgerID) int {
	n := 0
	for _, b := range e.bookies {
		if ents, _, err := b.Read(int64(id), 0, 0, 1<<20, false, nil); err == nil && len(ents) > 0 {
			n++
		}
	}
	return n
}

// checkSegment reads ledger m's object and checks that it holds exactly
// the batches written, byte for byte, in order.
func (e *env) checkSegment(m catalog.LedgerMetadata) {
	e.t.Helper()
	ctx := e.ctx()
	data, err := e.bucket.ReadAll(ctx, m.Location)
	if err != nil {
		e.t.Fatalf("ledger %d: read %s: %v", m.ID, m.Location, err)
	}
	r, err := segment.Open(bytes.NewReader(data), int64(len(data)), segment.ReaderOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Verify(ctx); err != nil {
		e.t.Fatal(err)
	}
	rng := r.All()
	buf, err := r.ReadRange(rng, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	var got []byte
	it := r.Batches(rng, buf)
	for it.Next() {
		got = append(got, it.Batch()...)
	}
	if err := it.Err(); err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	want := bytes.Join(e.written[m.ID], nil)
	e.mu.Unlock()
	if !bytes.Equal(got, want) {
		e.t.Fatalf("ledger %d: segment holds %d bytes of batches, want the %d written", m.ID, len(got), len(want))
	}
}

// keys lists every object key under prefix.
func (e *env) keys(prefix string) []string {
	e.t.Helper()
	var out []string
	it := e.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(e.ctx())
		if err == io.EOF {
			return out
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, obj.Key)
	}
}

func (e *env) pass(c *Compactor) Report {
	e.t.Helper()
	r, err := c.Pass(e.ctx())
	if err != nil {
		e.t.Fatalf("pass: %v (report %+v)", err, r)
	}
	return r
}
