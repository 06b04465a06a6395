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
}

// streamEvent is a stream goroutine's report: an answer, or the stream's
// failure (err != nil).
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
	st.q.push(addRequest(s.ledger, s.key, a))
	s.c.stats.addsSent.Add(1)
}

// answer turns a stream goroutine's report into the machine's events: the
// add's answer, nothing for a stale or unknown report, or a failure for
// every pending add when the stream broke.
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
	r := ev.resp
	if r.GetLedgerId() != s.ledger {
		return nil
	}
	for i, p := range st.pending {
		if p.entry == r.GetEntryId() {
			if i == 0 { // the usual case: answers come in order
				st.pending[0] = pendingAdd{}
				st.pending = st.pending[1:]
			} else {
				st.pending = append(st.pending[:i], st.pending[i+1:]...)
			}
			out := addEvent(ev.bookie, p.entry, r.GetStatus())
			if _, ok := out.(ledger.AddFailed); ok {
				s.c.stats.addFailures.Add(1)
			}
			return []ledger.Event{out}
		}
	}
	return nil // an answer nobody waits for (after a duplicate)
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

// runSender opens the stream and sends what is queued; the first
// successful send starts the receiver. Any failure is reported once as the
// stream's failure. Exits when ctx ends or the stream breaks.
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
	for {
		batch, ok := q.wait(ctx)
		if !ok {
			return
		}
		for _, req := range batch {
			if err := stream.Send(req); err != nil {
				// The server ended the stream; the receiver (if any)
				// reports its real error, else report this one.
				if !receiving {
					report(streamEvent{bookie: bookie, gen: gen, err: err})
				}
				return
			}
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
						report(streamEvent{bookie: bookie, gen: gen, resp: resp})
					}
				}()
			}
		}
	}
}

// sendQueue hands requests from the loop to a stream's sender without
// blocking the loop. Its length is bounded by the machine: at most
// MaxInFlight adds are unacknowledged, each sent at most once per bookie
// per stream.
type sendQueue struct {
	mu   sync.Mutex
	reqs []*bookiev1.AddEntriesRequest
	wake chan struct{} // capacity 1: "reqs is not empty"
}

func newSendQueue() *sendQueue { return &sendQueue{wake: make(chan struct{}, 1)} }

func (q *sendQueue) push(r *bookiev1.AddEntriesRequest) {
	q.mu.Lock()
	q.reqs = append(q.reqs, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// wait returns everything queued, waiting for something; false once ctx
// ended.
func (q *sendQueue) wait(ctx context.Context) ([]*bookiev1.AddEntriesRequest, bool) {
	for {
		q.mu.Lock()
		batch := q.reqs
		q.reqs = nil
		q.mu.Unlock()
		if len(batch) > 0 {
			return batch, true
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
