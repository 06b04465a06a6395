package ingest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/services/ingest/txn"
)

// The memo folds a carried-out Prepare's Complete into the next decision
// only at that Prepare's version, and stores it on its own only when no
// store of the id came first.
func TestTxnMemoFoldsOnlyTheCarriedOutPrepare(t *testing.T) {
	m := newTxnMemo()
	prep := txn.State{ID: "a", ProducerID: 7, Epoch: 3, Status: txn.PrepareCommit, Timeout: time.Minute,
		Partitions: []txn.Partition{{TopicID: "t", Partition: 0}}, Version: 5}
	if got := m.settled("a", &prep); got != nil {
		t.Fatalf("settled before the markers were written: %v", got)
	}
	m.remember(prep)
	m.markWritten("a", 5)
	got := m.settled("a", &prep)
	if got == nil || got.Status != txn.CompleteCommit || got.Version != 5 || len(got.Partitions) != 0 || got.Epoch != 3 {
		t.Fatalf("settled: %v; want CompleteCommit at epoch 3, version 5 (the Prepare's, for the compare-and-set), no partitions", got)
	}
	other := prep
	other.Version = 6
	if got := m.settled("a", &other); got != nil {
		t.Fatalf("settled on another version of the id: %v", got)
	}
	ongoing := prep
	ongoing.Status = txn.Ongoing
	if got := m.settled("a", &ongoing); got != nil {
		t.Fatalf("settled on a state that is not Prepare: %v", got)
	}

	// The next request stored over the Prepare: the deferred Complete does
	// nothing.
	var completed atomic.Int32
	m.completeLater("a", 5, func() { completed.Add(1) })
	next := *got
	next.Status, next.Version = txn.Ongoing, 6
	m.remember(next)
	// carriedOut remembers prep under id as this copy's carried-out Prepare.
	carriedOut := func(id string) {
		st := prep
		st.ID = id
		m.remember(st)
		m.markWritten(id, st.Version)
	}
	// Untouched: stored on its own after completeDelay.
	carriedOut("b")
	var bDone atomic.Int32
	m.completeLater("b", 5, func() { bDone.Add(1) })
	time.Sleep(completeDelay + 100*time.Millisecond)
	if completed.Load() != 0 || bDone.Load() != 1 {
		t.Fatalf("deferred completions run: a %d (stored over: want 0), b %d (want 1)", completed.Load(), bDone.Load())
	}

	// Shutdown runs a waiting completion at once.
	carriedOut("c")
	var cDone atomic.Int32
	m.completeLater("c", 5, func() { cDone.Add(1) })
	start := time.Now()
	m.shutdown()
	if cDone.Load() != 1 || time.Since(start) >= completeDelay {
		t.Fatalf("shutdown: completion run %d times after %v; want once, at once", cDone.Load(), time.Since(start))
	}
}
