package membership

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/services/fetch/assign"
)

// startRound releases the revoked leases whose deadline passed (their
// commit never came), then asks for the group's members.
func (m *Member) startRound(now time.Time) {
	keys := slices.SortedFunc(maps.Keys(m.leases), compareKeys)
	for _, k := range keys {
		if l := m.leases[k]; l.revoking && now.After(l.deadline) {
			delete(m.leases, k)
			m.emit(ReleaseLease{Key: k, Epoch: l.epoch})
		}
	}
	m.round = &round{}
	m.phase = phaseMembers
	m.emit(ListMembers{})
}

func (m *Member) membersListed(ev MembersListed) error {
	r := m.round
	for _, mb := range ev.Members {
		r.members = append(r.members, memberTopics{id: mb.ID, topics: mb.Topics})
	}
	m.phase = phaseTopic
	m.emit(ReadTopic{Topic: m.cfg.Topics[0]})
	return nil
}

func (m *Member) topicFailed(ev TopicFailed) error {
	topic := m.cfg.Topics[m.round.at]
	if ev.Topic != topic {
		return fmt.Errorf("%w: %v while reading topic %s", ErrInvalidEvent, ev, topic)
	}
	m.nextTopic(ev.Err)
	return nil
}

// view balances one topic on the store's view of it: the leases that
// moved are dropped as lost, strays are released, then assign.Decide plans
// the round (strays free in it); extras are revoked at once (they stop
// being followed), acquisitions are asked for.
func (m *Member) view(ev TopicView) error {
	r := m.round
	topic := m.cfg.Topics[r.at]
	if ev.Topic != topic {
		return fmt.Errorf("%w: %v while reading topic %s", ErrInvalidEvent, ev, topic)
	}
	if ev.Partitions < 0 {
		return fmt.Errorf("%w: %v: negative partition count", ErrInvalidEvent, ev)
	}
	var ids []string
	for _, mb := range r.members {
		if slices.Contains(mb.topics, topic) {
			ids = append(ids, mb.id)
		}
	}
	owners := make(map[int32]string, len(ev.Leases))
	stored := make(map[int32]bookkeeping.Lease, len(ev.Leases))
	for _, l := range ev.Leases {
		if l.Partition >= 0 && l.Partition < ev.Partitions {
			owners[l.Partition] = l.Owner
			stored[l.Partition] = l
		}
	}

	// Leases the member holds that moved (another owner or epoch, or no
	// record): lost. A revoking lease too: the store freed it already.
	var lost []Lease
	for _, k := range m.topicKeys(topic) {
		l := m.leases[k]
		st, ok := stored[k.Partition]
		if ok && st.Owner == m.cfg.MemberID && st.Epoch == l.epoch {
			continue
		}
		lost = append(lost, Lease{Key: k, Epoch: l.epoch, Offset: l.next})
		if !l.revoking {
			m.emit(Unfollow{Key: k})
		}
		delete(m.leases, k)
	}
	if len(lost) > 0 {
		m.emit(Announce{Revoked: lost, Lost: true})
	}

	// Strays: leases the store names the member owner of that it does not
	// hold (see the package doc). Each is released at its stored epoch and
	// is free in the plan, which may give it back to the member, through an
	// Acquire that must then move its epoch (answered).
	if !m.cfg.unsafe.keepStrays {
		for _, p := range slices.Sorted(maps.Keys(stored)) {
			k := Key{Topic: topic, Partition: p}
			if _, held := m.leases[k]; held || stored[p].Owner != m.cfg.MemberID {
				continue // held at this epoch (the lost leases are gone), or not the member's
			}
			m.emit(ReleaseLease{Key: k, Epoch: stored[p].Epoch})
			owners[p] = ""
		}
	}

	plan, err := assign.Decide(m.cfg.Assign, assign.Input{Me: m.cfg.MemberID, Members: ids, Partitions: ev.Partitions, Owners: owners})
	if err != nil {
		m.nextTopic(err)
		return nil
	}
	for _, p := range plan.Release {
		k := Key{Topic: topic, Partition: p}
		l, ok := m.leases[k]
		if !ok || l.revoking {
			continue // not held, or already being revoked
		}
		l.revoking, l.deadline = true, ev.Now.Add(m.cfg.RevokeTimeout)
		m.emit(Unfollow{Key: k})
		r.revoked = append(r.revoked, Lease{Key: k, Epoch: l.epoch, Offset: l.next})
	}
	if len(plan.Acquire) == 0 {
		m.finishTopic()
		return nil
	}
	want := make([]Want, len(plan.Acquire))
	r.pending = make(map[int32]int64, len(plan.Acquire))
	for i, p := range plan.Acquire {
		committed, epoch := bookkeeping.NoOffset, int64(0)
		if st, ok := stored[p]; ok {
			committed, epoch = st.Offset, st.Epoch
		}
		want[i] = Want{Partition: p, Committed: committed}
		r.pending[p] = epoch
	}
	m.phase = phaseAcquire
	m.emit(Acquire{Topic: topic, Want: want})
	return nil
}

// answered takes one partition's answer to Acquire; after the last, the
// topic's changes take effect.
//
// A lease acquired at an epoch no higher than the view showed was not
// handed over by the store: it named the member already (a stray whose
// release failed, or one the view showed free while the member was not
// live), and gave its epoch back unchanged. Work may have been done at
// that epoch before — by this member id before the store forgot it — and
// could still commit, so the lease is not followed: it is released (kept)
// and a later round acquires it at a new epoch.
func (m *Member) answered(k Key, ev Event) error {
	r := m.round
	seen, ok := r.pending[k.Partition]
	if !ok || k.Topic != m.cfg.Topics[r.at] {
		return fmt.Errorf("%w: an answer for %v, which is not being acquired", ErrInvalidEvent, k)
	}
	delete(r.pending, k.Partition)
	switch ev := ev.(type) {
	case LeaseAcquired:
		if ev.Epoch <= seen && !m.cfg.unsafe.followKept {
			r.kept = append(r.kept, Lease(ev))
			r.failed = append(r.failed, fmt.Errorf("%v: acquired at e%d, no newer than the view showed (the lease named the member already): released, to be acquired anew", k, ev.Epoch))
		} else {
			r.acquired = append(r.acquired, Lease(ev))
		}
	case AcquireFailed:
		r.failed = append(r.failed, ev.Err)
	}
	if len(r.pending) == 0 {
		m.finishTopic()
	}
	return nil
}

// finishTopic starts the leases acquired together with the event that
// announces them and the revokes, so (for a session) no record of a
// partition precedes the event that assigns it.
func (m *Member) finishTopic() {
	r := m.round
	slices.SortFunc(r.kept, func(a, b Lease) int { return compareKeys(a.Key, b.Key) })
	for _, l := range r.kept {
		m.emit(ReleaseLease{Key: l.Key, Epoch: l.Epoch})
	}
	slices.SortFunc(r.acquired, func(a, b Lease) int { return compareKeys(a.Key, b.Key) })
	for _, a := range r.acquired {
		if _, held := m.leases[a.Key]; held {
			// The view showed the partition free while the member held
			// it: Decide never plans that, and nothing else adds a lease.
			panic(fmt.Sprintf("membership: acquired %v, which the member holds", a.Key))
		}
		m.leases[a.Key] = &lease{epoch: a.Epoch, next: a.Offset}
		m.emit(Follow{Lease: a})
	}
	if len(r.acquired) > 0 || len(r.revoked) > 0 {
		m.emit(Announce{Added: r.acquired, Revoked: r.revoked})
	}
	m.nextTopic(errors.Join(r.failed...))
}

// nextTopic ends the topic being balanced (err: what failed in it) and
// reads the next one, or ends the round.
func (m *Member) nextTopic(err error) {
	r := m.round
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("topic %s: %w", m.cfg.Topics[r.at], err))
	}
	r.revoked, r.pending, r.acquired, r.kept, r.failed = nil, nil, nil, nil, nil
	r.at++
	if r.at < len(m.cfg.Topics) {
		m.phase = phaseTopic
		m.emit(ReadTopic{Topic: m.cfg.Topics[r.at]})
		return
	}
	m.endRound(errors.Join(r.errs...))
}

func (m *Member) endRound(err error) {
	m.round = nil
	m.phase = phaseIdle
	m.emit(RoundDone{Err: err})
}

// topicKeys are the held leases of topic, by partition.
func (m *Member) topicKeys(topic string) []Key {
	var keys []Key
	for k := range m.leases {
		if k.Topic == topic {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}
