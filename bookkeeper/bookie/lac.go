package bookie

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// lacWatch wakes ReadLAC long-polls, and fires WatchLac watches, when a
// ledger's LAC rises or the ledger is fenced. Only ledgers with waiters
// have an entry, so the add path pays one map lookup; the number of waiters
// (long-polls and watches together) is bounded.
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
	n      int           // long-polls waiting and watches registered
	regs   map[*lacReg]struct{}
}

// lacReg is one WatchLac watch: registered in its ledger's lacWaiters
// until the LAC passes prev or the ledger is fenced, then handed to its
// stream (lacStream.push) to be answered.
type lacReg struct {
	s        *lacStream
	id       uint64
	ledger   int64
	prev     int64
	maxBytes int
	refused  string // answer at once with this reason; never registered
	lac      int64  // the LAC that fired it (set under lacWatch.mu before the push)
	fenced   bool   // fired by a fence (likewise)
}

func newLacWatch(max int) *lacWatch {
	return &lacWatch{ledgers: make(map[int64]*lacWaiters), max: max}
}

// update records that ledger's LAC is at least lac.
func (w *lacWatch) update(ledger, lac int64) {
	w.mu.Lock()
	if e := w.ledgers[ledger]; e != nil {
		if lac > e.lac {
			e.lac = lac
			close(e.woken)
			e.woken = make(chan struct{})
		}
		for r := range e.regs {
			if lac > r.prev {
				w.fireLocked(e, r, lac, false)
			}
		}
	}
	w.mu.Unlock()
}

// fence records that ledger was fenced: its waiters answer at once.
func (w *lacWatch) fence(ledger int64) {
	w.mu.Lock()
	if e := w.ledgers[ledger]; e != nil {
		if !e.fenced {
			e.fenced = true
			close(e.woken)
			e.woken = make(chan struct{})
		}
		for r := range e.regs {
			w.fireLocked(e, r, e.lac, true)
		}
	}
	w.mu.Unlock()
}

// register adds watch r; current reads the stored LAC and fenced flag
// after it is registered (as in wait), and fires it at once when the LAC
// is already above r.prev or the ledger fenced.
func (w *lacWatch) register(r *lacReg, current func() (int64, bool, error)) error {
	w.mu.Lock()
	if w.waiters >= w.max {
		w.mu.Unlock()
		return errTooManyWaiters
	}
	e := w.ledgers[r.ledger]
	if e == nil {
		e = &lacWaiters{lac: -1, woken: make(chan struct{})}
		w.ledgers[r.ledger] = e
	}
	if e.regs == nil {
		e.regs = make(map[*lacReg]struct{})
	}
	e.regs[r] = struct{}{}
	e.n++
	w.waiters++
	w.mu.Unlock()

	lac, fenced, err := current()
	if err != nil {
		w.cancel(r)
		return err
	}
	if lac > r.prev || fenced {
		w.mu.Lock()
		if e := w.registeredLocked(r); e != nil {
			w.fireLocked(e, r, lac, fenced)
		}
		w.mu.Unlock()
	}
	return nil
}

// cancel drops watch r if it is registered (not fired, not refused).
func (w *lacWatch) cancel(r *lacReg) {
	w.mu.Lock()
	if e := w.registeredLocked(r); e != nil {
		w.dropLocked(e, r)
	}
	w.mu.Unlock()
}

// registeredLocked returns r's ledger entry while r is registered in it.
func (w *lacWatch) registeredLocked(r *lacReg) *lacWaiters {
	if e := w.ledgers[r.ledger]; e != nil {
		if _, ok := e.regs[r]; ok {
			return e
		}
	}
	return nil
}

// fireLocked ends watch r and hands it to its stream. Lock order:
// lacWatch.mu, then lacStream.mu.
func (w *lacWatch) fireLocked(e *lacWaiters, r *lacReg, lac int64, fenced bool) {
	w.dropLocked(e, r)
	r.lac, r.fenced = max(lac, e.lac), fenced || e.fenced
	r.s.push(r)
}

func (w *lacWatch) dropLocked(e *lacWaiters, r *lacReg) {
	delete(e.regs, r)
	e.n--
	w.waiters--
	if e.n == 0 {
		delete(w.ledgers, r.ledger)
	}
}

// lacStream is the bookie's side of one WatchLac stream: its watches by
// id (registered, or fired and not yet sent) and those ready to send.
type lacStream struct {
	mu    sync.Mutex
	regs  map[uint64]*lacReg
	ready []*lacReg
	wake  chan struct{} // capacity 1: "ready is not empty"
}

func newLacStream() *lacStream {
	return &lacStream{regs: make(map[uint64]*lacReg), wake: make(chan struct{}, 1)}
}

// push queues r to be answered.
func (s *lacStream) push(r *lacReg) {
	s.mu.Lock()
	s.ready = append(s.ready, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the watches to answer now (those not cancelled since they
// fired) and forgets their ids.
func (s *lacStream) take() []*lacReg {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ready[:0:0]
	for _, r := range s.ready {
		if s.regs[r.id] == r {
			delete(s.regs, r.id)
			out = append(out, r)
		}
	}
	clear(s.ready)
	s.ready = s.ready[:0]
	return out
}

// errTooManyWaiters: MaxLacWaiters calls are already waiting.
var errTooManyWaiters = fmt.Errorf("%w: too many LAC long-polls waiting (ReadLac calls and WatchLac watches)", ErrBusy)

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
