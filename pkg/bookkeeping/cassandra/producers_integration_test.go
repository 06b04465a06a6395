//go:build integration

package cassandra

import (
	"sync"
	"testing"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// TestIntegrationCassandraProducerIDsAcrossStores: Stores sharing a keyspace
// (as ingest nodes do) reserve disjoint blocks; a restarted Store never
// repeats an id.
func TestIntegrationCassandraProducerIDsAcrossStores(t *testing.T) {
	const stores, workers, each = 3, 4, 25
	ctx := t.Context()
	cfg := testConfig(t)
	cfg.ProducerIDBlock = 7 // small, so blocks run out and races happen
	var all []*bookkeeping.Store
	for range stores {
		all = append(all, openStore(t, cfg))
	}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for _, s := range all {
		for range workers {
			wg.Go(func() {
				for range each {
					id, err := s.AllocateProducerID(ctx)
					if err != nil {
						t.Errorf("AllocateProducerID: %v", err)
						return
					}
					mu.Lock()
					if seen[id] {
						t.Errorf("producer id %d handed out twice", id)
					}
					seen[id] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(seen) != stores*workers*each {
		t.Fatalf("%d distinct ids, want %d", len(seen), stores*workers*each)
	}
	// A new Store (a restart) starts past every reserved block.
	id, err := openStore(t, cfg).AllocateProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for old := range seen {
		if id <= old {
			t.Fatalf("restarted store handed out %d, not above the earlier id %d", id, old)
		}
	}
}

// TestIntegrationCassandraProducerEpochExhausted: at the highest epoch,
// InitProducer moves the transactional id to a new producer id at epoch 0.
func TestIntegrationCassandraProducerEpochExhausted(t *testing.T) {
	ctx := t.Context()
	s := openDriver(t, testConfig(t)) // to set the stored epoch
	first, err := s.InitProducer(ctx, "txn")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.session.Query(`UPDATE transactions SET epoch = ? WHERE bucket = ? AND transactional_id = 'txn'`, bookkeeping.MaxProducerEpoch, s.bucket("txn")).Exec(); err != nil {
		t.Fatal(err)
	}
	next, err := s.InitProducer(ctx, "txn")
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == first.ID || next.Epoch != 0 {
		t.Fatalf("InitProducer at the highest epoch = %+v, want a new id (not %d) at epoch 0", next, first.ID)
	}
	again, err := s.InitProducer(ctx, "txn")
	if err != nil || again != (bookkeeping.Producer{ID: next.ID, Epoch: 1}) {
		t.Fatalf("InitProducer after the id change = %+v, %v; want id %d epoch 1", again, err, next.ID)
	}
}
