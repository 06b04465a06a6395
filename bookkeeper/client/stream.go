package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// addSet is one ledger handle's (a Writer's or a recovery's) adds in
// flight, per bookie, and the transport that carries them:
//
//   - A Writer's adds go over the client's shared AddEntries stream per
//     bookie (addMux, mux.go): every writer of the process sends on it, the
//     sender puts the adds of many ledgers into one message, and the bookie
//     answers many per response. With hundreds of partitions this is one
//     stream per bookie instead of one per bookie per ledger — the
//     difference between a few goroutines and thousands, and between one
//     HTTP/2 frame per ledger per flush and one per flush. Explicit LAC
//     pushes ride the same stream (LedgerAdds.lac, unanswered).
//   - A recovery's adds go over its own streams, one per bookie, opened on
//     the first add and closed when it returns (runSender): a process may
//     recover a ledger while its own old writer of that ledger still runs,
//     and answers on a shared stream are told apart by ledger id only.
//
// Either way a broken or slow stream fails exactly the adds it carried
// (AddFailed for each), which is what the machine must hear.
//
// Every method runs on the owning loop's goroutine (the addSet is not safe
// for concurrent use); stream goroutines report to it through its inbox.
// The addSet is the single source of truth for the adds awaiting an
// answer: each SendAdd gets exactly one event back — the bookie's answer,
// or AddFailed{FailUnavailable} when the stream that carried it breaks or
// the add's AddTimeout passes (which breaks that stream, failing
// everything else it carried too: the machine stops using that bookie
// anyway).
type addSet struct {
	c      *Client
	ledger int64
	key    []byte
	ctx    context.Context // the handle's lifetime
	wg     *sync.WaitGroup // the handle's goroutines (own streams)
	in     *inbox
	shared bool // a writer's: adds go over the client's muxes

	streams map[string]*addStream
	gen     uint64 // own streams' generations

	// last is the add message built for the last SendAdd: the machine
	// sends one entry to its whole write set in a row, and the copies
	// share one message (its checksum computed once). Messages are never
	// modified once built, so senders may marshal one concurrently.
	last *bookiev1.Add

	// failed is why each bookie last failed an add (a reason of
	// sluice.ledger.bookie.errors), for the ensemble change that replaces
	// it to be counted by reason.
	failed map[string]string
}

// streamEvent is a stream goroutine's report: answers for the handle's
// ledger, or the failure (err != nil) of the stream generation gen.
type streamEvent struct {
	bookie  string
	gen     uint64
	results []*bookiev1.AddResult
	err     error
}

// inbox carries stream reports to the loop without ever blocking the
// stream goroutines (a shared stream must not wait for one slow writer).
// Bounded: each add sent gets at most one answer, each stream generation
// at most one failure report.
type inbox struct {
	mu   sync.Mutex
	evs  []streamEvent
	wake chan struct{} // capacity 1: "evs is not empty"
}

func newInbox() *inbox { return &inbox{wake: make(chan struct{}, 1)} }

func (b *inbox) push(ev streamEvent) {
	b.mu.Lock()
	b.evs = append(b.evs, ev)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take returns the reports received so far, in order.
func (b *inbox) take() []streamEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	evs := b.evs
	b.evs = nil
	return evs
}

// addStream is the loop's view of one bookie: its adds awaiting an answer
// and, for own streams, the stream.
type addStream struct {
	bookie string
	// own streams only:
	gen    uint64
	cancel context.CancelFunc
	q      *sendQueue
	// shared only: subscribed to the bookie's mux.
	mux *addMux
	// lacPushed: an explicit LAC was pushed to the bookie (shared only);
	// relac: a stream generation broke since, so the bookie may have lost
	// it (a restarted bookie knows only the LAC its last entry carried:
	// explicit LACs are not journaled) and it is pushed again (relacDue).
	lacPushed, relac bool
	// pending are the adds queued or sent and not answered, in queue order
	// (so deadlines, and stream generations, are in order too).
	pending []pendingAdd
}

type pendingAdd struct {
	entry    int64
	gen      uint64 // the stream generation that carries it
	deadline time.Time
}

func newAddSet(c *Client, m catalog.LedgerMetadata, ctx context.Context, wg *sync.WaitGroup, shared bool) *addSet {
	return &addSet{
		c: c, ledger: int64(m.ID), key: MasterKey(m), ctx: ctx, wg: wg, shared: shared,
		in:      newInbox(),
		streams: map[string]*addStream{},
	}
}

// stream returns the bookie's view, creating it (and, for own streams,
// starting the stream) on first use.
func (s *addSet) stream(bookie string) *addStream {
	st := s.streams[bookie]
	if st != nil {
		return st
	}
	st = &addStream{bookie: bookie}
	if s.shared {
		st.mux = s.c.mux(bookie)
		st.mux.subscribe(s.ledger, s.in)
	} else {
		s.gen++
		ctx, cancel := context.WithCancel(s.ctx)
		st.gen, st.cancel, st.q = s.gen, cancel, newSendQueue()
		s.c.stats.streamsOpened.Add(1)
		s.wg.Add(1)
		go s.runSender(ctx, bookie, st.gen, st.q)
	}
	s.streams[bookie] = st
	return st
}

// send queues a SendAdd on its bookie's stream; tc is the entry's trace
// context (Add.trace_context), nil when it is not traced.
func (s *addSet) send(a ledger.SendAdd, tc []byte) {
	st := s.stream(a.Bookie)
	if l := s.last; l == nil || l.GetEntryId() != a.Entry || l.GetLac() != a.LAC || l.GetRecovery() != a.Recovery || len(l.GetPayload()) != len(a.Payload) {
		s.last = addMessage(s.ledger, a)
		s.last.TraceContext = tc
	}
	gen := st.gen
	if st.mux != nil {
		gen = st.mux.enqueue(muxItem{ledger: s.ledger, key: s.key, add: s.last})
	} else {
		st.q.push(s.last)
	}
	st.pending = append(st.pending, pendingAdd{entry: a.Entry, gen: gen, deadline: s.c.cfg.Now().Add(s.c.cfg.AddTimeout)})
	s.c.stats.addsSent.Add(1)
}

// pushLac sends an explicit LAC to a bookie (SendWriteLac), unanswered. A
// push lost with its stream, or forgotten by a bookie that restarted, is
// made again once the stream broke (relac, repushLac): an idle writer has
// no next add to carry it. Shared streams only (a recovery pushes none).
func (s *addSet) pushLac(bookie string, lac int64) {
	st := s.stream(bookie)
	if st.mux != nil {
		st.mux.enqueue(muxItem{ledger: s.ledger, key: s.key, lac: lac})
		st.lacPushed, st.relac = true, false
	}
}

// relacDue reports whether a bookie's stream broke after it was pushed an
// explicit LAC, so the push should be made again (repushLac).
func (s *addSet) relacDue() bool {
	for _, st := range s.streams {
		if st.relac {
			return true
		}
	}
	return false
}

// repushLac pushes lac again to every bookie whose stream broke after its
// last push. The push opens a new stream generation; if the bookie is
// still down that breaks too and the bookie is due again.
func (s *addSet) repushLac(lac int64) {
	for _, st := range s.streams {
		if st.relac {
			s.pushLac(st.bookie, lac)
		}
	}
}

// answerAll takes the inbox's reports and returns the machine's events.
func (s *addSet) answerAll() []ledger.Event {
	var out []ledger.Event
	for _, ev := range s.in.take() {
		out = append(out, s.answer(ev)...)
	}
	return out
}

// answer turns a stream goroutine's report into the machine's events: one
// per answer to a pending add (answers nobody waits for are skipped), or a
// failure for every pending add the broken stream generation carried.
func (s *addSet) answer(ev streamEvent) []ledger.Event {
	st := s.streams[ev.bookie]
	if st == nil {
		return nil // a stream already dropped
	}
	if ev.err != nil {
		if st.mux == nil && st.gen != ev.gen {
			return nil
		}
		if st.lacPushed {
			st.relac = true
		}
		if s.ctx.Err() == nil && st.hasGen(ev.gen) {
			s.c.log.Warn("bookie add stream broke", slog.Int64("ledger", s.ledger), slog.String("bookie", ev.bookie),
				slog.Int("pending", len(st.pending)), slog.Any("err", ev.err))
		}
		reason := reasonUnavailable
		if errors.Is(ev.err, errAddTimeout) { // another writer's add on the shared stream timed out
			reason = reasonTimeout
		}
		return s.failGen(st, ev.gen, reason)
	}
	out := make([]ledger.Event, 0, len(ev.results))
	for _, r := range ev.results {
		if e, ok := st.settle(ev.gen, r); ok {
			if _, failed := e.(ledger.AddFailed); failed {
				s.c.stats.addFailures.Add(1)
				s.noteFailed(st.bookie, addFailReason(r.GetStatus()), 1)
			}
			out = append(out, e)
		}
	}
	return out
}

// noteFailed counts n adds bookie failed for reason (not once the
// handle is ending: its streams then break on purpose) and remembers the
// reason for the ensemble change.
func (s *addSet) noteFailed(bookie, reason string, n int) {
	if n == 0 || s.ctx.Err() != nil {
		return
	}
	s.c.meters.bookieError(bookie, opAdd, reason, n)
	if s.failed == nil {
		s.failed = map[string]string{}
	}
	s.failed[bookie] = reason
}

// failReason is why bookie last failed an add ("error" if it never did).
func (s *addSet) failReason(bookie string) string {
	if r, ok := s.failed[bookie]; ok {
		return r
	}
	return reasonError
}

// settle removes the pending add r answers and returns its event; false
// for an answer nobody waits for (after a duplicate, or from a stream
// generation whose adds were already failed).
func (st *addStream) settle(gen uint64, r *bookiev1.AddResult) (ledger.Event, bool) {
	for i, p := range st.pending {
		if p.entry == r.GetEntryId() && p.gen == gen {
			if i == 0 { // the usual case: answers come in order
				st.pending[0] = pendingAdd{}
				st.pending = st.pending[1:]
			} else {
				st.pending = append(st.pending[:i], st.pending[i+1:]...)
			}
			return addEvent(st.bookie, p.entry, r.GetStatus()), true
		}
	}
	return nil, false
}

func (st *addStream) hasGen(gen uint64) bool {
	for _, p := range st.pending {
		if p.gen == gen {
			return true
		}
	}
	return false
}

// busy reports whether any add awaits an answer.
func (s *addSet) busy() bool {
	for _, st := range s.streams {
		if len(st.pending) > 0 {
			return true
		}
	}
	return false
}

// timeouts breaks every stream whose oldest pending add passed its
// deadline, failing the pending adds it carried.
func (s *addSet) timeouts(now time.Time) []ledger.Event {
	var out []ledger.Event
	for _, st := range s.streams {
		if len(st.pending) > 0 && now.After(st.pending[0].deadline) {
			p := st.pending[0]
			s.c.log.Warn("bookie add timed out", slog.Int64("ledger", s.ledger), slog.String("bookie", st.bookie),
				slog.Int64("entry", p.entry), slog.Duration("timeout", s.c.cfg.AddTimeout))
			if st.mux != nil {
				// Every writer's adds on that stream fail: the bookie
				// answers none of them in time.
				st.mux.fail(p.gen, fmt.Errorf("%w: ledger %d entry %d unanswered after %v", errAddTimeout, s.ledger, p.entry, s.c.cfg.AddTimeout))
			}
			out = append(out, s.failGen(st, p.gen, reasonTimeout)...)
		}
	}
	return out
}

// failGen fails the pending adds stream generation gen carried, for
// reason; an own stream is dropped (it carries one generation).
func (s *addSet) failGen(st *addStream, gen uint64, reason string) []ledger.Event {
	var out []ledger.Event
	kept := st.pending[:0]
	for _, p := range st.pending {
		if p.gen == gen {
			out = append(out, ledger.AddFailed{Bookie: st.bookie, Entry: p.entry, Reason: ledger.FailUnavailable})
		} else {
			kept = append(kept, p)
		}
	}
	clear(st.pending[len(kept):])
	st.pending = kept
	if st.mux == nil {
		st.cancel()
		delete(s.streams, st.bookie)
	}
	s.c.stats.addFailures.Add(int64(len(out)))
	s.noteFailed(st.bookie, reason, len(out))
	return out
}

// closeAll ends every own stream and leaves every shared one, without
// reporting anything (the handle is done). The owner then waits for the
// goroutines.
func (s *addSet) closeAll() {
	for _, st := range s.streams {
		if st.mux != nil {
			st.mux.unsubscribe(s.ledger, s.in)
		} else {
			st.cancel()
		}
	}
	clear(s.streams)
}

// runSender opens an own stream and sends what is queued, as few messages as
// the batch bounds allow (batchLen); the first successful send starts the
// receiver. Any failure is reported once as the stream's failure. Exits
// when ctx ends or the stream breaks.
func (s *addSet) runSender(ctx context.Context, bookie string, gen uint64, q *sendQueue) {
	defer s.wg.Done()
	report := func(ev streamEvent) {
		if ctx.Err() == nil {
			s.in.push(ev)
		}
	}
	bc, err := s.c.bookies.client(ctx, bookie)
	if err != nil {
		report(streamEvent{bookie: bookie, gen: gen, err: err})
		return
	}
	stream := bc.AddEntries(ctx)
	receiving := false
	defer func() {
		_ = stream.CloseRequest()
		if !receiving {
			_ = stream.CloseResponse()
		}
	}()
	maxAdds, maxBytes := s.c.cfg.MaxAddBatch, s.c.cfg.MaxAddBatchBytes
	for {
		queued, ok := q.wait(ctx)
		if !ok {
			return
		}
		for len(queued) > 0 {
			n := batchLen(queued, maxAdds, maxBytes)
			req := &bookiev1.AddEntriesRequest{Ledgers: []*bookiev1.LedgerAdds{{LedgerId: s.ledger, MasterKey: s.key, Adds: queued[:n:n]}}}
			queued = queued[n:]
			if err := stream.Send(req); err != nil {
				// The server ended the stream; the receiver (if any)
				// reports its real error, else report this one.
				if !receiving {
					report(streamEvent{bookie: bookie, gen: gen, err: err})
				}
				return
			}
			s.c.stats.addMessagesSent.Add(1)
			if !receiving {
				receiving = true
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					defer func() { _ = stream.CloseResponse() }()
					for {
						resp, err := stream.Receive()
						if err != nil {
							if unavailable(err) {
								s.c.bookies.forgetAfterFailure(bookie)
							}
							report(streamEvent{bookie: bookie, gen: gen, err: err})
							return
						}
						s.c.stats.addResponses.Add(1)
						for _, g := range resp.GetLedgers() {
							if g.GetLedgerId() == s.ledger {
								report(streamEvent{bookie: bookie, gen: gen, results: g.GetResults()})
							}
						}
					}
				}()
			}
		}
	}
}

// batchLen is how many of the queued adds (at least one) go in the next
// AddEntries message: at most maxAdds, and while their payloads fit
// maxBytes — except the first, which goes alone if it is larger.
func batchLen(queued []*bookiev1.Add, maxAdds, maxBytes int) int {
	n, size := 0, 0
	for n < len(queued) && n < maxAdds {
		p := len(queued[n].GetPayload())
		if n > 0 && size+p > maxBytes {
			break
		}
		size += p
		n++
	}
	return n
}

// sendQueue hands adds from the loop to a stream's sender without
// blocking the loop. Its length is bounded by the machine: at most
// MaxInFlight adds are unacknowledged, each sent at most once per bookie
// per stream.
type sendQueue struct {
	mu   sync.Mutex
	adds []*bookiev1.Add
	wake chan struct{} // capacity 1: "adds is not empty"
}

func newSendQueue() *sendQueue { return &sendQueue{wake: make(chan struct{}, 1)} }

func (q *sendQueue) push(a *bookiev1.Add) {
	q.mu.Lock()
	q.adds = append(q.adds, a)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// wait returns everything queued, waiting for something; false once ctx
// ended.
func (q *sendQueue) wait(ctx context.Context) ([]*bookiev1.Add, bool) {
	for {
		q.mu.Lock()
		queued := q.adds
		q.adds = nil
		q.mu.Unlock()
		if len(queued) > 0 {
			return queued, true
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// forgetAfterFailure drops a bookie's verified address after an
// UNAVAILABLE answer, so the next use re-checks it (and re-reads the
// registry if the id is unknown by then).
func (r *registry) forgetAfterFailure(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.verified, id)
}
