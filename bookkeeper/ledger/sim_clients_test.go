package ledger_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// The wrappers: the I/O side a real client would have, in miniature. Each
// carries out its machine's actions as messages and feeds answers back.

// endpoint is what every client shares: a name on the network, liveness,
// and its requests in flight with the failure to report on a timeout.
type endpoint struct {
	w           *world
	name        string
	alive       bool
	nextReq     int
	outstanding map[int]ledger.Event // request id → failure event (nil: none)
	requestsTo  []string             // every bookie a request went to, in order
	sentAt      map[int]int          // request id → step it was sent
	feed        func(ledger.Event)
}

func newEndpoint(w *world, prefix string) endpoint {
	w.nextClient++
	return endpoint{w: w, name: fmt.Sprintf("%s%d", prefix, w.nextClient), alive: true, outstanding: map[int]ledger.Event{}, sentAt: map[int]int{}}
}

// request sends a request to bookie to; serve runs there (if it is up)
// and replies through the network.
func (e *endpoint) request(to, kind string, entry int64, onTimeout ledger.Event, serve func(b *bookie, reply func(ledger.Event))) {
	e.nextReq++
	id := e.nextReq
	e.outstanding[id] = onTimeout
	e.sentAt[id] = e.w.steps
	e.requestsTo = append(e.requestsTo, to)
	w := e.w
	w.send(e.name, to, kind, entry, false, func() {
		b := w.bookies[to]
		if !b.up {
			return
		}
		serve(b, func(ev ledger.Event) {
			w.send(to, e.name, kind+"-resp", entry, false, func() { e.answer(id, ev) })
		})
	})
}

// call runs op at the catalog when the message is delivered, then done
// back at the client when the reply is.
func (e *endpoint) call(kind string, op func() func()) {
	w := e.w
	w.send(e.name, "catalog", kind, -1, true, func() {
		done := op()
		w.send("catalog", e.name, kind+"-resp", -1, true, func() {
			if e.alive {
				done()
			}
		})
	})
}

func (e *endpoint) answer(id int, ev ledger.Event) {
	if !e.alive {
		return
	}
	delete(e.outstanding, id) // a late answer after a timeout still goes in: machines must cope
	delete(e.sentAt, id)
	e.w.logf("%s <- %v", e.name, ev)
	e.feed(ev)
}

// timeoutOne reports the failure of one random request outstanding for
// at least the world's timeout.
func (e *endpoint) timeoutOne() bool {
	var old []int
	for _, id := range e.pendingIDs() {
		if e.w.steps-e.sentAt[id] >= e.w.timeoutAfter {
			old = append(old, id)
		}
	}
	if len(old) == 0 || !e.alive {
		return false
	}
	e.timeout(old[e.w.rng.IntN(len(old))])
	return true
}

func (e *endpoint) timeoutAll() {
	for _, id := range e.pendingIDs() {
		e.timeout(id)
	}
}

func (e *endpoint) timeout(id int) {
	ev, ok := e.outstanding[id]
	if !ok || !e.alive {
		return
	}
	delete(e.outstanding, id)
	delete(e.sentAt, id)
	if ev != nil {
		e.w.logf("%s timeout -> %v", e.name, ev)
		e.feed(ev)
	}
}

func (e *endpoint) pendingIDs() []int {
	ids := make([]int, 0, len(e.outstanding))
	for id := range e.outstanding {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (e *endpoint) crash() {
	e.w.logf("crash client %s", e.name)
	e.alive = false
	clear(e.outstanding)
	clear(e.sentAt)
}

// writerClient wraps the ledger's one Writer.
type writerClient struct {
	endpoint
	lw      *ledger.Writer
	meta    catalog.LedgerMetadata // the catalog record as it last read or wrote it
	stopped bool
	closed  bool
	closing bool
	acksFed map[int64]map[string]bool // entry → bookies whose ack was fed to the writer
}

// halfAcked reports whether the oldest unacknowledged entry has some acks
// but not Qa: the moment a zombie-race nemesis moves the lease.
func (c *writerClient) halfAcked() bool {
	if c.lw.Pending() == 0 {
		return false
	}
	n := len(c.acksFed[c.lw.LAC()+1])
	return n > 0 && n < c.w.rep.AckQuorum
}

func newWriterClient(w *world) *writerClient {
	lw, err := ledger.NewWriter(w.cfg, w.cat.meta.Ensembles[0].Bookies)
	if err != nil {
		panic(err)
	}
	c := &writerClient{endpoint: newEndpoint(w, "w"), lw: lw, meta: cloneMeta(w.cat.meta), acksFed: map[int64]map[string]bool{}}
	c.feed = c.step
	return c
}

func (c *writerClient) append() {
	entry := c.lw.NextEntry()
	payload := fmt.Appendf(nil, "e%d/%x", entry, c.w.rng.Uint32())
	if _, taken := c.w.payloads[entry]; !taken {
		c.w.payloads[entry] = payload // assigned before the adds go out
	}
	acts, err := c.lw.Step(ledger.Append{Payload: c.w.payloads[entry]})
	if err != nil {
		return // backpressure, closed, stopped
	}
	c.w.logf("%s append e%d", c.name, entry)
	c.handle(acts)
}

func (c *writerClient) step(ev ledger.Event) {
	if a, ok := ev.(ledger.AddAcked); ok {
		if c.acksFed[a.Entry] == nil {
			c.acksFed[a.Entry] = map[string]bool{}
		}
		c.acksFed[a.Entry][a.Bookie] = true
	}
	acts, err := c.lw.Step(ev)
	if err != nil {
		c.w.violate("%s: writer refused %v: %v", c.name, ev, err)
	}
	c.handle(acts)
}

func (c *writerClient) handle(acts []ledger.Action) {
	w := c.w
	for _, a := range acts {
		switch a := a.(type) {
		case ledger.SendAdd:
			c.request(a.Bookie, "add", a.Entry, ledger.AddFailed{Bookie: a.Bookie, Entry: a.Entry, Reason: ledger.FailUnavailable},
				func(b *bookie, reply func(ledger.Event)) { b.add(a, reply) })
		case ledger.SendWriteLac:
			w.send(c.name, a.Bookie, "write-lac", a.LAC, false, func() {
				if b := w.bookies[a.Bookie]; b.up {
					b.lac = max(b.lac, a.LAC)
				}
			})
		case ledger.Acknowledge:
			w.logf("%s acknowledged e%d", c.name, a.Entry)
			w.onAck(a.Entry)
		case ledger.EnsembleChangeNeeded:
			c.call("ensemble-change", func() func() { return c.changeEnsemble(a) })
		case ledger.Stopped:
			w.logf("%s stopped: %v", c.name, a.Err)
			c.stopped = true
		case ledger.CloseLedger:
			c.call("close", func() func() {
				m := cloneMeta(c.meta)
				m.State = catalog.LedgerClosed
				_, err := w.cat.update(withEnd(m, a.LastEntry)) // a conflict: recovery got there first
				w.logf("%s close at e%d: %v", c.name, a.LastEntry, err)
				return func() { c.closed, c.stopped = err == nil, err != nil }
			})
		}
	}
}

// changeEnsemble runs at the catalog: pick live replacements, store the
// new segment with compare-and-set, and answer the writer.
func (c *writerClient) changeEnsemble(a ledger.EnsembleChangeNeeded) func() {
	w := c.w
	cur := cloneMeta(w.cat.meta)
	if cur.Version != c.meta.Version {
		c.meta = cur // only recovery changes the record under an OPEN writer
	}
	if cur.State != catalog.LedgerOpen {
		return func() { c.step(ledger.Stop{Err: fmt.Errorf("ledger is %v: %w", cur.State, ledger.ErrFenced)}) }
	}
	var spare []string
	for _, id := range w.order {
		if w.bookies[id].up && !slices.Contains(a.Ensemble, id) {
			spare = append(spare, id)
		}
	}
	w.rng.Shuffle(len(spare), func(i, j int) { spare[i], spare[j] = spare[j], spare[i] })
	ens := slices.Clone(a.Ensemble)
	var rejoined []string
	for i, b := range ens {
		if slices.Contains(a.Failed, b) {
			if len(spare) == 0 {
				// As the client does: with no spare, a failed bookie that is
				// up again (restarted, maybe having lost unsynced data)
				// keeps its position and gets the pending entries again.
				if w.bookies[b].up {
					rejoined = append(rejoined, b)
					continue
				}
				return func() { c.step(ledger.EnsembleChangeFailed{Err: errors.New("no spare bookie")}) }
			}
			ens[i], spare = spare[0], spare[1:]
		}
	}
	if len(rejoined) > 0 {
		w.rejoins++
		w.logf("catalog: %s rejoins %v from e%d", c.name, rejoined, a.FromEntry)
	}
	if len(rejoined) == len(a.Failed) { // the catalog is unchanged
		return func() { c.step(ledger.BookieReplaced{FirstEntry: a.FromEntry, Ensemble: ens, Rejoined: rejoined}) }
	}
	segs := cur.Ensembles
	if last := segs[len(segs)-1]; last.FirstEntry == a.FromEntry {
		segs[len(segs)-1].Bookies = ens
	} else {
		cur.Ensembles = append(segs, catalog.EnsembleSegment{FirstEntry: a.FromEntry, Bookies: ens})
	}
	next, err := w.cat.update(cur)
	if err != nil {
		w.violate("%s: ensemble change from e%d refused by the catalog: %v", c.name, a.FromEntry, err)
		return func() { c.step(ledger.Stop{Err: err}) }
	}
	c.meta = cloneMeta(next)
	w.logf("catalog: %s segment e%d -> %v", c.name, a.FromEntry, ens)
	return func() { c.step(ledger.BookieReplaced{FirstEntry: a.FromEntry, Ensemble: ens, Rejoined: rejoined}) }
}

// recoveryClient is a new writer recovering the ledger (the lease moved).
type recoveryClient struct {
	endpoint
	rec     *ledger.Recovery
	version int64
	done    bool // the ledger is closed and this client saw it
	failed  bool
}

func startRecovery(w *world) *recoveryClient {
	c := &recoveryClient{endpoint: newEndpoint(w, "r")}
	c.feed = c.step
	w.recoveries = append(w.recoveries, c)
	w.logf("%s starts recovery (writer LAC e%d, next e%d)", c.name, w.writer.lw.LAC(), w.writer.lw.NextEntry())
	c.call("mark-in-recovery", func() func() {
		cur := cloneMeta(w.cat.meta)
		switch cur.State {
		case catalog.LedgerClosed:
			return func() { c.done = true }
		case catalog.LedgerOpen:
			cur.State = catalog.LedgerInRecovery
			next, err := w.cat.update(cur)
			if err != nil {
				w.violate("%s: mark IN_RECOVERY: %v", c.name, err)
				return func() { c.failed = true }
			}
			cur = cloneMeta(next)
		}
		return func() {
			rec, err := ledger.NewRecovery(w.cfg, cur.Ensembles)
			if err != nil {
				panic(err)
			}
			c.rec, c.version = rec, cur.Version
			c.handle(rec.Start())
		}
	})
	return c
}

func (c *recoveryClient) active() bool { return c.alive && !c.done && !c.failed }

func (c *recoveryClient) step(ev ledger.Event) {
	acts, err := c.rec.Step(ev)
	if err != nil {
		c.w.violate("%s: recovery refused %v: %v", c.name, ev, err)
	}
	c.handle(acts)
}

func (c *recoveryClient) handle(acts []ledger.Action) {
	w := c.w
	for _, a := range acts {
		switch a := a.(type) {
		case ledger.SendFence:
			//lint:ignore S1016 an action and the failure event it may cause are different things that happen to share fields
			c.request(a.Bookie, "fence", -1, ledger.FenceFailed{Bookie: a.Bookie}, func(b *bookie, reply func(ledger.Event)) {
				b.fenced = true
				reply(ledger.FenceOK{Bookie: b.id, LAC: b.lac})
			})
		case ledger.SendRecoveryRead:
			c.request(a.Bookie, "recovery-read", a.Entry, ledger.ReadFailed{Bookie: a.Bookie, Entry: a.Entry}, func(b *bookie, reply func(ledger.Event)) {
				if a.Fence {
					b.fenced = true
				}
				if p, ok := b.has(a.Entry); ok {
					reply(ledger.ReadOK{Bookie: b.id, Entry: a.Entry, Payload: p})
				} else {
					if !b.fenced {
						w.logf("%s: no such entry e%d, and not fenced (an unfenced recovery read)", b.id, a.Entry)
					}
					reply(ledger.ReadNoEntry{Bookie: b.id, Entry: a.Entry})
				}
			})
		case ledger.SendAdd:
			c.request(a.Bookie, "recovery-add", a.Entry, ledger.AddFailed{Bookie: a.Bookie, Entry: a.Entry, Reason: ledger.FailUnavailable},
				func(b *bookie, reply func(ledger.Event)) { b.add(a, reply) })
		case ledger.CloseLedger:
			w.decisions = append(w.decisions, a.LastEntry)
			w.logf("%s decided the end is e%d", c.name, a.LastEntry)
			c.call("close", func() func() {
				cur := cloneMeta(w.cat.meta)
				if cur.State == catalog.LedgerClosed {
					return func() { c.done = true } // another recovery (or the writer) won
				}
				if cur.Version != c.version {
					return func() { c.failed = true }
				}
				cur.State = catalog.LedgerClosed
				if _, err := w.cat.update(withEnd(cur, a.LastEntry)); err != nil {
					w.violate("%s: close at e%d refused: %v", c.name, a.LastEntry, err)
				}
				return func() { c.done = true }
			})
		case ledger.RecoveryFailed:
			w.logf("%s failed: %v", c.name, a.Err)
			c.failed = true
		}
	}
}

// readerClient tails the ledger in order, as a fetch service would.
type readerClient struct {
	endpoint
	rd       *ledger.Reader
	meta     catalog.LedgerMetadata
	next     int64 // next entry to deliver
	inflight bool
}

func newReaderClient(w *world) *readerClient {
	c := &readerClient{endpoint: newEndpoint(w, "rd"), meta: cloneMeta(w.cat.meta)}
	rd, err := ledger.NewReader(w.cfg, c.meta)
	if err != nil {
		panic(err)
	}
	c.rd = rd
	c.feed = c.step
	w.readers = append(w.readers, c)
	return c
}

func (c *readerClient) step(ev ledger.Event) {
	acts, err := c.rd.Step(ev)
	if err != nil {
		c.w.violate("%s: reader refused %v: %v", c.name, ev, err)
	}
	for _, a := range acts {
		switch a := a.(type) {
		case ledger.SendRead:
			//lint:ignore S1016 an action and the failure event it may cause are different things that happen to share fields
			c.request(a.Bookie, "read", a.Entry, ledger.ReadFailed{Bookie: a.Bookie, Entry: a.Entry}, func(b *bookie, reply func(ledger.Event)) {
				if p, ok := b.has(a.Entry); ok {
					reply(ledger.ReadOK{Bookie: b.id, Entry: a.Entry, Payload: p})
				} else {
					reply(ledger.ReadNoEntry{Bookie: b.id, Entry: a.Entry})
				}
			})
		case ledger.Deliver:
			c.deliver(a)
		case ledger.ReadError:
			c.inflight = false
			c.refresh()
		}
	}
}

func (c *readerClient) deliver(a ledger.Deliver) {
	w := c.w
	c.inflight = false
	end := w.cat.closedEnd
	switch {
	case a.Entry != c.next:
		w.violate("%s: delivered entry %d, expected %d (out of order)", c.name, a.Entry, c.next)
	case string(a.Payload) != string(w.payloads[a.Entry]):
		w.violate("%s: entry %d is %q, the writer wrote %q", c.name, a.Entry, a.Payload, w.payloads[a.Entry])
	case a.Entry > w.maxAcked && (end == nil || a.Entry > *end):
		w.violate("%s: read entry %d beyond every acknowledged entry (%d) of an open ledger (dirty read)", c.name, a.Entry, w.maxAcked)
	case end != nil && a.Entry > *end:
		w.violate("%s: read entry %d beyond the closed end %d", c.name, a.Entry, *end)
	}
	w.logf("%s delivered e%d", c.name, a.Entry)
	c.next = a.Entry + 1
}

// pollLac asks a bookie of the last segment for its LAC.
func (c *readerClient) pollLac() {
	segs := c.meta.Ensembles
	bookies := segs[len(segs)-1].Bookies
	b := bookies[c.w.rng.IntN(len(bookies))]
	c.request(b, "read-lac", -1, nil, func(bk *bookie, reply func(ledger.Event)) { reply(ledger.LacLearned{LAC: bk.lac}) })
}

func (c *readerClient) readNext() bool {
	if c.inflight || !c.rd.Readable(c.next) {
		return false
	}
	c.inflight = true
	c.step(ledger.Read{Entry: c.next})
	return true
}

func (c *readerClient) refresh() {
	w := c.w
	c.call("get-ledger", func() func() {
		m := cloneMeta(w.cat.meta)
		return func() {
			if m.Version <= c.meta.Version {
				return // an older answer overtaken by a newer one
			}
			c.meta = m
			c.step(ledger.MetadataChanged{Ensembles: m.Ensembles, Closed: m.State.Sealed(), LastEntry: m.LastEntry})
		}
	})
}

// finished: the reader read the whole closed ledger.
func (c *readerClient) finished() bool {
	end := c.w.cat.closedEnd
	return !c.alive || (end != nil && c.next > *end)
}
