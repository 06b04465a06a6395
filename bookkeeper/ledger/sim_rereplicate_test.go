package ledger_test

import (
	"bytes"
	"slices"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// rereplicatorClient is client.Rereplicate in miniature
// (bookkeeper/DESIGN.md §4.1), run over the simulated network while the
// zombie writer, recoveries and readers go on: it moves a CLOSED ledger's
// copies off bookie `from` to bookie `to`. It reads the ledger from the
// catalog (an open one is refused, as the real client refuses it); for
// every entry of every segment that names `from`, whose write set holds
// from's position, it reads the entry from another member of the write
// set, checks it is what the writer wrote (the checksum check), and adds
// it to `to` as a recovery add; once `to` acknowledged every add (synced),
// one compare-and-set replaces `from` by `to` in those segments. Then,
// half the time, `from` is lost for good: its disk wiped, never back.
//
// With sabotage, the compare-and-set goes out as soon as the adds are
// sent, before any is acknowledged: `to` may lose them in a crash, and
// with `from` gone an entry can be short of copies — which finalChecks
// must report.
type rereplicatorClient struct {
	endpoint
	from, to string
	sabotage bool
	meta     catalog.LedgerMetadata
	sched    ledger.Schedule
	todo     []int64         // entries still to read, in order
	sources  map[int64][]int // entry → write-set positions still to try
	acked    map[int64]bool
	lacs     map[int64]int64 // the LAC each entry was stored with, as read
	copies   int             // adds sent
	casSent  bool
	done     bool // finished, moved or not; failed says which
	failed   bool
}

// startRereplication starts a move off a bookie of the closed ledger to
// one outside the segments that name it; nil when there is no such pair.
func startRereplication(w *world, sabotage bool) *rereplicatorClient {
	m := w.cat.meta
	var from, to string
	for _, id := range w.order {
		b := w.bookies[id]
		if b.lost || !slices.ContainsFunc(m.Ensembles, func(s catalog.EnsembleSegment) bool { return slices.Contains(s.Bookies, id) }) {
			continue
		}
		from = id
		if w.rng.IntN(2) == 0 {
			break
		}
	}
	if from == "" {
		return nil
	}
	var taken []string
	for _, s := range m.Ensembles {
		if slices.Contains(s.Bookies, from) {
			taken = append(taken, s.Bookies...)
		}
	}
	for _, id := range w.order {
		if b := w.bookies[id]; !b.lost && b.up && !slices.Contains(taken, id) {
			to = id
			break
		}
	}
	if to == "" {
		return nil
	}
	c := &rereplicatorClient{endpoint: newEndpoint(w, "rr"), from: from, to: to, sabotage: sabotage,
		sources: map[int64][]int{}, acked: map[int64]bool{}, lacs: map[int64]int64{}}
	c.feed = c.step
	w.rereplications = append(w.rereplications, c)
	w.logf("%s moves %s's copies to %s", c.name, from, to)
	c.call("get-ledger", func() func() {
		m := cloneMeta(w.cat.meta)
		return func() { c.begin(m) }
	})
	return c
}

func (c *rereplicatorClient) active() bool { return c.alive && !c.done }

func (c *rereplicatorClient) finish(failed bool, why string) {
	c.done, c.failed = true, failed
	c.w.logf("%s %s", c.name, why)
}

func (c *rereplicatorClient) begin(m catalog.LedgerMetadata) {
	if m.State != catalog.LedgerClosed {
		c.finish(true, "refused: the ledger is "+m.State.String()+", only CLOSED ledgers' copies move")
		return
	}
	sched, err := ledger.NewSchedule(m.Replication)
	if err != nil {
		panic(err)
	}
	c.meta, c.sched = m, sched
	for i, seg := range m.Ensembles {
		pos := slices.Index(seg.Bookies, c.from)
		if pos < 0 {
			continue
		}
		last := m.LastEntry
		if i+1 < len(m.Ensembles) {
			last = m.Ensembles[i+1].FirstEntry - 1
		}
		for e := seg.FirstEntry; e <= last; e++ {
			ws := sched.WriteSet(e)
			if !slices.Contains(ws, pos) {
				continue
			}
			var others []int
			for _, p := range ws {
				if p != pos {
					others = append(others, p)
				}
			}
			c.todo = append(c.todo, e)
			c.sources[e] = others
		}
	}
	c.next()
}

// segmentOf is the segment of c.meta that holds entry e.
func (c *rereplicatorClient) segmentOf(e int64) catalog.EnsembleSegment {
	seg := c.meta.Ensembles[0]
	for _, s := range c.meta.Ensembles {
		if s.FirstEntry <= e {
			seg = s
		}
	}
	return seg
}

// next reads the next entry from one of its remaining sources, or, when
// every entry was read (and, without sabotage, acknowledged by `to`),
// sends the compare-and-set.
func (c *rereplicatorClient) next() {
	if c.done || c.casSent {
		return
	}
	if len(c.todo) == 0 {
		if c.sabotage || len(c.acked) == c.copies {
			c.commit()
		}
		return
	}
	e := c.todo[0]
	srcs := c.sources[e]
	if len(srcs) == 0 {
		c.finish(true, "failed: no other copy of an entry answered")
		return
	}
	src := c.segmentOf(e).Bookies[srcs[0]]
	c.request(src, "rr-read", e, ledger.ReadFailed{Bookie: src, Entry: e}, func(b *bookie, reply func(ledger.Event)) {
		if p, ok := b.has(e); ok {
			c.lacs[e] = b.entryLAC[e]
			reply(ledger.ReadOK{Bookie: b.id, Entry: e, Payload: p})
		} else {
			reply(ledger.ReadNoEntry{Bookie: b.id, Entry: e})
		}
	})
}

func (c *rereplicatorClient) step(ev ledger.Event) {
	if c.done {
		return
	}
	switch ev := ev.(type) {
	case ledger.ReadOK:
		if len(c.todo) == 0 || c.todo[0] != ev.Entry {
			return // a late duplicate
		}
		if !bytes.Equal(ev.Payload, c.w.payloads[ev.Entry]) {
			c.sources[ev.Entry] = c.sources[ev.Entry][1:] // a damaged copy is never spread
			c.next()
			return
		}
		c.todo = c.todo[1:]
		c.copies++
		e, p, lac := ev.Entry, ev.Payload, c.lacs[ev.Entry]
		c.request(c.to, "rr-add", e, ledger.AddFailed{Bookie: c.to, Entry: e, Reason: ledger.FailUnavailable}, func(b *bookie, reply func(ledger.Event)) {
			b.add(ledger.SendAdd{Bookie: c.to, Entry: e, LAC: lac, Payload: p, Recovery: true}, reply)
		})
		c.next()
	case ledger.ReadNoEntry, ledger.ReadFailed:
		var e int64
		if r, ok := ev.(ledger.ReadNoEntry); ok {
			e = r.Entry
		} else {
			e = ev.(ledger.ReadFailed).Entry
		}
		if len(c.todo) == 0 || c.todo[0] != e {
			return
		}
		c.sources[e] = c.sources[e][1:]
		c.next()
	case ledger.AddAcked:
		c.acked[ev.Entry] = true
		c.next()
	case ledger.AddFailed:
		if !c.casSent {
			c.finish(true, "failed: the new bookie did not take an entry")
		}
	}
}

// commit replaces `from` by `to` in the segments that name it, with the
// version read at the start (a conflict fails the move; the real client
// reads again and redoes it).
func (c *rereplicatorClient) commit() {
	c.casSent = true
	w := c.w
	moved := cloneMeta(c.meta)
	for i := range moved.Ensembles {
		if p := slices.Index(moved.Ensembles[i].Bookies, c.from); p >= 0 {
			moved.Ensembles[i].Bookies[p] = c.to
		}
	}
	c.call("move-replicas", func() func() {
		_, err := w.cat.update(moved)
		return func() {
			if err != nil {
				c.finish(true, "compare-and-set lost: "+err.Error())
				return
			}
			c.finish(false, "moved")
			w.moves++
			if w.rng.IntN(2) == 0 {
				w.bookies[c.from].loseForGood()
			}
		}
	})
}
