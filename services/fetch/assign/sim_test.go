package assign

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The simulation: a linearizable lease store modelled on pkg/bookkeeping's
// contract (an owner and an epoch per partition; Acquire succeeds when the
// lease is free or its owner is not live and bumps the epoch; Release by the
// owner at its epoch), and up to maxSimMembers members that join, leave,
// crash and expire while they balance with a planner (Decide, or a broken one
// to prove the checks can fail). Every store operation is one step; after
// every step the checker looks at the store and at what each member believes
// it holds.
//
// Each round every member plans on a snapshot of the store taken up to
// simParams.lag steps earlier, then all members' operations run in a random
// interleaving, with membership changes mixed in during the churn phase.
// A snapshot is never older than the member's own last operation, as
// bookkeeping's ListLeases guarantees (read-your-acknowledged-writes) —
// except for a quarter of the snapshots during churn, to test safety on
// wilder views. In the settle phase membership is fixed, a snapshot is also
// no older than the start of the previous round (a member reads the store at
// the start of its round; what it misses are the writes of rounds
// overlapping its own), and the assignment must be balanced within
// settleBound rounds.

var (
	flagSeed  = flag.Uint64("assign.seed", 0, "run the simulation with this seed only")
	flagSeeds = flag.Int("assign.seeds", 0, "number of simulation seeds (0: the default)")
)

const maxSimMembers = 8

// planner is Decide's signature, so the simulation can run broken planners.
type planner func(Config, Input) (Plan, error)

// simOptions select what runs; the zero value is the real thing.
type simOptions struct {
	plan planner // nil means Decide
	// noPlanChecks turns off the checks of each plan against the view it
	// was made from, so the checks of the store state are proven alone.
	noPlanChecks bool
	// grantHeld: the store's Acquire ignores a live owner.
	grantHeld bool
	// keepEpoch: the store's Acquire does not bump the epoch.
	keepEpoch bool
}

// simParams are drawn from the seed.
type simParams struct {
	cfg          Config
	partitions   int32
	members      int // initial members
	lag          int // how many steps old a snapshot may be
	churnRounds  int
	rawOwners    bool // Owners includes non-live owners (as free)
	eventPercent int  // chance of a membership event between two steps during churn
}

func drawParams(rng *rand.Rand) simParams {
	p := simParams{
		partitions:   int32(rng.IntN(65)),
		members:      1 + rng.IntN(maxSimMembers),
		lag:          rng.IntN(17),
		churnRounds:  rng.IntN(16),
		rawOwners:    rng.IntN(2) == 0,
		eventPercent: 1 + rng.IntN(10),
	}
	if rng.IntN(3) > 0 { // otherwise the defaults
		p.cfg = Config{MaxAcquirePerRound: 1 + rng.IntN(8), MaxReleasePerRound: 1 + rng.IntN(8)}
	}
	if rng.IntN(8) == 0 {
		p.partitions = int32(rng.IntN(300))
	}
	return p
}

// settleBound is how many rounds after membership stops changing the
// assignment must be balanced within. The rate term: the extras are
// released at MaxReleasePerRound per member and round, the shortfalls filled
// at MaxAcquirePerRound. The slack: in the first round a member may still
// plan on the old membership (and take too much); a release or acquire is
// visible to every member only two rounds later, since a view may be up to
// a round old; and a view that misses what others did last round can put a
// member's slot of the free list off by a little (a collision, or a round of
// waiting). Over 300,000 seeds the worst run needed 4 rounds beyond the rate
// term; TestSimulation logs its worst.
func settleBound(p simParams) int {
	return rateRounds(p) + settleSlack
}

const settleSlack = 6

func rateRounds(p simParams) int {
	cfg := p.cfg.withDefaults()
	return ceilDiv(int(p.partitions), cfg.MaxReleasePerRound) + ceilDiv(int(p.partitions), cfg.MaxAcquirePerRound)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// simStore is the lease store: the truth the checker compares beliefs with.
type simStore struct {
	owner     []string
	epoch     []int64
	live      map[string]bool
	grantHeld bool
	keepEpoch bool
}

var (
	errNotLive = errors.New("member not live")
	errHeld    = errors.New("lease held by a live member")
	errFenced  = errors.New("fenced")
)

func (s *simStore) acquire(p int32, m string) (int64, error) {
	if !s.live[m] {
		return 0, errNotLive
	}
	if s.owner[p] == m {
		return s.epoch[p], nil // a retried Acquire
	}
	if s.owner[p] != "" && s.live[s.owner[p]] && !s.grantHeld {
		return 0, errHeld
	}
	if !s.keepEpoch {
		s.epoch[p]++
	}
	s.owner[p] = m
	return s.epoch[p], nil
}

func (s *simStore) release(p int32, m string, epoch int64) error {
	if s.owner[p] != m || s.epoch[p] != epoch {
		return errFenced
	}
	s.owner[p] = ""
	return nil
}

type simOp struct {
	acquire bool
	p       int32
}

type simMember struct {
	id     string
	held   map[int32]int64 // what Acquire answers told it, less what it released
	queue  []simOp         // this round's plan, not yet applied
	lastOp int             // the step of its last store operation
	zombie bool            // expired: not live, still applying this round's plan
}

type snapshot struct {
	owner []string
	live  []string // sorted
}

type sim struct {
	rng     *rand.Rand
	p       simParams
	opts    simOptions
	st      simStore
	members []*simMember // running processes (live or zombie), in join order
	nextID  int
	step    int
	hist    []snapshot // hist[i] is the state after step histAt+i
	histAt  int
	// roundAt and prevRoundAt are the steps this round and the one before
	// started at.
	roundAt, prevRoundAt int
	// checker state
	prevOwner []string
	maxEpoch  []int64
	trace     []string // recent events, for failure reports
}

func newSim(seed uint64, opts simOptions) *sim {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := drawParams(rng)
	if opts.plan == nil {
		opts.plan = Decide
	}
	s := &sim{
		rng:  rng,
		p:    p,
		opts: opts,
		st: simStore{
			owner:     make([]string, p.partitions),
			epoch:     make([]int64, p.partitions),
			live:      make(map[string]bool),
			grantHeld: opts.grantHeld,
			keepEpoch: opts.keepEpoch,
		},
		prevOwner: make([]string, p.partitions),
		maxEpoch:  make([]int64, p.partitions),
	}
	s.record()
	return s
}

// run plays the churn phase and the settle phase and returns the first
// violation, or how many settle rounds it took to balance.
func (s *sim) run() (int, error) {
	for range s.p.members {
		if err := s.join(); err != nil {
			return 0, err
		}
	}
	for range s.p.churnRounds {
		if err := s.round(true); err != nil {
			return 0, err
		}
	}
	if len(s.liveMembers()) == 0 {
		if err := s.join(); err != nil {
			return 0, err
		}
	}
	bound := settleBound(s.p)
	for r := 1; r <= bound; r++ {
		if err := s.round(false); err != nil {
			return 0, err
		}
		if s.balanced() != nil {
			continue
		}
		// Balanced: it must stay so, with nothing planned.
		before := slices.Clone(s.st.owner)
		for range 3 {
			if err := s.round(false); err != nil {
				return 0, err
			}
			if err := s.balanced(); err != nil {
				return 0, fmt.Errorf("balanced after %d settle rounds, then not: %w", r, err)
			}
		}
		if !slices.Equal(before, s.st.owner) {
			return 0, fmt.Errorf("balanced after %d settle rounds, then leases moved", r)
		}
		return r, nil
	}
	return 0, fmt.Errorf("not balanced %d rounds after membership stopped changing: %w", bound, s.balanced())
}

// round plans every live member on a snapshot, then applies the plans
// interleaved, with membership events if churn.
func (s *sim) round(churn bool) error {
	s.prevRoundAt, s.roundAt = s.roundAt, s.step
	for _, m := range s.members {
		if m.zombie {
			continue
		}
		in := s.input(m, s.pickSnapshot(m, churn))
		plan, err := s.opts.plan(s.p.cfg, in)
		if err != nil {
			return fmt.Errorf("step %d: %s: planner: %w", s.step, m.id, err)
		}
		if !s.opts.noPlanChecks {
			if err := checkPlan(s.p.cfg, in, plan); err != nil {
				return fmt.Errorf("step %d: %s: %w (view %v)", s.step, m.id, err, in)
			}
		}
		m.queue = m.queue[:0]
		for _, p := range plan.Release {
			m.queue = append(m.queue, simOp{false, p})
		}
		for _, p := range plan.Acquire {
			m.queue = append(m.queue, simOp{true, p})
		}
	}
	for {
		if churn && s.rng.IntN(100) < s.p.eventPercent {
			if err := s.event(); err != nil {
				return err
			}
		}
		var ready []*simMember
		for _, m := range s.members {
			if len(m.queue) > 0 {
				ready = append(ready, m)
			}
		}
		if len(ready) == 0 {
			break
		}
		m := ready[s.rng.IntN(len(ready))]
		op := m.queue[0]
		m.queue = m.queue[1:]
		if err := s.apply(m, op); err != nil {
			return err
		}
	}
	// Zombies have applied what they planned; their process ends.
	s.members = slices.DeleteFunc(s.members, func(m *simMember) bool { return m.zombie })
	return nil
}

func (s *sim) apply(m *simMember, op simOp) error {
	if op.acquire {
		e, err := s.st.acquire(op.p, m.id)
		if err == nil {
			m.held[op.p] = e
		}
		s.tracef("%s acquire %d: epoch %d, %v", m.id, op.p, e, err)
	} else {
		e, ok := m.held[op.p]
		if !ok {
			s.tracef("%s release %d: not held, skipped", m.id, op.p)
			return nil // the view was older than what the member knows
		}
		err := s.st.release(op.p, m.id, e)
		delete(m.held, op.p) // released or lost: either way not ours
		s.tracef("%s release %d at epoch %d: %v", m.id, op.p, e, err)
	}
	m.lastOp = s.step + 1
	return s.stepDone()
}

// event joins, leaves, crashes or expires a member.
func (s *sim) event() error {
	live := s.liveMembers()
	if len(live) == 0 || (len(live) < maxSimMembers && s.rng.IntN(2) == 0) {
		if len(live) == maxSimMembers {
			return nil
		}
		return s.join()
	}
	m := live[s.rng.IntN(len(live))]
	switch s.rng.IntN(3) {
	case 0: // Leave: gives its leases up at once.
		m.held = nil
		m.queue = nil
		s.st.live[m.id] = false
		s.members = slices.DeleteFunc(s.members, func(x *simMember) bool { return x == m })
		s.tracef("%s leaves", m.id)
	case 1: // Crash: the process is gone; its session runs out.
		s.st.live[m.id] = false
		s.members = slices.DeleteFunc(s.members, func(x *simMember) bool { return x == m })
		s.tracef("%s crashes", m.id)
	case 2: // Expire: its session ran out but the process keeps going a while.
		s.st.live[m.id] = false
		m.zombie = true
		s.tracef("%s expires", m.id)
	}
	return s.stepDone()
}

func (s *sim) join() error {
	// Ids in random order, so joining members land anywhere in the sort.
	id := fmt.Sprintf("m%02d-%d", s.rng.IntN(100), s.nextID)
	s.nextID++
	s.st.live[id] = true
	s.members = append(s.members, &simMember{id: id, held: make(map[int32]int64), lastOp: s.step + 1})
	s.tracef("%s joins", id)
	return s.stepDone()
}

func (s *sim) liveMembers() []*simMember {
	var live []*simMember
	for _, m := range s.members {
		if !m.zombie {
			live = append(live, m)
		}
	}
	return live
}

// stepDone ends a step: records the state and checks it.
func (s *sim) stepDone() error {
	s.step++
	s.record()
	if err := s.check(); err != nil {
		return fmt.Errorf("step %d: %w\nrecent events:\n  %s", s.step, err, strings.Join(s.trace, "\n  "))
	}
	return nil
}

func (s *sim) tracef(format string, args ...any) {
	const keep = 30
	if len(s.trace) == keep {
		s.trace = slices.Delete(s.trace, 0, 1)
	}
	s.trace = append(s.trace, fmt.Sprintf("%d: ", s.step+1)+fmt.Sprintf(format, args...))
}

func (s *sim) record() {
	snap := snapshot{owner: slices.Clone(s.st.owner)}
	for id, ok := range s.st.live {
		if ok {
			snap.live = append(snap.live, id)
		}
	}
	slices.Sort(snap.live)
	s.hist = append(s.hist, snap)
	if len(s.hist) > s.p.lag+1 {
		s.hist = slices.Delete(s.hist, 0, 1)
		s.histAt++
	}
}

// pickSnapshot returns the state after a random one of the last lag steps.
// Outside churn the snapshot is also no older than the member's own last
// operation (read-your-writes) and than the start of the previous round: a
// member reads the store at the start of its round and sees every write
// acknowledged before, so what it misses are the writes of members whose
// rounds overlap its own.
func (s *sim) pickSnapshot(m *simMember, churn bool) snapshot {
	lo := s.histAt
	if !churn || s.rng.IntN(4) > 0 {
		lo = max(lo, m.lastOp)
	}
	if !churn {
		lo = max(lo, s.prevRoundAt)
	}
	return s.hist[lo-s.histAt+s.rng.IntN(s.step-lo+1)]
}

// input is what m would read from the store at snap.
func (s *sim) input(m *simMember, snap snapshot) Input {
	in := Input{
		Me:         m.id,
		Members:    slices.Clone(snap.live),
		Partitions: s.p.partitions,
		Owners:     make(map[int32]string),
	}
	s.rng.Shuffle(len(in.Members), func(i, j int) { in.Members[i], in.Members[j] = in.Members[j], in.Members[i] })
	for p, o := range snap.owner {
		// ListLeases reports owners that are not live as "".
		if o != "" && (s.p.rawOwners || slices.Contains(snap.live, o)) {
			in.Owners[int32(p)] = o
		}
	}
	return in
}

// check asserts the safety invariants on the state after a step.
func (s *sim) check() error {
	// At most one live member believes it holds a partition, and what it
	// believes is what the store says.
	believer := make(map[int32]string)
	for _, m := range s.members {
		if m.zombie || !s.st.live[m.id] {
			continue
		}
		for p := range m.held {
			if other, dup := believer[p]; dup {
				return fmt.Errorf("partition %d owned by both %s and %s", p, other, m.id)
			}
			believer[p] = m.id
		}
	}
	for _, m := range s.members {
		if m.zombie || !s.st.live[m.id] {
			continue
		}
		for p, e := range m.held {
			if s.st.owner[p] != m.id || s.st.epoch[p] != e {
				return fmt.Errorf("%s believes it owns partition %d at epoch %d; the store says %q at epoch %d",
					m.id, p, e, s.st.owner[p], s.st.epoch[p])
			}
		}
	}
	// Epochs strictly increase with every change of owner, and never change
	// otherwise.
	for p, o := range s.st.owner {
		e := s.st.epoch[p]
		switch {
		case o != "" && o != s.prevOwner[p]:
			if e <= s.maxEpoch[p] {
				return fmt.Errorf("partition %d: %s got epoch %d, not above the previous %d", p, o, e, s.maxEpoch[p])
			}
		case e != s.maxEpoch[p]:
			return fmt.Errorf("partition %d: epoch moved from %d to %d without a new owner", p, s.maxEpoch[p], e)
		}
		s.prevOwner[p], s.maxEpoch[p] = o, e
	}
	return nil
}

// balanced reports why the store's state is not balanced: every partition
// owned by a live member, and every live member holding exactly its Share.
func (s *sim) balanced() error {
	var live []string
	for id, ok := range s.st.live {
		if ok {
			live = append(live, id)
		}
	}
	held := make(map[string]int)
	for p, o := range s.st.owner {
		if !s.st.live[o] {
			return fmt.Errorf("partition %d is free", p)
		}
		held[o]++
	}
	for _, id := range live {
		if want := Share(live, id, s.p.partitions); held[id] != want {
			return fmt.Errorf("%s holds %d partitions, its share is %d", id, held[id], want)
		}
	}
	return nil
}

// checkPlan checks a plan against the view it was made from, independently
// of how Decide computes it.
func checkPlan(cfg Config, in Input, plan Plan) error {
	cfg = cfg.withDefaults()
	if len(plan.Acquire) > 0 && len(plan.Release) > 0 {
		return errors.New("plan both acquires and releases")
	}
	for _, list := range [][]int32{plan.Acquire, plan.Release} {
		for i, p := range list {
			if p < 0 || p >= in.Partitions {
				return fmt.Errorf("plan names partition %d, outside [0, %d)", p, in.Partitions)
			}
			if i > 0 && list[i-1] >= p {
				return fmt.Errorf("plan list %v not strictly ascending", list)
			}
		}
	}
	if len(plan.Acquire) > cfg.MaxAcquirePerRound || len(plan.Release) > cfg.MaxReleasePerRound {
		return fmt.Errorf("plan %+v exceeds the per-round limits %+v", plan, cfg)
	}
	isMember := slices.Contains(in.Members, in.Me)
	held := 0
	for _, o := range in.Owners {
		if o == in.Me {
			held++
		}
	}
	share := Share(in.Members, in.Me, in.Partitions)
	for _, p := range plan.Acquire {
		if o := in.Owners[p]; o != "" && slices.Contains(in.Members, o) {
			return fmt.Errorf("plans to acquire partition %d, held by live member %s", p, o)
		}
	}
	for _, p := range plan.Release {
		if in.Owners[p] != in.Me {
			return fmt.Errorf("plans to release partition %d, not its own", p)
		}
	}
	switch {
	case len(plan.Acquire) > 0 && !isMember:
		return errors.New("plans to acquire while not a member")
	case len(plan.Acquire) > 0 && len(plan.Acquire) > share-held:
		return fmt.Errorf("plans to acquire %d partitions, more than its shortfall %d-%d", len(plan.Acquire), share, held)
	case len(plan.Release) > 0 && len(plan.Release) > held-share:
		return fmt.Errorf("plans to release %d partitions, more than its extras %d-%d", len(plan.Release), held, share)
	}
	return nil
}

// seeds returns the seeds to run: -assign.seed alone, or n from a random
// base (logged, so a failure can be replayed).
func seeds(t *testing.T, n int) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	if *flagSeeds > 0 {
		n = *flagSeeds
	}
	base := rand.Uint64() >> 1
	t.Logf("seeds %d..%d (replay one with -assign.seed=N)", base, base+uint64(n)-1)
	s := make([]uint64, n)
	for i := range s {
		s[i] = base + uint64(i)
	}
	return s
}

func TestSimulation(t *testing.T) {
	n := 500
	if raceEnabled || testing.Short() {
		n = 120
	}
	worst, worstSeed := 0, uint64(0)
	for _, seed := range seeds(t, n) {
		s := newSim(seed, simOptions{})
		r, err := s.run()
		if err != nil {
			t.Fatalf("seed %d (%+v): %v", seed, s.p, err)
		}
		if r-rateRounds(s.p) > worst {
			worst, worstSeed = r-rateRounds(s.p), seed
		}
	}
	t.Logf("worst run: %d settle rounds beyond the rate term (seed %d; the bound allows %d)", worst, worstSeed, settleSlack)
}

// The checks must be able to fail: each broken planner or store is caught,
// by the check meant to catch it.
func TestSimulationCatchesBugs(t *testing.T) {
	tests := []struct {
		name string
		opts simOptions
		want string // in the error of a detecting seed
	}{
		{"planner ignores live owners", simOptions{plan: ignoreLiveOwners}, "held by live member"},
		{"planner ignores live owners, store grants held leases", simOptions{plan: ignoreLiveOwners, noPlanChecks: true, grantHeld: true}, "owned by both"},
		{"planner over-acquires", simOptions{plan: overAcquire}, "more than its shortfall"},
		{"planner over-acquires, no plan checks", simOptions{plan: overAcquire, noPlanChecks: true}, "not balanced"},
		{"planner never releases, no plan checks", simOptions{plan: neverRelease, noPlanChecks: true}, "not balanced"},
		{"planner releases too much", simOptions{plan: overRelease}, "more than its extras"},
		{"store keeps the epoch", simOptions{keepEpoch: true}, "not above the previous"},
	}
	runs := 100
	if raceEnabled || testing.Short() {
		runs = 40
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			caught := 0
			for seed := range uint64(runs) { // fixed seeds: the rates are stable
				_, err := newSim(seed+1, tt.opts).run()
				if err == nil {
					continue
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("seed %d: want an error with %q, got: %v", seed+1, tt.want, err)
				}
				caught++
			}
			t.Logf("caught in %d of %d runs", caught, runs)
			if caught < runs/4 {
				t.Errorf("caught in %d of %d runs only", caught, runs)
			}
		})
	}
}

// ignoreLiveOwners believes every partition it does not hold is free.
func ignoreLiveOwners(cfg Config, in Input) (Plan, error) {
	mine := make(map[int32]string)
	for p, o := range in.Owners {
		if o == in.Me {
			mine[p] = o
		}
	}
	in.Owners = mine
	return Decide(cfg, in)
}

// overAcquire aims at one partition more than its share: it acquires a free
// partition beyond its share when it can, and keeps it.
func overAcquire(cfg Config, in Input) (Plan, error) {
	plan, err := Decide(cfg, in)
	if err != nil || !slices.Contains(in.Members, in.Me) {
		return plan, err
	}
	held := 0
	for _, o := range in.Owners {
		if o == in.Me {
			held++
		}
	}
	share := Share(in.Members, in.Me, in.Partitions)
	if held == share+1 {
		return Plan{}, nil // keep the extra one
	}
	if held+len(plan.Acquire) != share || len(plan.Acquire) == cfg.withDefaults().MaxAcquirePerRound {
		return plan, nil
	}
	for p := range in.Partitions {
		o := in.Owners[p]
		if (o == "" || !slices.Contains(in.Members, o)) && !slices.Contains(plan.Acquire, p) {
			plan.Acquire = append(plan.Acquire, p)
			slices.Sort(plan.Acquire)
			break
		}
	}
	return plan, nil
}

func neverRelease(cfg Config, in Input) (Plan, error) {
	plan, err := Decide(cfg, in)
	plan.Release = nil
	return plan, err
}

// overRelease gives up one partition more than it should.
func overRelease(cfg Config, in Input) (Plan, error) {
	plan, err := Decide(cfg, in)
	if err != nil || len(plan.Release) == 0 || len(plan.Release) == cfg.withDefaults().MaxReleasePerRound {
		return plan, err
	}
	for p := range in.Partitions {
		if in.Owners[p] == in.Me && !slices.Contains(plan.Release, p) {
			plan.Release = append(plan.Release, p)
			slices.Sort(plan.Release)
			break
		}
	}
	return plan, nil
}
