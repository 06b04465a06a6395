package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Entry is one entry read from a ledger.
type Entry struct {
	ID      int64
	Payload []byte
}

// Reader reads one ledger with the rules of ledger.Reader: never beyond
// the LAC of an open ledger (so never an entry that is not acknowledged),
// never beyond the last entry of a closed one, from one replica of the
// entry's write set with a speculative second replica after
// SpeculativeReadTimeout, every entry's checksum verified.
//
// A Reader has no goroutines between calls: each call starts its RPCs and
// waits for all of them (cancelling the ones it no longer needs) before it
// returns, so every request's answer reaches the machine. Its methods are
// safe for concurrent use but run one at a time (a WaitLAC holds up a
// Read); use one Reader per tailing goroutine.
type Reader struct {
	c  *Client
	id catalog.LedgerID

	// mu serializes calls; it guards everything below. Leaf lock apart from
	// the registry's, which calls under it take briefly.
	mu          sync.Mutex
	meta        catalog.LedgerMetadata
	rd          *ledger.Reader
	lastRefresh time.Time
	// lacFirst is the index in the last ensemble of the bookie WaitLAC
	// polls first: the one whose answer won last time.
	lacFirst int
	// lacAt, lacGap: when WaitLAC last saw the LAC advance (the reader's
	// opening before that) and the usual time between advances (a moving
	// average, 0 until two were seen); they set its speculation delay.
	lacAt  time.Time
	lacGap time.Duration
}

// OpenReader reads the ledger's metadata and returns a reader of it.
func (c *Client) OpenReader(ctx context.Context, id catalog.LedgerID) (*Reader, error) {
	ctx, leave, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	m, err := c.getLedger(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.newReader(m)
}

func (c *Client) newReader(m catalog.LedgerMetadata) (*Reader, error) {
	rd, err := ledger.NewReader(c.cfg.ledgerConfig(m.Replication), m)
	if err != nil {
		return nil, fmt.Errorf("open reader of ledger %d: %w", m.ID, err)
	}
	now := c.cfg.Now()
	return &Reader{c: c, id: m.ID, meta: m, rd: rd, lastRefresh: now, lacAt: now}, nil
}

// ID is the ledger's id.
func (r *Reader) ID() catalog.LedgerID { return r.id }

// Metadata is the ledger's metadata as the reader last read it.
func (r *Reader) Metadata() catalog.LedgerMetadata {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.meta
}

// LAC is the highest entry the reader may return now: the LAC it learned
// on an open ledger (-1 before any), the last entry of a closed one.
func (r *Reader) LAC() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rd.LAC()
}

// LearnLAC tells the reader a LAC another reader of the same ledger
// learned from a bookie (a tail watcher long-polling while this reader
// serves reads), so Read need not ask the bookies again. A LAC is a fact
// about the ledger, whoever learned it; a lower one than known is ignored.
func (r *Reader) LearnLAC(lac int64) {
	if lac < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rd.LAC() < lac && !r.meta.State.Sealed() {
		r.step(ledger.LacLearned{LAC: lac})
	}
}

// PollLAC asks the bookies of an open ledger for their LAC once, without
// waiting for it to move, and returns the LAC known (the last entry of a
// sealed ledger). A bookie that says the ledger is fenced makes it re-read
// the metadata: a ledger closed meanwhile reports its last entry.
func (r *Reader) PollLAC(ctx context.Context) (int64, error) {
	ctx, leave, err := r.c.enter(ctx)
	if err != nil {
		return -1, err
	}
	defer leave()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.meta.State.Sealed() {
		if _, fenced, _ := r.pollLac(ctx, -1, 0, 0); fenced {
			// A recovery fenced the ledger (or its writer closed it):
			// the catalog has, or soon has, its end, which may be past
			// every bookie's LAC.
			if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
				return r.rd.LAC(), err
			}
		}
	}
	return r.rd.LAC(), ctxErr(ctx)
}

// Read returns entries first.. in order, up to last, the readable bound
// (LAC) and MaxReadBytes of payload — at least one entry. When first is
// beyond the LAC it asks the bookies for their LAC once; if first is still
// not readable it fails with ledger.ErrNotReadable (use WaitLAC to wait).
// When an entry cannot be read from any replica of an open ledger, the
// reader re-reads the metadata (a newer ensemble segment may hold it) and
// tries once more. An error after some entries were read returns those
// entries and no error; the next Read meets the error.
func (r *Reader) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	ctx, leave, err := r.c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	if first < 0 || last < first {
		return nil, fmt.Errorf("read ledger %d: %w: entries %d..%d", r.id, ErrInvalidArgument, first, last)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.rd.Readable(first) && !r.meta.State.Sealed() {
		r.pollLac(ctx, -1, 0, 0)
	}
	if !r.rd.Readable(first) {
		return nil, fmt.Errorf("read ledger %d entry %d: %w (readable up to %d)", r.id, first, ledger.ErrNotReadable, r.rd.LAC())
	}
	return r.readRange(ctx, first, min(last, r.rd.LAC()))
}

// WaitLAC returns the LAC once it is above previous (at once if the reader
// already knows one). On an open ledger it long-polls the bookies of the
// last ensemble segment (ReadLac; the first answer above previous wins) in
// rounds of LacPollTimeout; a round without progress re-reads the metadata
// (at most every MetadataRefreshInterval, or at once when no bookie
// answered), to learn that the ledger was closed or its ensemble changed.
// On a closed ledger whose last entry is not above previous it returns
// ErrLedgerSealed. When ctx ends first it returns the LAC known and ctx's
// error.
func (r *Reader) WaitLAC(ctx context.Context, previous int64) (int64, error) {
	lac, _, err := r.WaitLACEntries(ctx, previous, 0)
	return lac, err
}

// WaitLACEntries is WaitLAC that also asks the bookie that answers for the
// entries the advance made readable, within maxBytes of payload (0: none),
// so a tail reader needs no read after each advance. It returns those it
// got — verified, from previous+1 on, in order, not beyond the LAC — which
// may be fewer than the advance (none when the reader already knew a LAC
// above previous, the bookie lacks one, the byte bound): read the rest.
func (r *Reader) WaitLACEntries(ctx context.Context, previous int64, maxBytes int) (int64, []Entry, error) {
	ctx, leave, err := r.c.enter(ctx)
	if err != nil {
		return -1, nil, err
	}
	defer leave()
	if previous < -1 || maxBytes < 0 {
		return -1, nil, fmt.Errorf("wait for ledger %d LAC: %w: previous %d, max bytes %d", r.id, ErrInvalidArgument, previous, maxBytes)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg := r.c.cfg
	failures := 0
	var ents []Entry
	for {
		if lac := r.rd.LAC(); lac > previous {
			return lac, ents, nil
		}
		if r.meta.State.Sealed() {
			return r.rd.LAC(), nil, fmt.Errorf("wait for ledger %d LAC above %d: %w at entry %d", r.id, previous, ErrLedgerSealed, r.rd.LAC())
		}
		wait := cfg.LacPollTimeout
		if dl, ok := ctx.Deadline(); ok {
			wait = max(min(wait, time.Until(dl)), 0)
		}
		var allFailed, fenced bool
		allFailed, fenced, ents = r.pollLac(ctx, previous, wait, maxBytes)
		if err := ctx.Err(); err != nil {
			return r.rd.LAC(), nil, fmt.Errorf("wait for ledger %d LAC above %d: %w", r.id, previous, ctxErr(ctx))
		}
		if r.rd.LAC() > previous {
			continue
		}
		if fenced || allFailed || cfg.Now().Sub(r.lastRefresh) >= cfg.MetadataRefreshInterval {
			// A fenced bookie means the writer closed the ledger (and said
			// so) or a recovery began: the catalog has, or soon will have,
			// its end.
			if err := r.refresh(ctx); err != nil && ctx.Err() == nil && !allFailed {
				return r.rd.LAC(), nil, err
			}
		}
		if fenced && !r.meta.State.Sealed() {
			// Fenced but not closed yet (a recovery under way): look again
			// shortly rather than spinning on answers that come at once.
			if err := sleep(ctx, fencedRecheck); err != nil {
				return r.rd.LAC(), nil, fmt.Errorf("wait for ledger %d LAC above %d: %w", r.id, previous, ctxErr(ctx))
			}
			continue
		}
		if allFailed {
			if err := sleep(ctx, cfg.backoff(failures)); err != nil {
				return r.rd.LAC(), nil, fmt.Errorf("wait for ledger %d LAC above %d: %w", r.id, previous, ctxErr(ctx))
			}
			failures++
		} else {
			failures = 0
		}
	}
}

// lacSpeculation is how long a LAC long-poll waits on one bookie before it
// also asks the next: SpeculativeLacTimeout while the LAC advances often;
// on a tail that advances seldom, twice its usual gap (or the time since
// its last advance, if longer), at most the round. Long-polls that wait in
// vain on every bookie at once cost as many calls as there are bookies per
// round: with 1,024 mostly quiet tails, about 12,000 ReadLac calls a
// second and most of a core. A stalled first bookie then costs up to this
// long, once (the answering bookie is asked first from then on). Called
// with r.mu held.
func (r *Reader) lacSpeculation(wait time.Duration) time.Duration {
	d := r.c.cfg.SpeculativeLacTimeout
	gap := max(r.lacGap, r.c.cfg.Now().Sub(r.lacAt))
	return max(d, min(2*gap, wait))
}

// noteAdvance records an advance of the LAC seen by a long-poll. Called
// with r.mu held.
func (r *Reader) noteAdvance() {
	now := r.c.cfg.Now()
	g := now.Sub(r.lacAt)
	if r.lacGap == 0 {
		r.lacGap = g
	} else {
		r.lacGap = (3*r.lacGap + g) / 4
	}
	r.lacAt = now
}

// Refresh re-reads the ledger's metadata from the catalog (a close or an
// ensemble change) and returns it.
func (r *Reader) Refresh(ctx context.Context) (catalog.LedgerMetadata, error) {
	ctx, leave, err := r.c.enter(ctx)
	if err != nil {
		return catalog.LedgerMetadata{}, err
	}
	defer leave()
	r.mu.Lock()
	defer r.mu.Unlock()
	err = r.refresh(ctx)
	return r.meta, err
}

func (r *Reader) refresh(ctx context.Context) error {
	r.lastRefresh = r.c.cfg.Now()
	m, err := r.c.getLedger(ctx, r.id)
	if err != nil {
		return err
	}
	if m.Version <= r.meta.Version {
		return nil
	}
	if _, err := r.rd.Step(ledger.MetadataChanged{Ensembles: m.Ensembles, Closed: m.State.Sealed(), LastEntry: m.LastEntry}); err != nil {
		return fmt.Errorf("ledger %d metadata version %d: %w", r.id, m.Version, err)
	}
	r.meta = m
	return nil
}

// pollLac long-polls the bookies of the last segment for a LAC above
// previous, waiting up to wait (a watch on each bookie's shared WatchLac
// stream): first the one that answered first last time, then one more
// each lacSpeculation without progress (or at once when a poll fails). The
// first answer above previous wins and the others are cancelled; every
// poll's wait ends at the same deadline.
//
// A wait of 0 is a one-off question ("what is the LAC now?", one ReadLac
// call per bookie) and asks every bookie of the segment at once, taking
// the highest answer: one bookie's LAC may be behind the others' for good
// (an explicit LAC is not journaled, so a bookie restarted after the
// writer's last push knows only the LAC its last entry carried, and an
// idle writer pushes no more), and the first answer alone would then
// report a short end for as long as the ledger stays idle. It returns once
// every bookie answered, or SpeculativeLacTimeout after E−Qa+1 answered
// (they include one bookie of every ack quorum).
//
// It feeds the best answer to the machine and reports whether every bookie
// was asked and none answered, and whether one said the ledger is fenced
// (then it stops too: the LAC will not rise any more).
func (r *Reader) pollLac(ctx context.Context, previous int64, wait time.Duration, maxEntryBytes int) (allFailed, fenced bool, ents []Entry) {
	c := r.c
	bookies := r.meta.Ensembles[len(r.meta.Ensembles)-1].Bookies
	n := len(bookies)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		i      int
		lac    int64
		fenced bool
		ents   []Entry
		err    error
	}
	ch := make(chan answer, n)
	var wg sync.WaitGroup
	deadline := time.Now().Add(wait)
	launched := 0
	launch := func() {
		i := (r.lacFirst + launched) % n
		launched++
		left := max(time.Until(deadline), 0)
		wg.Go(func() {
			var (
				lac    int64
				fenced bool
				ents   []Entry
				err    error
			)
			if wait > 0 {
				lac, fenced, ents, err = c.watchLac(pctx, r.id, bookies[i], previous, left, maxEntryBytes)
			} else {
				cctx, cancel := context.WithTimeout(pctx, c.cfg.ReadTimeout)
				defer cancel()
				lac, fenced, ents, err = c.readLac(cctx, r.id, bookies[i], previous, maxEntryBytes)
			}
			ch <- answer{i, lac, fenced, ents, err}
		})
	}
	oneOff := wait <= 0
	launch()
	if oneOff {
		for launched < n {
			launch()
		}
	}
	known := r.rd.LAC()
	specDelay := r.lacSpeculation(wait)
	spec := time.NewTimer(specDelay)
	defer spec.Stop()
	// A one-off question may end before every bookie answered once it
	// heard enough of them (and gave the rest SpeculativeLacTimeout more).
	enough := max(n-r.meta.Replication.AckQuorum+1, 1)
	graceC := (<-chan time.Time)(nil)
	best, failures, heard := int64(-1), 0, 0
	for answered := 0; answered < launched; {
		select {
		case a := <-ch:
			answered++
			if a.err != nil {
				failures++
				if launched < n {
					launch()
				}
				continue
			}
			if a.lac > best {
				best = a.lac
				if oneOff {
					ents, r.lacFirst = a.ents, a.i
				}
			}
			if a.fenced {
				fenced = true
				answered = launched // done
			}
			if oneOff {
				if heard++; heard == enough && answered < launched {
					grace := time.NewTimer(c.cfg.SpeculativeLacTimeout)
					defer grace.Stop()
					graceC = grace.C
				}
				continue
			}
			if a.lac > previous {
				ents = a.ents
				r.lacFirst = a.i
				if a.lac > known {
					r.noteAdvance()
				}
				answered = launched // done
			}
		case <-graceC:
			answered = launched // enough answers; the rest are late
		case <-spec.C:
			if launched < n {
				launch()
				spec.Reset(specDelay)
			}
		}
	}
	if oneOff && best > known {
		r.noteAdvance()
	}
	cancel()
	wg.Wait()
	if best >= 0 {
		r.step(ledger.LacLearned{LAC: best})
	}
	return launched == n && failures == n, fenced, ents
}

// fencedRecheck is how often WaitLAC re-reads the metadata of a ledger its
// bookies say is fenced while the catalog does not show it closed yet.
const fencedRecheck = 20 * time.Millisecond

// step feeds an answer or a timer event; the machine refuses none of
// those, so a refusal is a bug here.
func (r *Reader) step(ev ledger.Event) []ledger.Action {
	acts, err := r.rd.Step(ev)
	if err != nil {
		panic(fmt.Sprintf("ledger client: reader of ledger %d refused %v: %v", r.id, ev, err))
	}
	return acts
}

// readRange reads entries first..last (all readable) with up to ReadAhead
// reads in flight, delivering in order until MaxReadBytes. It returns only
// after every RPC it started answered and was fed to the machine: the
// ones not needed any more are cancelled, and replicas the machine asks for
// meanwhile are answered ReadFailed without a call.
func (r *Reader) readRange(ctx context.Context, first, last int64) ([]Entry, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rr := &rangeRead{
		r: r, ctx: rctx, next: first, issued: first, last: last,
		// One message per RPC; at most one RPC per SendRead, so the
		// capacity covers every RPC started.
		answers: make(chan []readAnswer, r.c.cfg.ReadAhead*r.meta.Replication.WriteQuorum),
		got:     map[int64][]byte{}, errs: map[int64]error{},
		spec: map[int64]time.Time{}, retried: map[int64]bool{},
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		rr.collect(ctx)
		if rr.next > last || rr.full || rr.failErr != nil {
			break
		}
		rr.issue()
		if rr.failErr != nil {
			break
		}
		rr.flush()
		if rr.outstanding == 0 {
			panic(fmt.Sprintf("ledger client: reading ledger %d entry %d with no request in flight", r.id, rr.next))
		}
		rr.wait(ctx, timer)
	}
	cancel()
	rr.drain()
	if len(rr.out) > 0 {
		return rr.out, nil
	}
	return nil, rr.failErr
}

// rangeRead is one readRange call: the reader machine's asks not sent yet,
// the RPCs in flight, and the entries and errors that came back, until
// they are delivered in order. One goroutine (readRange's) uses it; the
// RPC goroutines only send on answers.
type rangeRead struct {
	r   *Reader
	ctx context.Context // the RPCs'; cancelled when readRange is done
	wg  sync.WaitGroup

	// next is the next entry to deliver, issued the next to ask the machine
	// for, last the range's end; issued-next <= ReadAhead.
	next, issued, last int64
	out                []Entry
	size               int  // bytes in out
	full               bool // out reached MaxReadBytes
	failErr            error

	// sends are the reads the machine asked for and flush has not sent;
	// outstanding the RPCs started and not yet answered on answers.
	sends       []ledger.SendRead
	outstanding int
	answers     chan []readAnswer
	// draining: the range is done; reads the machine asks for now fail at
	// once instead of being sent.
	draining bool

	got     map[int64][]byte    // delivered by the machine, not yet in out
	errs    map[int64]error     // failed for good by the machine
	spec    map[int64]time.Time // entry → when to ask another replica
	retried map[int64]bool      // entries re-asked after a metadata refresh
}

// feed steps one bookie answer (and the LAC it carried) into the machine.
// A copy found bad (the bookie lacks an entry of its write set, or the
// entry failed verification) is reported for re-replication (damage.go).
func (rr *rangeRead) feed(a readAnswer) {
	if a.lac >= 0 {
		rr.handle(rr.r.step(ledger.LacLearned{LAC: a.lac}))
	}
	switch ev := a.ev.(type) {
	case ledger.ReadNoEntry:
		rr.r.c.noteDamage(rr.r.meta, ev.Bookie, ev.Entry, catalog.DamageMissing)
	case ledger.ReadFailed:
		if a.checkErr != nil {
			rr.r.c.noteDamage(rr.r.meta, ev.Bookie, ev.Entry, catalog.DamageChecksum)
		}
	}
	rr.handle(rr.r.step(a.ev))
}

// handle carries out the reader machine's actions.
func (rr *rangeRead) handle(acts []ledger.Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case ledger.SendRead:
			if rr.draining {
				//lint:ignore S1016 an action and the failure event it may cause are different things that happen to share fields
				rr.feed(readAnswer{ev: ledger.ReadFailed{Bookie: a.Bookie, Entry: a.Entry}, lac: -1})
				continue
			}
			rr.sends = append(rr.sends, a)
		case ledger.Deliver:
			rr.got[a.Entry] = a.Payload
			delete(rr.spec, a.Entry)
		case ledger.ReadError:
			rr.errs[a.Entry] = a.Err
			delete(rr.spec, a.Entry)
		}
	}
}

// request asks the machine for entry e and arms its speculative timeout.
func (rr *rangeRead) request(e int64) error {
	acts, err := rr.r.rd.Step(ledger.Read{Entry: e})
	if err != nil {
		return err
	}
	rr.spec[e] = time.Now().Add(rr.r.c.cfg.SpeculativeReadTimeout)
	rr.handle(acts)
	return nil
}

// collect moves the entries that arrived, in order from next, into out
// until a gap or MaxReadBytes. An entry that failed as unavailable on a
// ledger not sealed is asked once more after a metadata refresh (its
// ensemble may have changed); any other failure ends the range.
func (rr *rangeRead) collect(ctx context.Context) {
	maxBytes := rr.r.c.cfg.MaxReadBytes
	for !rr.full && rr.failErr == nil {
		if p, ok := rr.got[rr.next]; ok {
			if len(rr.out) > 0 && rr.size+len(p) > maxBytes {
				rr.full = true
				return
			}
			delete(rr.got, rr.next)
			rr.out = append(rr.out, Entry{ID: rr.next, Payload: p})
			rr.size += len(p)
			rr.next++
			rr.full = rr.size >= maxBytes
			continue
		}
		if err, ok := rr.errs[rr.next]; ok {
			delete(rr.errs, rr.next)
			r := rr.r
			// A CLOSED ledger's copies may have moved (re-replication):
			// its metadata is refreshed too before the entry is given up.
			if !rr.retried[rr.next] && (!r.meta.State.Sealed() || r.meta.State == catalog.LedgerClosed) && errors.Is(err, ledger.ErrEntryUnavailable) {
				rr.retried[rr.next] = true
				if ferr := r.refresh(ctx); ferr == nil {
					if rerr := rr.request(rr.next); rerr == nil {
						return
					}
				}
			}
			rr.failErr = fmt.Errorf("read ledger %d: %w", r.id, err)
		}
		return
	}
}

// issue asks the machine for entries ahead of next, up to ReadAhead.
func (rr *rangeRead) issue() {
	for !rr.full && rr.failErr == nil && rr.issued <= rr.last && rr.issued-rr.next < int64(rr.r.c.cfg.ReadAhead) {
		if err := rr.request(rr.issued); err != nil {
			rr.failErr = err
			return
		}
		rr.issued++
	}
}

// flush sends the reads asked so far: each run of consecutive entries of
// one bookie is one range read (readEntries), answered in one message,
// instead of an RPC per entry.
func (rr *rangeRead) flush() {
	r := rr.r
	for _, run := range readRuns(rr.sends) {
		rr.outstanding++
		rr.wg.Go(func() {
			rr.answers <- r.c.readEntries(rr.ctx, r.id, run.bookie, run.first, run.last) // capacity covers every RPC
		})
	}
	rr.sends = rr.sends[:0]
}

// wait takes the next answer, fires the speculative timeouts that are due,
// or ends the range when ctx ends.
func (rr *rangeRead) wait(ctx context.Context, timer *time.Timer) {
	var earliest time.Time
	for _, d := range rr.spec {
		if earliest.IsZero() || d.Before(earliest) {
			earliest = d
		}
	}
	var timerC <-chan time.Time
	if !earliest.IsZero() {
		timer.Reset(max(time.Until(earliest), 0))
		timerC = timer.C
	}
	ms := rr.r.c.meters
	select {
	case as := <-rr.answers:
		rr.outstanding--
		for _, a := range as {
			reason := ""
			switch ev := a.ev.(type) {
			case ledger.ReadFailed:
				reason = reasonError
				if a.checkErr != nil {
					reason = reasonChecksum
				}
				ms.bookieError(ev.Bookie, opRead, reason, 1)
			case ledger.ReadNoEntry:
				reason = reasonNoEntry
			}
			sent := len(rr.sends)
			rr.feed(a)
			if reason != "" && len(rr.sends) > sent { // the machine asks another copy
				ms.fallback(reason)
			}
		}
	case <-timerC:
		now := time.Now()
		for e, d := range rr.spec {
			if !now.Before(d) {
				rr.spec[e] = now.Add(rr.r.c.cfg.SpeculativeReadTimeout)
				rr.r.c.stats.speculativeReads.Add(1)
				sent := len(rr.sends)
				rr.handle(rr.r.step(ledger.SpeculativeTimeout{Entry: e}))
				if len(rr.sends) > sent {
					ms.fallback(reasonSpeculative)
				}
			}
		}
	case <-ctx.Done():
		rr.failErr = fmt.Errorf("read ledger %d: %w", rr.r.id, ctxErr(ctx))
	}
	timer.Stop() // Go 1.23+ timers: no stale tick after Stop or Reset
}

// drain ends the range (the caller cancelled the RPCs' context first):
// reads asked and never sent fail, and every RPC in flight is waited for
// and fed to the machine, so it ends with nothing outstanding.
func (rr *rangeRead) drain() {
	rr.draining = true
	for _, a := range slices.Clone(rr.sends) {
		//lint:ignore S1016 an action and the failure event it may cause are different things that happen to share fields
		rr.feed(readAnswer{ev: ledger.ReadFailed{Bookie: a.Bookie, Entry: a.Entry}, lac: -1})
	}
	rr.sends = nil
	for rr.outstanding > 0 {
		as := <-rr.answers
		rr.outstanding--
		for _, a := range as {
			rr.feed(a)
		}
	}
	rr.wg.Wait()
}

// readRun is a range read: entries first..last of one bookie.
type readRun struct {
	bookie      string
	first, last int64
}

// readRuns groups reads into runs of consecutive entries per bookie, in
// the order each bookie was first asked.
func readRuns(sends []ledger.SendRead) []readRun {
	if len(sends) == 0 {
		return nil
	}
	byBookie := map[string][]int64{}
	var order []string
	for _, a := range sends {
		if _, ok := byBookie[a.Bookie]; !ok {
			order = append(order, a.Bookie)
		}
		byBookie[a.Bookie] = append(byBookie[a.Bookie], a.Entry)
	}
	var runs []readRun
	for _, b := range order {
		es := byBookie[b]
		slices.Sort(es)
		es = slices.Compact(es)
		start := 0
		for i := 1; i <= len(es); i++ {
			if i == len(es) || es[i] != es[i-1]+1 {
				runs = append(runs, readRun{bookie: b, first: es[start], last: es[i-1]})
				start = i
			}
		}
	}
	return runs
}

// ReadEntries returns the payloads of entries first..last of a ledger —
// all of them, or an error. For sealed ledgers (on an open one only
// entries up to the LAC are readable); the caller bounds the range, since
// everything is held in memory.
func (c *Client) ReadEntries(ctx context.Context, id catalog.LedgerID, first, last int64) ([][]byte, error) {
	r, err := c.OpenReader(ctx, id)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for e := first; e <= last; {
		ents, err := r.Read(ctx, e, last)
		if err != nil {
			return nil, err
		}
		for _, en := range ents {
			out = append(out, en.Payload)
		}
		e = ents[len(ents)-1].ID + 1
	}
	return out, nil
}
