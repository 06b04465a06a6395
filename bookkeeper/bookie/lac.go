package bookie

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// lacWatch wakes ReadLAC long-polls when a ledger's LAC rises. Only ledgers
// with waiters have an entry, so the add path pays one map lookup; the number
// of waiters is bounded.
type lacWatch struct {
	mu      sync.Mutex
	ledgers map[int64]*lacWaiters
	waiters int
	max     int
}

type lacWaiters struct {
	lac    int64         // highest LAC seen since the first waiter came
	fenced bool          // the ledger was fenced since the first waiter came
	woken  chan struct{} // closed (and replaced) when lac rises or the ledger is fenced
	n      int
}

func newLacWatch(max int) *lacWatch {
	return &lacWatch{ledgers: make(map[int64]*lacWaiters), max: max}
}

// update records that ledger's LAC is at least lac.
func (w *lacWatch) update(ledger, lac int64) {
	w.mu.Lock()
	if e := w.ledgers[ledger]; e != nil && lac > e.lac {
		e.lac = lac
		close(e.woken)
		e.woken = make(chan struct{})
	}
	w.mu.Unlock()
}

// fence records that ledger was fenced: its waiters answer at once.
func (w *lacWatch) fence(ledger int64) {
	w.mu.Lock()
	if e := w.ledgers[ledger]; e != nil && !e.fenced {
		e.fenced = true
		close(e.woken)
		e.woken = make(chan struct{})
	}
	w.mu.Unlock()
}

// errTooManyWaiters: MaxLacWaiters calls are already waiting.
var errTooManyWaiters = fmt.Errorf("%w: too many ReadLac calls waiting", ErrBusy)

// wait returns the LAC once it is above previous or the ledger is fenced,
// or whatever it is when timeout passes or ctx ends. current reads the
// stored LAC and fenced flag; it is read after the waiter is registered,
// so an update between the two is not lost.
func (w *lacWatch) wait(ctx context.Context, ledger, previous int64, timeout time.Duration, current func() (int64, bool, error)) (int64, bool, error) {
	w.mu.Lock()
	if w.waiters >= w.max {
		w.mu.Unlock()
		return 0, false, errTooManyWaiters
	}
	e := w.ledgers[ledger]
	if e == nil {
		e = &lacWaiters{lac: -1, woken: make(chan struct{})}
		w.ledgers[ledger] = e
	}
	e.n++
	w.waiters++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		e.n--
		w.waiters--
		if e.n == 0 {
			delete(w.ledgers, ledger)
		}
		w.mu.Unlock()
	}()

	stored, storedFenced, err := current()
	if err != nil {
		return 0, false, err
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	for {
		w.mu.Lock()
		lac, fenced, woken := max(e.lac, stored), e.fenced || storedFenced, e.woken
		w.mu.Unlock()
		if lac > previous || fenced || timer == nil {
			return lac, fenced, nil
		}
		select {
		case <-woken:
		case <-timer:
			timer = nil
		case <-ctx.Done():
			return lac, fenced, nil
		}
	}
}
