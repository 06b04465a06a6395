package machine

import (
	"fmt"
	"math"
)

// OpenTxn is a transaction open on the partition: its producer's
// transactional batches since the last marker, the first of them at First,
// written at Epoch. A marker of the producer at a higher epoch ends it.
type OpenTxn struct {
	ProducerID int64
	Epoch      int16
	First      int64
}

// txns tracks the transactions open on the partition, in two views like
// the idempotent producers' state: committed (as of the durable end) and
// queued (as of every batch given offsets). The last stable offset (LSO)
// of a view is the first offset of its oldest open transaction, else the
// view's end. A failed ledger's recovery rolls the queued view back to
// what the ledger kept.
//
// Invariants: queued is committed with undo's changes applied, in order;
// undo is in offset order and every change in it is above the durable end.
type txns struct {
	committed map[int64]OpenTxn
	queued    map[int64]OpenTxn
	undo      []txnChange
}

// txnChange is one change of the queued view at offset at: producer pid's
// open transaction went from was (had) to now (has).
type txnChange struct {
	pid      int64
	at       int64
	was, now OpenTxn
	had, has bool
}

func newTxns(open []OpenTxn) (*txns, error) {
	t := &txns{committed: make(map[int64]OpenTxn, len(open)), queued: make(map[int64]OpenTxn, len(open))}
	for _, o := range open {
		if o.ProducerID < 0 || o.Epoch < 0 || o.First < 0 {
			return nil, fmt.Errorf("open transaction %+v: producer id, epoch and first offset must be ≥ 0", o)
		}
		if _, dup := t.committed[o.ProducerID]; dup {
			return nil, fmt.Errorf("producer %d has two open transactions", o.ProducerID)
		}
		t.committed[o.ProducerID] = o
		t.queued[o.ProducerID] = o
	}
	return t, nil
}

// open returns the producer's open transaction in the queued view.
func (t *txns) open(pid int64) (OpenTxn, bool) {
	o, ok := t.queued[pid]
	return o, ok
}

// begin records a transactional batch of pid at epoch given offset at: it
// opens the producer's transaction unless one is open.
func (t *txns) begin(pid int64, epoch int16, at int64) {
	if _, ok := t.queued[pid]; ok {
		return
	}
	o := OpenTxn{ProducerID: pid, Epoch: epoch, First: at}
	t.queued[pid] = o
	t.undo = append(t.undo, txnChange{pid: pid, at: at, now: o, has: true})
}

// end records a marker of pid given offset at: it ends the producer's open
// transaction, if any.
func (t *txns) end(pid int64, at int64) {
	o, ok := t.queued[pid]
	if !ok {
		return
	}
	delete(t.queued, pid)
	t.undo = append(t.undo, txnChange{pid: pid, at: at, was: o, had: true})
}

// commit makes every change at or below through committed.
func (t *txns) commit(through int64) {
	n := 0
	for _, c := range t.undo {
		if c.at > through {
			break
		}
		if c.has {
			t.committed[c.pid] = c.now
		} else {
			delete(t.committed, c.pid)
		}
		n++
	}
	if n > 0 {
		t.undo = t.undo[:copy(t.undo, t.undo[n:])]
	}
}

// abort undoes every change at or after from: those offsets were not
// stored.
func (t *txns) abort(from int64) {
	for len(t.undo) > 0 {
		c := t.undo[len(t.undo)-1]
		if c.at < from {
			break
		}
		if c.had {
			t.queued[c.pid] = c.was
		} else {
			delete(t.queued, c.pid)
		}
		t.undo = t.undo[:len(t.undo)-1]
	}
}

// lso is the queued view's last stable offset, end being the view's end
// (the next offset).
func (t *txns) lso(end int64) int64 { return oldest(t.queued, end) }

// committedLSO is the committed view's, end being the durable end + 1.
func (t *txns) committedLSO(end int64) int64 { return oldest(t.committed, end) }

func oldest(open map[int64]OpenTxn, end int64) int64 {
	lso := int64(math.MaxInt64)
	for _, o := range open {
		lso = min(lso, o.First)
	}
	return min(lso, end)
}
