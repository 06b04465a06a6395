package embedded

import (
	"bytes"
	"context"
	"fmt"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// Commit implements bookkeeping.Offsets.
func (s *store) Commit(ctx context.Context, c bookkeeping.Commit) error {
	return s.commit(ctx, c, false)
}

// Reset implements bookkeeping.Offsets.
func (s *store) Reset(ctx context.Context, c bookkeeping.Commit) error {
	return s.commit(ctx, c, true)
}

// commit checks every partition of c, then writes all of them in one synced
// batch — or nothing.
func (s *store) commit(ctx context.Context, c bookkeeping.Commit, reset bool) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	op := "commit"
	if reset {
		op = "reset"
	}
	wrap := func(err error) error { return fmt.Errorf("%s %s/%s: %w", op, c.Group, c.Topic, err) }

	standalone := c.Member == ""
	if standalone {
		// Without a member nothing fences the write, so it is only safe
		// while nobody may be consuming the group.
		active, err := s.hasLiveMembers(c.Group)
		if err != nil {
			return wrap(err)
		}
		if active {
			return wrap(fmt.Errorf("%w: the group has live members; only they may commit", bookkeeping.ErrConflict))
		}
	}
	recs := make([]partitionRecord, len(c.Offsets))
	var fenced, regressed []int32
	for i, o := range c.Offsets {
		r, _, err := s.partition(partitionKey(c.Group, c.Topic, o.Partition))
		if err != nil {
			return wrap(err)
		}
		if !standalone && (r.owner != c.Member || r.epoch != o.Epoch) {
			fenced = append(fenced, o.Partition)
		}
		// An offset of another incarnation (or of an unknown one, "")
		// is replaced whatever its value, as on Cassandra.
		if !reset && r.topicID == c.TopicID && o.Offset < r.offset {
			regressed = append(regressed, o.Partition)
		}
		if standalone {
			r.owner = "" // fence a non-live owner that might come back
		}
		r.offset, r.metadata, r.commitEpoch, r.topicID = o.Offset, o.Metadata, o.Epoch, c.TopicID
		recs[i] = r
	}
	if len(fenced) > 0 {
		return bookkeeping.NewFencedError(c.Group, c.Topic, fenced)
	}
	if len(regressed) > 0 {
		return bookkeeping.NewOffsetRegressionError(c.Group, c.Topic, regressed)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for i, o := range c.Offsets {
		if err := b.Set(partitionKey(c.Group, c.Topic, o.Partition), recs[i].encode(), nil); err != nil {
			return wrap(err)
		}
	}
	if standalone {
		// A member's commit needs no record: its Join made one.
		if err := recordGroup(b, c.Group); err != nil {
			return wrap(err)
		}
	}
	if err := commit(b); err != nil {
		return wrap(err)
	}
	return nil
}

// hasLiveMembers reports whether group has a live member. The caller holds mu.
func (s *store) hasLiveMembers(group string) (bool, error) {
	now := s.now().UnixNano()
	found := false
	p := memberPrefix(group)
	err := s.scan(p, prefixEnd(p), func(k, v []byte) (bool, error) {
		r, err := decodeMember(v)
		if err != nil {
			return false, fmt.Errorf("member record %q: %w", k, err)
		}
		found = now < r.expiresAt
		return !found, nil
	})
	return found, err
}

// FetchOffset implements bookkeeping.Offsets.
func (s *store) FetchOffset(ctx context.Context, group, topic string, partition int32) (bookkeeping.Committed, error) {
	unlock, err := s.rlock(ctx)
	if err != nil {
		return bookkeeping.Committed{}, err
	}
	defer unlock()
	r, _, err := s.partition(partitionKey(group, topic, partition))
	if err != nil {
		return bookkeeping.Committed{}, fmt.Errorf("fetch offset %s/%s/%d: %w", group, topic, partition, err)
	}
	if r.offset == bookkeeping.NoOffset {
		return bookkeeping.Committed{}, fmt.Errorf("fetch offset %s/%s/%d: %w: nothing committed", group, topic, partition, bookkeeping.ErrNotFound)
	}
	return r.committed(), nil
}

// ListOffsets implements bookkeeping.Offsets.
func (s *store) ListOffsets(ctx context.Context, group string, after bookkeeping.Cursor, limit int) ([]bookkeeping.GroupOffset, bool, error) {
	unlock, err := s.rlock(ctx)
	if err != nil {
		return nil, false, err
	}
	defer unlock()

	p := groupPrefix(group)
	lower := p
	if after.Topic != "" {
		// The first key after (topic, partition): partitions are 32-bit
		// big-endian, so partition+1 (≤ MaxPartitions) still sorts inside
		// the topic and before any later topic.
		lower = partitionKey(group, after.Topic, after.Partition+1)
	}
	out := []bookkeeping.GroupOffset{}
	more := false
	err = s.scan(lower, prefixEnd(p), func(k, v []byte) (bool, error) {
		if !bytes.HasPrefix(k, p) {
			return false, fmt.Errorf("%w: key %q outside group prefix", ErrCorrupt, k)
		}
		topic, partition, err := splitPartitionKey(group, k)
		if err != nil {
			return false, err
		}
		r, err := decodePartition(v)
		if err != nil {
			return false, fmt.Errorf("partition record %q: %w", k, err)
		}
		if r.offset == bookkeeping.NoOffset {
			return true, nil // a lease without a commit
		}
		if len(out) == limit {
			more = true
			return false, nil
		}
		out = append(out, bookkeeping.GroupOffset{Topic: topic, Partition: partition, Committed: r.committed()})
		return true, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list offsets of group %q: %w", group, err)
	}
	return out, more, nil
}

// committed is the committed offset of r, which must have one.
func (r partitionRecord) committed() bookkeeping.Committed {
	return bookkeeping.Committed{Offset: r.offset, Metadata: r.metadata, Epoch: r.commitEpoch, TopicID: r.topicID}
}

// CommitTxnOffsets implements bookkeeping.Offsets: every offset in one
// synced batch, each written unless the stored one of the same
// incarnation is higher; owners and epochs stay.
func (s *store) CommitTxnOffsets(ctx context.Context, offsets []bookkeeping.TxnOffset) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	b := s.db.NewBatch()
	defer b.Close()
	groups := make(map[string]bool)
	for _, o := range offsets {
		key := partitionKey(o.Group, o.Topic, o.Partition)
		r, _, err := s.partition(key)
		if err != nil {
			return fmt.Errorf("commit transaction offsets %s/%s/%d: %w", o.Group, o.Topic, o.Partition, err)
		}
		if r.topicID == o.TopicID && r.offset > o.Offset {
			continue // the group moved on since
		}
		r.offset, r.metadata, r.commitEpoch, r.topicID = o.Offset, "", 0, o.TopicID
		if err := b.Set(key, r.encode(), nil); err != nil {
			return err
		}
		if !groups[o.Group] {
			groups[o.Group] = true
			if err := recordGroup(b, o.Group); err != nil {
				return err
			}
		}
	}
	if err := commit(b); err != nil {
		return fmt.Errorf("commit transaction offsets: %w", err)
	}
	return nil
}
