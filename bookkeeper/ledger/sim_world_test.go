package ledger_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// The simulated world: bookies, a network and a catalog, all in memory and
// driven one event at a time by a seeded random scheduler (or by a script,
// in the regression tests). Nothing runs concurrently and nothing reads a
// clock, so a seed replays exactly.

// msg is one message in flight. deliver runs the receiver's handler.
type msg struct {
	id       int
	from, to string
	kind     string
	entry    int64
	reliable bool // catalog calls: delayed and reordered, never dropped or duplicated
	due      int  // not deliverable before this step (a slow message)
	deliver  func()
}

func (m *msg) String() string {
	return fmt.Sprintf("#%d %s->%s %s e%d", m.id, m.from, m.to, m.kind, m.entry)
}

type world struct {
	rng     *rand.Rand
	rep     catalog.Replication
	cfg     ledger.Config
	bookies map[string]*bookie
	order   []string // bookie ids, for deterministic iteration
	net     []*msg
	nextMsg int
	cat     *catalogStore
	// Faults (zero in scripted tests).
	lossPct      int // percent of messages lost
	dupPct       int // percent of messages delivered twice
	slow         int // percent of messages delivered late, by 20..slowMax steps
	slowMax      int
	timeoutAfter int               // steps a request waits before it may time out
	cuts         map[[2]string]int // partitioned pairs of endpoints → step the cut heals

	writer         *writerClient
	recoveries     []*recoveryClient
	readers        []*readerClient
	rereplications []*rereplicatorClient
	nextClient     int
	// Re-replication (sim_rereplicate_test.go): whether this seed moves
	// copies once the ledger is closed, with the sabotaged mover, and
	// how many moves completed.
	rereplicate, rrSabotage bool
	moves                   int

	// History, for the checks.
	payloads   map[int64][]byte // what the writer assigned to each entry
	maxAcked   int64            // highest entry the writer acknowledged
	rejoins    int              // ensemble changes answered by a failed bookie that was up again
	decisions  []int64          // every recovery's CloseLedger, committed or not
	violations []string

	trace   []string
	verbose bool
	steps   int
}

func newWorld(seed uint64, rep catalog.Replication, nBookies int, cfg ledger.Config) *world {
	w := &world{
		rng:      rand.New(rand.NewPCG(seed, 0x5eed)),
		rep:      rep,
		cfg:      cfg,
		bookies:  map[string]*bookie{},
		payloads: map[int64][]byte{},
		maxAcked: -1,
	}
	for i := 1; i <= nBookies; i++ {
		id := fmt.Sprintf("b%d", i)
		w.bookies[id] = &bookie{w: w, id: id, up: true, durable: map[int64][]byte{}, unsynced: map[int64][]byte{}, entryLAC: map[int64]int64{}, lac: -1}
		w.order = append(w.order, id)
	}
	w.cat = &catalogStore{w: w, meta: catalog.NewLedger(catalog.LedgerSpec{
		Topic: "t", TopicID: "t1", Replication: rep, Ensemble: slices.Clone(w.order[:rep.Ensemble]),
		WriterOwner: "w1", WriterEpoch: 1,
	}, 1, time.Unix(0, 0))}
	return w
}

func (w *world) logf(format string, args ...any) {
	line := fmt.Sprintf("%5d ", w.steps) + fmt.Sprintf(format, args...)
	if w.verbose {
		w.trace = append(w.trace, line)
		return
	}
	w.trace = append(w.trace, line)
	if len(w.trace) > 400 {
		w.trace = slices.Delete(w.trace, 0, 200)
	}
}

func (w *world) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	w.logf("VIOLATION %s", v)
	w.violations = append(w.violations, v)
}

func (w *world) send(from, to, kind string, entry int64, reliable bool, deliver func()) {
	copies := 1
	if !reliable && w.rng.IntN(100) < w.lossPct {
		copies = 0
	} else if !reliable && w.rng.IntN(100) < w.dupPct {
		copies = 2
	}
	for c := 0; c < copies || c == 0; c++ {
		w.nextMsg++
		m := &msg{id: w.nextMsg, from: from, to: to, kind: kind, entry: entry, reliable: reliable, deliver: deliver}
		if copies == 0 {
			w.logf("lose %v", m)
			return
		}
		if c == 1 {
			w.logf("duplicate %v", m)
		}
		if w.slow > 0 && w.rng.IntN(100) < w.slow {
			m.due = w.steps + 20 + w.rng.IntN(w.slowMax-20)
		}
		w.net = append(w.net, m)
	}
}

// deliverable lists the messages that may be delivered now.
func (w *world) deliverable() []int {
	var out []int
	for i, m := range w.net {
		if m.due <= w.steps {
			out = append(out, i)
		}
	}
	return out
}

// deliverAt takes message i off the network and delivers it, unless a
// partition cuts its endpoints apart (then it is lost).
func (w *world) deliverAt(i int) {
	m := w.net[i]
	w.net = slices.Delete(w.net, i, i+1)
	if !m.reliable && w.cut(m.from, m.to) {
		w.logf("partition drops %v", m)
		return
	}
	w.logf("deliver %v", m)
	m.deliver()
}

func (w *world) cut(a, b string) bool {
	if a > b {
		a, b = b, a
	}
	until, ok := w.cuts[[2]string{a, b}]
	return ok && until > w.steps
}

// partition cuts a and b apart until step until.
func (w *world) partition(a, b string, until int) {
	if a > b {
		a, b = b, a
	}
	if w.cuts == nil {
		w.cuts = map[[2]string]int{}
	}
	w.cuts[[2]string{a, b}] = until
	w.logf("partition %s | %s until step %d", a, b, until)
}

func (w *world) dropAt(i int) {
	w.logf("drop %v", w.net[i])
	w.net = slices.Delete(w.net, i, i+1)
}

// find returns the index of the first message matching, or -1.
func (w *world) find(from, to, kind string, entry int64) int {
	return slices.IndexFunc(w.net, func(m *msg) bool {
		return (from == "" || m.from == from) && (to == "" || m.to == to) && (kind == "" || m.kind == kind) && (entry < -1 || m.entry == entry)
	})
}

// bookie is a simulated bookie holding one ledger. An add is stored at
// once (visible to reads) but acknowledged only when the bookie syncs; a
// crash loses what was not synced, and the acks waiting on it. The fence
// flag is persisted before it is answered.
type bookie struct {
	w        *world
	id       string
	up       bool
	durable  map[int64][]byte
	unsynced map[int64][]byte
	entryLAC map[int64]int64 // LAC piggybacked with each stored entry
	lac      int64
	fenced   bool
	waiting  []func() // acks released by the next sync
	lost     bool     // lost for good: disk gone, never restarted
}

// loseForGood takes the bookie down for good with its disk.
func (b *bookie) loseForGood() {
	b.w.logf("lose %s for good (%d durable entries gone)", b.id, len(b.durable))
	b.crash()
	b.lost = true
	clear(b.durable)
}

func (b *bookie) has(entry int64) ([]byte, bool) {
	if p, ok := b.unsynced[entry]; ok {
		return p, true
	}
	p, ok := b.durable[entry]
	return p, ok
}

// add serves AddEntries. reply is called with the outcome (after a sync
// for a stored entry).
func (b *bookie) add(a ledger.SendAdd, reply func(ledger.Event)) {
	if b.fenced && !a.Recovery {
		reply(ledger.AddFailed{Bookie: b.id, Entry: a.Entry, Reason: ledger.FailFenced})
		return
	}
	if want, ok := b.w.payloads[a.Entry]; !ok || !bytes.Equal(want, a.Payload) {
		b.w.violate("bookie %s asked to store entry %d as %q; the writer wrote %q", b.id, a.Entry, a.Payload, want)
	}
	b.unsynced[a.Entry] = a.Payload
	b.entryLAC[a.Entry] = a.LAC
	b.lac = max(b.lac, a.LAC)
	b.waiting = append(b.waiting, func() { reply(ledger.AddAcked{Bookie: b.id, Entry: a.Entry}) })
}

func (b *bookie) sync() {
	for e, p := range b.unsynced {
		b.durable[e] = p
	}
	clear(b.unsynced)
	waiting := b.waiting
	b.waiting = nil
	for _, f := range waiting {
		f()
	}
}

func (b *bookie) crash() {
	b.w.logf("crash %s (loses %d unsynced entries)", b.id, len(b.unsynced))
	b.up = false
	clear(b.unsynced)
	b.waiting = nil
}

func (b *bookie) restart() {
	if b.lost {
		return
	}
	b.w.logf("restart %s", b.id)
	b.up = true
	b.lac = -1
	for e := range b.durable {
		b.lac = max(b.lac, b.entryLAC[e])
	}
}

// catalogStore is the catalog's ledger record, updated with the real
// catalog rules (catalog.NextLedger: versioned compare-and-set, legal
// transitions, immutable closed ends).
type catalogStore struct {
	w         *world
	meta      catalog.LedgerMetadata
	closedEnd *int64 // set on the first close; a close never changes
}

func (c *catalogStore) update(m catalog.LedgerMetadata) (catalog.LedgerMetadata, error) {
	next, err := catalog.NextLedger(c.meta, m, time.Unix(0, 0))
	if err != nil {
		return c.meta, err
	}
	if next.State == catalog.LedgerClosed && c.closedEnd == nil {
		end := next.LastEntry
		c.closedEnd = &end
		c.w.logf("catalog: ledger CLOSED at e%d", end)
		if c.w.maxAcked > end {
			c.w.violate("ledger closed at %d but entry %d was acknowledged", end, c.w.maxAcked)
		}
	}
	c.meta = next
	return next, nil
}

func cloneMeta(m catalog.LedgerMetadata) catalog.LedgerMetadata {
	m.Ensembles = slices.Clone(m.Ensembles)
	for i := range m.Ensembles {
		m.Ensembles[i].Bookies = slices.Clone(m.Ensembles[i].Bookies)
	}
	return m
}

// withEnd sets the ledger's end (one record per entry, from offset 0).
func withEnd(m catalog.LedgerMetadata, last int64) catalog.LedgerMetadata {
	m.LastEntry, m.LastOffset = last, m.FirstOffset+last
	return m
}

func (w *world) onAck(entry int64) {
	if entry != w.maxAcked+1 {
		w.violate("writer acknowledged entry %d after %d", entry, w.maxAcked)
	}
	w.maxAcked = max(w.maxAcked, entry)
	if e := w.cat.closedEnd; e != nil && entry > *e {
		w.violate("writer acknowledged entry %d after the ledger closed at %d (acknowledged entry lost)", entry, *e)
	}
}

func (w *world) report() string {
	var b strings.Builder
	for _, v := range w.violations {
		fmt.Fprintf(&b, "violation: %s\n", v)
	}
	b.WriteString("trace (tail):\n")
	tail := w.trace
	if !w.verbose && len(tail) > 120 {
		tail = tail[len(tail)-120:]
	}
	for _, l := range tail {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}
