package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// getPartition reads a partition item of topic incarnation id; a missing item
// is the never-written partition (version 0, found false).
func (c *store) getPartition(ctx context.Context, topic string, id catalog.TopicID, index int) (catalog.Partition, bool, error) {
	it, err := c.get(ctx, partitionPK(id), indexSK(index))
	if err != nil || it == nil {
		return catalog.Partition{Topic: topic, TopicID: id, Index: index}, false, err
	}
	p, err := decodePartition(it)
	if err == nil && (p.TopicID != id || p.Index != index) {
		err = fmt.Errorf("%w: item %s/%s holds partition %s/%d", ErrCorrupt, partitionPK(id), indexSK(index), p.TopicID, p.Index)
	}
	return p, err == nil, err
}

// partitionPut writes p conditioned on the version it was read at (found) or
// on there being no item yet.
func (c *store) partitionCond(readVersion int64, found bool) cond {
	if !found {
		return notExists
	}
	return versionIs(readVersion)
}

// livePartition resolves a live topic's partition.
func (c *store) livePartition(ctx context.Context, topic string, index int) (catalog.Topic, catalog.Partition, bool, error) {
	t, err := c.getTopic(ctx, topic)
	if err != nil {
		return catalog.Topic{}, catalog.Partition{}, false, err
	}
	if index >= t.Partitions {
		return catalog.Topic{}, catalog.Partition{}, false, fmt.Errorf("topic has %d partitions: %w", t.Partitions, catalog.ErrNotFound)
	}
	p, found, err := c.getPartition(ctx, t.Name, t.ID, index)
	return t, p, found, err
}

// topicIs is the condition that a topic item is still the incarnation id
// and has a partition index.
func topicIs(id catalog.TopicID, index int) cond {
	return cond{expr: "#id = :tid AND #parts > :idx", names: map[string]string{"#id": "id", "#parts": "parts"},
		values: map[string]av{":tid": s(string(id)), ":idx": n(int64(index))}}
}

// GetPartition implements catalog.Driver (Partitions.GetPartition).
func (c *store) GetPartition(ctx context.Context, topic string, partition int) (catalog.Partition, error) {
	_, p, _, err := c.livePartition(ctx, topic, partition)
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("get partition %s/%d: %w", topic, partition, err)
	}
	return p, nil
}

// ListPartitionRange implements catalog.Driver: one range query over the
// topic's partition items, with never-written partitions filled in.
// catalog.Catalog's ListPartitions turns the page token into start and back.
func (c *store) ListPartitionRange(ctx context.Context, topic string, start, limit int) ([]catalog.Partition, bool, error) {
	ps, more, err := c.listPartitions(ctx, topic, start, limit)
	if err != nil {
		return nil, false, fmt.Errorf("list partitions of %q: %w", topic, err)
	}
	return ps, more, nil
}

func (c *store) listPartitions(ctx context.Context, topic string, start, n int) ([]catalog.Partition, bool, error) {
	t, err := c.getTopic(ctx, topic)
	if err != nil {
		return nil, false, err
	}
	end := min(start+n, t.Partitions)
	var ps []catalog.Partition
	for i := start; i < end; i++ {
		ps = append(ps, catalog.Partition{Topic: t.Name, TopicID: t.ID, Index: i})
	}
	more := end < t.Partitions
	if start >= end {
		return ps, more, nil
	}
	in := &dynamodb.QueryInput{
		TableName: &c.table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :a AND :b"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]av{":pk": s(partitionPK(t.ID)), ":a": s(indexSK(start)), ":b": s(indexSK(end - 1))},
	}
	for {
		out, err := c.api.Query(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("query partitions: %w", err)
		}
		for _, it := range out.Items {
			p, err := decodePartition(it)
			if err != nil {
				return nil, false, err
			}
			if p.TopicID != t.ID || p.Index < start || p.Index >= end {
				return nil, false, fmt.Errorf("%w: partition item %s/%d in the range of %s [%d, %d)", ErrCorrupt, p.TopicID, p.Index, t.ID, start, end)
			}
			ps[p.Index-start] = p
		}
		if out.LastEvaluatedKey == nil {
			return ps, more, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// acquirePlan is AcquireWriter's decision, made from consistent reads, and
// the transaction that commits it only if what it was decided on still holds.
type acquirePlan struct {
	next catalog.Partition
	ops  []txOp
}

// planAcquire reads and decides; AcquireWriter commits the plan. They are
// split so a test can change the world in between and see each condition
// of the transaction map to its error.
func (c *store) planAcquire(ctx context.Context, topic string, partition int, owner string) (acquirePlan, error) {
	t, p, found, err := c.livePartition(ctx, topic, partition)
	if err != nil {
		return acquirePlan{}, err
	}
	now := c.clock.Now()
	self, selfFound, err := c.getOwner(ctx, owner)
	if err != nil {
		return acquirePlan{}, err
	}
	if !selfFound || !self.LiveAt(now) {
		return acquirePlan{}, catalog.ErrOwnerExpired
	}
	stealing := p.Owner != "" && p.Owner != owner
	curLive := false
	if stealing {
		cur, curFound, err := c.getOwner(ctx, p.Owner)
		if err != nil {
			return acquirePlan{}, err
		}
		curLive = curFound && cur.LiveAt(now)
	}
	if err := catalog.CanAcquire(p, owner, curLive); err != nil {
		return acquirePlan{}, err
	}
	next := catalog.Acquired(p, owner)
	nowMs := map[string]av{":now": n(now.UnixMilli())}
	expName := map[string]string{"#exp": attrExpires}
	// Ordered by which failure should be reported first.
	ops := []txOp{
		c.txCheck(pkTopics, t.Name, topicIs(t.ID, partition), fmt.Errorf("topic was deleted: %w", catalog.ErrNotFound)),
		c.txCheck(pkOwners, owner, cond{expr: "#exp > :now", names: expName, values: nowMs}, catalog.ErrOwnerExpired),
	}
	if stealing {
		// The old owner must still be dead when the steal commits.
		ops = append(ops, c.txCheck(pkOwners, p.Owner, notExists.or(cond{expr: "#exp <= :now", names: expName, values: nowMs}),
			fmt.Errorf("owner %q renewed its heartbeat: %w", p.Owner, catalog.ErrOwned)))
	}
	ops = append(ops, c.txPut(partitionItem(next), c.partitionCond(p.Version, found), catalog.ErrVersionConflict))
	return acquirePlan{next: next, ops: ops}, nil
}

// AcquireWriter implements catalog.Writers: consistent reads decide, and one
// transaction commits the new owner and epoch conditioned on everything the
// decision rested on — the partition's version, the topic incarnation, the
// caller's heartbeat being live and, when stealing, the old owner's being
// missing or expired.
func (c *store) AcquireWriter(ctx context.Context, topic string, partition int, owner string) (catalog.Partition, error) {
	plan, err := c.planAcquire(ctx, topic, partition, owner)
	if err == nil {
		err = c.transact(ctx, plan.ops)
	}
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("acquire writer %s/%d for %q: %w", topic, partition, owner, err)
	}
	return plan.next, nil
}

// ReleaseWriter implements catalog.Writers.
func (c *store) ReleaseWriter(ctx context.Context, lease catalog.WriterLease) error {
	err := c.fencedCAS(ctx, lease, func(p catalog.Partition, found bool) ([]txOp, error) {
		next, err := catalog.Released(p, lease)
		if err != nil {
			return nil, err
		}
		return []txOp{c.txPut(partitionItem(next), c.partitionCond(p.Version, found), catalog.ErrVersionConflict)}, nil
	})
	if err != nil {
		return fmt.Errorf("release writer %v: %w", lease, err)
	}
	return nil
}

// AppendLedger implements catalog.Writers: the partition is written at the
// version read (re-read on conflict: the epoch, not the version, decides
// whether the writer may append) together with checks that the topic is
// still this incarnation and the ledger still exists.
func (c *store) AppendLedger(ctx context.Context, lease catalog.WriterLease, ref catalog.LedgerRef) (catalog.Partition, error) {
	var next catalog.Partition
	err := c.fencedCAS(ctx, lease, func(p catalog.Partition, found bool) ([]txOp, error) {
		if err := catalog.CheckLease(p, lease); err != nil {
			return nil, err
		}
		deleted := fmt.Errorf("topic %q (id %s) was deleted: %w", lease.Topic, lease.TopicID, catalog.ErrNotFound)
		if t, err := c.getTopic(ctx, lease.Topic); errors.Is(err, catalog.ErrNotFound) || (err == nil && t.ID != lease.TopicID) {
			return nil, deleted
		} else if err != nil {
			return nil, err
		}
		m, err := c.getLedger(ctx, ref.ID)
		if err != nil {
			return nil, fmt.Errorf("ledger %d: %w", ref.ID, err)
		}
		if err := catalog.CheckLedgerForLease(m, lease, ref); err != nil {
			return nil, err
		}
		if next, err = catalog.AppendedLedger(p, lease, ref); err != nil {
			return nil, err
		}
		return []txOp{
			c.txCheck(pkTopics, lease.Topic, topicIs(lease.TopicID, lease.Partition), deleted),
			c.txCheck(ledgerPK(ref.ID), skLedger, exists, fmt.Errorf("ledger %d was deleted: %w", ref.ID, catalog.ErrNotFound)),
			c.txPut(partitionItem(next), versionIs(p.Version), catalog.ErrVersionConflict),
		}, nil
	})
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("append ledger %d to %v: %w", ref.ID, lease, err)
	}
	return next, nil
}

// fencedCAS runs a writer's read-decide-commit on its partition, deciding
// again from a fresh read when the commit loses a version race.
func (c *store) fencedCAS(ctx context.Context, lease catalog.WriterLease, decide func(p catalog.Partition, found bool) ([]txOp, error)) error {
	for range casAttempts {
		p, found, err := c.getPartition(ctx, lease.Topic, lease.TopicID, lease.Partition)
		if err != nil {
			return err
		}
		ops, err := decide(p, found)
		if err != nil {
			return err
		}
		if err = c.transact(ctx, ops); !errors.Is(err, catalog.ErrVersionConflict) {
			return err
		}
	}
	return fmt.Errorf("%d attempts lost a race: %w", casAttempts, catalog.ErrVersionConflict)
}

// TrimLedgers implements catalog.LedgerTrimmer: a conditional put at the
// caller's expected version.
func (c *store) TrimLedgers(ctx context.Context, topicID catalog.TopicID, partition int, through catalog.LedgerID, expectVersion int64) (catalog.Partition, error) {
	p, found, err := c.getPartition(ctx, "", topicID, partition)
	switch {
	case err != nil:
	case !found:
		err = catalog.ErrNotFound
	case p.Version != expectVersion:
		err = fmt.Errorf("at version %d, not %d: %w", p.Version, expectVersion, catalog.ErrVersionConflict)
	default:
		if p, err = catalog.TrimmedLedgers(p, through); err == nil {
			if err = c.putIf(ctx, partitionItem(p), versionIs(expectVersion)); errors.Is(err, errCondition) {
				err = catalog.ErrVersionConflict
			}
		}
	}
	if err != nil {
		return catalog.Partition{}, fmt.Errorf("trim ledgers of %s/%d through %d: %w", topicID, partition, through, err)
	}
	return p, nil
}
