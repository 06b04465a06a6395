package embedded

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// getPartition reads a partition record of topic incarnation id; a missing
// record is the never-written partition (version 0). Callers hold the lock.
func (c *store) getPartition(topic string, id catalog.TopicID, index int) (p catalog.Partition, found bool, err error) {
	var r partitionRec
	key := partitionKey(id, index)
	found, err = c.get(key, &r)
	if err != nil || !found {
		return catalog.Partition{Topic: topic, TopicID: id, Index: index}, false, err
	}
	if p, err = r.partition(); err != nil {
		return catalog.Partition{}, false, corrupt(key, err)
	}
	if p.TopicID != id || p.Index != index {
		return catalog.Partition{}, false, corrupt(key, fmt.Errorf("record is %s/%d", p.TopicID, p.Index))
	}
	return p, true, nil
}

// livePartition resolves a live topic's partition; ErrNotFound if the topic
// is missing or has fewer partitions.
func (c *store) livePartition(topic string, index int) (catalog.Topic, catalog.Partition, error) {
	t, err := c.getTopic(topic)
	if err != nil {
		return catalog.Topic{}, catalog.Partition{}, err
	}
	if index >= t.Partitions {
		return catalog.Topic{}, catalog.Partition{}, fmt.Errorf("topic has %d partitions: %w", t.Partitions, catalog.ErrNotFound)
	}
	p, _, err := c.getPartition(t.Name, t.ID, index)
	return t, p, err
}

func (c *store) putPartition(p catalog.Partition) error {
	b := c.db.NewBatch()
	set(b, partitionKey(p.TopicID, p.Index), toPartitionRec(p))
	return c.commit(b)
}

// GetPartition implements catalog.Driver (Partitions.GetPartition).
func (c *store) GetPartition(_ context.Context, topic string, partition int) (catalog.Partition, error) {
	var p catalog.Partition
	err := c.read(func() (err error) { _, p, err = c.livePartition(topic, partition); return err })
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("get partition %s/%d: %w", topic, partition, err)
	}
	return p, nil
}

// ListPartitionRange implements catalog.Driver: catalog.Catalog's
// ListPartitions turns the page token into start and back.
func (c *store) ListPartitionRange(_ context.Context, topic string, start, limit int) ([]catalog.Partition, bool, error) {
	var ps []catalog.Partition
	more := false
	err := c.read(func() error {
		t, err := c.getTopic(topic)
		if err != nil {
			return err
		}
		end := min(start+limit, t.Partitions)
		for i := start; i < end; i++ {
			p, _, err := c.getPartition(t.Name, t.ID, i)
			if err != nil {
				return err
			}
			ps = append(ps, p)
		}
		more = end < t.Partitions
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list partitions of %q: %w", topic, err)
	}
	return ps, more, nil
}

// AcquireWriter implements catalog.Writers.
func (c *store) AcquireWriter(_ context.Context, topic string, partition int, owner string) (catalog.Partition, error) {
	var p catalog.Partition
	err := c.write(func() (err error) {
		if _, p, err = c.livePartition(topic, partition); err != nil {
			return err
		}
		now := c.clock.Now()
		self, found, err := c.getOwner(owner)
		if err != nil {
			return err
		}
		if !found || !self.LiveAt(now) {
			return catalog.ErrOwnerExpired
		}
		curLive := false
		if p.Owner != "" && p.Owner != owner {
			cur, found, err := c.getOwner(p.Owner)
			if err != nil {
				return err
			}
			curLive = found && cur.LiveAt(now)
		}
		if err := catalog.CanAcquire(p, owner, curLive); err != nil {
			return err
		}
		p = catalog.Acquired(p, owner)
		return c.putPartition(p)
	})
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("acquire writer %s/%d for %q: %w", topic, partition, owner, err)
	}
	return p, nil
}

// ReleaseWriter implements catalog.Writers.
func (c *store) ReleaseWriter(_ context.Context, lease catalog.WriterLease) error {
	err := c.write(func() error {
		p, _, err := c.getPartition(lease.Topic, lease.TopicID, lease.Partition)
		if err != nil {
			return err
		}
		if p, err = catalog.Released(p, lease); err != nil {
			return err
		}
		return c.putPartition(p)
	})
	if err != nil {
		return fmt.Errorf("release writer %v: %w", lease, err)
	}
	return nil
}

// AppendLedger implements catalog.Writers.
func (c *store) AppendLedger(_ context.Context, lease catalog.WriterLease, ref catalog.LedgerRef) (catalog.Partition, error) {
	var p catalog.Partition
	err := c.write(func() (err error) {
		if p, _, err = c.getPartition(lease.Topic, lease.TopicID, lease.Partition); err != nil {
			return err
		}
		if err := catalog.CheckLease(p, lease); err != nil {
			return err
		}
		t, err := c.getTopic(lease.Topic)
		if err != nil || t.ID != lease.TopicID {
			return fmt.Errorf("topic %q (id %s) was deleted: %w", lease.Topic, lease.TopicID, catalog.ErrNotFound)
		}
		m, err := c.getLedger(ref.ID)
		if err != nil {
			return fmt.Errorf("ledger %d: %w", ref.ID, err)
		}
		if err := catalog.CheckLedgerForLease(m, lease, ref); err != nil {
			return err
		}
		if p, err = catalog.AppendedLedger(p, lease, ref); err != nil {
			return err
		}
		return c.putPartition(p)
	})
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("append ledger %d to %v: %w", ref.ID, lease, err)
	}
	return p, nil
}

// TrimLedgers implements catalog.LedgerTrimmer.
func (c *store) TrimLedgers(_ context.Context, topicID catalog.TopicID, partition int, through catalog.LedgerID, expectVersion int64) (catalog.Partition, error) {
	var p catalog.Partition
	err := c.write(func() error {
		var found bool
		var err error
		if p, found, err = c.getPartition("", topicID, partition); err != nil {
			return err
		}
		if !found {
			return catalog.ErrNotFound
		}
		if p.Version != expectVersion {
			return fmt.Errorf("at version %d, not %d: %w", p.Version, expectVersion, catalog.ErrVersionConflict)
		}
		if p, err = catalog.TrimmedLedgers(p, through); err != nil {
			return err
		}
		return c.putPartition(p)
	})
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("trim ledgers of %s/%d through %d: %w", topicID, partition, through, err)
	}
	return p, nil
}
