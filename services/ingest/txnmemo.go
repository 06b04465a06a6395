package ingest

import (
	"sync"
	"time"

	"github.com/sluicemq/sluice/services/ingest/txn"
)

// txnMemo is what this copy remembers of the transactional ids it
// coordinates (coordinator.go), to keep bookkeeping reads and writes off a
// transaction's path (docs/DESIGN.md, "Transactions"):
//
//   - states: the state this copy last loaded or stored per id. It is a
//     hint, never the truth — another copy may have moved the id on — so
//     the coordinator acts on a remembered state only through a decision
//     that stores, whose compare-and-set on the state's version fails if
//     it is stale; a decision that stores nothing (a refusal, an add of a
//     partition already in) is made again on a fresh read.
//   - written: the ids whose Prepare state, at the version given, this
//     copy carried out (markers written, a commit's offsets applied), so
//     that only storing Complete is left. The coordinator decides the
//     id's next request on that Complete without storing it first (one
//     compare-and-set instead of two), and stores it on its own only if
//     no request came within completeDelay (completeLater).
//
// Its lock is a leaf: nothing is called under it.
type txnMemo struct {
	mu      sync.Mutex
	states  map[string]txn.State
	written map[string]int64
	// stop is closed by shutdown: completions waiting for completeDelay
	// run at once. running counts them.
	stop     chan struct{}
	stopOnce sync.Once
	running  sync.WaitGroup
}

// maxTxnMemo bounds the remembered states; past it the memo starts over
// (a forgotten id costs one read, and a forgotten written one its
// Complete stored by the sweeper).
const maxTxnMemo = 100_000

// completeDelay is how long a Complete waits to be folded into the id's
// next request before it is stored on its own. Below the sweeper's two
// passes (TxnSweepInterval, 1 s), which would otherwise write the markers
// again.
const completeDelay = 200 * time.Millisecond

func newTxnMemo() *txnMemo {
	return &txnMemo{states: make(map[string]txn.State), written: make(map[string]int64), stop: make(chan struct{})}
}

// state returns the state remembered for tid.
func (m *txnMemo) state(tid string) (txn.State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[tid]
	return st, ok
}

// remember records st, just loaded or stored, as tid's state, unless a
// newer one is remembered (a slow read answering after a store). A written
// mark of another version is dropped: the id moved on.
func (m *txnMemo) remember(st txn.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.states) >= maxTxnMemo {
		m.states = make(map[string]txn.State)
	}
	if cur, ok := m.states[st.ID]; ok && cur.Version > st.Version {
		return
	}
	m.states[st.ID] = st
	if v, ok := m.written[st.ID]; ok && v != st.Version {
		delete(m.written, st.ID)
	}
}

// forget drops what is remembered of tid (a compare-and-set found it
// stale, or a read found nothing).
func (m *txnMemo) forget(tid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, tid)
}

// markWritten records that this copy carried out tid's Prepare state at
// version.
func (m *txnMemo) markWritten(tid string, version int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.written) >= maxTxnMemo {
		m.written = make(map[string]int64)
	}
	m.written[tid] = version
}

// settled returns the Complete of cur when cur is a Prepare state this
// copy carried out (its version unchanged): the state to decide the next
// request on, with cur's version for the compare-and-set. Else nil.
func (m *txnMemo) settled(tid string, cur *txn.State) *txn.State {
	if cur == nil || cur.Status != txn.PrepareCommit && cur.Status != txn.PrepareAbort {
		return nil
	}
	m.mu.Lock()
	v, ok := m.written[tid]
	m.mu.Unlock()
	if !ok || v != cur.Version {
		return nil
	}
	return txn.Step(tid, cur, txn.MarkersWritten{}).Store
}

// completeLater runs complete after completeDelay (at once when shutdown
// began) unless tid's Prepare at version was stored over meanwhile — by
// this copy's next request for it, which folded the Complete in.
func (m *txnMemo) completeLater(tid string, version int64, complete func()) {
	m.running.Add(1)
	go func() {
		defer m.running.Done()
		t := time.NewTimer(completeDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-m.stop:
		}
		m.mu.Lock()
		v, ok := m.written[tid]
		m.mu.Unlock()
		if ok && v == version {
			complete()
		}
	}()
}

// shutdown runs the waiting completions at once and waits for them.
func (m *txnMemo) shutdown() {
	m.stopOnce.Do(func() { close(m.stop) })
	m.running.Wait()
}
