package fetch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch"
)

// countingCatalog counts partition reads, one by one and by listing.
type countingCatalog struct {
	fetch.Catalog
	gets, lists atomic.Int64
}

func (c *countingCatalog) GetPartition(ctx context.Context, topic string, partition int) (catalog.Partition, error) {
	c.gets.Add(1)
	return c.Catalog.GetPartition(ctx, topic, partition)
}

func (c *countingCatalog) ListPartitions(ctx context.Context, topic, token string, limit int) (catalog.Page[catalog.Partition], error) {
	c.lists.Add(1)
	return c.Catalog.ListPartitions(ctx, topic, token, limit)
}

// A member taking many partitions it never committed reads their start
// offsets from one partition listing per balancing round, not from one
// catalog read per partition.
func TestGroupAcquisitionsReadOnePartitionListing(t *testing.T) {
	e := startCluster(t, groupConfig())
	const n = 40
	e.createTopic(t, "wide", n)
	for p := range int32(n) {
		if p%4 == 0 { // some partitions have data, most have none
			e.produce(t, "wide", p, 0, 3, 3)
		}
	}
	cat := &countingCatalog{Catalog: e.c.Catalog}
	cfg := fetch.Config{BalanceInterval: 50 * time.Millisecond, RevokeTimeout: 2 * time.Second}
	_, cons := e.fetchCopy(t, cfg, fetch.Deps{Catalog: cat, Ledgers: e.c.Ledgers, Bookkeeping: e.c.Bookkeeping})
	m := subscribe(t, cons, &sluicev1.SubscribeRequest{Group: "wide", Topics: []string{"wide"}, SessionTimeoutMs: 3000}, true)
	waitFor(t, "the member holds every partition", 20*time.Second, func() bool { return m.held() == n })
	gets, lists := cat.gets.Load(), cat.lists.Load()
	t.Logf("%d partitions acquired with %d listings and %d single partition reads", n, lists, gets)
	if lists == 0 || gets >= n/2 {
		t.Fatalf("%d listings and %d single partition reads for %d acquisitions; want the starts from listings", lists, gets, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range int32(n) {
		if off := m.next[key("wide", p)]; off != 0 {
			t.Fatalf("partition %d starts at %d; want the log start 0", p, off)
		}
	}
}
