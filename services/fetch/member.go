package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch/assign"
)

// A member is one consumer group member served by this copy: its
// membership in bookkeeping (join, heartbeat, leave) and its balancing
// rounds, which acquire, revoke, release and notice lost partition leases
// (services/fetch/assign decides which). Two owners use it:
//   - a Subscribe session (session.go), whose client receives the
//     assignment events and the records;
//   - a trigger's runner (triggers.go), which reads and invokes itself.
//
// What a held lease does is the owner's, through its hooks. The owner's
// coordinator goroutine runs coordinate; releases may come from any
// goroutine (a commit of a revoked lease, a trigger worker that finished).
//
// mu guards leases and, for the session, the session's own fields (one
// lock for both, so an assignment event and the leases it announces change
// together); no I/O runs under it, and the hooks run under it.
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

	// lastBeat is when (Unix ns) the store last confirmed the member live:
	// its join or a heartbeat that found it. live() reads it.
	lastBeat atomic.Int64

	mu     sync.Mutex
	leases map[tp]*heldLease
}

// memberHooks are what a member's owner does with its leases. All run with
// member.mu held and must not block.
type memberHooks struct {
	// follow starts the work on a newly acquired lease and returns what
	// stops it (called when the lease is revoked or lost, or the member
	// leaves).
	follow func(k tp, l *sluicev1.PartitionLease) (unfollow func())
	// changed reports a round's changes of one topic: leases acquired,
	// leases revoked (held until committed or RevokeTimeout), or, with
	// lost, leases that moved away.
	changed func(added, revoked []*sluicev1.PartitionLease, lost bool)
	// alive is asked before each coordination round; an error ends the
	// member (nil: always alive).
	alive func() error
}

type tp struct {
	topic     string
	partition int32
}

// heldLease is a partition leased to the member.
type heldLease struct {
	epoch    int64
	next     int64 // next offset to deliver (sessions; a trigger worker keeps its own)
	revoking bool  // revoked, kept until committed or the deadline
	deadline time.Time
	unfollow func()
}

// leave ends the membership so the member's leases are free at once.
func (m *member) leave() {
	m.mu.Lock()
	for _, l := range m.leases {
		if l.unfollow != nil {
			l.unfollow()
		}
	}
	m.leases = map[tp]*heldLease{}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.s.d.Bookkeeping.Leave(ctx, m.group, m.memberID); err != nil && !errors.Is(err, bookkeeping.ErrNotFound) {
		m.s.log.Warn("group member could not leave; its leases free after its session timeout",
			slog.String("group", m.group), slog.String("member", m.memberID), slog.Any("err", err))
	}
}

// join enters the group.
func (m *member) join(ctx context.Context) error {
	start := time.Now()
	err := m.s.d.Bookkeeping.Join(ctx, m.group, bookkeeping.Member{ID: m.memberID, ClientInfo: m.info, SessionTimeout: m.timeout, Topics: m.topics})
	if err == nil {
		m.lastBeat.Store(start.UnixNano())
	}
	return err
}

// live reports whether the member's leases are surely still its own: the
// store confirmed it live less than three quarters of its session timeout
// ago, so no other member can have taken them yet. A process that was
// paused (or cut off from the store) past that must not start work on
// them — an invocation, a DLQ write — until a heartbeat confirms it again;
// if the store forgot the member meanwhile, the heartbeat drops its leases
// instead (heartbeat). Commits are fenced regardless.
func (m *member) live() bool {
	return time.Since(time.Unix(0, m.lastBeat.Load())) < m.timeout-m.timeout/4
}

// coordinate runs the member's heartbeat and balancing until ctx ends or
// alive fails (its error is returned).
func (m *member) coordinate() error {
	s := m.s
	hb := m.timeout / 3
	lastBeat := time.Now()
	t := time.NewTicker(s.cfg.BalanceInterval)
	defer t.Stop()
	for {
		if m.hooks.alive != nil {
			if err := m.hooks.alive(); err != nil {
				return err
			}
		}
		if time.Since(lastBeat) >= hb {
			if err := m.heartbeat(); err != nil {
				if m.ctx.Err() != nil {
					return nil
				}
				s.log.Warn("group heartbeat failed", slog.String("group", m.group), slog.String("member", m.memberID), slog.Any("err", err))
			} else {
				lastBeat = time.Now()
			}
		}
		if err := m.balance(); err != nil && m.ctx.Err() == nil {
			s.log.Warn("group balancing round failed", slog.String("group", m.group), slog.String("member", m.memberID), slog.Any("err", err))
		}
		select {
		case <-m.ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// heartbeat keeps the member live. A member the store forgot (its
// heartbeats failed, or its process was paused, past the timeout) has lost
// its leases: other members may hold them now. It drops them all at once
// (lost; the owner's work on them stops) and joins again as a new member
// would; the next balancing rounds acquire its share afresh.
func (m *member) heartbeat() error {
	ctx, cancel := context.WithTimeout(m.ctx, m.timeout/3)
	defer cancel()
	start := time.Now()
	err := m.s.d.Bookkeeping.Heartbeat(ctx, m.group, m.memberID)
	if err == nil {
		m.lastBeat.Store(start.UnixNano())
	}
	if errors.Is(err, bookkeeping.ErrNotFound) {
		m.dropAll()
		err = m.join(ctx)
	}
	return err
}

// dropAll gives up every lease as lost.
func (m *member) dropAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	byTopic := map[string][]*sluicev1.PartitionLease{}
	for k, l := range m.leases {
		if l.unfollow != nil {
			l.unfollow()
		}
		byTopic[k.topic] = append(byTopic[k.topic], &sluicev1.PartitionLease{Topic: k.topic, Partition: k.partition, Epoch: l.epoch, Offset: l.next})
		delete(m.leases, k)
	}
	for _, lost := range byTopic {
		m.hooks.changed(nil, lost, true)
	}
	if len(byTopic) > 0 {
		m.s.log.Warn("group member expired in the store (paused or cut off past its session timeout): its leases are dropped as lost",
			slog.String("group", m.group), slog.String("member", m.memberID))
	}
}

// balance is one balancing round over the member's topics.
func (m *member) balance() error {
	s := m.s
	ctx, cancel := context.WithTimeout(m.ctx, max(m.timeout/2, time.Second))
	defer cancel()
	// Revoked leases whose commit never came are released now.
	now := time.Now()
	var expired []tp
	m.mu.Lock()
	for k, l := range m.leases {
		if l.revoking && now.After(l.deadline) {
			expired = append(expired, k)
		}
	}
	m.mu.Unlock()
	for _, k := range expired {
		m.release(ctx, k)
	}
	members, err := s.d.Bookkeeping.ListMembers(ctx, m.group)
	if err != nil {
		return err
	}
	var errs []error
	for _, topic := range m.topics {
		if err := m.balanceTopic(ctx, topic, members); err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", topic, err))
		}
	}
	return errors.Join(errs...)
}

func (m *member) balanceTopic(ctx context.Context, topic string, members []bookkeeping.Member) error {
	s := m.s
	t, err := s.topic(ctx, topic)
	if err != nil {
		return err
	}
	var ids []string
	for _, mb := range members {
		if slices.Contains(mb.Topics, topic) {
			ids = append(ids, mb.ID)
		}
	}
	leases, err := s.d.Bookkeeping.ListLeases(ctx, m.group, topic)
	if err != nil {
		return err
	}
	forgetOtherIncarnations(leases, t)
	owners := make(map[int32]string, len(leases))
	stored := make(map[int32]bookkeeping.Lease, len(leases))
	for _, l := range leases {
		if int(l.Partition) < t.Partitions {
			owners[l.Partition] = l.Owner
			stored[l.Partition] = l
		}
	}
	// Leases this member holds that moved: lost.
	var lost []*sluicev1.PartitionLease
	m.mu.Lock()
	for k, l := range m.leases {
		if k.topic != topic {
			continue
		}
		st := stored[k.partition]
		if st.Owner != m.memberID || st.Epoch != l.epoch {
			lost = append(lost, &sluicev1.PartitionLease{Topic: topic, Partition: k.partition, Epoch: l.epoch, Offset: l.next})
			if l.unfollow != nil {
				l.unfollow()
			}
			delete(m.leases, k)
		}
	}
	if len(lost) > 0 {
		m.hooks.changed(nil, lost, true)
	}
	m.mu.Unlock()
	plan, err := assign.Decide(s.cfg.Assign, assign.Input{Me: m.memberID, Members: ids, Partitions: int32(t.Partitions), Owners: owners})
	if err != nil {
		return err
	}
	var added, revoked []*sluicev1.PartitionLease
	for _, p := range plan.Release {
		k := tp{topic, p}
		m.mu.Lock()
		if l, ok := m.leases[k]; ok && !l.revoking {
			l.revoking, l.deadline = true, time.Now().Add(s.cfg.RevokeTimeout)
			if l.unfollow != nil {
				l.unfollow()
				l.unfollow = nil
			}
			revoked = append(revoked, &sluicev1.PartitionLease{Topic: topic, Partition: p, Epoch: l.epoch, Offset: l.next})
		}
		m.mu.Unlock()
	}
	// Acquisitions run acquireParallelism at a time: each is a lease
	// compare-and-set in bookkeeping and, for a partition the group never
	// committed, a catalog read for its start offset; one after another,
	// a round over hundreds of new partitions outlasted its deadline.
	m.primeStarts(ctx, topic, plan.Acquire, stored)
	got := make([]*sluicev1.PartitionLease, len(plan.Acquire))
	errs := make([]error, len(plan.Acquire))
	sem := make(chan struct{}, acquireParallelism)
	var wg sync.WaitGroup
	for i, p := range plan.Acquire {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got[i], errs[i] = m.acquire(ctx, topic, p, stored)
		})
	}
	wg.Wait()
	for _, a := range got {
		if a != nil {
			added = append(added, a)
		}
	}
	if len(added) > 0 || len(revoked) > 0 {
		// The leases start together with their event, so (for a session)
		// no record of a partition precedes the event that assigns it.
		m.mu.Lock()
		for _, a := range added {
			k := tp{topic, a.Partition}
			m.leases[k] = &heldLease{epoch: a.Epoch, next: a.Offset, unfollow: m.hooks.follow(k, a)}
		}
		m.hooks.changed(added, revoked, false)
		m.mu.Unlock()
		s.log.Info("group assignment changed", slog.String("group", m.group), slog.String("member", m.memberID),
			slog.String("topic", topic), slog.Int("added", len(added)), slog.Int("revoked", len(revoked)))
	}
	return errors.Join(errs...)
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
func (m *member) primeStarts(ctx context.Context, topic string, acquire []int32, stored map[int32]bookkeeping.Lease) {
	lo, hi, n := int32(-1), int32(-1), 0
	for _, p := range acquire {
		if st, ok := stored[p]; ok && st.Offset != bookkeeping.NoOffset {
			continue
		}
		if n == 0 || p < lo {
			lo = p
		}
		hi = max(hi, p)
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
func (m *member) acquire(ctx context.Context, topic string, p int32, stored map[int32]bookkeeping.Lease) (*sluicev1.PartitionLease, error) {
	s := m.s
	epoch, err := s.d.Bookkeeping.Acquire(ctx, m.group, topic, p, m.memberID)
	if err != nil {
		if errors.Is(err, bookkeeping.ErrLeaseHeld) {
			return nil, nil
		}
		return nil, err
	}
	next := bookkeeping.NoOffset
	if st, ok := stored[p]; ok {
		next = st.Offset
	}
	if next == bookkeeping.NoOffset {
		if m.start == sluicev1.StartPosition_START_POSITION_TIMESTAMP {
			next, err = s.startOffset(ctx, topic, int(p), m.start, 0, m.startMs)
		} else {
			next, err = s.startOffsetWithin(ctx, topic, int(p), startOf(m.start), primeAge)
		}
		if err != nil {
			// Hold the lease but release it: another round retries.
			_ = s.d.Bookkeeping.Release(ctx, m.group, topic, p, m.memberID, epoch)
			return nil, err
		}
	}
	return &sluicev1.PartitionLease{Topic: topic, Partition: p, Epoch: epoch, Offset: next}, nil
}

// startOf maps a start position: unset means earliest.
func startOf(p sluicev1.StartPosition) sluicev1.StartPosition {
	if p == sluicev1.StartPosition_START_POSITION_UNSPECIFIED {
		return sluicev1.StartPosition_START_POSITION_EARLIEST
	}
	return p
}

// release gives up a revoking lease (a lease not being revoked stays).
func (m *member) release(ctx context.Context, k tp) {
	m.mu.Lock()
	l, ok := m.leases[k]
	if !ok || !l.revoking {
		m.mu.Unlock()
		return
	}
	delete(m.leases, k)
	m.mu.Unlock()
	err := m.s.d.Bookkeeping.Release(ctx, m.group, k.topic, k.partition, m.memberID, l.epoch)
	if err != nil && !errors.Is(err, bookkeeping.ErrFenced) {
		m.s.log.Warn("group lease release failed; it frees when the member leaves", slog.String("group", m.group),
			slog.String("topic", k.topic), slog.Int("partition", int(k.partition)), slog.Any("err", err))
	}
}
