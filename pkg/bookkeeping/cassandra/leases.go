package cassandra

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

const (
	selectLease    = `SELECT owner, epoch FROM consumer_partitions WHERE group_id = ? AND topic = ? AND partition_id = ?`
	selectLiveIn   = `SELECT member_id FROM group_members WHERE group_id = ? AND member_id IN ?`
	insertTopic    = `INSERT INTO group_topics (group_id, topic) VALUES (?, ?)`
	insertLease    = `INSERT INTO consumer_partitions (group_id, topic, partition_id, owner, epoch, committed_offset, metadata, commit_epoch) VALUES (?, ?, ?, ?, 1, -1, '', 0) IF NOT EXISTS`
	moveLease      = `UPDATE consumer_partitions SET owner = ?, epoch = ? WHERE group_id = ? AND topic = ? AND partition_id = ? IF owner = ? AND epoch = ?`
	releaseLease   = `UPDATE consumer_partitions SET owner = '' WHERE group_id = ? AND topic = ? AND partition_id = ? IF owner = ? AND epoch = ?`
	listPartitions = `SELECT partition_id, owner, epoch, committed_offset, metadata, committed_topic_id FROM consumer_partitions WHERE group_id = ? AND topic = ?`
)

// Acquire implements bookkeeping.Leases: serial read, decide, CAS on what was
// read; a lost race or an unknown outcome goes round again.
func (s *store) Acquire(ctx context.Context, group, topic string, partition int32, member string) (int64, error) {
	wrap := func(err error) error {
		return fmt.Errorf("acquire %s/%s/%d for %q: %w", group, topic, partition, member, err)
	}
	topicRecorded := false
	for range maxCASAttempts {
		var owner string
		var epoch int64
		err := s.serialRead(selectLease, group, topic, partition).ScanContext(ctx, &owner, &epoch)
		exists := err == nil
		if err != nil && err != gocql.ErrNotFound {
			return 0, wrap(err)
		}
		live, err := s.areLive(ctx, group, member, owner)
		if err != nil {
			return 0, wrap(err)
		}
		switch {
		case !live[member]:
			return 0, wrap(fmt.Errorf("member %w in the group (expired, left or never joined)", bookkeeping.ErrNotFound))
		case exists && owner == member:
			return epoch, nil
		case exists && owner != "" && live[owner]:
			return 0, wrap(fmt.Errorf("%w: %q at epoch %d", bookkeeping.ErrLeaseHeld, owner, epoch))
		}
		if !topicRecorded {
			// group_topics lets ListOffsets find the topic. Written before
			// the lease, so a lease row never exists without it.
			if err := s.recordTopic(ctx, group, topic); err != nil {
				return 0, wrap(err)
			}
			topicRecorded = true
		}
		var applied bool
		if exists {
			applied, err = s.lwt(moveLease, member, epoch+1, group, topic, partition, owner, epoch).MapScanCASContext(ctx, map[string]any{})
		} else {
			applied, err = s.lwt(insertLease, group, topic, partition, member).MapScanCASContext(ctx, map[string]any{})
		}
		switch {
		case err == nil && applied:
			return epoch + 1, nil
		case err == nil || unknownOutcome(err):
			continue // lost a race, or do not know: read the settled state
		default:
			return 0, wrap(err)
		}
	}
	return 0, wrap(fmt.Errorf("%w: lost %d races in a row", bookkeeping.ErrConflict, maxCASAttempts))
}

// recordTopic notes that group has leases or offsets on topic (idempotent).
func (s *store) recordTopic(ctx context.Context, group, topic string) error {
	return s.write(insertTopic, group, topic).Idempotent(true).ExecContext(ctx)
}

// areLive returns which of the given members of group are live.
func (s *store) areLive(ctx context.Context, group string, members ...string) (map[string]bool, error) {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			ids = append(ids, m)
		}
	}
	live := make(map[string]bool, len(ids))
	iter := s.read(selectLiveIn, group, ids).IterContext(ctx)
	var id string
	for iter.Scan(&id) {
		live[id] = true
	}
	return live, iter.Close()
}

// Release implements bookkeeping.Leases.
func (s *store) Release(ctx context.Context, group, topic string, partition int32, member string, epoch int64) error {
	applied, err := s.lwt(releaseLease, group, topic, partition, member, epoch).MapScanCASContext(ctx, map[string]any{})
	if err != nil {
		return fmt.Errorf("release %s/%s/%d: %w", group, topic, partition, err)
	}
	if !applied {
		return bookkeeping.NewFencedError(group, topic, []int32{partition})
	}
	return nil
}

// ListLeases implements bookkeeping.Leases.
func (s *store) ListLeases(ctx context.Context, group, topic string) ([]bookkeeping.Lease, error) {
	wrap := func(err error) error { return fmt.Errorf("list leases of %s/%s: %w", group, topic, err) }
	live, err := s.liveSet(ctx, group)
	if err != nil {
		return nil, wrap(err)
	}
	leases := []bookkeeping.Lease{}
	iter := s.read(listPartitions, group, topic).IterContext(ctx)
	var l bookkeeping.Lease
	for iter.Scan(&l.Partition, &l.Owner, &l.Epoch, &l.Offset, &l.Metadata, &l.TopicID) {
		if !live[l.Owner] {
			l.Owner = ""
		}
		leases = append(leases, l)
		if len(leases) > bookkeeping.MaxPartitions {
			_ = iter.Close()
			return nil, wrap(fmt.Errorf("more than %d partitions stored", bookkeeping.MaxPartitions))
		}
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err)
	}
	return leases, nil
}
