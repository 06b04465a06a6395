package client

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// errAddTimeout breaks a shared stream whose bookie left an add unanswered
// for AddTimeout.
var errAddTimeout = errors.New("add timed out")

// errMuxIdle ends a shared stream nobody subscribes to any more.
var errMuxIdle = errors.New("no writer uses the stream")

// addMux is the client's AddEntries stream to one bookie, shared by every
// Writer that sends to it (addSet explains why). One stream generation
// runs at a time: it opens on the first add after none ran, and ends when
// it breaks (reported to every subscriber, whose adds on it fail), when a
// writer's add on it times out (the same), when its last subscriber leaves,
// or when the client closes.
//
// Answers are routed by ledger id to the subscribed writer's inbox: one
// writer per ledger per client (a ledger has one writer, and recoveries use
// their own streams).
type addMux struct {
	c      *Client
	bookie string

	// mu guards the fields below. Leaf lock.
	mu   sync.Mutex
	gen  uint64
	cur  *muxStream
	subs map[int64]*inbox
}

// muxItem is one queued add, or an explicit LAC when add is nil.
type muxItem struct {
	ledger int64
	key    []byte
	add    *bookiev1.Add
	lac    int64
}

// muxStream is one generation of the shared stream. q and lacAt are
// guarded by the mux's mu.
type muxStream struct {
	gen    uint64
	ctx    context.Context
	cancel context.CancelFunc
	q      []muxItem
	lacAt  map[int64]int // ledger → index in q of its queued LAC push
	wake   chan struct{} // capacity 1: "q is not empty"
	once   sync.Once
}

// mux returns the bookie's shared stream, creating it on first use.
func (c *Client) mux(bookie string) *addMux {
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	m := c.muxes[bookie]
	if m == nil {
		m = &addMux{c: c, bookie: bookie, subs: map[int64]*inbox{}}
		c.muxes[bookie] = m
	}
	return m
}

// subscribe routes the answers for ledger to in, and the failures of the
// stream too.
func (m *addMux) subscribe(ledger int64, in *inbox) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.subs[ledger]; ok && old != in {
		panic("ledger client: two writers of one ledger share a bookie stream")
	}
	m.subs[ledger] = in
}

// unsubscribe stops routing ledger's answers to in and drops its adds not
// yet sent (their writer is gone; a ledger left open is recovered, so an
// add that never lands changes nothing). The stream ends with its last
// subscriber.
func (m *addMux) unsubscribe(ledger int64, in *inbox) {
	m.mu.Lock()
	if m.subs[ledger] == in {
		delete(m.subs, ledger)
	}
	st := m.cur
	if st != nil {
		kept := st.q[:0]
		clear(st.lacAt)
		for _, it := range st.q {
			if it.ledger != ledger {
				if it.add == nil {
					st.lacAt[it.ledger] = len(kept)
				}
				kept = append(kept, it)
			}
		}
		clear(st.q[len(kept):])
		st.q = kept
	}
	idle := len(m.subs) == 0 && st != nil
	m.mu.Unlock()
	if idle {
		m.broken(st, errMuxIdle)
	}
}

// enqueue queues an add (or a LAC push) on the current stream, starting
// one if none runs, and returns the generation that carries it. A LAC
// push replaces one of the same ledger still queued.
func (m *addMux) enqueue(it muxItem) uint64 {
	m.mu.Lock()
	st := m.cur
	if st == nil {
		m.gen++
		ctx, cancel := context.WithCancel(m.c.ctx)
		st = &muxStream{gen: m.gen, ctx: ctx, cancel: cancel, lacAt: map[int64]int{}, wake: make(chan struct{}, 1)}
		m.cur = st
		m.c.stats.streamsOpened.Add(1)
		m.c.wg.Add(1)
		go m.run(st)
	}
	if it.add == nil {
		if i, ok := st.lacAt[it.ledger]; ok {
			st.q[i].lac = max(st.q[i].lac, it.lac)
			m.mu.Unlock()
			return st.gen
		}
		st.lacAt[it.ledger] = len(st.q)
	}
	st.q = append(st.q, it)
	m.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return st.gen
}

// take returns everything queued on st, waiting for something; false once
// st ended.
func (m *addMux) take(st *muxStream) ([]muxItem, bool) {
	for {
		m.mu.Lock()
		q := st.q
		st.q = nil
		clear(st.lacAt)
		m.mu.Unlock()
		if len(q) > 0 {
			return q, true
		}
		select {
		case <-st.wake:
		case <-st.ctx.Done():
			return nil, false
		}
	}
}

// fail breaks generation gen if it still runs.
func (m *addMux) fail(gen uint64, err error) {
	m.mu.Lock()
	st := m.cur
	m.mu.Unlock()
	if st != nil && st.gen == gen {
		m.broken(st, err)
	}
}

// broken ends st once: no more adds go on it, and every subscriber hears
// that its adds on generation st.gen failed.
func (m *addMux) broken(st *muxStream, err error) {
	st.once.Do(func() {
		st.cancel()
		m.mu.Lock()
		if m.cur == st {
			m.cur = nil
		}
		subs := make([]*inbox, 0, len(m.subs))
		for _, in := range m.subs {
			subs = append(subs, in)
		}
		m.mu.Unlock()
		if !errors.Is(err, errMuxIdle) && m.c.ctx.Err() == nil {
			// The stream broke under its bookie (not because nobody uses
			// it): check the bookie's address again before the next
			// stream, which may find it restarted elsewhere. A stream
			// cut mid-message reads as UNKNOWN or INTERNAL, not only
			// UNAVAILABLE.
			m.c.bookies.forgetAfterFailure(m.bookie)
		}
		if len(subs) > 0 && m.c.ctx.Err() == nil {
			m.c.log.Warn("bookie add stream broke", slog.String("bookie", m.bookie), slog.Uint64("generation", st.gen),
				slog.Int("writers", len(subs)), slog.Any("err", err))
		}
		for _, in := range subs {
			in.push(streamEvent{bookie: m.bookie, gen: st.gen, err: err})
		}
	})
}

// route hands one response's answers to their writers.
func (m *addMux) route(gen uint64, resp *bookiev1.AddEntriesResponse) {
	for _, g := range resp.GetLedgers() {
		m.mu.Lock()
		in := m.subs[g.GetLedgerId()]
		m.mu.Unlock()
		if in != nil {
			in.push(streamEvent{bookie: m.bookie, gen: gen, results: g.GetResults()})
		}
	}
}

// run is generation st's sender: it opens the stream and sends what is
// queued in as few messages as the batch bounds allow (muxBatch,
// pumpStream). Owned by the client (its wg); exits when st ends.
func (m *addMux) run(st *muxStream) {
	c := m.c
	defer c.wg.Done()
	bc, err := c.bookies.client(st.ctx, m.bookie)
	if err != nil {
		m.broken(st, err)
		return
	}
	maxAdds, maxBytes := c.cfg.MaxAddBatch, c.cfg.MaxAddBatchBytes
	next := func() ([]*bookiev1.AddEntriesRequest, error) {
		queued, ok := m.take(st)
		if !ok {
			return nil, context.Cause(st.ctx)
		}
		var msgs []*bookiev1.AddEntriesRequest
		for len(queued) > 0 {
			req, n := muxBatch(queued, maxAdds, maxBytes)
			msgs = append(msgs, req)
			queued = queued[n:]
		}
		return msgs, nil
	}
	pumpStream(c, bc.AddEntries(st.ctx), next,
		func() { c.stats.addMessagesSent.Add(1) },
		func(resp *bookiev1.AddEntriesResponse) {
			c.stats.addResponses.Add(1)
			m.route(st.gen, resp)
		},
		func(err error) { m.broken(st, err) })
}

// muxBatch builds the next AddEntries message from the head of queued:
// adds grouped by ledger (each ledger's in queue order), at most maxAdds
// adds whose payloads fit maxBytes (the first add goes even if larger), and
// the LAC pushes among them. It returns the message and how many items it
// took (at least one).
func muxBatch(queued []muxItem, maxAdds, maxBytes int) (*bookiev1.AddEntriesRequest, int) {
	req := &bookiev1.AddEntriesRequest{}
	groups := make(map[int64]*bookiev1.LedgerAdds, 4)
	adds, size, n := 0, 0, 0
	for ; n < len(queued); n++ {
		it := queued[n]
		if it.add != nil {
			p := len(it.add.GetPayload())
			if adds == maxAdds || (adds > 0 && size+p > maxBytes) {
				break
			}
			adds++
			size += p
		}
		g := groups[it.ledger]
		if g == nil {
			g = &bookiev1.LedgerAdds{LedgerId: it.ledger, MasterKey: it.key}
			groups[it.ledger] = g
			req.Ledgers = append(req.Ledgers, g)
		}
		if it.add != nil {
			g.Adds = append(g.Adds, it.add)
		} else {
			lac := it.lac
			if g.Lac != nil {
				lac = max(lac, *g.Lac)
			}
			g.Lac = &lac
		}
	}
	return req, n
}
