package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is an in-process ledger tier for tests: real bookies (in-memory
// filesystems) served over loopback h2c, registered in an embedded catalog.
type cluster struct {
	t   testing.TB
	cat *catalog.Catalog
	// serverTLS, when set before bookies start, serves them over TLS
	// (HTTP/2 by ALPN) with it.
	serverTLS *tls.Config
	// bookieTracer, when set before bookies start, is their
	// TracerProvider.
	bookieTracer trace.TracerProvider
	// bookieMeters, when set before bookies start, is their
	// MeterProvider.
	bookieMeters metric.MeterProvider
	mu           sync.Mutex
	bookies      map[string]*testBookie
}

type testBookie struct {
	id   string
	fs   vfs.FS         // its disk, kept across restartBookie
	b    *bookie.Bookie // nil for a fake
	srv  *httptest.Server
	addr string
	down bool
}

func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, cat: cat, bookies: map[string]*testBookie{}}
	t.Cleanup(c.close)
	for i := 1; i <= n; i++ {
		c.startBookie(fmt.Sprintf("b%d", i))
	}
	return c
}

func (c *cluster) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bookies {
		c.stopLocked(b)
	}
	if err := c.cat.Close(); err != nil {
		c.t.Errorf("close catalog: %v", err)
	}
}

// startBookie opens a real bookie and registers it; opts go to its
// handler.
func (c *cluster) startBookie(id string, opts ...connect.HandlerOption) *testBookie {
	c.t.Helper()
	return c.openBookie(id, vfs.NewCrashableMem(), opts...)
}

// restartBookie opens a stopped bookie again on its disk, at a new address.
func (c *cluster) restartBookie(id string) *testBookie {
	c.t.Helper()
	c.mu.Lock()
	old := c.bookies[id]
	c.mu.Unlock()
	if !old.down {
		c.t.Fatalf("restart bookie %s: it is running", id)
	}
	return c.openBookie(id, old.fs)
}

func (c *cluster) openBookie(id string, fs vfs.FS, opts ...connect.HandlerOption) *testBookie {
	c.t.Helper()
	b, err := bookie.Open(bookie.Config{
		ID: id, InstanceID: "test", Dir: "/data", FS: fs,
		MaxEntryBytes: 1 << 20, MaxReadBytes: 4 << 20, WriteBufferBytes: 4 << 20,
		CheckpointInterval: time.Hour, DiskCheckInterval: time.Hour, GCInterval: -1,
		TracerProvider: c.bookieTracer, MeterProvider: c.bookieMeters,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(b.Handler(opts...))
	tb := c.serve(id, b, mux)
	tb.fs = fs
	return tb
}

// startFake serves h as bookie id (for faults a real bookie cannot show).
func (c *cluster) startFake(id string, h bookiev1connect.BookieServiceHandler) *testBookie {
	mux := http.NewServeMux()
	mux.Handle(bookiev1connect.NewBookieServiceHandler(h))
	return c.serve(id, nil, mux)
}

func (c *cluster) serve(id string, b *bookie.Bookie, mux *http.ServeMux) *testBookie {
	c.t.Helper()
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	if c.serverTLS != nil {
		p.SetHTTP2(true)
		srv.Config.Protocols = &p
		srv.TLS = c.serverTLS.Clone()
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what TLS tests make
		srv.StartTLS()
	} else {
		p.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = &p
		srv.Start()
	}
	tb := &testBookie{id: id, b: b, srv: srv, addr: srv.Listener.Addr().String()}
	c.mu.Lock()
	c.bookies[id] = tb
	c.mu.Unlock()
	if _, err := c.cat.HeartbeatBookie(context.Background(), catalog.Bookie{
		ID: id, Address: tb.addr, FreeBytes: 1 << 30, TotalBytes: 1 << 31,
	}, time.Minute); err != nil {
		c.t.Fatal(err)
	}
	return tb
}

// stopBookie kills a bookie's server (connections cut) and closes it. Its
// registry record stays live, as after a crash.
func (c *cluster) stopBookie(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked(c.bookies[id])
}

// crashBookie stops a bookie as kill -9 would: its disk keeps only what was
// synced (a crash clone taken before the close), and its registry record
// stays live.
func (c *cluster) crashBookie(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.bookies[id]
	b.srv.CloseClientConnections()
	b.srv.Close()
	crashed := b.fs.(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{})
	c.stopLocked(b)
	b.fs = crashed
}

func (c *cluster) stopLocked(b *testBookie) {
	if b.down {
		return
	}
	b.down = true
	b.srv.CloseClientConnections()
	b.srv.Close()
	if b.b != nil {
		if err := b.b.Close(); err != nil {
			c.t.Errorf("close bookie %s: %v", b.id, err)
		}
	}
}

// rpc returns a raw BookieService client of a bookie (gRPC over h2c).
func (c *cluster) rpc(t testing.TB, id string) bookiev1connect.BookieServiceClient {
	c.mu.Lock()
	addr := c.bookies[id].addr
	c.mu.Unlock()
	peers := rpcclient.New(nil)
	t.Cleanup(peers.Close)
	hc := peers.HTTP
	return grpcDialer(hc, false, 8<<20)(addr)
}

// testConfig is a client config with short timeouts for tests.
func (c *cluster) config() Config {
	return Config{
		Ledgers: c.cat, Bookies: c.cat,
		AddTimeout: 5 * time.Second, ReadTimeout: 2 * time.Second, FenceTimeout: 2 * time.Second,
		CatalogTimeout: 5 * time.Second, LacPollTimeout: time.Second, RetryBackoff: 5 * time.Millisecond,
		TickInterval: 2 * time.Millisecond, SpeculativeReadTimeout: 50 * time.Millisecond,
		MaxEntryBytes: 1 << 20, DamageConfirmDelay: 20 * time.Millisecond,
	}
}

func (c *cluster) client(t testing.TB, mod ...func(*Config)) *Client {
	t.Helper()
	cfg := c.config()
	for _, m := range mod {
		m(&cfg)
	}
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func spec(rep catalog.Replication, ensemble ...string) catalog.LedgerSpec {
	return catalog.LedgerSpec{
		Topic: "orders", TopicID: "orders-1", Partition: 3, Replication: rep, Ensemble: ensemble,
		FirstOffset: 100, WriterOwner: "ingest-1", WriterEpoch: 7,
	}
}

func payload(e int64) []byte { return fmt.Appendf(nil, "entry %d payload", e) }

// lastOffsetOf is the tests' entry → offset rule: one record per entry.
func lastOffsetOf(first int64) func(int64, []byte) (int64, error) {
	return func(last int64, p []byte) (int64, error) {
		var e int64
		if _, err := fmt.Sscanf(string(p), "entry %d payload", &e); err != nil || e != last {
			return 0, fmt.Errorf("payload %q is not entry %d's", p, last)
		}
		return first + last, nil
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// appendN appends entries from..to with Append, checking ids.
func appendN(t testing.TB, w *Writer, from, to int64) {
	t.Helper()
	for e := from; e <= to; e++ {
		got, err := w.Append(ctxT(t), payload(e))
		if err != nil || got != e {
			t.Fatalf("append %d: got %d, %v", e, got, err)
		}
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// readAll reads entries 0..last through a new reader and checks payloads.
func readAll(t testing.TB, cl *Client, id catalog.LedgerID, last int64) {
	t.Helper()
	got, err := cl.ReadEntries(ctxT(t), id, 0, last)
	if err != nil {
		t.Fatalf("read ledger %d entries 0..%d: %v", id, last, err)
	}
	if int64(len(got)) != last+1 {
		t.Fatalf("read %d entries, want %d", len(got), last+1)
	}
	for e, p := range got {
		if string(p) != string(payload(int64(e))) {
			t.Fatalf("entry %d = %q", e, p)
		}
	}
}

// rawRead reads one entry from one bookie, bypassing the client.
func rawRead(t testing.TB, bc bookiev1connect.BookieServiceClient, id catalog.LedgerID, e int64) (*bookiev1.Entry, error) {
	resp, err := bc.ReadEntries(ctxT(t), connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: int64(id), FirstEntry: e, LastEntry: e}))
	if err != nil {
		return nil, err
	}
	if len(resp.Msg.GetEntries()) != 1 {
		return nil, errors.New("no entry")
	}
	return resp.Msg.GetEntries()[0], nil
}

// silentBookie is a bookie that takes adds and never answers them.
type silentBookie struct {
	bookiev1connect.UnimplementedBookieServiceHandler
	id string
}

func (s silentBookie) GetStatus(context.Context, *connect.Request[bookiev1.GetStatusRequest]) (*connect.Response[bookiev1.GetStatusResponse], error) {
	return connect.NewResponse(&bookiev1.GetStatusResponse{BookieId: s.id, InstanceId: "test"}), nil
}

func (s silentBookie) AddEntries(ctx context.Context, stream *connect.BidiStream[bookiev1.AddEntriesRequest, bookiev1.AddEntriesResponse]) error {
	for {
		if _, err := stream.Receive(); err != nil {
			<-ctx.Done()
			return ctx.Err()
		}
	}
}
