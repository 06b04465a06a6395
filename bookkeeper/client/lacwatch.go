package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// maxWatchBatch is the most watches and cancels one WatchLacRequest
// carries (the bookie's bound).
const maxWatchBatch = 4096

// errWatchRefused: the bookie did not take a watch (its reason follows).
var errWatchRefused = errors.New("bookie refused the LAC watch")

// lacMux is the client's WatchLac stream to one bookie, shared by every
// Reader that long-polls it for a LAC: one watch per long-poll on one
// stream, where ReadLac costs one call each. One stream generation runs
// at a time; it opens on the first watch after none ran and ends when it
// breaks (every watch on it fails, and the Readers ask another bookie as
// they would after a failed ReadLac) or the client closes. It stays open
// while idle: a stream without watches costs nothing but its HTTP/2
// stream.
type lacMux struct {
	c      *Client
	bookie string

	// mu guards the fields below. Leaf lock.
	mu     sync.Mutex
	cur    *watchStream
	nextID uint64
}

// watchStream is one generation of a lacMux's stream; q and waiting are
// guarded by the mux's mu.
type watchStream struct {
	ctx     context.Context
	cancel  context.CancelFunc
	q       []*bookiev1.LacWatch
	waiting map[uint64]chan watchAnswer
	wake    chan struct{} // capacity 1: "q is not empty"
	once    sync.Once
}

// watchAnswer is the bookie's answer to one watch, or the stream's failure.
type watchAnswer struct {
	adv *bookiev1.LacAdvance
	err error
}

// lacMux returns the bookie's watch stream, creating it on first use.
func (c *Client) lacMux(bookie string) *lacMux {
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	m := c.lacMuxes[bookie]
	if m == nil {
		m = &lacMux{c: c, bookie: bookie}
		c.lacMuxes[bookie] = m
	}
	return m
}

// watchLac is readLac on the bookie's watch stream: it returns the LAC
// once it is above previous or the ledger is fenced, with the entries it
// made readable (within maxEntryBytes, verified); or, when wait passes
// first, lac -1 and no error (the watch is cancelled, as a ReadLac would
// have answered with a LAC not above previous); or an error when ctx ends,
// the stream breaks or the bookie refuses the watch.
func (c *Client) watchLac(ctx context.Context, id catalog.LedgerID, bookie string, previous int64, wait time.Duration, maxEntryBytes int) (lac int64, fenced bool, ents []Entry, err error) {
	m := c.lacMux(bookie)
	st, wid, ch := m.watch(&bookiev1.LacWatch{LedgerId: int64(id), PreviousLac: previous, MaxEntryBytes: int32(maxEntryBytes)})
	t := time.NewTimer(wait)
	defer t.Stop()
	var a watchAnswer
	select {
	case a = <-ch:
	case <-t.C:
		if !m.unwatch(st, wid) {
			a = <-ch // answered (or failed) meanwhile
			break
		}
		return -1, false, nil, nil
	case <-ctx.Done():
		if !m.unwatch(st, wid) {
			a = <-ch
			break
		}
		return -1, false, nil, ctx.Err()
	}
	if a.err != nil {
		return -1, false, nil, a.err
	}
	adv := a.adv
	if r := adv.GetRefused(); r != "" {
		return -1, false, nil, fmt.Errorf("%w: %s", errWatchRefused, r)
	}
	lac = adv.GetLac()
	ents = c.lacEntries(id, bookie, previous, lac, adv.GetEntries())
	return lac, adv.GetFenced(), ents, nil
}

// watch registers w (under a new id) on the current stream, starting one
// if none runs, and returns the stream, the id and where its answer comes.
func (m *lacMux) watch(w *bookiev1.LacWatch) (*watchStream, uint64, chan watchAnswer) {
	ch := make(chan watchAnswer, 1)
	m.mu.Lock()
	st := m.cur
	if st == nil {
		ctx, cancel := context.WithCancel(m.c.ctx)
		st = &watchStream{ctx: ctx, cancel: cancel, waiting: map[uint64]chan watchAnswer{}, wake: make(chan struct{}, 1)}
		m.cur = st
		m.c.stats.watchStreamsOpened.Add(1)
		m.c.wg.Add(1)
		go m.run(st)
	}
	m.nextID++
	w.Id = m.nextID
	st.waiting[w.Id] = ch
	st.q = append(st.q, w)
	m.mu.Unlock()
	m.c.stats.lacWatches.Add(1)
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return st, w.Id, ch
}

// unwatch cancels watch id on st; false when it was answered (or failed)
// already, its answer then is on its channel.
func (m *lacMux) unwatch(st *watchStream, id uint64) bool {
	m.mu.Lock()
	_, ok := st.waiting[id]
	if ok {
		delete(st.waiting, id)
		if m.cur == st {
			st.q = append(st.q, &bookiev1.LacWatch{Id: id, Cancel: true})
		}
	}
	m.mu.Unlock()
	if ok {
		select {
		case st.wake <- struct{}{}:
		default:
		}
	}
	return ok
}

// take returns what is queued on st, waiting for something; false once st
// ended.
func (m *lacMux) take(st *watchStream) ([]*bookiev1.LacWatch, bool) {
	for {
		m.mu.Lock()
		q := st.q
		st.q = nil
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

// broken ends st once: every watch on it fails with err.
func (m *lacMux) broken(st *watchStream, err error) {
	st.once.Do(func() {
		st.cancel()
		m.mu.Lock()
		if m.cur == st {
			m.cur = nil
		}
		waiting := st.waiting
		st.waiting = map[uint64]chan watchAnswer{}
		m.mu.Unlock()
		if unavailable(err) {
			m.c.bookies.forgetAfterFailure(m.bookie)
		}
		if err == nil {
			err = errors.New("LAC watch stream ended")
		}
		for _, ch := range waiting {
			ch <- watchAnswer{err: fmt.Errorf("bookie %s: LAC watch stream: %w", m.bookie, err)}
		}
	})
}

// route hands one response's answers to their watchers; answers to
// watches cancelled meanwhile are dropped.
func (m *lacMux) route(st *watchStream, resp *bookiev1.WatchLacResponse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range resp.GetAdvances() {
		if ch, ok := st.waiting[a.GetId()]; ok {
			delete(st.waiting, a.GetId())
			ch <- watchAnswer{adv: a}
		}
	}
}

// run is generation st's sender: it opens the stream and sends what is
// queued, at most maxWatchBatch watches a message (pumpStream). Owned by
// the client (its wg); exits when st ends.
func (m *lacMux) run(st *watchStream) {
	c := m.c
	defer c.wg.Done()
	bc, err := c.bookies.client(st.ctx, m.bookie)
	if err != nil {
		m.broken(st, err)
		return
	}
	next := func() ([]*bookiev1.WatchLacRequest, error) {
		queued, ok := m.take(st)
		if !ok {
			return nil, context.Cause(st.ctx)
		}
		var msgs []*bookiev1.WatchLacRequest
		for len(queued) > 0 {
			n := min(len(queued), maxWatchBatch)
			msgs = append(msgs, &bookiev1.WatchLacRequest{Watches: queued[:n]})
			queued = queued[n:]
		}
		return msgs, nil
	}
	pumpStream(c, bc.WatchLac(st.ctx), next, func() {},
		func(resp *bookiev1.WatchLacResponse) { m.route(st, resp) },
		func(err error) { m.broken(st, err) })
}
