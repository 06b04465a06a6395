package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch/membership"
)

// A member is one consumer group member served by this copy. What it
// decides — when to heartbeat, which leases to acquire, revoke, release or
// drop as lost — is services/fetch/membership's machine; member is its
// wrapper: it feeds the machine the store's answers and the clock
// (Config.Now), carries out its actions (bookkeeping and catalog calls,
// the owner's hooks) and logs. Two owners use it:
//   - a Subscribe session (session.go), whose client receives the
//     assignment events and the records;
//   - a trigger's runner (triggers.go), which reads and invokes itself.
//
// What a held lease does is the owner's, through its hooks. The owner's
// coordinator goroutine runs coordinate, which alone feeds the machine
// its cycle (Tick, the heartbeat's and the round's answers); RevokeDone
// may come from any goroutine (a commit of a revoked lease, a trigger
// worker that ended), Leave after the coordinator ended.
//
// mu guards the machine, unfollow and, for the session, the session's own
// fields (one lock for both, so an assignment event and the leases it
// announces change together). Every step runs under it and so do the
// hooks the step asks for (Follow, Unfollow, Announce); the I/O it asks
// for runs after it is released.
//
// Lock order (services/DESIGN.md §4): member.mu → partlog's Logs.mu →
// Log.mu (a session's follow and unfollow), and member.mu →
// triggerRunner.mu (a runner's follow). Nothing takes member.mu while
// holding another of fetch's locks, and it is not reentrant: a hook must
// not lock it again.
type member struct {
	s        *Service
	group    string
	memberID string
	topics   []string
	timeout  time.Duration
	// start is where a partition the group never committed starts
	// (EARLIEST, LATEST or TIMESTAMP with startMs).
	start   sluicev1.StartPosition
	startMs int64
	info    string
	ctx     context.Context // ends the member's work; leave runs after it
	hooks   memberHooks

	mu   sync.Mutex
	mach *membership.Member
	// unfollow holds what stops the owner's work on each lease the
	// machine follows (Follow's hook result): exactly the machine's
	// followed leases.
	unfollow map[tp]func()
}

// memberHooks are what a member's owner does with its leases. All run with
// member.mu held and must not block.
type memberHooks struct {
	// follow starts the work on a newly acquired lease and returns what
	// stops it (called when the lease is revoked or lost, or the member
	// leaves).
	follow func(l membership.Lease) (unfollow func())
	// changed reports a round's changes of one topic: leases acquired,
	// leases revoked (held until committed or RevokeTimeout), or, with
	// lost, leases that moved away.
	changed func(membership.Announce)
	// alive is asked before each coordination round; an error ends the
	// member (nil: always alive).
	alive func() error
}

// tp names a partition of a topic.
type tp = membership.Key

// initMember sets m up as the member id of a group, with its machine; it
// has not joined yet. topics are sorted and distinct. The owner sets the
// start position, info, ctx and hooks.
func (s *Service) initMember(m *member, group, id string, topics []string, timeout time.Duration) {
	mach, err := membership.New(membership.Config{MemberID: id, Topics: topics, SessionTimeout: timeout,
		RevokeTimeout: s.cfg.RevokeTimeout, Assign: s.cfg.Assign})
	if err != nil {
		panic(fmt.Sprintf("fetch: member of group %q: %v", group, err)) // validated before
	}
	m.s, m.group, m.memberID, m.topics, m.timeout = s, group, id, topics, timeout
	m.mach, m.unfollow = mach, map[tp]func(){}
}

// step feeds the machine an event under mu, runs the hooks it asks for,
// and returns its actions; the caller carries out the requests (run).
func (m *member) step(ev membership.Event) []membership.Action {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stepLocked(ev)
}

// stepLocked is step with mu held.
func (m *member) stepLocked(ev membership.Event) []membership.Action {
	acts, err := m.mach.Step(ev)
	if err != nil {
		panic(fmt.Sprintf("fetch: member %s of group %q: %v", m.memberID, m.group, err)) // the wrapper's bug
	}
	for _, a := range acts {
		switch a := a.(type) {
		case membership.Follow:
			m.unfollow[a.Lease.Key] = m.hooks.follow(a.Lease)
		case membership.Unfollow:
			if stop := m.unfollow[a.Key]; stop != nil {
				stop()
			}
			delete(m.unfollow, a.Key)
		case membership.Announce:
			m.hooks.changed(a)
		}
	}
	return acts
}

// join enters the group (the first Join; the machine asks for re-joins).
func (m *member) join(ctx context.Context) error {
	_, err := m.sendJoin(ctx)
	return err
}

// sendJoin joins and tells the machine; it returns what the machine asks
// next.
func (m *member) sendJoin(ctx context.Context) ([]membership.Action, error) {
	sent := m.s.now()
	err := m.s.d.Bookkeeping.Join(ctx, m.group, bookkeeping.Member{ID: m.memberID, ClientInfo: m.info, SessionTimeout: m.timeout, Topics: m.topics})
	if err != nil {
		return m.step(membership.JoinFailed{Err: err, Now: m.s.now()}), err
	}
	return m.step(membership.Joined{Sent: sent, Now: m.s.now()}), nil
}

// live reports whether the member's leases are surely still its own
// (membership.Member.Live): the store confirmed it live less than three
// quarters of its session timeout ago, so no other member can have taken
// them yet. A process that was paused (or cut off from the store) past
// that must not start work on them — an invocation, a DLQ write — until a
// heartbeat confirms it again; if the store forgot the member meanwhile,
// the heartbeat drops its leases instead. Commits are fenced regardless.
func (m *member) live() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mach.Live(m.s.now())
}

// coordinate runs the member's heartbeat and balancing until ctx ends or
// alive fails (its error is returned).
func (m *member) coordinate() error {
	t := time.NewTicker(m.s.cfg.BalanceInterval)
	defer t.Stop()
	for {
		if m.hooks.alive != nil {
			if err := m.hooks.alive(); err != nil {
				return err
			}
		}
		if !m.cycle() {
			return nil
		}
		select {
		case <-m.ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// cycle feeds the machine a Tick and carries out what follows until it is
// idle again: a heartbeat when due (with a re-join if the store forgot the
// member), then a balancing round. It returns false, leaving the cycle
// unfinished, when the member's ctx ended during the heartbeat.
//
// The heartbeat and a re-join share one deadline, a third of the session
// timeout; the round's calls share another, half of it (at least 1s).
func (m *member) cycle() bool {
	s := m.s
	var hbCtx, roundCtx context.Context
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	heartbeatCtx := func() context.Context {
		if hbCtx == nil {
			var cancel context.CancelFunc
			hbCtx, cancel = context.WithTimeout(m.ctx, m.timeout/3)
			cancels = append(cancels, cancel)
		}
		return hbCtx
	}
	round := func() context.Context {
		if roundCtx == nil {
			var cancel context.CancelFunc
			roundCtx, cancel = context.WithTimeout(m.ctx, max(m.timeout/2, time.Second))
			cancels = append(cancels, cancel)
		}
		return roundCtx
	}
	acts := m.step(membership.Tick{Now: s.now()})
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		var next []membership.Action
		switch a := a.(type) {
		case membership.Follow, membership.Unfollow:
			// done under the lock (step)
		case membership.Announce:
			if !a.Lost {
				s.log.Info("group assignment changed", slog.String("group", m.group), slog.String("member", m.memberID),
					slog.String("topic", announcedTopic(a)), slog.Int("added", len(a.Added)), slog.Int("revoked", len(a.Revoked)))
			}
		case membership.SendHeartbeat:
			var ok bool
			if next, ok = m.heartbeat(heartbeatCtx()); !ok {
				return false
			}
		case membership.SendJoin:
			var err error
			next, err = m.sendJoin(heartbeatCtx())
			if err != nil {
				if m.ctx.Err() != nil {
					return false
				}
				s.log.Warn("group heartbeat failed", slog.String("group", m.group), slog.String("member", m.memberID), slog.Any("err", err))
			}
		case membership.ReleaseLease:
			m.releaseLease(round(), a)
		case membership.ListMembers:
			members, err := s.d.Bookkeeping.ListMembers(round(), m.group)
			if err != nil {
				next = m.step(membership.MembersFailed{Err: err})
			} else {
				next = m.step(membership.MembersListed{Members: members})
			}
		case membership.ReadTopic:
			next = m.readTopic(round(), a.Topic)
		case membership.Acquire:
			next = m.acquireAll(round(), a)
		case membership.RoundDone:
			if a.Err != nil && m.ctx.Err() == nil {
				s.log.Warn("group balancing round failed", slog.String("group", m.group), slog.String("member", m.memberID), slog.Any("err", a.Err))
			}
		default:
			panic(fmt.Sprintf("fetch: member coordinator cannot carry out %v", a))
		}
		acts = append(acts, next...)
	}
	return true
}

// heartbeat keeps the member live. A member the store forgot (its
// heartbeats failed, or its process was paused, past the timeout) has lost
// its leases: the machine drops them all at once and asks to join again.
// ok is false when the heartbeat failed because the member's ctx ended.
func (m *member) heartbeat(ctx context.Context) (next []membership.Action, ok bool) {
	s := m.s
	sent := s.now()
	err := s.d.Bookkeeping.Heartbeat(ctx, m.group, m.memberID)
	switch {
	case err == nil:
		return m.step(membership.HeartbeatOK{Sent: sent, Now: s.now()}), true
	case errors.Is(err, bookkeeping.ErrNotFound):
		next = m.step(membership.MemberForgotten{})
		for _, a := range next {
			if _, ok := a.(membership.Announce); ok {
				s.log.Warn("group member expired in the store (paused or cut off past its session timeout): its leases are dropped as lost",
					slog.String("group", m.group), slog.String("member", m.memberID))
				break
			}
		}
		return next, true
	case m.ctx.Err() != nil:
		return nil, false
	}
	s.log.Warn("group heartbeat failed", slog.String("group", m.group), slog.String("member", m.memberID), slog.Any("err", err))
	return m.step(membership.HeartbeatFailed{Err: err, Now: s.now()}), true
}

// readTopic reads a topic and its leases for the round.
func (m *member) readTopic(ctx context.Context, topic string) []membership.Action {
	s := m.s
	t, err := s.topic(ctx, topic)
	if err != nil {
		return m.step(membership.TopicFailed{Topic: topic, Err: err})
	}
	leases, err := s.d.Bookkeeping.ListLeases(ctx, m.group, topic)
	if err != nil {
		return m.step(membership.TopicFailed{Topic: topic, Err: err})
	}
	forgetOtherIncarnations(leases, t)
	return m.step(membership.TopicView{Topic: topic, Partitions: int32(t.Partitions), Leases: leases, Now: s.now()})
}

// acquireAll carries out an Acquire: acquireParallelism at a time, each a
// lease compare-and-set in bookkeeping and, for a partition the group
// never committed, a catalog read for its start offset (one after
// another, a round over hundreds of new partitions outlasted its
// deadline). The answers are fed in partition order once all are in.
func (m *member) acquireAll(ctx context.Context, a membership.Acquire) []membership.Action {
	m.primeStarts(ctx, a.Topic, a.Want)
	got := make([]*membership.Lease, len(a.Want))
	errs := make([]error, len(a.Want))
	sem := make(chan struct{}, acquireParallelism)
	var wg sync.WaitGroup
	for i, w := range a.Want {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got[i], errs[i] = m.acquire(ctx, a.Topic, w)
		})
	}
	wg.Wait()
	var next []membership.Action
	for i, w := range a.Want {
		k := tp{Topic: a.Topic, Partition: w.Partition}
		var ev membership.Event
		switch {
		case got[i] != nil:
			ev = membership.LeaseAcquired{Key: k, Epoch: got[i].Epoch, Offset: got[i].Offset}
		case errs[i] != nil:
			ev = membership.AcquireFailed{Key: k, Err: errs[i]}
		default:
			ev = membership.AcquireHeld{Key: k}
		}
		next = append(next, m.step(ev)...)
	}
	return next
}

// acquireParallelism bounds the lease acquisitions of one balancing round
// that run at once.
const acquireParallelism = 16

// primeAge is how old a partition record primed for a balancing round
// (primeStarts) may be when an acquisition takes its start offset: the
// round's own listing, not one from before. Should the log start move
// meanwhile (retention), delivery meets OUT_OF_RANGE and continues at the
// new start.
const primeAge = 15 * time.Second

// primeStarts reads in one listing the partition records of the
// partitions this round acquires that the group never committed (their
// start offset comes from the record): one catalog call for the round
// instead of one or two per partition. A failed listing only means each
// acquisition reads its own.
func (m *member) primeStarts(ctx context.Context, topic string, want []membership.Want) {
	lo, hi, n := int32(-1), int32(-1), 0
	for _, w := range want {
		if w.Committed != bookkeeping.NoOffset {
			continue
		}
		if n == 0 || w.Partition < lo {
			lo = w.Partition
		}
		hi = max(hi, w.Partition)
		n++
	}
	if n < 2 {
		return
	}
	s := m.s
	for next := int(lo); next <= int(hi); {
		token := "" // the first page: IndexToken starts at 1
		if next > 0 {
			token = catalog.IndexToken(next)
		}
		page, err := s.d.Catalog.ListPartitions(ctx, topic, token, min(int(hi)-next+1, catalog.MaxPageSize))
		if err != nil {
			s.log.Debug("listing partitions for a balancing round failed", slog.String("topic", topic), slog.Any("err", err))
			return
		}
		s.logs.Prime(page.Items)
		if len(page.Items) == 0 || page.NextPageToken == "" {
			return
		}
		next = page.Items[len(page.Items)-1].Index + 1
	}
}

// acquire takes the lease of one partition for the member and returns it
// with the offset work starts at (nil, nil: another member holds it).
func (m *member) acquire(ctx context.Context, topic string, w membership.Want) (*membership.Lease, error) {
	s := m.s
	p := w.Partition
	epoch, err := s.d.Bookkeeping.Acquire(ctx, m.group, topic, p, m.memberID)
	if err != nil {
		if errors.Is(err, bookkeeping.ErrLeaseHeld) {
			return nil, nil
		}
		return nil, err
	}
	next := w.Committed
	if next == bookkeeping.NoOffset {
		if m.start == sluicev1.StartPosition_START_POSITION_TIMESTAMP {
			next, err = s.startOffset(ctx, topic, int(p), m.start, 0, m.startMs)
		} else {
			next, err = s.startOffsetWithin(ctx, topic, int(p), startOf(m.start), primeAge)
		}
		if err != nil {
			// Give the lease back: another round retries. Should the
			// release fail, the next round's view shows the lease under
			// the member's id at an epoch the machine does not hold (a
			// stray), and the machine releases it then.
			_ = s.d.Bookkeeping.Release(ctx, m.group, topic, p, m.memberID, epoch)
			return nil, err
		}
	}
	s.m.leaseAcquired(ctx, m.group)
	return &membership.Lease{Key: tp{Topic: topic, Partition: p}, Epoch: epoch, Offset: next}, nil
}

// startOf maps a start position: unset means earliest.
func startOf(p sluicev1.StartPosition) sluicev1.StartPosition {
	if p == sluicev1.StartPosition_START_POSITION_UNSPECIFIED {
		return sluicev1.StartPosition_START_POSITION_EARLIEST
	}
	return p
}

// release gives up a revoking lease (a lease not being revoked stays): its
// owner is done with it (committed, or its worker ended).
func (m *member) release(ctx context.Context, k tp) {
	for _, a := range m.step(membership.RevokeDone{Key: k}) {
		if r, ok := a.(membership.ReleaseLease); ok {
			m.releaseLease(ctx, r)
		}
	}
}

func (m *member) releaseLease(ctx context.Context, r membership.ReleaseLease) {
	err := m.s.d.Bookkeeping.Release(ctx, m.group, r.Key.Topic, r.Key.Partition, m.memberID, r.Epoch)
	if err != nil && !errors.Is(err, bookkeeping.ErrFenced) {
		m.s.log.Warn("group lease release failed; the next balancing round releases it again", slog.String("group", m.group),
			slog.String("topic", r.Key.Topic), slog.Int("partition", int(r.Key.Partition)), slog.Any("err", err))
	}
}

// leave ends the membership so the member's leases are free at once. It
// runs after the coordinator ended.
func (m *member) leave() {
	for _, a := range m.step(membership.Leave{}) {
		if _, ok := a.(membership.LeaveGroup); !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := m.s.d.Bookkeeping.Leave(ctx, m.group, m.memberID)
		cancel()
		if err != nil && !errors.Is(err, bookkeeping.ErrNotFound) {
			m.s.log.Warn("group member could not leave; its leases free after its session timeout",
				slog.String("group", m.group), slog.String("member", m.memberID), slog.Any("err", err))
		}
	}
}

// announcedTopic is the topic of an Announce (all its leases share one).
func announcedTopic(a membership.Announce) string {
	if len(a.Added) > 0 {
		return a.Added[0].Topic
	}
	if len(a.Revoked) > 0 {
		return a.Revoked[0].Topic
	}
	return ""
}
