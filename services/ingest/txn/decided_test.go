package txn

import "testing"

// Decided is true only for a retry (the epoch before the bump, from the
// producer id that ended the transaction) asking for the outcome that was
// decided: what lets CommitTxn answer a retry whose batches the decision's
// bump now fences.
func TestDecided(t *testing.T) {
	at := func(st Status, epoch int16, byCoordinator bool) *State {
		return &State{ID: "t", ProducerID: 7, Epoch: epoch, Status: st, BumpedByCoordinator: byCoordinator}
	}
	commit := EndTxn{ProducerID: 7, Epoch: 4, Commit: true}
	abort := EndTxn{ProducerID: 7, Epoch: 4}
	for _, c := range []struct {
		name string
		cur  *State
		e    EndTxn
		want bool
	}{
		{"no state", nil, commit, false},
		{"commit prepared at the bump", at(PrepareCommit, 5, false), commit, true},
		{"commit complete at the bump", at(CompleteCommit, 5, false), commit, true},
		{"abort complete, asked to commit", at(CompleteAbort, 5, false), commit, false},
		{"abort prepared, asked to abort", at(PrepareAbort, 5, false), abort, true},
		{"still open at the request's epoch", at(Ongoing, 4, false), commit, false},
		{"committed two bumps on", at(CompleteCommit, 6, false), commit, false},
		{"aborted by the coordinator (timeout)", at(CompleteAbort, 5, true), abort, false},
		{"another producer id", at(CompleteCommit, 5, false), EndTxn{ProducerID: 8, Epoch: 4, Commit: true}, false},
	} {
		if got := Decided(c.cur, c.e); got != c.want {
			t.Errorf("%s: Decided %v; want %v", c.name, got, c.want)
		}
	}
}
