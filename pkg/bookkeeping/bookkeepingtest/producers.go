package bookkeepingtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

var producerTests = []test{
	{"AllocateUnique", testAllocateUnique},
	{"InitProducerWithoutTransactionalID", testInitProducerWithoutTransactionalID},
	{"InitProducerBumpsEpoch", testInitProducerBumpsEpoch},
	{"ConcurrentInitProducerDistinctEpochs", testConcurrentInitProducer},
	{"Validation", testProducerValidation},
}

func testAllocateUnique(t *testing.T, e *env) {
	const workers, each = 16, 32
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, err := e.Producers.AllocateProducerID(e.ctx)
				if err != nil {
					t.Errorf("AllocateProducerID: %v", err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		})
	}
	wg.Wait()
	seen := make(map[int64]bool, workers*each)
	for _, ws := range ids {
		for _, id := range ws {
			if id < 1 {
				t.Fatalf("producer id %d, want ≥ 1", id)
			}
			if seen[id] {
				t.Fatalf("producer id %d handed out twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("%d ids, want %d", len(seen), workers*each)
	}
}

func testInitProducerWithoutTransactionalID(t *testing.T, e *env) {
	a, err := e.Producers.InitProducer(e.ctx, "")
	if err != nil {
		t.Fatalf("InitProducer(\"\"): %v", err)
	}
	b, err := e.Producers.InitProducer(e.ctx, "")
	if err != nil {
		t.Fatalf("InitProducer(\"\"): %v", err)
	}
	if a.Epoch != 0 || b.Epoch != 0 || a.ID < 1 || a.ID == b.ID {
		t.Fatalf("two idempotent producers got %+v and %+v, want distinct ids ≥ 1 with epoch 0", a, b)
	}
}

func testInitProducerBumpsEpoch(t *testing.T, e *env) {
	txn := "txn-" + e.id
	first, err := e.Producers.InitProducer(e.ctx, txn)
	if err != nil {
		t.Fatalf("InitProducer: %v", err)
	}
	if first.Epoch != 0 || first.ID < 1 {
		t.Fatalf("first InitProducer = %+v, want epoch 0 and an id ≥ 1", first)
	}
	for want := int16(1); want <= 3; want++ {
		p, err := e.Producers.InitProducer(e.ctx, txn)
		if err != nil {
			t.Fatalf("InitProducer again: %v", err)
		}
		if p != (bookkeeping.Producer{ID: first.ID, Epoch: want}) {
			t.Fatalf("re-init %d = %+v, want id %d epoch %d", want, p, first.ID, want)
		}
	}
	other, err := e.Producers.InitProducer(e.ctx, txn+"-other")
	if err != nil {
		t.Fatalf("InitProducer of another transactional id: %v", err)
	}
	if other.ID == first.ID || other.Epoch != 0 {
		t.Fatalf("another transactional id got %+v, want a new id (not %d) with epoch 0", other, first.ID)
	}
	id, err := e.Producers.AllocateProducerID(e.ctx)
	if err != nil {
		t.Fatalf("AllocateProducerID: %v", err)
	}
	if id == first.ID || id == other.ID {
		t.Fatalf("AllocateProducerID returned %d, an id a transactional producer has", id)
	}
}

// testConcurrentInitProducer: concurrent re-inits of one transactional id
// are each a separate session: same id, distinct epochs, each above the last
// sequential one.
func testConcurrentInitProducer(t *testing.T, e *env) {
	const n = 8
	txn := "txn-" + e.id
	first, err := e.Producers.InitProducer(e.ctx, txn)
	if err != nil {
		t.Fatalf("InitProducer: %v", err)
	}
	got := make([]bookkeeping.Producer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p, err := e.Producers.InitProducer(e.ctx, txn)
			if err != nil && !errors.Is(err, bookkeeping.ErrConflict) {
				t.Errorf("concurrent InitProducer: %v", err)
			}
			got[i] = p
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var epochs []int16
	for _, p := range got {
		if p == (bookkeeping.Producer{}) {
			continue // lost every race (ErrConflict): allowed, but must be rare
		}
		if p.ID != first.ID {
			t.Fatalf("concurrent InitProducer gave id %d, want %d", p.ID, first.ID)
		}
		epochs = append(epochs, p.Epoch)
	}
	slices.Sort(epochs)
	if len(epochs) < n/2 {
		t.Fatalf("only %d of %d concurrent InitProducer calls succeeded", len(epochs), n)
	}
	if len(slices.Compact(slices.Clone(epochs))) != len(epochs) || epochs[0] < 1 {
		t.Fatalf("concurrent InitProducer epochs %v, want distinct epochs ≥ 1", epochs)
	}
	last, err := e.Producers.InitProducer(e.ctx, txn)
	if err != nil {
		t.Fatalf("InitProducer after the race: %v", err)
	}
	if last.ID != first.ID || last.Epoch <= epochs[len(epochs)-1] {
		t.Fatalf("InitProducer after the race = %+v, want id %d with an epoch above %d", last, first.ID, epochs[len(epochs)-1])
	}
}

func testProducerValidation(t *testing.T, e *env) {
	for _, id := range []string{strings.Repeat("x", bookkeeping.MaxNameBytes+1), "a\x00b", "\xfe"} {
		_, err := e.Producers.InitProducer(e.ctx, id)
		wantValidation(t, fmt.Sprintf("InitProducer(%q)", id), err, "transactional_id")
	}
}
