package membership_test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/services/fetch/membership"
)

var (
	seedsFlag = flag.Int("seeds", 0, "number of simulation seeds TestSimulation runs (0: 200, or 40 under -race or -short)")
	seedFlag  = flag.Int64("seed", -1, "run only this simulation seed, with a full trace")
)

// TestSimulation runs up to five members of one group, each its own
// machine, over a model of the lease store (pkg/bookkeeping's contract:
// members live for a session timeout after their last Join or Heartbeat,
// Acquire takes a free lease — no owner, or one not live — and bumps its
// epoch, Release frees it at the holder's epoch, Leave frees a member's
// leases at once, ListLeases shows owners that are not live as free). One
// clock; every step is one thing: time passing, a member's Tick, the store
// carrying out one request, an answer reaching its member, an owner's
// RevokeDone or Advance, a member pausing (its process stops stepping for
// up to 2.5 session timeouts), crashing, leaving or joining. Requests fail
// before the store sees them, or after (the store applied them, the answer
// is lost — an Acquire then leaves the lease with the member, or gives it
// back), and answers come late. Then faults stop and the group settles.
//
// Checked after every step (invariants 1-5 of the package doc):
//
//   - the machine's own invariants (Member.Check);
//   - the owner's work equals the machine's followed leases (Follow and
//     Unfollow, each once), and what the client was told matches: an
//     added lease is followed in the same step, a revoked one was added
//     and is not followed, a lost one was told before;
//   - while a member is Live, every lease it follows is its own in the
//     store at the epoch it holds, and the store lists it live; so no
//     partition is followed by two live members;
//   - a round starts with no revoked lease past its deadline;
//   - after MemberForgotten the member holds nothing;
//   - a member follows a partition only at an epoch above every epoch it
//     followed it at before: work of that older epoch (a client told the
//     lease was lost, a trigger worker still finishing) may still try to
//     commit, and only a newer epoch fences it.
//
// After settling, every partition of a topic with a member is followed by
// exactly one member. One followed by none while the store names a live
// member as its owner is orphaned: a stray (the package doc) that was
// neither released nor acquired anew.
//
// A failing seed prints the tail of its trace; replay it in full with
// -seed N -v.
func TestSimulation(t *testing.T) {
	seeds := seedList()
	total := map[string]int{}
	for _, seed := range seeds {
		w := runSim(seed, simOptions{verbose: *seedFlag >= 0})
		if len(w.violations) > 0 {
			t.Fatalf("seed %d:\n%s", seed, runSim(seed, simOptions{verbose: true}).report())
		}
		for k, n := range w.stats {
			total[k] += n
		}
		if *seedFlag >= 0 {
			t.Log(strings.Join(w.trace, "\n"))
		}
	}
	t.Logf("%d seeds, none with a violation or an orphaned partition", len(seeds))
	var counts []string
	for _, k := range slices.Sorted(maps.Keys(total)) {
		counts = append(counts, fmt.Sprintf("%s %d", k, total[k]))
	}
	t.Logf("what happened: %s", strings.Join(counts, ", "))
}

// TestSimulationCatchesKeptLeases: a member that keeps its leases when the
// store forgot it follows them again once it re-joins, though other
// members took them meanwhile.
func TestSimulationCatchesKeptLeases(t *testing.T) {
	catches(t, simOptions{keepLeases: true}, "follows")
}

// TestSimulationCatchesBeatAtAnswer: a member that counts its liveness
// from a heartbeat's answer instead of its sending trusts its leases after
// the store let them go, when answers come late.
func TestSimulationCatchesBeatAtAnswer(t *testing.T) {
	catches(t, simOptions{beatAtAnswer: true}, "follows")
}

func catches(t *testing.T, opt simOptions, want string) {
	t.Helper()
	const maxSeeds = 2000
	for seed := range uint64(maxSeeds) {
		w := runSim(seed, opt)
		if len(w.violations) == 0 {
			continue
		}
		t.Logf("seed %d fails (%d seeds searched):\n  %s", seed, seed+1, strings.Join(w.violations, "\n  "))
		if !slices.ContainsFunc(w.violations, func(v string) bool { return strings.Contains(v, want) }) {
			opt.verbose = true
			t.Fatalf("expected a violation naming %q:\n%s", want, runSim(seed, opt).report())
		}
		if w := runSim(seed, simOptions{}); len(w.violations) > 0 {
			t.Fatalf("seed %d also fails with the rule:\n%s", seed, runSim(seed, simOptions{verbose: true}).report())
		}
		return
	}
	t.Fatalf("no violation in %d seeds with the rule switched off: the simulation cannot see it", maxSeeds)
}

// TestSimulationCatchesStrays: a member that counts the leases the store
// names it owner of, but that it does not hold, as its own (neither
// releasing nor acquiring them) leaves them orphaned.
func TestSimulationCatchesStrays(t *testing.T) {
	catches(t, simOptions{keepStrays: true}, "orphaned")
}

// TestSimulationCatchesFollowKept: a member that follows a lease the store
// gave back at an epoch it already had works on it again at an epoch
// whose older work is not fenced.
func TestSimulationCatchesFollowKept(t *testing.T) {
	catches(t, simOptions{followKept: true}, "worked on it")
}

// TestSimulationDeterministic: a seed replays exactly.
func TestSimulationDeterministic(t *testing.T) {
	for seed := range uint64(5) {
		a := runSim(seed, simOptions{verbose: true})
		b := runSim(seed, simOptions{verbose: true})
		if !slices.Equal(a.trace, b.trace) {
			t.Fatalf("seed %d ran differently twice", seed)
		}
	}
}

func seedList() []uint64 {
	if *seedFlag >= 0 {
		return []uint64{uint64(*seedFlag)}
	}
	n := *seedsFlag
	if n == 0 {
		n = 200
		if raceEnabled || testing.Short() {
			n = 40 // the race detector slows this one goroutine and can find nothing in it
		}
	}
	var out []uint64
	for s := range n {
		out = append(out, uint64(s))
	}
	return out
}

type simOptions struct {
	keepLeases, beatAtAnswer bool
	keepStrays, followKept   bool
	verbose                  bool
}

const (
	simTimeout  = 3 * time.Second
	simRevoke   = time.Second
	simInterval = 200 * time.Millisecond
	maxMembers  = 5
)

// faults are one seed's fault rates (percent, or weights in the draw).
type faults struct {
	fail, lost, slow         int           // per request: fails unseen, applied but answer lost, answered late
	slowMax                  time.Duration // how late
	pause, crash, leave, add int           // weights
}

type world struct {
	rng        *rand.Rand
	opt        simOptions
	f          faults
	now        time.Time
	store      *store
	members    []*simMember
	ids        int
	topics     map[string]int32
	trace      []string
	violations []string
	stats      map[string]int              // events and some actions, by kind
	followers  map[membership.Key][]string // check's, kept to spare allocations
}

func runSim(seed uint64, opt simOptions) *world {
	r := rand.New(rand.NewPCG(seed, 23))
	w := &world{rng: r, opt: opt, now: time.Unix(0, 0), topics: map[string]int32{"a": int32(1 + r.IntN(8))},
		followers: map[membership.Key][]string{}, stats: map[string]int{}}
	if r.IntN(2) == 0 {
		w.topics["b"] = int32(r.IntN(6))
	}
	w.store = &store{members: map[string]storeMember{}, leases: map[membership.Key]*storeLease{}}
	w.f = faults{fail: r.IntN(15), lost: r.IntN(10), slow: r.IntN(40), slowMax: time.Duration(1+r.IntN(3000)) * time.Millisecond,
		pause: r.IntN(4), crash: r.IntN(2), leave: r.IntN(2), add: 1 + r.IntN(4)}
	w.logf("seed %d: topics %v faults %+v", seed, w.topics, w.f)
	for range 1 + r.IntN(3) {
		w.addMember()
	}
	steps := 2000 + r.IntN(4000)
	for range steps {
		if len(w.violations) > 0 {
			return w
		}
		w.chaosStep(true)
	}
	// Settle: no more faults or membership changes; ten session timeouts
	// leave every revoke, expiry and round time to finish.
	w.f = faults{}
	for _, m := range w.members {
		m.pausedUntil = time.Time{}
	}
	end := w.now.Add(10 * simTimeout)
	for w.now.Before(end) && len(w.violations) == 0 {
		w.chaosStep(false)
	}
	if len(w.violations) == 0 {
		w.settledChecks()
	}
	return w
}

// logf adds to the trace of a verbose run (a failing seed runs again
// verbose for its report: runs are deterministic).
func (w *world) logf(format string, args ...any) {
	if w.opt.verbose {
		w.trace = append(w.trace, fmt.Sprintf("%8v ", w.now.Sub(time.Unix(0, 0)))+fmt.Sprintf(format, args...))
	}
}

func (w *world) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	w.logf("VIOLATION: %s", v)
	w.violations = append(w.violations, v)
}

func (w *world) report() string {
	return strings.Join(w.violations, "\n") + "\n--- trace (tail):\n" + strings.Join(w.trace[max(len(w.trace)-200, 0):], "\n")
}

func (w *world) pct(p int) bool { return p > 0 && w.rng.IntN(100) < p }

// chaosStep takes one random step; with churn, members pause, crash,
// leave and join.
func (w *world) chaosStep(churn bool) {
	var opts []func()
	var weights []int
	add := func(weight int, fn func()) {
		if weight > 0 {
			opts = append(opts, fn)
			weights = append(weights, weight)
		}
	}
	add(150, func() { w.now = w.now.Add(time.Duration(1+w.rng.IntN(60)) * time.Millisecond) })
	for _, m := range w.members {
		if m.crashed || m.left || w.now.Before(m.pausedUntil) {
			continue
		}
		switch {
		case !m.joined && len(m.queue) == 0 && len(m.inbox) == 0:
			add(30, func() { m.queue = append(m.queue, req{join: true, sent: w.now}) })
		case m.joined && !m.busy && !w.now.Before(m.nextTick):
			add(100, func() {
				m.nextTick = w.now.Add(simInterval)
				m.busy = true
				w.step(m, membership.Tick{Now: w.now})
			})
		}
		if len(m.queue) > 0 {
			add(80, func() { w.process(m) })
		}
		if i := m.ready(w.now); i >= 0 {
			add(80, func() { w.deliver(m, i) })
		}
		if len(m.side) > 0 {
			add(40, func() { w.processSide(m) })
		}
		m.buf = m.m.AppendFollowed(m.buf[:0])
		if m.m.Held() > len(m.buf) {
			add(15, func() {
				held := m.m.HeldLeases()
				var revoking []membership.Key
				for _, k := range slices.SortedFunc(maps.Keys(held), compareKeys) {
					if held[k].Revoking {
						revoking = append(revoking, k)
					}
				}
				w.step(m, membership.RevokeDone{Key: revoking[w.rng.IntN(len(revoking))]})
			})
		}
		if len(m.buf) > 0 {
			add(10, func() {
				k := m.buf[w.rng.IntN(len(m.buf))]
				h, _ := m.m.Lease(k)
				w.step(m, membership.Advance{Key: k, Epoch: h.Epoch, From: h.Next, To: h.Next + int64(1+w.rng.IntN(10))})
			})
		}
		if churn {
			add(w.f.pause, func() {
				m.pausedUntil = w.now.Add(time.Duration(w.rng.Int64N(int64(5 * simTimeout / 2))))
				w.stats["pauses"]++
				w.logf("%s paused until %v", m.id, m.pausedUntil.Sub(time.Unix(0, 0)))
			})
			add(w.f.crash, func() { m.crashed = true; w.stats["crashes"]++; w.logf("%s crashed", m.id) })
			if m.joined {
				add(w.f.leave, func() {
					m.left, m.queue, m.inbox = true, nil, nil
					w.step(m, membership.Leave{})
				})
			}
		}
	}
	if churn && w.running() < maxMembers {
		add(w.f.add, w.addMember)
	}
	n := w.rng.IntN(sum(weights))
	for i, x := range weights {
		if n < x {
			opts[i]()
			break
		}
		n -= x
	}
	w.check()
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

func (w *world) running() int {
	n := 0
	for _, m := range w.members {
		if !m.crashed && !m.left {
			n++
		}
	}
	return n
}

// simMember is one member's process: its machine, the requests its
// coordinator sent in order (queue), those sent from other goroutines
// (side: releases after a commit, the leave), the answers on their way,
// and what the owner and its client were told.
type simMember struct {
	id          string
	topics      []string
	m           *membership.Member
	joined      bool // the first Join was answered
	busy        bool // a cycle is in progress
	crashed     bool
	left        bool
	pausedUntil time.Time
	nextTick    time.Time
	queue       []req
	side        []req
	inbox       []answer
	followed    map[membership.Key]int64 // the owner's work: epoch by partition
	worked      map[membership.Key]int64 // the highest epoch ever followed, by partition
	told        map[membership.Key]bool  // the client's view: true held, false revoked
	buf         []membership.Key
}

type req struct {
	act  membership.Action // nil with join
	join bool
	want membership.Want // for Acquire: one partition
	sent time.Time
}

type answer struct {
	ev membership.Event
	at time.Time // not before
}

func (m *simMember) ready(now time.Time) int {
	for i, a := range m.inbox {
		if !now.Before(a.at) {
			return i
		}
	}
	return -1
}

func (w *world) addMember() {
	w.ids++
	id := fmt.Sprintf("m%d", w.ids)
	topics := slices.Sorted(maps.Keys(w.topics))
	if len(topics) > 1 && w.rng.IntN(3) == 0 {
		topics = topics[w.rng.IntN(len(topics)):][:1]
	}
	cfg := membership.Config{MemberID: id, Topics: topics, SessionTimeout: simTimeout, RevokeTimeout: simRevoke}
	if w.opt.keepLeases {
		membership.UnsafeKeepLeasesWhenForgotten(&cfg)
	}
	if w.opt.beatAtAnswer {
		membership.UnsafeBeatAtAnswer(&cfg)
	}
	if w.opt.keepStrays {
		membership.UnsafeKeepStrays(&cfg)
	}
	if w.opt.followKept {
		membership.UnsafeFollowKept(&cfg)
	}
	mach, err := membership.New(cfg)
	if err != nil {
		panic(err)
	}
	w.members = append(w.members, &simMember{id: id, topics: topics, m: mach,
		followed: map[membership.Key]int64{}, worked: map[membership.Key]int64{}, told: map[membership.Key]bool{}})
	w.logf("%s starts on %v", id, topics)
}

// step feeds m an event and takes its actions: the hooks are checked and
// recorded, requests queued.
func (w *world) step(m *simMember, ev membership.Event) {
	acts, err := m.m.Step(ev)
	w.logf("%s <- %v -> %v", m.id, ev, acts)
	w.stats[strings.TrimPrefix(fmt.Sprintf("%T", ev), "membership.")]++
	if err != nil {
		w.violate("%s refused %v: %v", m.id, ev, err)
		return
	}
	side := false
	switch ev.(type) {
	case membership.RevokeDone, membership.Leave:
		side = true
	}
	followedNow := map[membership.Key]bool{}
	for _, a := range acts {
		switch a := a.(type) {
		case membership.Follow:
			if _, ok := m.followed[a.Lease.Key]; ok {
				w.violate("%s follows %v twice", m.id, a.Lease.Key)
			}
			if e, ok := m.worked[a.Lease.Key]; ok && a.Lease.Epoch <= e {
				w.violate("%s follows %v at e%d, though it worked on it at e%d before: that work's commits would not be fenced",
					m.id, a.Lease.Key, a.Lease.Epoch, e)
			}
			m.worked[a.Lease.Key] = a.Lease.Epoch
			m.followed[a.Lease.Key] = a.Lease.Epoch
			followedNow[a.Lease.Key] = true
		case membership.Unfollow:
			if _, ok := m.followed[a.Key]; !ok {
				w.violate("%s unfollows %v, which it does not follow", m.id, a.Key)
			}
			delete(m.followed, a.Key)
		case membership.Announce:
			w.announced(m, a, followedNow)
		case membership.ReleaseLease:
			if side {
				m.side = append(m.side, req{act: a, sent: w.now})
				break
			}
			switch ev.(type) {
			case membership.TopicView:
				w.stats["strays released"]++
			case membership.LeaseAcquired, membership.AcquireHeld, membership.AcquireFailed:
				w.stats["kept leases released"]++
			default:
				w.stats["revoke deadlines passed"]++
			}
			m.queue = append(m.queue, req{act: a, sent: w.now})
		case membership.Acquire:
			for _, want := range a.Want {
				m.queue = append(m.queue, req{act: a, want: want, sent: w.now})
			}
		case membership.RoundDone:
			m.busy = false
		case membership.ListMembers:
			w.checkDeadlines(m)
			m.queue = append(m.queue, req{act: a, sent: w.now})
		default:
			if side {
				m.side = append(m.side, req{act: a, sent: w.now})
			} else {
				m.queue = append(m.queue, req{act: a, sent: w.now})
			}
		}
	}
	if _, ok := ev.(membership.MemberForgotten); ok && m.m.Held() > 0 && !w.opt.keepLeases { // with keepLeases, find what it leads to
		w.violate("%s holds %d leases after the store forgot it", m.id, m.m.Held())
	}
}

// announced checks an Announce against what the client was told.
func (w *world) announced(m *simMember, a membership.Announce, followedNow map[membership.Key]bool) {
	for _, l := range a.Added {
		if !followedNow[l.Key] {
			w.violate("%s announces %v added without following it in the same step", m.id, l.Key)
		}
		m.told[l.Key] = true
	}
	for _, l := range a.Revoked {
		held, ok := m.told[l.Key]
		switch {
		case !ok:
			w.violate("%s announces %v gone, which its client was never told it holds", m.id, l.Key)
		case !a.Lost && !held:
			w.violate("%s announces %v revoked twice", m.id, l.Key)
		}
		if _, f := m.followed[l.Key]; f {
			w.violate("%s announces %v revoked or lost while still following it", m.id, l.Key)
		}
		if a.Lost {
			delete(m.told, l.Key)
		} else {
			m.told[l.Key] = false
		}
	}
}

// checkDeadlines: a round starts with no revoked lease past its deadline.
func (w *world) checkDeadlines(m *simMember) {
	for k, h := range m.m.HeldLeases() {
		if h.Revoking && w.now.After(h.Deadline) {
			w.violate("%s starts a round at %v holding %v revoked until %v", m.id, w.now.Sub(time.Unix(0, 0)), k, h.Deadline.Sub(time.Unix(0, 0)))
		}
	}
}

func (w *world) deliver(m *simMember, i int) {
	a := m.inbox[i]
	m.inbox = slices.Delete(m.inbox, i, i+1)
	ev := a.ev
	// Answers carry the time they arrive.
	switch e := ev.(type) {
	case membership.Joined:
		e.Now = w.now
		ev = e
		if !m.joined {
			m.joined = true
			m.nextTick = w.now
		}
	case membership.JoinFailed:
		e.Now = w.now
		ev = e
	case membership.HeartbeatOK:
		e.Now = w.now
		ev = e
	case membership.HeartbeatFailed:
		e.Now = w.now
		ev = e
	case membership.TopicView:
		e.Now = w.now
		ev = e
	}
	w.step(m, ev)
}

var (
	errUnavailable = errors.New("store unavailable")
	errLostAnswer  = errors.New("the answer was lost")
)

// process lets the store carry out m's next coordinator request.
func (w *world) process(m *simMember) {
	r := m.queue[0]
	m.queue = m.queue[1:]
	ev := w.apply(m, r)
	if ev == nil {
		return
	}
	at := w.now
	if w.pct(w.f.slow) {
		at = at.Add(time.Duration(w.rng.Int64N(int64(w.f.slowMax))))
	}
	m.inbox = append(m.inbox, answer{ev: ev, at: at})
}

func (w *world) processSide(m *simMember) {
	i := w.rng.IntN(len(m.side))
	r := m.side[i]
	m.side = slices.Delete(m.side, i, i+1)
	w.apply(m, r)
}

// apply carries out one request at the store and returns its answer (nil:
// none is expected).
func (w *world) apply(m *simMember, r req) membership.Event {
	s, now, id := w.store, w.now, m.id
	fail, lost := w.pct(w.f.fail), w.pct(w.f.lost)
	if r.join {
		if fail {
			return membership.JoinFailed{Err: errUnavailable}
		}
		s.members[id] = storeMember{expires: now.Add(simTimeout), topics: m.topics}
		w.logf("store: %s joined", id)
		if lost {
			return membership.JoinFailed{Err: errLostAnswer}
		}
		return membership.Joined{Sent: r.sent}
	}
	switch a := r.act.(type) {
	case membership.SendJoin:
		return w.apply(m, req{join: true, sent: r.sent})
	case membership.SendHeartbeat:
		if fail {
			return membership.HeartbeatFailed{Err: errUnavailable}
		}
		if !s.live(id, now) {
			delete(s.members, id)
			return membership.MemberForgotten{}
		}
		s.members[id] = storeMember{expires: now.Add(simTimeout), topics: m.topics}
		if lost {
			return membership.HeartbeatFailed{Err: errLostAnswer}
		}
		return membership.HeartbeatOK{Sent: r.sent}
	case membership.ListMembers:
		if fail {
			return membership.MembersFailed{Err: errUnavailable}
		}
		var ms []bookkeeping.Member
		for _, mid := range slices.Sorted(maps.Keys(s.members)) {
			if s.live(mid, now) {
				ms = append(ms, bookkeeping.Member{ID: mid, Topics: s.members[mid].topics})
			}
		}
		return membership.MembersListed{Members: ms}
	case membership.ReadTopic:
		if fail {
			return membership.TopicFailed{Topic: a.Topic, Err: errUnavailable}
		}
		ev := membership.TopicView{Topic: a.Topic, Partitions: w.topics[a.Topic]}
		for p := range w.topics[a.Topic] {
			if l := s.leases[membership.Key{Topic: a.Topic, Partition: p}]; l != nil {
				owner := l.owner
				if !s.live(owner, now) {
					owner = ""
				}
				ev.Leases = append(ev.Leases, bookkeeping.Lease{Partition: p, Owner: owner, Epoch: l.epoch, Offset: l.offset})
			}
		}
		return ev
	case membership.Acquire:
		k := membership.Key{Topic: a.Topic, Partition: r.want.Partition}
		if fail {
			return membership.AcquireFailed{Key: k, Err: errUnavailable}
		}
		if !s.live(id, now) {
			return membership.AcquireFailed{Key: k, Err: bookkeeping.ErrNotFound}
		}
		l := s.leases[k]
		if l == nil {
			l = &storeLease{offset: bookkeeping.NoOffset}
			s.leases[k] = l
		}
		switch {
		case l.owner == id:
		case s.live(l.owner, now):
			return membership.AcquireHeld{Key: k}
		default:
			l.owner, l.epoch = id, l.epoch+1
		}
		w.logf("store: %s takes %v at e%d", id, k, l.epoch)
		if lost {
			if w.rng.IntN(2) == 0 {
				l.owner = "" // the wrapper gave it back
			}
			return membership.AcquireFailed{Key: k, Err: errLostAnswer}
		}
		return membership.LeaseAcquired{Key: k, Epoch: l.epoch, Offset: max(l.offset, 0)}
	case membership.ReleaseLease:
		if l := s.leases[a.Key]; !fail && l != nil && l.owner == id && l.epoch == a.Epoch {
			l.owner = ""
			w.logf("store: %s releases %v e%d", id, a.Key, a.Epoch)
		}
		return nil
	case membership.LeaveGroup:
		if !fail {
			delete(s.members, id)
			w.logf("store: %s left", id)
		}
		return nil
	}
	panic(fmt.Sprintf("the store cannot carry out %v", r.act))
}

// check verifies the invariants after a step.
func (w *world) check() {
	clear(w.followers)
	for _, m := range w.members {
		if m.crashed {
			continue // a crashed process does no work
		}
		if err := m.m.Check(); err != nil {
			w.violate("%s: %v", m.id, err)
		}
		mine := m.m.AppendFollowed(m.buf[:0])
		m.buf = mine
		same := len(mine) == len(m.followed)
		for _, k := range mine {
			_, ok := m.followed[k]
			same = same && ok
		}
		if !same {
			w.violate("%s: the machine follows %v, the owner works on %v", m.id, mine, slices.Collect(maps.Keys(m.followed)))
		}
		if !m.m.Live(w.now) {
			continue
		}
		for _, k := range mine {
			w.followers[k] = append(w.followers[k], m.id)
			l := w.store.leases[k]
			switch {
			case l == nil || l.owner != m.id || l.epoch != m.followed[k]:
				w.violate("%s follows %v at e%d while live, but the store has %+v", m.id, k, m.followed[k], l)
			case !w.store.live(m.id, w.now):
				w.violate("%s follows %v while live, but the store does not list it", m.id, k)
			}
		}
	}
	for k, ids := range w.followers {
		if len(ids) > 1 {
			w.violate("%v is followed by %d live members: %v", k, len(ids), ids)
		}
	}
}

// settledChecks: after the faults, every partition of a topic with a
// running member is followed by exactly one.
func (w *world) settledChecks() {
	for _, topic := range slices.Sorted(maps.Keys(w.topics)) {
		subscribed := false
		for _, m := range w.members {
			subscribed = subscribed || (!m.crashed && !m.left && slices.Contains(m.topics, topic))
		}
		if !subscribed {
			continue
		}
		for p := range w.topics[topic] {
			k := membership.Key{Topic: topic, Partition: p}
			var by []string
			for _, m := range w.members {
				if _, ok := m.followed[k]; ok && !m.crashed {
					by = append(by, m.id)
				}
			}
			l := w.store.leases[k]
			switch {
			case len(by) == 1:
			case len(by) == 0 && l != nil && w.store.live(l.owner, w.now):
				w.violate("after settling, %v is orphaned: the store names %s at e%d, which does not hold it", k, l.owner, l.epoch)
			default:
				w.violate("after settling, %v is followed by %v (store: %+v)", k, by, l)
			}
		}
	}
}

type store struct {
	members map[string]storeMember
	leases  map[membership.Key]*storeLease
}

type storeMember struct {
	expires time.Time
	topics  []string
}

type storeLease struct {
	owner  string
	epoch  int64
	offset int64
}

func (s *store) live(id string, now time.Time) bool {
	m, ok := s.members[id]
	return ok && now.Before(m.expires)
}

func compareKeys(a, b membership.Key) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}
