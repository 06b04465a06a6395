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
// transactional id) over one compare-and-set store, with producers that
// restart (zombies keep sending), coordinators that crash between storing
// a decision and writing its markers, lost races, and a sweeper, in random
// orders. It checks, for every transaction, that the markers written agree
// with the one decision stored (no torn or flipped transaction), that a
// producer told "committed" has commit markers in every partition it added
// and no abort marker, that a fenced epoch never gets a request accepted,
// and that once the faults stop the sweeper leaves nothing open past its
// deadline or half-written. SIM_SEEDS=N runs more seeds; SIM_SEED=S
// replays one.
func TestSimulation(t *testing.T) {
	seeds := 500
	if v, err := strconv.Atoi(os.Getenv("SIM_SEEDS")); err == nil {
		seeds = v
	}
	first := uint64(1)
	if v, err := strconv.ParseUint(os.Getenv("SIM_SEED"), 10, 64); err == nil {
		first, seeds = v, 1
	}
	for s := first; s < first+uint64(seeds); s++ {
		if err := simulate(s); err != nil {
			t.Fatalf("seed %d: %v (replay with SIM_SEED=%d)", s, err, s)
		}
	}
}

// txnKey names one transaction: a producer session's epoch at which it
// was decided.
type txnKey struct {
	pid   int64
	epoch int16
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

// cas stores next if the version still matches; false on a lost race.
func (s *simStore) cas(next *State) bool {
	want := int64(0)
	if s.cur != nil {
		want = s.cur.Version
	}
	if next.Version != want {
		return false
	}
	st := next.clone()
	st.Version = want + 1
	s.cur = &st
	s.history = append(s.history, st)
	return true
}

// simProducer is a client's view of its session.
type simProducer struct {
	pid   int64
	epoch int16
	ok    bool // initialised
	added map[Partition]bool
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
	// pending: Prepare decisions stored whose markers are not written
	// (the deciding coordinator may have crashed).
	producers []*simProducer
	faults    bool
}

func simulate(seed uint64) error {
	w := &simWorld{rng: rand.New(rand.NewPCG(seed, seed*7+1)), now: time.Unix(0, 0), nextID: 100,
		decided: map[txnKey]bool{}, markers: map[txnKey]map[Partition]bool{}, committed: map[txnKey][]Partition{}, faults: true}
	// Two instances of the same transactional id: the second is the
	// first's restart, both keep sending (the first is a zombie once the
	// second initialised).
	w.producers = []*simProducer{{}, {}}
	steps := 200 + w.rng.IntN(400)
	for i := 0; i < steps; i++ {
		if err := w.step(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	// Faults stop: the sweeper runs until nothing is open or half done.
	w.faults = false
	w.now = w.now.Add(time.Hour)
	for i := 0; i < 10; i++ {
		if err := w.request(Expire{Now: w.now}, nil); err != nil {
			return err
		}
	}
	if c := w.store.cur; c != nil && !c.Status.idle() {
		return fmt.Errorf("after the sweeper: %v", c)
	}
	return w.checkEnd()
}

func (w *simWorld) step() error {
	p := w.producers[w.rng.IntN(len(w.producers))]
	switch w.rng.IntN(8) {
	case 0:
		return w.request(InitProducer{Timeout: 5 * time.Second, Now: w.now}, p)
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
		return w.request(EndTxn{ProducerID: p.pid, Epoch: p.epoch, Commit: w.rng.IntN(3) > 0, Now: w.now}, p)
	case 6:
		return w.request(Expire{Now: w.now}, nil)
	default:
		w.now = w.now.Add(time.Duration(w.rng.IntN(3000)) * time.Millisecond)
	}
	return nil
}

// request runs one request as a coordinator does: load, step, store with
// compare-and-set (retrying a lost race), write markers, complete. With
// faults on, the coordinator may crash after storing, or lose the race to
// another one that changed the state meanwhile.
func (w *simWorld) request(ev Event, p *simProducer) error {
	for attempt := 0; attempt < 5; attempt++ {
		cur := w.store.load()
		d := Step("tx", cur, ev)
		if d.NeedProducerID {
			e := ev.(InitProducer)
			e.FreshID = w.nextID
			w.nextID++
			ev = e
			d = Step("tx", cur, ev)
		}
		if w.faults && w.rng.IntN(10) == 0 && cur != nil {
			// Another coordinator moved the state first: touch the version.
			c := cur.clone()
			w.store.cas(&c)
		}
		if d.Store != nil {
			if err := w.checkStore(cur, d); err != nil {
				return err
			}
			if !w.store.cas(d.Store) {
				continue // lost the race: load and step again
			}
			if d.Store.Status.preparing() {
				w.decided[txnKey{d.Store.ProducerID, d.Store.Epoch}] = d.Store.Status == PrepareCommit
			}
		}
		if d.Markers != nil {
			if w.faults && w.rng.IntN(6) == 0 {
				return nil // crashed before writing the markers: the sweeper finishes
			}
			if err := w.write(d.Markers); err != nil {
				return err
			}
			done := Step("tx", w.store.load(), MarkersWritten{})
			if done.Store != nil && !w.store.cas(done.Store) {
				return nil // someone else completed it, or will
			}
		}
		if p != nil {
			return w.answer(ev, d, p)
		}
		return nil
	}
	return nil
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
	return nil
}

// checkStore verifies a transition against the state it replaces.
func (w *simWorld) checkStore(cur *State, d Decision) error {
	next := d.Store
	if cur == nil {
		return nil
	}
	if next.ProducerID == cur.ProducerID && next.Epoch < cur.Epoch {
		return fmt.Errorf("epoch moved back: %v after %v", next, cur)
	}
	if cur.Status.preparing() && next.Status != cur.Status && next.Status != CompleteCommit && next.Status != CompleteAbort {
		return fmt.Errorf("decided %v replaced by %v", cur.Status, next.Status)
	}
	if cur.Status == PrepareCommit && next.Status == CompleteAbort || cur.Status == PrepareAbort && next.Status == CompleteCommit {
		return fmt.Errorf("decision flipped: %v → %v", cur.Status, next.Status)
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
		// The other instance, if it shares the session, is now a zombie.
		p.pid, p.epoch, p.ok, p.added = d.Reply.ProducerID, d.Reply.Epoch, true, map[Partition]bool{}
	case AddPartitions:
		if cur := w.store.cur; e.Epoch < cur.Epoch && !(cur.Status.preparing() || cur.Status == CompleteCommit || cur.Status == CompleteAbort) {
			return fmt.Errorf("fenced epoch %d accepted at %v", e.Epoch, cur)
		}
		for _, pt := range e.Partitions {
			p.added[pt] = true
		}
	case EndTxn:
		if e.Commit && !d.Pending && len(p.added) > 0 && d.Store == nil {
			// A retry answered from a completed state.
			break
		}
		if e.Commit && len(p.added) > 0 {
			var parts []Partition
			for pt := range p.added {
				parts = append(parts, pt)
			}
			w.committed[txnKey{d.Reply.ProducerID, d.Reply.Epoch}] = parts
		}
		p.epoch, p.added = d.Reply.Epoch, map[Partition]bool{}
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
	for _, st := range w.store.history {
		if !st.Status.preparing() {
			continue
		}
		k := txnKey{st.ProducerID, st.Epoch}
		for _, p := range st.Partitions {
			if got, ok := w.markers[k][p]; !ok || got != (st.Status == PrepareCommit) {
				return fmt.Errorf("%v decided %v: %v has marker %v (%v)", k, st.Status, p, got, ok)
			}
		}
	}
	return nil
}
