package ingest

import (
	"context"
	"sync"

	"github.com/sluicemq/sluice/services/ingest/txn"
)

// txnMemo is what this copy remembers of the transactional ids it
// coordinates (coordinator.go), to keep bookkeeping reads and writes off a
// transaction's critical path (docs/DESIGN.md, "Transactions"):
//
//   - states: the state this copy last loaded or stored per id. It is a
//     hint, never the truth — another copy may have moved the id on — so
//     the coordinator acts on a remembered state only through a decision
//     that stores, whose compare-and-set on the state's version fails if
//     it is stale; a decision that stores nothing (a refusal, an add of a
//     partition already in) is made again on a fresh read.
//   - completing: the ids whose Complete this copy is storing in the
//     background after it answered EndTxn (the markers are written and the
//     offsets applied then; only the last compare-and-set is left). The
//     next request for the id on this copy waits for it instead of
//     finding Prepare and answering CONCURRENT_TRANSACTIONS.
//
// Its lock is a leaf: nothing is called under it.
type txnMemo struct {
	mu     sync.Mutex
	states map[string]txn.State
	// completing maps an id to the completion under way and its
	// generation (so a finished one does not remove a later one).
	completing map[string]completion
	gen        uint64
	// running counts the background completions; shutdown waits for them.
	running sync.WaitGroup
}

type completion struct {
	gen  uint64
	done chan struct{}
}

// maxTxnMemo bounds the remembered states; past it the memo starts over
// (a forgotten id costs one read).
const maxTxnMemo = 100_000

// state returns the state remembered for tid.
func (m *txnMemo) state(tid string) (txn.State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[tid]
	return st, ok
}

// remember records st, just loaded or stored, as tid's state.
func (m *txnMemo) remember(st txn.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states == nil || len(m.states) >= maxTxnMemo {
		m.states = make(map[string]txn.State)
	}
	m.states[st.ID] = st
}

// forget drops what is remembered of tid (a compare-and-set found it
// stale, or a read found nothing).
func (m *txnMemo) forget(tid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, tid)
}

// complete runs fn — storing tid's Complete — on a goroutine of its own,
// and remembers it until it returns so that waitCompleted can wait for it.
func (m *txnMemo) complete(tid string, fn func()) {
	m.mu.Lock()
	if m.completing == nil {
		m.completing = make(map[string]completion)
	}
	m.gen++
	c := completion{gen: m.gen, done: make(chan struct{})}
	m.completing[tid] = c
	m.running.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.running.Done()
		defer close(c.done)
		fn()
		m.mu.Lock()
		if m.completing[tid].gen == c.gen {
			delete(m.completing, tid)
		}
		m.mu.Unlock()
	}()
}

// waitCompleted waits until no completion of tid started by this copy is
// under way, or ctx ends.
func (m *txnMemo) waitCompleted(ctx context.Context, tid string) error {
	for {
		m.mu.Lock()
		c, ok := m.completing[tid]
		m.mu.Unlock()
		if !ok {
			return nil
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// wait waits for every background completion (shutdown).
func (m *txnMemo) wait() { m.running.Wait() }
