package ledger_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

var (
	seedsFlag = flag.Int("seeds", 400, "number of simulation seeds TestSimulation runs per fault profile")
	seedFlag  = flag.Int64("seed", -1, "run only this simulation seed, with a full trace on failure")
)

// TestSimulation runs the ledger protocol — a writer, recoveries by new
// writers, tailing readers — over simulated bookies, network and catalog
// (sim_world_test.go) under random faults, for -seeds seeds in each of two
// fault profiles (mixed, zombie-race; see profile). Faults: messages lost,
// duplicated, reordered and delivered late; client–bookie partitions;
// bookies crashing, losing every add they had not synced (an add is
// acknowledged only after its sync), and restarting; request timeouts
// (whose late answers still arrive); the writer crashing, or living on as a
// zombie — busy or idle — while a new writer recovers the ledger;
// recoveries running concurrently, crashing, failing and being retried;
// in half the seeds, once the ledger is closed, re-replication moving its
// copies off a bookie (sim_rereplicate_test.go) while all that goes on,
// the bookie then lost for good half the time. Then faults stop and the
// ledger must close. Checked during the run and at
// its end:
//
//   - no acknowledged entry is lost: the closed end is at or above every
//     entry the writer acknowledged — including acknowledgements arriving
//     after the close, which a fenced old writer must never get — and every
//     entry up to the end is durable on Qa bookies of its write set;
//   - every recovery's decided end, committed or not, is at or above every
//     acknowledged entry; the catalog's closed end, once set, never moves
//     (concurrent and repeated recoveries agree through its
//     compare-and-set);
//   - acknowledgements come in entry order; no bookie stores, and no reader
//     returns, an entry different from what the writer wrote;
//   - readers deliver entries in order, never beyond the LAC of an open
//     ledger (an entry not yet acknowledged) nor beyond the closed end, and
//     read the whole ledger once it is closed;
//   - no segment names a bookie lost for good, and every entry still has
//     its Qa durable copies after moves and losses;
//   - once faults stop, the ledger closes (liveness).
//
// A failing seed prints the tail of its trace; replay it in full with
// -seed N -v.
func TestSimulation(t *testing.T) {
	for _, p := range []profile{profileMixed, profileZombieRace} {
		t.Run(p.String(), func(t *testing.T) {
			seeds := seedList()
			start := time.Now()
			var st simStats
			for _, seed := range seeds {
				w := runSim(seed, simOptions{profile: p, verbose: *seedFlag >= 0})
				st.add(w)
				if len(w.violations) > 0 {
					t.Fatalf("seed %d:\n%s\nreplay: go test ./bookkeeper/ledger -run 'TestSimulation$/%v' -seed %d -v", seed, w.report(), p, seed)
				}
			}
			t.Logf("%d seeds in %v: %s", len(seeds), time.Since(start).Round(time.Millisecond), st)
		})
	}
}

// TestSimulationCatchesUnfencedRecoveryReads removes the fence flag from
// recovery reads (BookKeeper before PR #2616) and asserts that the
// simulation, searching seeds of the zombie-race profile, finds the lost
// acknowledged entry this allows: proof that the checks can fail, and that
// fencing recovery reads is what keeps TestSimulation passing on the same
// profile. The search stops at the first failing seed (a few hundred seeds
// in; the bound is far above what it needs).
func TestSimulationCatchesUnfencedRecoveryReads(t *testing.T) {
	start := time.Now()
	const maxSeeds = 20_000
	for seed := uint64(0); seed < maxSeeds; seed++ {
		w := runSim(seed, simOptions{profile: profileZombieRace, noReadFence: true})
		if len(w.violations) == 0 {
			continue
		}
		t.Logf("without read fencing, seed %d fails (%d seeds searched in %v):\n  %s",
			seed, seed+1, time.Since(start).Round(time.Millisecond), strings.Join(w.violations, "\n  "))
		if !slices.ContainsFunc(w.violations, func(v string) bool { return strings.Contains(v, "acknowledged") }) {
			t.Fatalf("expected a lost acknowledged entry:\n%s", w.report())
		}
		if w := runSim(seed, simOptions{profile: profileZombieRace}); len(w.violations) > 0 {
			t.Fatalf("seed %d also fails with fencing:\n%s", seed, w.report())
		}
		return
	}
	t.Fatalf("no violation in %d seeds with recovery-read fencing disabled: the simulation cannot see PR #2616's bug", maxSeeds)
}

// TestSimulationCatchesRereplicationBeforeAck breaks re-replication the
// way the issue names — the catalog points at the new bookie before its
// copies are acknowledged (synced) — and asserts that the simulation finds
// an entry left short of copies once the old bookie is lost for good:
// proof that its checks see a broken move. The same seed with the real
// mover passes.
func TestSimulationCatchesRereplicationBeforeAck(t *testing.T) {
	start := time.Now()
	const maxSeeds = 20_000
	for seed := uint64(0); seed < maxSeeds; seed++ {
		w := runSim(seed, simOptions{profile: profileMixed, rrForce: true, rrSabotage: true})
		if len(w.violations) == 0 {
			continue
		}
		t.Logf("with the move committed before the copies were acknowledged, seed %d fails (%d seeds searched in %v):\n  %s",
			seed, seed+1, time.Since(start).Round(time.Millisecond), strings.Join(w.violations, "\n  "))
		if !slices.ContainsFunc(w.violations, func(v string) bool { return strings.Contains(v, "durable copies") }) {
			t.Fatalf("expected an entry short of durable copies:\n%s", w.report())
		}
		if w := runSim(seed, simOptions{profile: profileMixed, rrForce: true}); len(w.violations) > 0 {
			t.Fatalf("seed %d also fails with the real mover:\n%s", seed, w.report())
		}
		return
	}
	t.Fatalf("no violation in %d seeds with the sabotaged mover: the simulation cannot see a move before the copy is durable", maxSeeds)
}

// TestSimulationRereplicates runs the simulation with a move in every seed
// that has a spare bookie, and bookies crashing more often.
func TestSimulationRereplicates(t *testing.T) {
	var st simStats
	for _, seed := range seedList() {
		w := runSim(seed, simOptions{profile: profileMixed, rrForce: true})
		st.add(w)
		if len(w.violations) > 0 {
			t.Fatalf("seed %d:\n%s", seed, w.report())
		}
	}
	if st.moves == 0 {
		t.Fatal("no replica moved")
	}
	t.Logf("%s", st)
}

// TestSimulationDeterministic: a seed replays exactly, so a failing seed
// can be debugged.
func TestSimulationDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		for _, p := range []profile{profileMixed, profileZombieRace} {
			a := runSim(seed, simOptions{profile: p, verbose: true})
			b := runSim(seed, simOptions{profile: p, verbose: true})
			if !slices.Equal(a.trace, b.trace) {
				t.Fatalf("seed %d (%v) ran differently twice", seed, p)
			}
		}
	}
}

func seedList() []uint64 {
	if *seedFlag >= 0 {
		return []uint64{uint64(*seedFlag)}
	}
	var out []uint64
	for s := 0; s < *seedsFlag; s++ {
		out = append(out, uint64(s))
	}
	return out
}

type simOptions struct {
	profile     profile
	noReadFence bool
	// rrForce: every seed re-replicates once the ledger is closed, and
	// bookies crash more often; rrSabotage: with a mover that commits
	// before the new bookie acknowledged (sim_rereplicate_test.go).
	rrForce, rrSabotage bool
	verbose             bool
}

// profile is a family of fault schedules (a nemesis, in Jepsen's terms).
type profile uint8

const (
	// profileMixed draws every fault at random rates, on random shapes.
	profileMixed profile = iota
	// profileZombieRace aims at the race PR #2616 fixed: an old writer
	// that is alive but idle (a zombie) with adds in flight when recovery
	// starts, on Qw > Qa shapes, with many slow and lost messages so that
	// fences, recovery reads and the old writer's adds arrive in any order.
	profileZombieRace
)

func (p profile) String() string { return [...]string{"mixed", "zombie-race"}[p] }

func mixedFaults(r *rand.Rand) (catalog.Replication, faults, int) {
	shapes := []catalog.Replication{
		{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, {Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
		{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}, {Ensemble: 4, WriteQuorum: 3, AckQuorum: 2},
		{Ensemble: 5, WriteQuorum: 3, AckQuorum: 2}, {Ensemble: 3, WriteQuorum: 3, AckQuorum: 3},
		{Ensemble: 2, WriteQuorum: 2, AckQuorum: 1}, {Ensemble: 4, WriteQuorum: 4, AckQuorum: 3},
	}
	f := faults{
		drop: r.IntN(11), dup: r.IntN(6), bookieCrash: r.IntN(3), writerCrash: r.IntN(2), recoveryCrash: r.IntN(2),
		timeout: 1 + r.IntN(3), partition: r.IntN(3), slow: r.IntN(5) * 10, zombie: r.IntN(3) > 0, quiet: r.IntN(2) == 0,
		concurrent: r.IntN(3) == 0, timeoutAfter: 100 + r.IntN(500), slowMax: 400,
	}
	steps := 300 + r.IntN(900)
	if r.IntN(5) > 0 {
		f.recoveryAt = 50 + r.IntN(steps)
	}
	return shapes[r.IntN(len(shapes))], f, steps
}

func zombieRace(r *rand.Rand) (catalog.Replication, faults, int) {
	shapes := []catalog.Replication{
		{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, {Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
		{Ensemble: 4, WriteQuorum: 3, AckQuorum: 2}, {Ensemble: 5, WriteQuorum: 5, AckQuorum: 3},
	}
	f := faults{
		drop: r.IntN(5), dup: r.IntN(4), recoveryCrash: r.IntN(2), timeout: 1 + r.IntN(2), partition: r.IntN(2),
		slow: 10 + r.IntN(30), slowMax: 600, zombie: true, quiet: true, halfAcked: true, concurrent: r.IntN(4) == 0,
		timeoutAfter: 700 + r.IntN(500), recoveryAt: 20 + r.IntN(150),
	}
	return shapes[r.IntN(len(shapes))], f, 800 + r.IntN(700)
}

// faults are one seed's fault schedule.
type faults struct {
	// Per message: percent lost, percent delivered twice, percent delivered
	// late (by 20..slowMax steps).
	drop, dup, slow, slowMax int
	// Weights in the scheduler's draw (a delivery weighs 400, a sync 120,
	// an append 100): crashes and partitions are rare.
	bookieCrash, writerCrash, recoveryCrash, partition int
	// timeout×10 weighs timing out a request older than timeoutAfter steps.
	timeout, timeoutAfter int
	// recoveryAt is the step the writer's lease moves and a new writer
	// starts recovering (0: never during faults). The old writer crashes
	// then, unless zombie: it lives on, appending (or, quiet, not); with
	// halfAcked the move waits for an add that has some acks but not Qa.
	// concurrent starts two recoveries at once.
	recoveryAt                           int
	zombie, quiet, halfAcked, concurrent bool
}

func runSim(seed uint64, opt simOptions) *world {
	r := rand.New(rand.NewPCG(seed, 99))
	var (
		rep   catalog.Replication
		f     faults
		steps int
	)
	if opt.profile == profileZombieRace {
		rep, f, steps = zombieRace(r)
	} else {
		rep, f, steps = mixedFaults(r)
	}
	cfg := ledger.Config{Replication: rep, MaxInFlight: 1 + r.IntN(6), RecoveryReadWindow: 1 + r.IntN(3), MaxEnsembleChanges: 10}
	if opt.profile == profileZombieRace {
		cfg.MaxInFlight = 1 + r.IntN(2) // fewer adds to run into the fence first
	}
	if opt.noReadFence {
		ledger.UnsafeNoReadFence(&cfg)
	}
	// 0-2 spare bookies: with none, a failed bookie can only rejoin.
	w := newWorld(seed, rep, rep.Ensemble+r.IntN(3), cfg)
	w.verbose = opt.verbose
	w.slow, w.slowMax, w.timeoutAfter, w.lossPct, w.dupPct = f.slow, f.slowMax, f.timeoutAfter, f.drop, f.dup
	w.logf("seed %d: %+v faults %+v in-flight %d window %d", seed, rep, f, cfg.MaxInFlight, cfg.RecoveryReadWindow)
	w.writer = newWriterClient(w)
	for range 1 + r.IntN(2) {
		newReaderClient(w)
	}
	w.rereplicate, w.rrSabotage = opt.rrForce || r.IntN(2) == 0, opt.rrSabotage
	if opt.rrForce {
		f.bookieCrash += 10 // so that a new bookie sometimes crashes before it syncs
	}
	for w.steps < steps {
		w.steps++
		w.chaosStep(f)
	}
	w.heal()
	w.finalChecks()
	return w
}

// chaosStep takes one random step while faults happen.
func (w *world) chaosStep(f faults) {
	var opts []func()
	var weights []int
	add := func(weight int, fn func()) {
		if weight > 0 {
			opts = append(opts, fn)
			weights = append(weights, weight)
		}
	}
	if ready := w.deliverable(); len(ready) > 0 {
		add(400, func() { w.deliverAt(ready[w.rng.IntN(len(ready))]) })
	}
	add(f.partition, func() {
		clients := []string{w.writer.name}
		for _, rc := range w.recoveries {
			clients = append(clients, rc.name)
		}
		w.partition(clients[w.rng.IntN(len(clients))], w.order[w.rng.IntN(len(w.order))], w.steps+10+w.rng.IntN(200))
	})
	up, down := w.bookiesBy(true), w.bookiesBy(false)
	if len(up) > 0 {
		add(120, func() { up[w.rng.IntN(len(up))].sync() })
		add(f.bookieCrash, func() { up[w.rng.IntN(len(up))].crash() })
	}
	if len(down) > 0 {
		add(30, func() { down[w.rng.IntN(len(down))].restart() })
	}
	if wr := w.writer; wr.alive && !wr.stopped && !wr.closing {
		if !f.quiet || len(w.recoveries) == 0 {
			add(100, wr.append)
		}
		add(30, func() { wr.step(ledger.Tick{}) })
		add(10*f.timeout, func() { wr.timeoutOne() })
		if w.steps > 100 {
			add(f.writerCrash, wr.crash)
		}
		add(w.steps/500, func() { wr.closing = true; wr.step(ledger.Close{}) })
	}
	active := 0
	for _, rc := range w.recoveries {
		if rc.active() {
			active++
			add(10*f.timeout, func() { rc.timeoutOne() })
			add(f.recoveryCrash, rc.crash)
		}
	}
	switch {
	case w.cat.closedEnd != nil || f.recoveryAt == 0 || len(w.recoveries) >= 8:
	case len(w.recoveries) == 0 && w.steps >= f.recoveryAt && (!f.halfAcked || w.writer.halfAcked() || w.steps > 3*f.recoveryAt):
		// The writer's lease moves: the old writer crashed, or lives on as
		// a zombie that has not noticed yet.
		if !f.zombie {
			w.writer.crash()
		}
		startRecovery(w)
		if f.concurrent {
			startRecovery(w)
		}
	case len(w.recoveries) > 0 && active == 0:
		add(10, func() { startRecovery(w) }) // the new writer retries
	}
	if w.rereplicate && w.cat.closedEnd != nil && !slices.ContainsFunc(w.rereplications, (*rereplicatorClient).active) && len(w.rereplications) < 4 {
		add(20, func() { startRereplication(w, w.rrSabotage) })
	}
	for _, rr := range w.rereplications {
		if rr.active() {
			add(10*f.timeout, func() { rr.timeoutOne() })
		}
	}
	for _, rd := range w.readers {
		if rd.alive {
			add(30, rd.pollLac)
			add(60, func() { rd.readNext() })
			add(10, func() { rd.step(ledger.SpeculativeTimeout{Entry: rd.next}) })
			add(10*f.timeout, func() { rd.timeoutOne() })
		}
	}
	total := 0
	for _, x := range weights {
		total += x
	}
	if total == 0 {
		return
	}
	n := w.rng.IntN(total)
	for i, x := range weights {
		if n < x {
			opts[i]()
			return
		}
		n -= x
	}
}

func (w *world) bookiesBy(up bool) []*bookie {
	var out []*bookie
	for _, id := range w.order {
		if b := w.bookies[id]; b.up == up && !b.lost {
			out = append(out, b)
		}
	}
	return out
}

// heal stops the faults and runs until the ledger is closed, every
// recovery has settled and every reader has read the whole ledger.
func (w *world) heal() {
	w.logf("faults stop")
	w.slow, w.cuts, w.lossPct, w.dupPct = 0, nil, 0, 0
	for _, m := range w.net {
		m.due = 0
	}
	for _, b := range w.bookiesBy(false) {
		b.restart()
	}
	if wr := w.writer; wr.alive && !wr.stopped && len(w.recoveries) == 0 && w.rng.IntN(2) == 0 {
		wr.closing = true
		wr.step(ledger.Close{}) // a graceful close instead of a recovery
	}
	final := false
	for i := 0; i < 100_000; i++ {
		w.steps++
		if len(w.net) > 0 {
			if w.rng.IntN(4) == 0 {
				for _, b := range w.bookiesBy(true) {
					b.sync()
				}
			}
			w.deliverAt(w.rng.IntN(len(w.net)))
			continue
		}
		for _, b := range w.bookiesBy(true) {
			b.sync()
		}
		if len(w.net) > 0 {
			continue
		}
		// Quiet: time out what will never be answered, then nudge.
		w.writer.timeoutAll()
		for _, rc := range w.recoveries {
			rc.timeoutAll()
		}
		for _, rd := range w.readers {
			rd.timeoutAll()
		}
		for _, rr := range w.rereplications {
			rr.timeoutAll()
		}
		if len(w.net) > 0 {
			continue
		}
		rrActive := slices.ContainsFunc(w.rereplications, (*rereplicatorClient).active)
		if w.rereplicate && w.cat.closedEnd != nil && w.moves == 0 && !rrActive && len(w.rereplications) < 4 {
			if startRereplication(w, w.rrSabotage) == nil {
				w.rereplicate = false // no spare bookie outside the ledger's segments
			}
			continue
		}
		if wr := w.writer; wr.alive && !wr.stopped && !wr.closed {
			wr.step(ledger.Tick{}) // retries a failed ensemble change
		}
		if w.cat.closedEnd == nil && !slices.ContainsFunc(w.recoveries, (*recoveryClient).active) && !(w.writer.alive && w.writer.closing && !w.writer.stopped) {
			startRecovery(w)
			continue
		}
		if w.cat.closedEnd != nil && !final {
			final = true
			newReaderClient(w) // a fresh reader reads the closed ledger from the start
		}
		progressed := false
		for _, rd := range w.readers {
			if rd.alive && !rd.finished() {
				if !rd.readNext() {
					rd.pollLac()
					rd.refresh()
				}
				progressed = true
			}
		}
		if len(w.net) == 0 && !progressed && w.cat.closedEnd != nil && !slices.ContainsFunc(w.recoveries, (*recoveryClient).active) &&
			!slices.ContainsFunc(w.rereplications, (*rereplicatorClient).active) {
			return
		}
	}
	w.violate("the ledger did not settle after faults stopped (closed: %v)", w.cat.closedEnd != nil)
}

func (w *world) finalChecks() {
	if w.cat.closedEnd == nil {
		w.violate("ledger never closed")
		return
	}
	end := *w.cat.closedEnd
	m := w.cat.meta
	if m.State != catalog.LedgerClosed || m.LastEntry != end {
		w.violate("catalog end moved: %v at %d, first closed at %d", m.State, m.LastEntry, end)
	}
	if w.maxAcked > end {
		w.violate("entry %d was acknowledged but the ledger closed at %d (acknowledged entry lost)", w.maxAcked, end)
	}
	for _, d := range w.decisions {
		if d < w.maxAcked {
			w.violate("a recovery decided the end is %d, below acknowledged entry %d", d, w.maxAcked)
		}
	}
	for e := int64(0); e <= end; e++ {
		seg := m.Ensembles[0]
		for _, s := range m.Ensembles {
			if s.FirstEntry <= e {
				seg = s
			}
		}
		copies := 0
		for i := range w.rep.WriteQuorum {
			b := w.bookies[seg.Bookies[(int(e)+i)%w.rep.Ensemble]]
			if p, ok := b.durable[e]; ok && string(p) == string(w.payloads[e]) {
				copies++
			}
		}
		if copies < w.rep.AckQuorum {
			w.violate("entry %d (within the closed end %d) has %d durable copies in its write set of %v, want >= %d", e, end, copies, seg, w.rep.AckQuorum)
		}
	}
	for _, s := range m.Ensembles {
		for _, id := range s.Bookies {
			if w.bookies[id].lost {
				w.violate("segment %+v names %s, lost for good", s, id)
			}
		}
	}
	for _, rd := range w.readers {
		if rd.alive && rd.next != end+1 {
			w.violate("%s read up to %d of a ledger closed at %d", rd.name, rd.next-1, end)
		}
	}
}

type simStats struct {
	runs, acked, closedEmpty, recoveries, changes, rejoins, fenced, moves int
}

func (s *simStats) add(w *world) {
	s.runs++
	s.acked += int(w.maxAcked + 1)
	if w.cat.closedEnd != nil && *w.cat.closedEnd < 0 {
		s.closedEmpty++
	}
	s.recoveries += len(w.recoveries)
	s.changes += len(w.cat.meta.Ensembles) - 1
	s.rejoins += w.rejoins
	s.moves += w.moves
	if errors.Is(w.writer.lw.Err(), ledger.ErrFenced) {
		s.fenced++
	}
}

func (s simStats) String() string {
	return fmt.Sprintf("%d entries acknowledged, %d recovery attempts, %d ensemble changes, %d rejoins, %d writers fenced, %d ledgers closed empty, %d replica moves",
		s.acked, s.recoveries, s.changes, s.rejoins, s.fenced, s.closedEmpty, s.moves)
}
