package sluice_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// testCluster is an in-process Sluice (internal/cluster) that a test can
// stop and start again on the same directory and address.
type testCluster struct {
	t    *testing.T
	dir  string
	addr string
	mod  func(*cluster.Config)
	c    *cluster.Cluster
	stop func()
}

// startCluster runs a cluster on a new directory and a free loopback port;
// it is stopped when the test ends (after the test's own cleanups
// registered later, such as closing producers).
func startCluster(t *testing.T, mod func(*cluster.Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, dir: t.TempDir(), addr: "127.0.0.1:0", mod: mod}
	tc.start()
	tc.addr = tc.c.Addr() // restarts reuse the port (the listener sets SO_REUSEADDR)
	t.Cleanup(func() { tc.stop() })
	return tc
}

// start runs the cluster and waits until its ingest copy is registered
// live, so the first produce does not race the owner registration.
func (tc *testCluster) start() {
	t := tc.t
	t.Helper()
	cfg := cluster.Config{Dir: tc.dir, Addr: tc.addr}
	// A producer's open ProduceStream keeps the server's graceful drain
	// waiting until the shutdown timeout (see the report): keep it short.
	cfg.Server.ShutdownTimeout = 300 * time.Millisecond
	if tc.mod != nil {
		tc.mod(&cfg)
	}
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	tc.c = c
	tc.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !isDrainTimeout(err) {
			t.Errorf("cluster Run: %v", err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if o, err := c.Catalog.GetOwner(context.Background(), "ingest-1"); err == nil && o.LiveAt(time.Now()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("ingest-1 not registered live")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// restart stops the cluster and starts it again on the same directory and
// address.
func (tc *testCluster) restart() {
	tc.t.Helper()
	tc.stop()
	tc.start()
}

// isDrainTimeout: the public server's graceful shutdown ran out of time
// because a client kept a stream open (expected while producers run).
func isDrainTimeout(err error) bool {
	for _, e := range unjoin(err) {
		if !(errors.Is(e, context.DeadlineExceeded) && strings.Contains(e.Error(), "shutdown")) {
			return false
		}
	}
	return true
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// client returns a Client for the cluster, closed when the test ends.
func (tc *testCluster) client(opts ...sluice.ClientOption) *sluice.Client {
	tc.t.Helper()
	c, err := sluice.NewClient(tc.addr, opts...)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(func() { _ = c.Close() })
	return c
}

// producer returns a Producer closed when the test ends.
func producer(t *testing.T, c *sluice.Client, opts ...sluice.ProducerOption) *sluice.Producer {
	t.Helper()
	p, err := c.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// readPartition returns every record stored in a partition, in offset
// order, checking that offsets are dense from 0. Call it on a cluster
// restarted after the produce (graceful stops seal the ledgers).
func (tc *testCluster) readPartition(topic string, p int) []record.Record {
	t := tc.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	part, err := tc.c.Catalog.GetPartition(ctx, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Record
	for _, ref := range part.Ledgers {
		m, err := tc.c.Catalog.GetLedger(ctx, ref.ID)
		if err != nil {
			t.Fatal(err)
		}
		last := m.LastEntry
		if !m.State.Sealed() {
			r, err := tc.c.Ledgers.OpenReader(ctx, ref.ID)
			if err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			last, _ = r.WaitLAC(wctx, -1) // an empty open ledger has LAC -1
			wcancel()
		}
		if last < 0 {
			continue
		}
		ents, err := tc.c.Ledgers.ReadEntries(ctx, ref.ID, 0, last)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			for rest := e; len(rest) > 0; {
				b, r, err := record.Split(rest)
				if err != nil {
					t.Fatal(err)
				}
				if b.BaseOffset() != int64(len(out)) {
					t.Fatalf("%s/%d: batch at offset %d after %d records", topic, p, b.BaseOffset(), len(out))
				}
				recs, err := record.Decode(b, record.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range recs {
					recs[i].Offset = b.BaseOffset() + int64(i)
				}
				out = append(out, recs...)
				rest = r
			}
		}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Producers get their ids from the server (InitProducer): two producers of
// one client have distinct ids, the small ones the server allocates, not
// random 63-bit ones.
func TestProducerIDsComeFromInitProducer(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "ids", 1, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ids := map[int64]bool{}
	hooks := sluice.WithHooks(sluice.Hooks{OnBatchSent: func(b sluice.BatchInfo) {
		mu.Lock()
		ids[b.ProducerID] = true
		mu.Unlock()
	}})
	for range 2 {
		p := producer(t, c, hooks)
		if _, err := p.ProduceSync(ctx, &sluice.Record{Topic: "ids", Partition: 0, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 {
		t.Fatalf("batches carried producer ids %v; want two distinct ones", ids)
	}
	for id := range ids {
		if id < 1 || id > 1<<20 {
			t.Fatalf("producer id %d: not one the server allocated (ids %v)", id, ids)
		}
	}
}
