package membership

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// ErrInvalidEvent: the machine cannot take the event now (an answer to a
// request it did not make, a Tick in the middle of a cycle). A programmer
// error of the wrapper; the machine's state did not change.
var ErrInvalidEvent = errors.New("membership: invalid event")

// phase is where the coordinator's cycle stands: which answer the machine
// waits for.
type phase uint8

const (
	phaseNew       phase = iota + 1 // not joined yet: Joined or JoinFailed
	phaseIdle                       // between cycles: Tick
	phaseHeartbeat                  // SendHeartbeat's answer
	phaseRejoin                     // SendJoin's answer
	phaseMembers                    // ListMembers's answer
	phaseTopic                      // ReadTopic's answer, for round.topics[round.at]
	phaseAcquire                    // the answers to Acquire, for round.pending
	phaseLeft                       // Leave: every event is ignored
)

var phaseNames = [...]string{phaseNew: "new", phaseIdle: "idle", phaseHeartbeat: "heartbeat", phaseRejoin: "rejoin",
	phaseMembers: "members", phaseTopic: "topic", phaseAcquire: "acquire", phaseLeft: "left"}

func (p phase) String() string { return phaseNames[p] }

// Member is one consumer group member's lifecycle as a pure machine: its
// membership in the store (join, heartbeat, re-join after the store forgot
// it, leave), its balancing rounds over its topics (assign.Decide on the
// store's view: acquire up to its share, revoke extras, notice leases that
// moved), and the leases it holds. Step takes an Event and returns the
// Actions to carry out; the package doc lists them and the rules.
//
// Not safe for concurrent use: the wrapper steps it under its lock.
type Member struct {
	cfg Config

	// phase is the coordinator's place in its cycle. Invariants: round is
	// non-nil iff phase is members, topic or acquire; in new and left no
	// lease is held.
	phase phase

	// leases are the partitions the member holds. Invariants:
	//   - a lease is followed (a Follow without its Unfollow yet) iff it
	//     is held and not revoking;
	//   - a revoking lease has the deadline RevokeTimeout after its revoke,
	//     and a lease that is not revoking has none; it stays held until
	//     RevokeDone or the first cycle's round that starts after the
	//     deadline, which emits its ReleaseLease;
	//   - every held lease was acquired at its epoch (LeaseAcquired),
	//     higher than the epoch the round's view showed for it, and a view
	//     that shows its partition with another owner or epoch drops it as
	//     lost before anything else is decided: the store moves a lease
	//     only on its holder's release or once the holder is not live;
	//   - a lease the view shows under the member's id but not held
	//     (a stray) is released at its stored epoch in that view's step;
	//   - MemberForgotten drops every lease (other members may hold them
	//     now), Leave too;
	//   - the topic of every lease is one of Config.Topics.
	leases map[Key]*lease

	// lastBeat is when the store's last confirmation of the member (Joined
	// or HeartbeatOK) was sent; zero before the first. Live(now) is
	// now-lastBeat < ¾ SessionTimeout: the store renewed the member for a
	// SessionTimeout from a moment after lastBeat, so until then no other
	// member can have taken a lease the member holds and has not released;
	// the quarter left is the margin for clocks and a process paused
	// between checking Live and starting work.
	lastBeat time.Time
	// beatBase is where the heartbeat schedule counts from: the first
	// Tick, then the answer of each heartbeat or re-join that succeeded. A
	// Tick at least SessionTimeout/3 after it sends a heartbeat, so a
	// failing one is retried every Tick.
	beatBase time.Time

	// round is the balancing round in progress.
	round *round

	out []Action // actions of the current Step
}

type lease struct {
	epoch    int64
	next     int64
	revoking bool
	deadline time.Time // when revoking: release by then
}

// round is one balancing round: the topics in Config order, one at a time.
type round struct {
	members []memberTopics
	at      int     // index in Config.Topics of the topic being balanced
	errs    []error // of the topics done, wrapped with their topic

	// Of the topic being balanced, once its view came:
	revoked  []Lease         // revoked by its plan, announced with the acquisitions
	pending  map[int32]int64 // partitions asked for in Acquire and not answered → the epoch the view showed (0: no record)
	acquired []Lease         // answered LeaseAcquired at a higher epoch than the view showed
	kept     []Lease         // answered LeaseAcquired at no higher an epoch: released, not followed
	failed   []error         // answered AcquireFailed, and the kept
}

type memberTopics struct {
	id     string
	topics []string
}

// New returns the machine of a member that has not joined yet.
func New(cfg Config) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Topics = slices.Clone(cfg.Topics)
	return &Member{cfg: cfg, phase: phaseNew, leases: map[Key]*lease{}}, nil
}

// Live reports whether the member's leases are surely still its own at
// now: the store confirmed the member less than three quarters of its
// session timeout ago (see lastBeat). An owner must not start work on a
// lease — an invocation, a write elsewhere — while it is not; commits are
// fenced by the store regardless.
func (m *Member) Live(now time.Time) bool {
	if m.lastBeat.IsZero() {
		return false
	}
	t := m.cfg.SessionTimeout
	return now.Sub(m.lastBeat) < t-t/4
}

// Lease returns the lease of k if the member holds it.
func (m *Member) Lease(k Key) (Held, bool) {
	l, ok := m.leases[k]
	if !ok {
		return Held{}, false
	}
	return Held{Epoch: l.epoch, Next: l.next, Revoking: l.revoking, Deadline: l.deadline}, true
}

// AppendFollowed appends the followed leases (held, not revoking) to dst,
// ordered by topic and partition.
func (m *Member) AppendFollowed(dst []Key) []Key {
	n := len(dst)
	for k, l := range m.leases {
		if !l.revoking {
			dst = append(dst, k)
		}
	}
	slices.SortFunc(dst[n:], compareKeys)
	return dst
}

// Held returns the number of leases held, revoking ones included.
func (m *Member) Held() int { return len(m.leases) }

// Step feeds one event and returns the actions to carry out, in order. An
// error (ErrInvalidEvent) means the event was refused and nothing changed.
func (m *Member) Step(ev Event) ([]Action, error) {
	err := m.step(ev)
	out := m.out
	m.out = nil
	return out, err
}

func (m *Member) step(ev Event) error {
	if m.phase == phaseLeft {
		return nil
	}
	switch ev := ev.(type) {
	case RevokeDone:
		m.revokeDone(ev.Key)
		return nil
	case Advance:
		if l, ok := m.leases[ev.Key]; ok && l.epoch == ev.Epoch && l.next == ev.From {
			l.next = ev.To
		}
		return nil
	case Leave:
		m.leave()
		return nil
	}
	want := m.expects(ev)
	if want != m.phase {
		return fmt.Errorf("%w: %v while %v", ErrInvalidEvent, ev, m.phase)
	}
	switch ev := ev.(type) {
	case Joined:
		m.lastBeat = ev.Sent
		if m.phase == phaseNew {
			m.phase = phaseIdle // the first Tick starts the heartbeat schedule
			return nil
		}
		m.beatBase = ev.Now
		m.startRound(ev.Now)
	case JoinFailed:
		if m.phase == phaseRejoin {
			m.startRound(ev.Now)
		}
	case Tick:
		m.tick(ev.Now)
	case HeartbeatOK:
		m.lastBeat = ev.Sent
		if m.cfg.unsafe.beatAtAnswer {
			m.lastBeat = ev.Now
		}
		m.beatBase = ev.Now
		m.startRound(ev.Now)
	case HeartbeatFailed:
		m.startRound(ev.Now)
	case MemberForgotten:
		m.forgotten()
	case MembersListed:
		return m.membersListed(ev)
	case MembersFailed:
		m.endRound(ev.Err)
	case TopicView:
		return m.view(ev)
	case TopicFailed:
		return m.topicFailed(ev)
	case LeaseAcquired:
		return m.answered(ev.Key, ev)
	case AcquireHeld:
		return m.answered(ev.Key, ev)
	case AcquireFailed:
		return m.answered(ev.Key, ev)
	}
	return nil
}

// expects is the phase in which ev may come (0: none).
func (m *Member) expects(ev Event) phase {
	switch ev.(type) {
	case Joined, JoinFailed:
		if m.phase == phaseNew {
			return phaseNew
		}
		return phaseRejoin
	case Tick:
		return phaseIdle
	case HeartbeatOK, HeartbeatFailed, MemberForgotten:
		return phaseHeartbeat
	case MembersListed, MembersFailed:
		return phaseMembers
	case TopicView, TopicFailed:
		return phaseTopic
	case LeaseAcquired, AcquireHeld, AcquireFailed:
		return phaseAcquire
	}
	return 0
}

func (m *Member) emit(a Action) { m.out = append(m.out, a) }

// tick starts a cycle: the heartbeat when due, else the round.
func (m *Member) tick(now time.Time) {
	if m.beatBase.IsZero() {
		m.beatBase = now // the heartbeat schedule starts with coordination
	}
	if now.Sub(m.beatBase) >= m.cfg.SessionTimeout/3 {
		m.phase = phaseHeartbeat
		m.emit(SendHeartbeat{})
		return
	}
	m.startRound(now)
}

// forgotten drops every lease as lost, all at once (the owner's work on
// them stops), and joins again as a new member would: the next rounds
// acquire its share afresh.
func (m *Member) forgotten() {
	if !m.cfg.unsafe.keepLeasesWhenForgotten {
		m.dropAll(true)
	}
	m.phase = phaseRejoin
	m.emit(SendJoin{})
}

// dropAll unfollows every followed lease and forgets them all; with
// announce, each topic's leases are announced lost.
func (m *Member) dropAll(announce bool) {
	keys := slices.SortedFunc(maps.Keys(m.leases), compareKeys)
	for _, k := range keys {
		if !m.leases[k].revoking {
			m.emit(Unfollow{Key: k})
		}
	}
	if announce {
		var lost []Lease
		for i, k := range keys {
			l := m.leases[k]
			lost = append(lost, Lease{Key: k, Epoch: l.epoch, Offset: l.next})
			if i == len(keys)-1 || keys[i+1].Topic != k.Topic {
				m.emit(Announce{Revoked: lost, Lost: true})
				lost = nil
			}
		}
	}
	clear(m.leases)
}

func (m *Member) leave() {
	m.dropAll(false)
	m.round = nil
	m.phase = phaseLeft
	m.emit(LeaveGroup{})
}

// revokeDone releases a revoking lease.
func (m *Member) revokeDone(k Key) {
	l, ok := m.leases[k]
	if !ok || !l.revoking {
		return
	}
	delete(m.leases, k)
	m.emit(ReleaseLease{Key: k, Epoch: l.epoch})
}

// Check verifies the invariants the fields state that can be checked on
// the machine alone; nil when they hold. The simulation calls it after
// every step.
func (m *Member) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if (m.round != nil) != (m.phase == phaseMembers || m.phase == phaseTopic || m.phase == phaseAcquire) {
		bad("phase %v with round %v", m.phase, m.round != nil)
	}
	if (m.phase == phaseNew || m.phase == phaseLeft) && len(m.leases) > 0 {
		bad("phase %v holds %d leases", m.phase, len(m.leases))
	}
	for k, l := range m.leases {
		if l.revoking == l.deadline.IsZero() {
			bad("%v: revoking %v with deadline %v", k, l.revoking, l.deadline)
		}
		if !slices.Contains(m.cfg.Topics, k.Topic) {
			bad("%v: not a topic of the member", k)
		}
	}
	if m.phase == phaseAcquire {
		if len(m.round.pending) == 0 {
			bad("acquire phase with nothing pending")
		}
		for p := range m.round.pending {
			if _, ok := m.leases[Key{Topic: m.cfg.Topics[m.round.at], Partition: p}]; ok {
				bad("acquiring %s/%d, which is held", m.cfg.Topics[m.round.at], p)
			}
		}
	}
	return errors.Join(errs...)
}
