package partlog

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
)

// gatedParts counts GetPartition calls and holds them while gate is shut.
type gatedParts struct {
	catalog.Partitions
	calls atomic.Int64
	mu    sync.Mutex
	gate  chan struct{} // nil: open
}

func (g *gatedParts) GetPartition(ctx context.Context, topic string, partition int) (catalog.Partition, error) {
	g.calls.Add(1)
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return catalog.Partition{}, ctx.Err()
		}
	}
	return g.Partitions.GetPartition(ctx, topic, partition)
}

// A session's read never waits for the catalog once the partition's chain
// is cached: a chain older than ChainTTL is re-read in the background, once
// at a time, while reads go on with the cached one. (A session follows its
// partitions, so they have a tail watcher; marked here without one running.
// A read at the end of a partition nobody watches asks the catalog for a
// newer chain: TestFetchAtEndSeesTheFirstLedgerAtOnce.)
func TestReadsDoNotWaitForAChainReread(t *testing.T) {
	ctx := context.Background()
	_, parts, ls, now := chainFixture(t, 1, time.Second)
	lg := ls.get("t", 0)
	lg.mu.Lock()
	lg.watching = true
	lg.mu.Unlock()

	if _, err := ls.Read(ctx, "t", 0, 0, Limits{MaxRecords: 10, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if n := parts.calls.Load(); n != 1 {
		t.Fatalf("first read: %d catalog reads, want 1", n)
	}
	gate := make(chan struct{})
	parts.mu.Lock()
	parts.gate = gate
	parts.mu.Unlock()
	now.Add(int64(2 * time.Second)) // the chain is stale now
	for i := range 5 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := ls.Read(rctx, "t", 0, 0, Limits{MaxRecords: 10, MaxBytes: 1 << 20})
		cancel()
		if err != nil {
			t.Fatalf("read %d with the catalog held: %v (it waited for the catalog)", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for parts.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := parts.calls.Load(); n != 2 {
		t.Fatalf("%d catalog reads while held, want 1 initial + 1 background re-read", n)
	}
	close(gate)
	for {
		lg.mu.Lock()
		done := !lg.rereading && now.Load()-lg.partAt.UnixNano() < int64(time.Second)
		lg.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background re-read did not refresh the chain")
		}
		time.Sleep(time.Millisecond)
	}
}

// Partition records primed from one listing serve Start while younger than
// the age asked for: no catalog read per partition; an older one is read
// again, and a stale record never replaces a newer one.
func TestPrimedChainsServeStart(t *testing.T) {
	ctx := context.Background()
	cat, parts, ls, now := chainFixture(t, 8, 0)

	page, err := cat.ListPartitions(ctx, "t", "", catalog.MaxPageSize)
	if err != nil || len(page.Items) != 8 {
		t.Fatalf("list: %d partitions, %v", len(page.Items), err)
	}
	page.Items[3].LogStartOffset, page.Items[3].Version = 42, page.Items[3].Version+1 // as if retention moved it
	ls.Prime(page.Items)
	for p := range 8 {
		start, err := ls.Start(ctx, "t", p, 10*time.Second)
		want := int64(0)
		if p == 3 {
			want = 42
		}
		if err != nil || start != want {
			t.Fatalf("partition %d: start %d, %v; want %d", p, start, err, want)
		}
	}
	if n := parts.calls.Load(); n != 0 {
		t.Fatalf("%d catalog reads after priming; want 0", n)
	}
	// An older record primed later does not replace the newer one.
	stale, err := cat.ListPartitions(ctx, "t", "", catalog.MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	ls.Prime(stale.Items)
	if start, _ := ls.Start(ctx, "t", 3, 10*time.Second); start != 42 {
		t.Fatalf("after priming an older record: start %d; want 42", start)
	}
	now.Add(int64(11 * time.Second)) // older than asked for: read again
	if start, err := ls.Start(ctx, "t", 5, 10*time.Second); err != nil || start != 0 || parts.calls.Load() != 1 {
		t.Fatalf("stale chain: start %d, %v after %d catalog reads; want 0 after 1", start, err, parts.calls.Load())
	}
}

// A tail watcher's periodic chain re-read (chainAge > 0) never holds up
// its round: it goes on with the chain it has while the catalog answers in
// the background. After a seal (chainAge 0) the round waits for the read.
func TestWatchRoundRereadsChainInTheBackground(t *testing.T) {
	ctx := context.Background()
	_, parts, ls, now := chainFixture(t, 1, 0)
	lg := ls.get("t", 0)
	var ws watchState
	if err := lg.watchRound(ctx, time.Second, &ws); err != errNoTail || parts.calls.Load() != 1 {
		t.Fatalf("first round: %v after %d catalog reads; want errNoTail after 1 (no chain yet: read inline)", err, parts.calls.Load())
	}
	gate := make(chan struct{})
	parts.mu.Lock()
	parts.gate = gate
	parts.mu.Unlock()
	now.Add(int64(2 * time.Second)) // the chain is older than chainAge
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := lg.watchRound(rctx, time.Second, &ws); err != errNoTail {
		t.Fatalf("round with a stale chain and a stalled catalog: %v; want errNoTail at once", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the round waited %v for the catalog", d)
	}
	eventually(t, "the background re-read started", func() bool { return parts.calls.Load() == 2 })
	sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer scancel()
	if err := lg.watchRound(sctx, 0, &ws); err == nil || err == errNoTail {
		t.Fatalf("round after a seal with a stalled catalog: %v; want it to wait for the read (and time out)", err)
	}
	close(gate)
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// chainFixture is an embedded catalog with topic "t" of the given
// partitions, its partition reads counted (and gated) by parts, and the
// logs over it on a clock the test moves (now, UnixNano).
func chainFixture(t *testing.T, partitions int, chainTTL time.Duration) (*catalog.Catalog, *gatedParts, *Logs, *atomic.Int64) {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	if _, err := cat.CreateTopic(context.Background(), "t", partitions, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	lc, err := client.New(client.Config{Ledgers: cat, Bookies: cat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Close() })
	now := new(atomic.Int64)
	now.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	parts := &gatedParts{Partitions: cat}
	ls, err := New(Config{ChainTTL: chainTTL, Now: func() time.Time { return time.Unix(0, now.Load()) }}, parts, lc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ls.Close)
	return cat, parts, ls, now
}
