package txn

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSimulation drives several coordinators (any ingest copy may serve any
// transactional id) over one compare-and-set store, as the driver in
// services/ingest/coordinator.go does: each copy decides on the state it
// remembers (stale when another copy moved on), folds the Complete of a
// Prepare it carried out into its next decision, and stores a Complete on
// its own later, once, unless something was stored over it. Producers
// restart (zombies keep sending), copies crash (losing what they
// remember and their deferred completions) and crash between storing a
// decision and writing its markers, and a sweeper runs, in random orders.
// It checks, for every transaction, that the markers written agree with
// the one decision stored (no torn or flipped transaction), that a
// producer told "committed" has commit markers in every partition it added
// and its offsets applied, that an abort's offsets are never applied, that
// no Prepare is left before all its markers are written, that a fenced
// epoch never gets a request accepted, and that once the faults stop the
// sweeper leaves nothing open past its deadline or half-written.
// SIM_SEEDS=N runs more seeds; SIM_SEED=S replays one (SIM_TRACE=1 prints
// its requests and decisions).
func TestSimulation(t *testing.T) {
	seeds := 500
	if v, err := strconv.Atoi(os.Getenv("SIM_SEEDS")); err == nil {
		seeds = v
	}
	first := uint64(1)
	if v, err := strconv.ParseUint(os.Getenv("SIM_SEED"), 10, 64); err == nil {
		first, seeds = v, 1
	}
	spentRuns := 0
	for s := first; s < first+uint64(seeds); s++ {
		spent, err := simulate(s)
		if err != nil {
			t.Fatalf("seed %d: %v (replay with SIM_SEED=%d)", s, err, s)
		}
		if spent {
			spentRuns++
		}
	}
	if seeds >= 100 && spentRuns < seeds/10 {
		t.Fatalf("only %d of %d runs spent a producer id's epochs at an EndTxn", spentRuns, seeds)
	}
	t.Logf("%d of %d runs spent a producer id's epochs at an EndTxn", spentRuns, seeds)
}

var simTrace = os.Getenv("SIM_TRACE") != ""

// txnKey names one transaction: the producer id and epoch of its markers
// (its session's, bumped; or the replaced id's MaxEpoch when its EndTxn
// spent the epoch space).
type txnKey struct {
	pid   int64
	epoch int16
}

// keyOf is the transaction a Prepare state decides.
func keyOf(st *State) txnKey {
	m := markersOf(st)
	return txnKey{m.ProducerID, m.Epoch}
}

type simStore struct {
	cur     *State
	history []State
}

func (s *simStore) load() *State {
	if s.cur == nil {
		return nil
	}
	c := s.cur.clone()
	return &c
}

// cas stores next if the version still matches, and returns what it
// stored; nil on a lost race.
func (s *simStore) cas(next *State) *State {
	want := int64(0)
	if s.cur != nil {
		want = s.cur.Version
	}
	if next.Version != want {
		return nil
	}
	st := next.clone()
	st.Version = want + 1
	s.cur = &st
	s.history = append(s.history, st)
	out := st.clone()
	return &out
}

// simCopy is one coordinator's memory (services/ingest/txnmemo.go): the
// state it last loaded or stored, the version of a Prepare whose markers
// (and offsets) it carried out (0: none), and the completions it
// deferred.
type simCopy struct {
	state    *State
	written  int64
	deferred []State
}

func (c *simCopy) remember(st *State) {
	if st == nil {
		c.state = nil
		return
	}
	if c.state != nil && c.state.Version > st.Version {
		return
	}
	cl := st.clone()
	c.state = &cl
	if c.written != st.Version {
		c.written = 0
	}
}

// simProducer is a client's view of its session.
type simProducer struct {
	pid     int64
	epoch   int16
	ok      bool // initialised
	added   map[Partition]bool
	offsets []Offset // sent with the open transaction
	// lastEnd is the last EndTxn answered without an error, and
	// lastReply its answer: what a retry of it must get again while the
	// stored state is still that transaction's.
	lastEnd   *EndTxn
	lastReply Reply
}

type simWorld struct {
	rng    *rand.Rand
	now    time.Time
	store  simStore
	nextID int64
	// decided: the outcome stored for each transaction (by the epoch
	// its Prepare carries); markers: what each partition got for it.
	decided map[txnKey]bool
	markers map[txnKey]map[Partition]bool
	// committed: transactions a producer was told were committed, with
	// the partitions it had added.
	committed map[txnKey][]Partition
	// applied: the offsets applied, by the transaction they came with.
	applied map[txnKey][]Offset
	// offsets: what a producer told "committed" had added.
	offsets   map[txnKey][]Offset
	producers []*simProducer
	copies    []*simCopy
	faults    bool
	// answered is the decision the last request answered its client with
	// (nil when it crashed first).
	answered *Decision
}

// simulate runs one seed; spent reports whether an EndTxn moved the
// transactional id to a fresh producer id.
func simulate(seed uint64) (spent bool, err error) {
	w := &simWorld{rng: rand.New(rand.NewPCG(seed, seed*7+1)), now: time.Unix(0, 0), nextID: 100,
		decided: map[txnKey]bool{}, markers: map[txnKey]map[Partition]bool{}, committed: map[txnKey][]Partition{},
		applied: map[txnKey][]Offset{}, offsets: map[txnKey][]Offset{}, faults: true,
	}
	// One to three coordinating copies: with one, nothing but that copy
	// can finish what it left.
	for range 1 + w.rng.IntN(3) {
		w.copies = append(w.copies, &simCopy{})
	}
	// Two instances of the same transactional id: the second is the
	// first's restart, both keep sending (the first is a zombie once the
	// second initialised).
	w.producers = []*simProducer{{}, {}}
	if w.rng.IntN(2) == 0 {
		// A transactional id whose producer id is near the end of its
		// epochs: a bump spends them within the run (a fresh id at
		// InitProducer or EndTxn).
		w.store.cas(&State{ID: "tx", ProducerID: 99, Epoch: MaxEpoch - 2 - int16(w.rng.IntN(3)), Status: CompleteCommit, Timeout: 5 * time.Second})
	}
	steps := 200 + w.rng.IntN(400)
	for i := 0; i < steps; i++ {
		if err := w.step(); err != nil {
			return false, fmt.Errorf("step %d: %w", i, err)
		}
	}
	// Faults stop: the sweeper runs until nothing is open or half done.
	w.faults = false
	w.now = w.now.Add(time.Hour)
	for i := 0; i < 10; i++ {
		if err := w.request(Expire{Now: w.now}, nil); err != nil {
			return false, err
		}
		for _, c := range w.copies {
			for len(c.deferred) > 0 {
				w.completeDeferred(c)
			}
		}
	}
	if c := w.store.cur; c != nil && !c.Status.idle() {
		return false, fmt.Errorf("after the sweeper: %v", c)
	}
	for _, st := range w.store.history {
		if st.PrevProducerID != 0 {
			spent = true
		}
	}
	return spent, w.checkEnd()
}

func (w *simWorld) step() error {
	p := w.producers[w.rng.IntN(len(w.producers))]
	switch w.rng.IntN(12) {
	case 10:
		return w.retryEnd(p)
	case 0:
		ev := InitProducer{Timeout: 5 * time.Second, Now: w.now}
		if p.ok && w.rng.IntN(2) == 0 {
			// KIP-588: re-initialise naming the session held (after a
			// timeout, or to start over) — it must not fence a newer one.
			ev.Resume = &Reply{p.pid, p.epoch}
		}
		return w.request(ev, p)
	case 1, 2, 3:
		if !p.ok {
			return nil
		}
		ps := []Partition{{"t", int32(w.rng.IntN(4))}}
		return w.request(AddPartitions{ProducerID: p.pid, Epoch: p.epoch, Partitions: ps, Now: w.now}, p)
	case 4:
		if !p.ok {
			return nil
		}
		return w.request(AddGroup{ProducerID: p.pid, Epoch: p.epoch, Group: "g", Now: w.now}, p)
	case 5:
		if !p.ok {
			return nil
		}
		ev := EndTxn{ProducerID: p.pid, Epoch: p.epoch, Commit: w.rng.IntN(3) > 0, Now: w.now}
		if w.rng.IntN(2) == 0 {
			// The partitions the next transaction opens with.
			for range 1 + w.rng.IntN(2) {
				ev.Next = append(ev.Next, Partition{"t", int32(w.rng.IntN(4))})
			}
		}
		return w.request(ev, p)
	case 6:
		return w.request(Expire{Now: w.now}, nil)
	case 7:
		if !p.ok {
			return nil
		}
		part := int32(w.rng.IntN(4))
		os := []Offset{{Group: "g", Topic: "in", TopicID: "in-id", Partition: part, Offset: int64(w.rng.IntN(1000))}}
		return w.request(AddOffsets{ProducerID: p.pid, Epoch: p.epoch, Offsets: os, Now: w.now}, p)
	case 8:
		// A copy's deferred completion fires.
		c := w.copies[w.rng.IntN(len(w.copies))]
		if len(c.deferred) > 0 {
			w.completeDeferred(c)
		}
	case 9:
		if w.faults && w.rng.IntN(4) == 0 {
			// A copy crashes: what it remembered and deferred is gone.
			*w.copies[w.rng.IntN(len(w.copies))] = simCopy{}
		}
	default:
		w.now = w.now.Add(time.Duration(w.rng.IntN(3000)) * time.Millisecond)
	}
	return nil
}

// request runs one request as a coordinator does (coordinator.go): on a
// random copy, decide on the remembered state (or a fresh read), folding
// in the Complete of a Prepare the copy carried out; a decision that
// stores nothing on a remembered state is made again on a fresh read; a
// lost compare-and-set forgets and reads again; markers, then a deferred
// completion. With faults on, the coordinator may crash after storing.
func (w *simWorld) request(ev Event, p *simProducer) error {
	w.answered = nil
	c := w.copies[w.rng.IntN(len(w.copies))]
	fresh := false
	for attempt := 0; attempt < 8; attempt++ {
		var cur *State
		remembered := false
		if !fresh && c.state != nil {
			st := c.state.clone()
			cur, remembered = &st, true
		} else {
			cur = w.store.load()
			c.remember(cur)
		}
		folded := false
		if cur != nil && cur.Status.preparing() && c.written == cur.Version {
			cur, folded = Step("tx", cur, MarkersWritten{}).Store, true
		}
		d := Step("tx", cur, ev)
		if d.NeedProducerID {
			ev = WithFreshID(ev, w.nextID)
			w.nextID++
			d = Step("tx", cur, ev)
		}
		if simTrace {
			fmt.Printf("%T%+v on %v (remembered %v, folded %v): store %v markers %+v reply %+v err %v\n", ev, ev, cur, remembered, folded, d.Store, d.Markers, d.Reply, d.Err)
		}
		if d.Store == nil && remembered {
			fresh = true
			continue
		}
		if d.Store == nil && folded {
			d.Store = cur // the folded Complete, stored on its own
		}
		if d.Store != nil {
			prev := w.store.load()
			stored := w.store.cas(d.Store)
			if stored == nil {
				c.state, fresh = nil, true
				continue // lost the race: read and decide again
			}
			if err := w.checkStore(prev, stored); err != nil {
				return err
			}
			c.remember(stored)
			cur = stored
			if stored.Status.preparing() {
				w.decided[keyOf(stored)] = stored.Status == PrepareCommit
			}
		}
		if d.Markers != nil {
			if w.faults && w.rng.IntN(6) == 0 {
				return nil // crashed before writing the markers: the sweeper finishes
			}
			if err := w.write(d.Markers); err != nil {
				return err
			}
			c.written = cur.Version
			c.deferred = append(c.deferred, cur.clone())
		}
		w.answered = &d
		if p != nil {
			return w.answer(ev, d, p)
		}
		return nil
	}
	return nil
}

// retryEnd sends p's last answered EndTxn again, as a client that lost the
// answer does (its view stays as it was), and checks the answer: while the
// stored state is still that transaction's outcome — its session, decided
// or complete, bumped by no one else — the retry gets the same answer,
// across a change of producer id too.
func (w *simWorld) retryEnd(p *simProducer) error {
	if p.lastEnd == nil {
		return nil
	}
	e := *p.lastEnd
	e.Now, e.FreshID = w.now, 0
	cur := w.store.load()
	if err := w.request(e, nil); err != nil {
		return err
	}
	d := w.answered
	same := cur != nil && (Reply{cur.ProducerID, cur.Epoch}) == p.lastReply && !cur.BumpedByCoordinator &&
		(cur.Status.preparing() || cur.Status == CompleteCommit || cur.Status == CompleteAbort || cur.Ended != 0)
	switch {
	case d == nil || !same:
	case d.Err != nil:
		return fmt.Errorf("a retry of %+v (answered %+v) refused at %v: %v", e, p.lastReply, cur, d.Err)
	case d.Reply != p.lastReply:
		return fmt.Errorf("a retry of %+v answered %+v, first %+v, at %v", e, d.Reply, p.lastReply, cur)
	}
	return nil
}

// completeDeferred runs c's oldest deferred completion: one
// compare-and-set of the Prepare's Complete, only while c still holds that
// Prepare as carried out; a lost race is dropped.
func (w *simWorld) completeDeferred(c *simCopy) {
	prep := c.deferred[0]
	c.deferred = c.deferred[1:]
	if c.written != prep.Version {
		return
	}
	if w.faults && w.rng.IntN(4) == 0 {
		return // the store failed (a timeout): the mark stays, nothing stored
	}
	d := Step("tx", &prep, MarkersWritten{})
	if d.Store == nil {
		return
	}
	if stored := w.store.cas(d.Store); stored != nil {
		c.remember(stored)
	} else {
		c.state = nil
	}
}

// write records markers, checking them against the stored decision.
func (w *simWorld) write(m *Markers) error {
	k := txnKey{m.ProducerID, m.Epoch}
	commit, ok := w.decided[k]
	if !ok {
		return fmt.Errorf("markers for %v with no stored decision", k)
	}
	if commit != m.Commit {
		return fmt.Errorf("markers for %v say commit=%v, the decision %v", k, m.Commit, commit)
	}
	if w.markers[k] == nil {
		w.markers[k] = map[Partition]bool{}
	}
	for _, p := range m.Partitions {
		if prev, seen := w.markers[k][p]; seen && prev != m.Commit {
			return fmt.Errorf("torn: %v got both outcomes for %v", p, k)
		}
		w.markers[k][p] = m.Commit
	}
	if len(m.Offsets) > 0 {
		if !m.Commit {
			return fmt.Errorf("offsets %v applied with the abort of %v", m.Offsets, k)
		}
		w.applied[k] = m.Offsets
	}
	return nil
}

// checkStore verifies a transition against the state it replaced: the
// epoch never moves back, a decision never flips, and a Prepare is left
// only once every marker it asks for is written (its Complete, or a state
// decided on its folded Complete).
func (w *simWorld) checkStore(cur, next *State) error {
	if err := checkInvariants(next); err != nil {
		return err
	}
	if cur == nil {
		return nil
	}
	if next.ProducerID == cur.ProducerID && next.Epoch < cur.Epoch {
		return fmt.Errorf("epoch moved back: %v after %v", next, cur)
	}
	// The same transaction's end (a later one's, decided on a folded
	// Complete, has a newer epoch).
	sameTxn := next.ProducerID == cur.ProducerID && next.Epoch == cur.Epoch
	if sameTxn && (cur.Status == PrepareCommit && next.Status == CompleteAbort || cur.Status == PrepareAbort && next.Status == CompleteCommit) {
		return fmt.Errorf("decision flipped: %v → %v", cur, next)
	}
	if cur.Status.preparing() && next.Status != cur.Status {
		k := keyOf(cur)
		for _, p := range cur.Partitions {
			if got, ok := w.markers[k][p]; !ok || got != (cur.Status == PrepareCommit) {
				return fmt.Errorf("%v left (now %v) before its marker in %v was written", cur, next.Status, p)
			}
		}
		if cur.Status == PrepareCommit && len(cur.Offsets) > 0 && w.applied[k] == nil {
			return fmt.Errorf("%v left (now %v) before its offsets were applied", cur, next.Status)
		}
	}
	return nil
}

// answer updates the producer's view from its reply, checking that a
// fenced epoch was never accepted.
func (w *simWorld) answer(ev Event, d Decision, p *simProducer) error {
	if d.Err != nil {
		return nil
	}
	switch e := ev.(type) {
	case InitProducer:
		if r := e.Resume; r != nil {
			// Resuming is allowed only from the current session or the one
			// a timeout bumped (its reply stored one state, over prev).
			h := w.store.history
			prev := h[len(h)-2]
			if prev.ProducerID != r.ProducerID || prev.Epoch != r.Epoch && !(prev.TimedOut && prev.Epoch == r.Epoch+1) {
				return fmt.Errorf("session %d/%d resumed over %v", r.ProducerID, r.Epoch, prev)
			}
		}
		// The other instance, if it shares the session, is now a zombie.
		p.pid, p.epoch, p.ok, p.added, p.offsets = d.Reply.ProducerID, d.Reply.Epoch, true, map[Partition]bool{}, nil
	case AddPartitions:
		if cur := w.store.cur; e.ProducerID != cur.ProducerID || e.Epoch < cur.Epoch && !(cur.Status.preparing() || cur.Status == CompleteCommit || cur.Status == CompleteAbort) {
			return fmt.Errorf("fenced session %d/%d accepted at %v", e.ProducerID, e.Epoch, cur)
		}
		for _, pt := range e.Partitions {
			p.added[pt] = true
		}
	case AddOffsets:
		if cur := w.store.cur; e.ProducerID != cur.ProducerID || e.Epoch < cur.Epoch && !(cur.Status.preparing() || cur.Status == CompleteCommit || cur.Status == CompleteAbort) {
			return fmt.Errorf("fenced session %d/%d accepted offsets at %v", e.ProducerID, e.Epoch, cur)
		}
		p.offsets = append(p.offsets, e.Offsets...)
	case EndTxn:
		if e.Commit && !d.Pending && len(p.added) > 0 && d.Store == nil {
			// A retry answered from a completed state.
			break
		}
		// The transaction's markers: at the reply's session, or at the
		// request's id's MaxEpoch when the EndTxn spent its epochs.
		k := txnKey{d.Reply.ProducerID, d.Reply.Epoch}
		if d.Reply.ProducerID != e.ProducerID {
			k = txnKey{e.ProducerID, MaxEpoch}
		}
		if e.Commit && len(p.added) > 0 {
			var parts []Partition
			for pt := range p.added {
				parts = append(parts, pt)
			}
			w.committed[k] = parts
		}
		if e.Commit && len(p.offsets) > 0 {
			w.offsets[k] = p.offsets
		}
		p.pid, p.epoch, p.added, p.offsets = d.Reply.ProducerID, d.Reply.Epoch, map[Partition]bool{}, nil
		// The partitions it named are in the next transaction: the client
		// writes there without adding them, so a commit of it must mark
		// them (checkEnd).
		for _, pt := range d.Next {
			p.added[pt] = true
		}
		p.lastEnd, p.lastReply = &e, d.Reply
	}
	return nil
}

// checkEnd: every transaction a producer was told was committed has a
// commit marker in each partition it added; every decision's markers are
// all written and agree with it.
func (w *simWorld) checkEnd() error {
	for k, parts := range w.committed {
		if c, ok := w.decided[k]; !ok || !c {
			return fmt.Errorf("%v told committed, stored decision %v (%v)", k, c, ok)
		}
		for _, p := range parts {
			if got, ok := w.markers[k][p]; !ok || !got {
				return fmt.Errorf("%v told committed, %v has marker %v (%v)", k, p, got, ok)
			}
		}
	}
	for k, offs := range w.offsets {
		if len(w.applied[k]) == 0 {
			return fmt.Errorf("%v told committed with offsets %v; none applied", k, offs)
		}
	}
	for _, st := range w.store.history {
		if !st.Status.preparing() {
			continue
		}
		k := keyOf(&st)
		for _, p := range st.Partitions {
			if got, ok := w.markers[k][p]; !ok || got != (st.Status == PrepareCommit) {
				return fmt.Errorf("%v decided %v: %v has marker %v (%v)", k, st.Status, p, got, ok)
			}
		}
	}
	return nil
}
