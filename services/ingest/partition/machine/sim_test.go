package machine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
)

// TestSimulation drives the machine with random event orders against a
// model of the ledger tier and the catalog — entries acknowledged or failed
// in order, recoveries that keep any prefix of what was sent that includes
// what was acknowledged, I/O steps that fail or are fenced, linger and
// retry timers, Close and its timeout — and checks the invariants after
// every step and, at the end, that every accepted batch was answered
// exactly once and every acknowledged record is in the chain at its
// offset. SIM_SEEDS=N runs more seeds; SIM_SEED=S replays one.
func TestSimulation(t *testing.T) {
	seeds := 300
	if v, err := strconv.Atoi(os.Getenv("SIM_SEEDS")); err == nil {
		seeds = v
	}
	first := uint64(1)
	if v, err := strconv.ParseUint(os.Getenv("SIM_SEED"), 10, 64); err == nil {
		first, seeds = v, 1
	}
	for s := first; s < first+uint64(seeds); s++ {
		if !runSim(t, s) {
			t.Fatalf("seed %d failed: replay with SIM_SEED=%d", s, s)
		}
	}
}

// simLedger is the model's ledger: entries in send order, how many the
// bookies acknowledged, and its end once sealed or recovered.
type simLedger struct {
	name    string
	first   int64
	entries []Send
	acked   int // entries acknowledged, a prefix
	failed  bool
	closed  bool
	end     int64
}

type simWorld struct {
	t   *testing.T
	rng *rand.Rand
	m   *Writer
	cfg Config
	now time.Time

	ledgers []*simLedger
	cur     *simLedger // the ledger the machine writes to (by handle)
	// chain: the ledgers appended, in order.
	chain []*simLedger

	pendingOp    Action // the I/O step under way
	lingerArmed  bool
	retryArmed   bool
	closed       bool
	finished     int
	closeTimeout bool

	// accepted: tag -> offsets; answered: tag -> answers seen; acks in
	// the order producers saw them.
	accepted  map[string][2]int64
	answered  map[string]int
	ackedUpTo int64
	nextTag   int
	// producers' next sequence (idempotent producers 1..3) and their
	// batches sent, for retries.
	seq     map[int64]int32
	batches map[int64][]simBatch
	// txnEpoch: the epochs of the transactional producers 4 and 5 (the
	// coordinator's, bumped by every marker asked for); stable: the
	// machine's StableOffset after the last step.
	txnEpoch map[int64]int16
	stable   int64
	fail     string
}

type simBatch struct {
	seq int32
	n   int
}

func runSim(t *testing.T, seed uint64) bool {
	w := &simWorld{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		accepted: map[string][2]int64{}, answered: map[string]int{}, ackedUpTo: -1,
		seq: map[int64]int32{}, batches: map[int64][]simBatch{}, txnEpoch: map[int64]int16{}}
	w.cfg = Config{Topic: "t", Epoch: 1, MaxEntryBytes: 200 + w.rng.IntN(800), MaxInFlightEntries: 1 + w.rng.IntN(4),
		MaxBufferedBytes: 2000 + int64(w.rng.IntN(4000)), RollBytes: 500 + int64(w.rng.IntN(3000)), RollAge: time.Second}
	if w.rng.IntN(2) == 0 {
		w.cfg.Linger = time.Millisecond
	}
	st, err := dedup.New(dedup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w.now = time.Unix(0, 0)
	m, acts := New(w.cfg, st, nil, -1)
	w.m = m
	w.apply(acts)
	steps := 300 + w.rng.IntN(700)
	for i := 0; i < steps && w.fail == ""; i++ {
		w.step()
	}
	// Wind down: close, then let everything succeed until Finished.
	if w.fail == "" && !w.closed {
		w.closed = true
		w.do(Close{})
	}
	for i := 0; w.fail == "" && w.finished == 0 && i < 10000; i++ {
		w.calm()
	}
	if w.fail == "" && w.finished != 1 {
		w.fail = fmt.Sprintf("Close did not finish (finished %d times), phase %v", w.finished, w.m.phase)
	}
	if w.fail == "" {
		w.checkEnd()
	}
	if w.fail != "" {
		t.Errorf("seed %d: %s", seed, w.fail)
		return false
	}
	return true
}

// step picks one enabled event at random.
func (w *simWorld) step() {
	for {
		switch w.rng.IntN(12) {
		case 0, 1, 2:
			w.enqueue()
			return
		case 3, 4:
			if w.settleHead(w.rng.IntN(12) == 0) {
				return
			}
		case 5:
			if w.pendingOp != nil {
				w.answerOp(w.rng.IntN(4) == 0, w.rng.IntN(40) == 0)
				return
			}
		case 6:
			if w.lingerArmed {
				w.lingerArmed = false
				w.do(LingerExpired{Now: w.now})
				return
			}
		case 7:
			if w.retryArmed {
				w.retryArmed = false
				w.do(RetryDue{})
				return
			}
		case 8:
			if w.rng.IntN(10) == 0 {
				// An early roll (a draining bookie): of the ledger being
				// written, or a stale one.
				_, gen, ok := w.m.Current()
				if !ok || w.rng.IntN(3) == 0 {
					gen = int64(w.rng.IntN(4))
				}
				w.do(Roll{Gen: gen})
				return
			}
			w.now = w.now.Add(time.Duration(w.rng.IntN(300)) * time.Millisecond)
			return
		case 9:
			if w.cur != nil && len(w.cur.entries) > w.cur.acked && w.rng.IntN(20) == 0 {
				// The ledger refuses the last Send at once (the driver
				// reports it as that entry's Settled).
				e := w.cur.entries[len(w.cur.entries)-1]
				w.do(Settled{Gen: e.Gen, Seq: e.Seq, Err: errors.New("refused"), Now: w.now})
				return
			}
		case 10:
			if !w.closed && w.rng.IntN(30) == 0 {
				w.closed = true
				w.do(Close{})
				return
			}
			if w.closed && !w.closeTimeout && w.rng.IntN(20) == 0 {
				w.closeTimeout = true
				w.do(CloseTimedOut{})
				return
			}
		case 11:
			if w.rng.IntN(3) == 0 {
				w.mark()
			} else {
				w.retryBatch()
			}
			return
		}
	}
}

// calm makes progress without faults: acks, successful steps, timers.
func (w *simWorld) calm() {
	switch {
	case w.settleHead(false):
	case w.pendingOp != nil:
		w.answerOp(false, false)
	case w.retryArmed:
		w.retryArmed = false
		w.do(RetryDue{})
	case w.lingerArmed:
		w.lingerArmed = false
		w.do(LingerExpired{Now: w.now})
	default:
		w.fail = fmt.Sprintf("stuck while closing: phase %v op %v", w.m.phase, w.m.op)
	}
}

func (w *simWorld) enqueue() {
	w.nextTag++
	tag := fmt.Sprintf("b%d", w.nextTag)
	opts := record.BuilderOptions{}
	n := 1 + w.rng.IntN(5)
	switch id := int64(w.rng.IntN(6)); {
	case id >= 4:
		// A transactional producer: its batches open a transaction that
		// only a marker ends.
		opts.Producer = &record.Producer{ID: id, Epoch: w.txnEpoch[id], BaseSequence: w.seq[id]}
		opts.Transactional = true
	case id > 0:
		opts.Producer = &record.Producer{ID: id, BaseSequence: w.seq[id]}
		w.batches[id] = append(w.batches[id], simBatch{w.seq[id], n})
	}
	w.offer(tag, buildBatch(w.t, opts, n, 10+w.rng.IntN(60)), opts.Producer)
}

// mark asks for a transactional producer's marker: at a bumped epoch, as
// the coordinator ends a transaction, or now and then at the current one,
// as a late or repeated marker, which writes nothing once the producer has
// written at that epoch.
func (w *simWorld) mark() {
	id := int64(4 + w.rng.IntN(2))
	epoch := w.txnEpoch[id]
	stale := w.rng.IntN(4) == 0
	if !stale {
		epoch++
		w.txnEpoch[id], w.seq[id] = epoch, 0
	}
	w.nextTag++
	tag := fmt.Sprintf("m%d", w.nextTag)
	acts := w.do(Mark{ProducerID: id, Epoch: epoch, Commit: w.rng.IntN(2) == 0, Tag: tag, Now: w.now})
	if w.fail != "" {
		return
	}
	if d, ok := acts[0].(Duplicate); ok && (d.Base != -1 || d.Last != -1) {
		w.fail = fmt.Sprintf("duplicate marker with offsets: %v", d)
	}
	if a, ok := acts[0].(Accepted); ok && a.Base != a.Last {
		w.fail = fmt.Sprintf("marker accepted over several offsets: %v", a)
	}
}

// replayLSO is the last stable offset after payloads (entries in chain
// order), by the rules from scratch: a transactional batch opens its
// producer's transaction unless one is open, a marker ends it.
func replayLSO(payloads [][]byte) (int64, error) {
	open := map[int64]int64{}
	end := int64(0)
	for _, p := range payloads {
		_, batches, err := record.EntryBatches(p)
		if err != nil {
			return 0, err
		}
		for rest := batches; len(rest) > 0; {
			b, r, err := record.Split(rest)
			if err != nil {
				return 0, err
			}
			rest = r
			end = b.NextOffset()
			switch a := b.Attributes(); {
			case a.Control():
				delete(open, b.ProducerID())
			case a.Transactional():
				if _, ok := open[b.ProducerID()]; !ok {
					open[b.ProducerID()] = b.BaseOffset()
				}
			}
		}
	}
	lso := end
	for _, f := range open {
		lso = min(lso, f)
	}
	return lso, nil
}

// chainPayloads is every entry of the chain's ledgers, in order: all sent
// (durable false), or the ones the machine knows are durable (acknowledged
// by the bookies, up to its durable end).
func (w *simWorld) chainPayloads(durable bool) [][]byte {
	var ps [][]byte
	for _, l := range w.chain {
		es := l.entries
		if durable {
			es = es[:l.acked]
		}
		for _, e := range es {
			if durable && e.Last > w.m.acked {
				break
			}
			ps = append(ps, e.Payload)
		}
	}
	return ps
}

// retryBatch sends an idempotent producer's earlier batch again.
func (w *simWorld) retryBatch() {
	id := int64(1 + w.rng.IntN(3))
	bs := w.batches[id]
	if len(bs) == 0 {
		return
	}
	b := bs[w.rng.IntN(len(bs))]
	w.nextTag++
	tag := fmt.Sprintf("r%d", w.nextTag)
	w.offer(tag, buildBatch(w.t, record.BuilderOptions{Producer: &record.Producer{ID: id, BaseSequence: b.seq}}, b.n, 10), nil)
}

func (w *simWorld) offer(tag string, batch []byte, p *record.Producer) {
	acts := w.do(Enqueue{Batch: batch, Tag: tag, Now: w.now})
	if w.fail != "" {
		return
	}
	if len(acts) == 0 {
		w.fail = "enqueue without a verdict"
		return
	}
	if _, ok := acts[0].(Accepted); ok && p != nil {
		w.seq[p.ID] = p.BaseSequence + record.Batch(batch).RecordCount()
	}
}

// settleHead answers the oldest unsettled entry of the current ledger.
func (w *simWorld) settleHead(fail bool) bool {
	l := w.cur
	if l == nil || l.failed || l.acked >= len(l.entries) {
		return false
	}
	e := l.entries[l.acked]
	if fail {
		l.failed = true
		w.do(Settled{Gen: e.Gen, Seq: e.Seq, Err: errors.New("bookie down"), Now: w.now})
		return true
	}
	l.acked++
	w.do(Settled{Gen: e.Gen, Seq: e.Seq, Now: w.now})
	return true
}

// answerOp answers the I/O step under way: success, a failure, or fencing.
func (w *simWorld) answerOp(fail, fence bool) {
	a := w.pendingOp
	w.pendingOp = nil
	var err error
	if fence {
		err = fmt.Errorf("%w: taken over", ErrFenced)
	} else if fail {
		err = errors.New("transient")
	}
	switch a := a.(type) {
	case OpenLedger:
		if err != nil {
			w.do(OpenFailed{Err: err})
			return
		}
		if n := len(w.chain); n > 0 {
			prev := w.chain[n-1]
			if !prev.closed {
				w.fail = fmt.Sprintf("ledger opened from %d while %s is not sealed", a.FirstOffset, prev.name)
				return
			}
			if a.FirstOffset != prev.end+1 {
				w.fail = fmt.Sprintf("ledger opened from %d, but %s ends at %d", a.FirstOffset, prev.name, prev.end)
				return
			}
		} else if a.FirstOffset != 0 {
			w.fail = fmt.Sprintf("first ledger opened from %d", a.FirstOffset)
			return
		}
		l := &simLedger{name: fmt.Sprintf("L%d", len(w.ledgers)+1), first: a.FirstOffset, end: a.FirstOffset - 1}
		w.ledgers = append(w.ledgers, l)
		w.chain = append(w.chain, l)
		w.cur = l
		w.do(Opened{Handle: l, ID: catalog.LedgerID(len(w.ledgers)), FirstOffset: a.FirstOffset, Now: w.now})
	case SealLedger:
		l := a.Handle.(*simLedger)
		if err != nil {
			w.do(SealDone{Err: err})
			return
		}
		if l.acked != len(l.entries) {
			w.fail = fmt.Sprintf("%s sealed with %d of %d entries acknowledged", l.name, l.acked, len(l.entries))
			return
		}
		l.closed, l.end = true, a.LastOffset
		if n := len(l.entries); n > 0 && l.entries[n-1].Last != a.LastOffset {
			w.fail = fmt.Sprintf("%s sealed at %d, its last entry ends at %d", l.name, a.LastOffset, l.entries[n-1].Last)
			return
		}
		w.do(SealDone{})
	case RecoverLedger:
		l := a.Handle.(*simLedger)
		if err != nil {
			w.do(Recovered{Err: err})
			return
		}
		// Any prefix holding every acknowledged entry may survive.
		k := l.acked + w.rng.IntN(len(l.entries)-l.acked+1)
		l.entries = l.entries[:k]
		l.acked, l.closed, l.end = k, true, l.first-1
		if k > 0 {
			l.end = l.entries[k-1].Last
		}
		w.do(Recovered{LastOffset: l.end})
	case ReleaseLease:
		w.do(Released{Err: err})
	}
}

// do steps the machine, records what it asked for and checks invariants.
func (w *simWorld) do(ev Event) []Action {
	acts := w.m.Step(ev)
	w.apply(acts)
	if w.fail == "" {
		w.check(ev)
	}
	return acts
}

func (w *simWorld) apply(acts []Action) {
	for _, a := range acts {
		if w.fail != "" {
			return
		}
		switch a := a.(type) {
		case Accepted:
			w.accepted[a.Tag.(string)] = [2]int64{a.Base, a.Last}
		case Send:
			l := a.Handle.(*simLedger)
			if l != w.cur || l.closed {
				w.fail = fmt.Sprintf("send to %s, which is not the open ledger", l.name)
				return
			}
			want := l.first
			if n := len(l.entries); n > 0 {
				want = l.entries[n-1].Last + 1
			}
			if a.First != want || a.Seq != int64(len(l.entries)) {
				w.fail = fmt.Sprintf("send %v: want first %d, seq %d", a, want, len(l.entries))
				return
			}
			last, lso, err := record.EntryStableOffset(a.Payload)
			if err != nil || last != a.Last {
				w.fail = fmt.Sprintf("send %v: payload ends at %d (%v)", a, last, err)
				return
			}
			l.entries = append(l.entries, a)
			// Its header says the LSO the chain has at its end.
			want, err2 := replayLSO(w.chainPayloads(false))
			if err2 != nil || lso != want {
				w.fail = fmt.Sprintf("send %v: entry says LSO %d, the chain's is %d (%v)", a, lso, want, err2)
				return
			}
		case Acknowledge:
			for _, t := range a.Tags {
				w.answer(t.(string), nil)
			}
		case Answer:
			if a.Err == nil {
				w.fail = fmt.Sprintf("answer %v without an error", a.Tag)
				return
			}
			w.answer(a.Tag.(string), a.Err)
		case ArmLinger:
			w.lingerArmed = true
		case RetryAfter:
			w.retryArmed = true
		case OpenLedger, SealLedger, RecoverLedger, ReleaseLease:
			if w.pendingOp != nil {
				w.fail = fmt.Sprintf("%v while %v is under way", a, w.pendingOp)
				return
			}
			w.pendingOp = a
		case Finished:
			w.finished++
			if w.finished > 1 {
				w.fail = "Finished twice"
			}
		}
	}
}

// answer checks one batch's answer: accepted, answered once, and if
// acknowledged, in offset order and stored.
func (w *simWorld) answer(tag string, err error) {
	if w.fail != "" {
		return
	}
	off, ok := w.accepted[tag]
	if !ok {
		w.fail = fmt.Sprintf("answer for %s, which was not accepted", tag)
		return
	}
	w.answered[tag]++
	if w.answered[tag] > 1 {
		w.fail = fmt.Sprintf("%s answered twice", tag)
		return
	}
	if err != nil {
		return
	}
	if off[0] <= w.ackedUpTo {
		w.fail = fmt.Sprintf("%s acknowledged at %d after %d: out of order", tag, off[0], w.ackedUpTo)
		return
	}
	if !w.stored(off[1]) {
		w.fail = fmt.Sprintf("%s acknowledged (%d-%d) but not stored on an acknowledged entry", tag, off[0], off[1])
		return
	}
	w.ackedUpTo = off[1]
}

// stored: offset is in an entry the bookies acknowledged, in a ledger of
// the chain.
func (w *simWorld) stored(offset int64) bool {
	for _, l := range w.chain {
		for _, e := range l.entries[:l.acked] {
			if offset >= e.First && offset <= e.Last {
				return true
			}
		}
	}
	return false
}

// check verifies the invariants written on the machine's fields.
func (w *simWorld) check(ev Event) {
	m := w.m
	bad := func(format string, args ...any) {
		if w.fail == "" {
			w.fail = fmt.Sprintf("after %v: ", ev) + fmt.Sprintf(format, args...)
		}
	}
	var bytes int64
	prev := m.lastSent
	for i, en := range m.inflight {
		bytes += int64(en.size())
		if i == len(m.inflight)-1 && en.last != m.lastSent {
			bad("last in flight ends at %d, lastSent %d", en.last, m.lastSent)
		}
	}
	for i, en := range m.queue {
		bytes += int64(en.size())
		if en.first != prev+1 {
			bad("queued entry %d starts at %d after %d", i, en.first, prev)
		}
		if i < len(m.queue)-1 && !en.sealed {
			bad("queued entry %d unsealed but not last", i)
		}
		prev = en.last
	}
	if (m.phase == Open || m.phase == Rolling) && prev != m.next-1 {
		bad("next %d, but the last batch ends at %d", m.next, prev)
	}
	if bytes != m.buffered || m.buffered > w.cfg.MaxBufferedBytes || m.buffered < 0 {
		bad("buffered %d, entries hold %d (max %d)", m.buffered, bytes, w.cfg.MaxBufferedBytes)
	}
	if len(m.inflight) > w.cfg.MaxInFlightEntries {
		bad("%d in flight", len(m.inflight))
	}
	if len(m.inflight) > 0 && (m.ledger == nil || m.ledger.failed) {
		bad("entries in flight without a ledger to write")
	}
	if len(m.queue) > 0 && (m.phase == Replacing || m.phase == Stopped || m.phase == Closed || m.phase == Closing) {
		bad("%d queued in phase %v", len(m.queue), m.phase)
	}
	if !(m.acked <= m.lastSent && m.lastSent < m.next) {
		bad("acked %d, lastSent %d, next %d", m.acked, m.lastSent, m.next)
	}
	if m.acked < w.ackedUpTo {
		bad("acked %d below what producers saw acknowledged (%d)", m.acked, w.ackedUpTo)
	}
	if lso := m.StableOffset(); lso < w.stable || lso > m.acked+1 {
		bad("stable offset %d: was %d, durable end %d", lso, w.stable, m.acked)
	} else if m.phase != Stopped && m.phase != Closed {
		// The committed view is the acknowledged entries' (and the
		// recovered ones').
		if want, err := replayLSO(w.chainPayloads(true)); err != nil || want != lso {
			bad("stable offset %d, the acknowledged entries' is %d (%v)", lso, want, err)
		}
		w.stable = lso
	}
	if m.op != opNone && m.retryArmed {
		bad("a step under way and a retry pending")
	}
	if (m.op == opNone) != (w.pendingOp == nil) && m.phase != Closed && m.phase != Stopped {
		bad("machine op %v, model op %v", m.op, w.pendingOp)
	}
}

// checkEnd: every accepted batch was answered once; every acknowledged
// offset is stored in the chain, the chain is contiguous and each ledger
// ended at or after what was acknowledged on it.
func (w *simWorld) checkEnd() {
	for tag := range w.accepted {
		if w.answered[tag] != 1 {
			w.fail = fmt.Sprintf("%s answered %d times", tag, w.answered[tag])
			return
		}
	}
	for o := int64(0); o <= w.ackedUpTo; o++ {
		if !w.stored(o) {
			w.fail = fmt.Sprintf("acknowledged offset %d is not stored", o)
			return
		}
	}
}
