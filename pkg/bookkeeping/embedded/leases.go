package embedded

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// Acquire implements bookkeeping.Leases.
func (s *store) Acquire(ctx context.Context, group, topic string, partition int32, member string) (int64, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	wrap := func(err error) error {
		return fmt.Errorf("acquire %s/%s/%d for %q: %w", group, topic, partition, member, err)
	}

	live, err := s.isLive(group, member)
	if err != nil {
		return 0, wrap(err)
	}
	if !live {
		return 0, wrap(fmt.Errorf("member %w in the group (expired, left or never joined)", bookkeeping.ErrNotFound))
	}
	key := partitionKey(group, topic, partition)
	r, _, err := s.partition(key)
	if err != nil {
		return 0, wrap(err)
	}
	if r.owner == member {
		return r.epoch, nil
	}
	if r.owner != "" {
		ownerLive, err := s.isLive(group, r.owner)
		if err != nil {
			return 0, wrap(err)
		}
		if ownerLive {
			return 0, wrap(fmt.Errorf("%w: %q at epoch %d", bookkeeping.ErrLeaseHeld, r.owner, r.epoch))
		}
	}
	r.owner, r.epoch = member, r.epoch+1
	if err := s.db.Set(key, r.encode(), syncWrite); err != nil {
		return 0, wrap(err)
	}
	return r.epoch, nil
}

// Release implements bookkeeping.Leases.
func (s *store) Release(ctx context.Context, group, topic string, partition int32, member string, epoch int64) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	key := partitionKey(group, topic, partition)
	r, _, err := s.partition(key)
	if err != nil {
		return fmt.Errorf("release %s/%s/%d: %w", group, topic, partition, err)
	}
	if r.owner != member || r.epoch != epoch {
		return bookkeeping.NewFencedError(group, topic, []int32{partition})
	}
	r.owner = ""
	if err := s.db.Set(key, r.encode(), syncWrite); err != nil {
		return fmt.Errorf("release %s/%s/%d: %w", group, topic, partition, err)
	}
	return nil
}

// ListLeases implements bookkeeping.Leases.
func (s *store) ListLeases(ctx context.Context, group, topic string) ([]bookkeeping.Lease, error) {
	unlock, err := s.rlock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	live := map[string]bool{} // owner → live, looked up once per owner
	leases := []bookkeeping.Lease{}
	p := topicPrefix(group, topic)
	err = s.scan(p, prefixEnd(p), func(k, v []byte) (bool, error) {
		_, partition, err := splitPartitionKey(group, k)
		if err != nil {
			return false, err
		}
		r, err := decodePartition(v)
		if err != nil {
			return false, fmt.Errorf("partition record %q: %w", k, err)
		}
		if r.owner != "" {
			isLive, seen := live[r.owner]
			if !seen {
				if isLive, err = s.isLive(group, r.owner); err != nil {
					return false, err
				}
				live[r.owner] = isLive
			}
			if !isLive {
				r.owner = ""
			}
		}
		leases = append(leases, bookkeeping.Lease{Partition: partition, Owner: r.owner, Epoch: r.epoch, Offset: r.offset, Metadata: r.metadata, TopicID: r.topicID})
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list leases of %s/%s: %w", group, topic, err)
	}
	return leases, nil
}

// partition reads the partition record at key; a missing record is the zero
// state: never leased, nothing committed.
func (s *store) partition(key []byte) (partitionRecord, bool, error) {
	v, err := s.get(key)
	if err != nil {
		return partitionRecord{}, false, err
	}
	if v == nil {
		return partitionRecord{offset: bookkeeping.NoOffset}, false, nil
	}
	r, err := decodePartition(v)
	if err != nil {
		return partitionRecord{}, false, fmt.Errorf("partition record %q: %w", key, err)
	}
	return r, true, nil
}
