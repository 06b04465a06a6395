package client

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// addSet is one ledger handle's (a Writer's or a recovery's) AddEntries
// streams: one bidi stream per bookie, opened on the first add to it.
//
// Why a stream per bookie per handle rather than one shared per bookie:
// answers come back in order within a ledger on the stream that carried the
// adds, so no demultiplexing across ledgers is needed; a broken or slow
// stream fails only that handle's adds to that bookie, which is exactly
// what the machine must hear (AddFailed for each); and a stream lives and
// dies with its handle. The HTTP/2 connection under the streams is shared
// per bookie address by the transport, so many handles cost one TCP
// connection, not many.
//
// Each stream's sender coalesces the adds queued at the moment it is free
// into one AddEntries message (at most MaxAddBatch adds and
// MaxAddBatchBytes of payload; one add of any size goes alone): it never
// waits for more adds to arrive, so batching adds no latency — adds queue
// up only while the sender is busy sending, which is when one message for
// many saves the most. The bookie answers the same way, several results per
// response.
//
// Every method runs on the owning loop's goroutine (the addSet is not safe
// for concurrent use); each stream's sender and receiver goroutines report
// to it through events. The addSet is the single source of truth for the
// adds awaiting an answer: each SendAdd gets exactly one event back —
// the bookie's answer, or AddFailed{FailUnavailable} when the stream
// breaks or the add's AddTimeout passes (which breaks the stream, failing
// everything else on it too: the machine stops using that bookie anyway).
type addSet struct {
	c      *Client
	ledger int64
	key    []byte
	ctx    context.Context // the handle's lifetime
	wg     *sync.WaitGroup // the handle's goroutines
	events chan streamEvent

	streams map[string]*addStream
	gen     uint64

	// last is the add message built for the last SendAdd: the machine
	// sends one entry to its whole write set in a row, and the copies
	// share one message (its checksum computed once). Messages are never
	// modified once built, so senders may marshal one concurrently.
	last *bookiev1.Add
}

// streamEvent is a stream goroutine's report: a response (one or more
// answers), or the stream's failure (err != nil).
type streamEvent struct {
	bookie string
	gen    uint64
	resp   *bookiev1.AddEntriesResponse
	err    error
}

// addStream is the loop's view of one stream.
type addStream struct {
	bookie string
	gen    uint64
	cancel context.CancelFunc
	q      *sendQueue
	// pending are the adds queued or sent and not answered, in queue order
	// (so deadlines are in order too).
	pending []pendingAdd
}

type pendingAdd struct {
	entry    int64
	deadline time.Time
}

func newAddSet(c *Client, m catalog.LedgerMetadata, ctx context.Context, wg *sync.WaitGroup) *addSet {
	return &addSet{
		c: c, ledger: int64(m.ID), key: MasterKey(m), ctx: ctx, wg: wg,
		events:  make(chan streamEvent, 256),
		streams: map[string]*addStream{},
	}
}

// send queues a SendAdd on its bookie's stream, opening it if needed.
func (s *addSet) send(a ledger.SendAdd) {
	st := s.streams[a.Bookie]
	if st == nil {
		s.gen++
		ctx, cancel := context.WithCancel(s.ctx)
		st = &addStream{bookie: a.Bookie, gen: s.gen, cancel: cancel, q: newSendQueue()}
		s.streams[a.Bookie] = st
		s.c.stats.streamsOpened.Add(1)
		s.wg.Add(1)
		go s.runSender(ctx, st.bookie, st.gen, st.q)
	}
	st.pending = append(st.pending, pendingAdd{entry: a.Entry, deadline: s.c.cfg.Now().Add(s.c.cfg.AddTimeout)})
	if l := s.last; l == nil || l.GetEntryId() != a.Entry || l.GetLac() != a.LAC || l.GetRecovery() != a.Recovery || len(l.GetPayload()) != len(a.Payload) {
		s.last = addMessage(s.ledger, a)
	}
	st.q.push(s.last)
	s.c.stats.addsSent.Add(1)
}

// answer turns a stream goroutine's report into the machine's events: one
// per answer the response carries (answers nobody waits for are skipped),
// nothing for a stale report, or a failure for every pending add when the
// stream broke.
func (s *addSet) answer(ev streamEvent) []ledger.Event {
	st := s.streams[ev.bookie]
	if st == nil || st.gen != ev.gen {
		return nil // a stream already dropped
	}
	if ev.err != nil {
		if s.ctx.Err() == nil {
			s.c.log.Warn("bookie add stream broke", slog.Int64("ledger", s.ledger), slog.String("bookie", ev.bookie),
				slog.Int("pending", len(st.pending)), slog.Any("err", ev.err))
		}
		return s.drop(st)
	}
	if ev.resp.GetLedgerId() != s.ledger {
		return nil
	}
	results := ev.resp.GetResults()
	out := make([]ledger.Event, 0, len(results))
	for _, r := range results {
		if e, ok := st.settle(r); ok {
			if _, failed := e.(ledger.AddFailed); failed {
				s.c.stats.addFailures.Add(1)
			}
			out = append(out, e)
		}
	}
	return out
}

// settle removes the pending add r answers and returns its event; false
// for an answer nobody waits for (after a duplicate).
func (st *addStream) settle(r *bookiev1.AddResult) (ledger.Event, bool) {
	for i, p := range st.pending {
		if p.entry == r.GetEntryId() {
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
// deadline, failing all its pending adds.
func (s *addSet) timeouts(now time.Time) []ledger.Event {
	var out []ledger.Event
	for _, st := range s.streams {
		if len(st.pending) > 0 && now.After(st.pending[0].deadline) {
			s.c.log.Warn("bookie add timed out", slog.Int64("ledger", s.ledger), slog.String("bookie", st.bookie),
				slog.Int64("entry", st.pending[0].entry), slog.Duration("timeout", s.c.cfg.AddTimeout))
			out = append(out, s.drop(st)...)
		}
	}
	return out
}

// drop ends a stream and fails its pending adds.
func (s *addSet) drop(st *addStream) []ledger.Event {
	st.cancel()
	delete(s.streams, st.bookie)
	out := make([]ledger.Event, len(st.pending))
	for i, p := range st.pending {
		out[i] = ledger.AddFailed{Bookie: st.bookie, Entry: p.entry, Reason: ledger.FailUnavailable}
	}
	s.c.stats.addFailures.Add(int64(len(out)))
	return out
}

// closeAll ends every stream without reporting anything (the handle is
// done). The owner then waits for the goroutines.
func (s *addSet) closeAll() {
	for _, st := range s.streams {
		st.cancel()
	}
	clear(s.streams)
}

// runSender opens the stream and sends what is queued, as few messages as
// the batch bounds allow (batchLen); the first successful send starts the
// receiver. Any failure is reported once as the stream's failure. Exits
// when ctx ends or the stream breaks.
func (s *addSet) runSender(ctx context.Context, bookie string, gen uint64, q *sendQueue) {
	defer s.wg.Done()
	report := func(ev streamEvent) {
		select {
		case s.events <- ev:
		case <-ctx.Done():
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
			req := &bookiev1.AddEntriesRequest{LedgerId: s.ledger, MasterKey: s.key, Adds: queued[:n:n]}
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
						report(streamEvent{bookie: bookie, gen: gen, resp: resp})
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
