package cassandra

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

const (
	// fencedCommit is one partition of a member's commit. The whole commit
	// is a batch of these on one (group, topic) partition key: one Paxos
	// round that applies all of them or none. It assumes the common case —
	// the stored offset is of the commit's incarnation, or there is none
	// (committed_topic_id null: a lease never committed, or an offset from
	// before schema v4, which may then only grow, as replacing it would).
	fencedCommit = `UPDATE consumer_partitions SET committed_offset = ?, metadata = ?, commit_epoch = ?, committed_topic_id = ? ` +
		`WHERE group_id = ? AND topic = ? AND partition_id = ? ` +
		`IF owner = ? AND epoch = ? AND committed_topic_id IN (?, null) AND committed_offset <= ?`
	// fencedReplace is one partition of a member's commit whose stored
	// offset the failed first round showed to be of another incarnation (or
	// of an unknown one): still fenced by the lease, pinned to exactly the
	// topic id and offset that round read, and without the regression
	// check.
	fencedReplace = `UPDATE consumer_partitions SET committed_offset = ?, metadata = ?, commit_epoch = ?, committed_topic_id = ? ` +
		`WHERE group_id = ? AND topic = ? AND partition_id = ? ` +
		`IF owner = ? AND epoch = ? AND committed_topic_id = ? AND committed_offset = ?`
	// unownedCommit is one partition of a standalone commit or reset of an
	// existing row: conditioned on the exact state read serially before, so
	// any lease move or commit in between fails the batch. It clears the
	// (non-live) owner.
	unownedCommit = `UPDATE consumer_partitions SET committed_offset = ?, metadata = ?, commit_epoch = 0, owner = '', committed_topic_id = ? ` +
		`WHERE group_id = ? AND topic = ? AND partition_id = ? IF owner = ? AND epoch = ? AND committed_offset = ? AND committed_topic_id = ?`
	// unownedInsert is one partition of a standalone commit or reset where
	// no row exists yet.
	unownedInsert = `INSERT INTO consumer_partitions (group_id, topic, partition_id, owner, epoch, committed_offset, metadata, commit_epoch, committed_topic_id) ` +
		`VALUES (?, ?, ?, '', 0, ?, ?, 0, ?) IF NOT EXISTS`
	// txnOffsetCommit is one partition of a committed transaction's
	// offsets (CommitTxnOffsets): pinned to the state a serial read saw,
	// leaving owner and epoch as they are.
	txnOffsetCommit = `UPDATE consumer_partitions SET committed_offset = ?, metadata = '', commit_epoch = 0, committed_topic_id = ? ` +
		`WHERE group_id = ? AND topic = ? AND partition_id = ? IF owner = ? AND epoch = ? AND committed_offset = ? AND committed_topic_id = ?`
	selectPartitionsIn = `SELECT partition_id, owner, epoch, committed_offset, committed_topic_id FROM consumer_partitions WHERE group_id = ? AND topic = ? AND partition_id IN ?`
	selectOffset       = `SELECT committed_offset, metadata, commit_epoch, committed_topic_id FROM consumer_partitions WHERE group_id = ? AND topic = ? AND partition_id = ?`
	listTopicsFrom     = `SELECT topic FROM group_topics WHERE group_id = ? AND topic >= ?`
	listOffsetsAll     = `SELECT partition_id, committed_offset, metadata, commit_epoch, committed_topic_id FROM consumer_partitions WHERE group_id = ? AND topic = ?`
	listOffsetsAfter   = `SELECT partition_id, committed_offset, metadata, commit_epoch, committed_topic_id FROM consumer_partitions WHERE group_id = ? AND topic = ? AND partition_id > ?`
)

// maxCommitRounds bounds the conditional batches of one member's commit.
// Round 1 is the only one in the steady state. Round 2 runs when round 1
// found stored offsets of another incarnation (once per partition after its
// topic was re-created). Round 3 runs only when the rows changed between
// rounds 1 and 2 — only the lease holder commits, so only by a concurrent
// commit of the same member; past it the caller gets ErrConflict and
// retries.
const maxCommitRounds = 3

// Commit implements bookkeeping.Offsets.
//
// The rule — regression check against a stored offset of the same
// incarnation only — is an OR (another id, or an offset not above the new
// one), and CQL conditions have no OR. So the first batch assumes the same
// incarnation (fencedCommit) and costs one Paxos round, as before schema v4.
// When it fails, Cassandra returns the rows it read within that round; if
// they show stored offsets of another incarnation, the second batch carries
// every partition again, those pinned to the state read (fencedReplace), so
// the commit stays all-or-nothing and a change in between fails it rather
// than being overwritten. The second round is paid only on the first commit
// after a topic was re-created (or a pre-v4 offset would move back).
func (s *store) Commit(ctx context.Context, c bookkeeping.Commit) error {
	if c.Member == "" {
		return s.commitUnowned(ctx, c, false)
	}
	var seen map[int32]partitionRow // what the previous round read; nil in round 1
	for round := 1; ; round++ {
		b := s.lwtBatch()
		for _, o := range c.Offsets {
			if r, ok := seen[o.Partition]; ok && r.topicID != c.TopicID {
				b.Query(fencedReplace, o.Offset, o.Metadata, o.Epoch, c.TopicID, c.Group, c.Topic, o.Partition,
					c.Member, o.Epoch, nullable(r.topicID), r.offset)
				continue
			}
			if sabotageCommitEpoch { // chaos sabotage build only: no lease check
				b.Query(unfencedCommit, o.Offset, o.Metadata, o.Epoch, c.TopicID, c.Group, c.Topic, o.Partition, c.TopicID, o.Offset)
				continue
			}
			b.Query(fencedCommit, o.Offset, o.Metadata, o.Epoch, c.TopicID, c.Group, c.Topic, o.Partition,
				c.Member, o.Epoch, c.TopicID, o.Offset)
		}
		rows, applied, err := execCAS(ctx, b)
		if err != nil {
			return fmt.Errorf("commit %s/%s: %w", c.Group, c.Topic, err)
		}
		if applied {
			return nil
		}
		// Not applied: the rows say why. A partition with no row was
		// never leased, so it is fenced too.
		var fenced, regressed []int32
		otherIncarnation := false
		for _, o := range c.Offsets {
			r, ok := rows[o.Partition]
			switch {
			case !ok || r.owner != c.Member || r.epoch != o.Epoch:
				fenced = append(fenced, o.Partition)
			case r.topicID != c.TopicID:
				otherIncarnation = true
			case r.offset > o.Offset:
				regressed = append(regressed, o.Partition)
			}
		}
		if len(fenced) > 0 {
			return bookkeeping.NewFencedError(c.Group, c.Topic, fenced)
		}
		if len(regressed) > 0 {
			return bookkeeping.NewOffsetRegressionError(c.Group, c.Topic, regressed)
		}
		if round == 1 && !otherIncarnation {
			return fmt.Errorf("commit %s/%s: %w: batch not applied but no condition failed", c.Group, c.Topic, bookkeeping.ErrConflict)
		}
		if round == maxCommitRounds {
			return fmt.Errorf("commit %s/%s: %w: the partitions changed while committing; retry", c.Group, c.Topic, bookkeeping.ErrConflict)
		}
		seen = rows // after round 1: another incarnation; later: a change since the last read
	}
}

// nullable is a stored topic id as a bind value: "" is how a null column
// reads (statements never write an empty id), and only a null bind value
// matches it in a condition.
func nullable(topicID string) any {
	if topicID == "" {
		return nil
	}
	return topicID
}

// Reset implements bookkeeping.Offsets.
func (s *store) Reset(ctx context.Context, c bookkeeping.Commit) error {
	return s.commitUnowned(ctx, c, true)
}

// commitUnowned is a standalone commit or a reset: allowed only while the
// group has no live members; one conditional batch pinned to the state a
// serial read saw.
func (s *store) commitUnowned(ctx context.Context, c bookkeeping.Commit, reset bool) error {
	op := "commit"
	if reset {
		op = "reset"
	}
	wrap := func(err error) error { return fmt.Errorf("%s %s/%s: %w", op, c.Group, c.Topic, err) }
	ids, err := s.memberIDs(ctx, c.Group, 1)
	if err != nil {
		return wrap(err)
	}
	if len(ids) > 0 {
		return wrap(fmt.Errorf("%w: the group has live members; only they may commit", bookkeeping.ErrConflict))
	}
	// Both recorded before the offsets, so offsets are never unlisted; a
	// commit that then fails leaves them recorded, which is harmless.
	if err := s.recordTopic(ctx, c.Group, c.Topic); err != nil {
		return wrap(err)
	}
	if err := s.recordGroup(ctx, c.Group); err != nil {
		return wrap(err)
	}
	parts := make([]int32, len(c.Offsets))
	for i, o := range c.Offsets {
		parts[i] = o.Partition
	}
	cur := make(map[int32]partitionRow, len(parts))
	iter := s.serialRead(selectPartitionsIn, c.Group, c.Topic, parts).IterContext(ctx)
	var (
		p int32
		r partitionRow
	)
	for iter.Scan(&p, &r.owner, &r.epoch, &r.offset, &r.topicID) {
		cur[p] = r
	}
	if err := iter.Close(); err != nil {
		return wrap(err)
	}
	var regressed []int32
	b := s.lwtBatch()
	for _, o := range c.Offsets {
		r, ok := cur[o.Partition]
		if !ok {
			b.Query(unownedInsert, c.Group, c.Topic, o.Partition, o.Offset, o.Metadata, c.TopicID)
			continue
		}
		// An offset of another (or an unknown) incarnation is replaced
		// whatever its value.
		if !reset && r.topicID == c.TopicID && r.offset > o.Offset {
			regressed = append(regressed, o.Partition)
		}
		b.Query(unownedCommit, o.Offset, o.Metadata, c.TopicID, c.Group, c.Topic, o.Partition, r.owner, r.epoch, r.offset, nullable(r.topicID))
	}
	if len(regressed) > 0 {
		return bookkeeping.NewOffsetRegressionError(c.Group, c.Topic, regressed)
	}
	_, applied, err := execCAS(ctx, b)
	if err != nil {
		return wrap(err)
	}
	if !applied {
		return wrap(fmt.Errorf("%w: the partitions changed while committing; retry", bookkeeping.ErrConflict))
	}
	return nil
}

// partitionRow is the condition columns of a consumer_partitions row.
type partitionRow struct {
	owner   string
	epoch   int64
	offset  int64
	topicID string // "" when null
}

// execCAS runs a conditional batch. When it is not applied, Cassandra returns
// the current values of the rows that exist; they come back keyed by
// partition.
func execCAS(ctx context.Context, b *gocql.Batch) (map[int32]partitionRow, bool, error) {
	first := map[string]any{}
	applied, iter, err := b.MapExecCASContext(ctx, first)
	if err != nil {
		if iter != nil {
			_ = iter.Close()
		}
		return nil, false, err
	}
	if applied {
		return nil, true, iter.Close()
	}
	rows := map[int32]partitionRow{}
	for m := first; len(m) > 0 || iter.MapScan(m); m = map[string]any{} {
		p, r, err := decodeCASRow(m)
		if err != nil {
			_ = iter.Close()
			return nil, false, err
		}
		rows[p] = r
	}
	return rows, false, iter.Close()
}

// decodeCASRow reads the row of a failed conditional statement.
func decodeCASRow(m map[string]any) (int32, partitionRow, error) {
	p, ok1 := m["partition_id"].(int)
	owner, ok2 := m["owner"].(string)
	epoch, ok3 := m["epoch"].(int64)
	offset, ok4 := m["committed_offset"].(int64)
	topicID, ok5 := m["committed_topic_id"].(string) // "" when null
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return 0, partitionRow{}, fmt.Errorf("unexpected row from a failed conditional batch: %v", m)
	}
	return int32(p), partitionRow{owner: owner, epoch: epoch, offset: offset, topicID: topicID}, nil
}

// FetchOffset implements bookkeeping.Offsets.
func (s *store) FetchOffset(ctx context.Context, group, topic string, partition int32) (bookkeeping.Committed, error) {
	var c bookkeeping.Committed
	err := s.read(selectOffset, group, topic, partition).ScanContext(ctx, &c.Offset, &c.Metadata, &c.Epoch, &c.TopicID)
	if err == gocql.ErrNotFound || (err == nil && c.Offset == bookkeeping.NoOffset) {
		return bookkeeping.Committed{}, fmt.Errorf("fetch offset %s/%s/%d: %w: nothing committed", group, topic, partition, bookkeeping.ErrNotFound)
	}
	if err != nil {
		return bookkeeping.Committed{}, fmt.Errorf("fetch offset %s/%s/%d: %w", group, topic, partition, err)
	}
	return c, nil
}

// ListOffsets implements bookkeeping.Offsets: the group's topics from
// group_topics, then each topic's partition rows, skipping leases without a
// commit, until limit+1 entries show whether there are more.
func (s *store) ListOffsets(ctx context.Context, group string, after bookkeeping.Cursor, limit int) ([]bookkeeping.GroupOffset, bool, error) {
	wrap := func(err error) error { return fmt.Errorf("list offsets of group %q: %w", group, err) }
	out := []bookkeeping.GroupOffset{}
	topics := s.read(listTopicsFrom, group, after.Topic).IterContext(ctx)
	var topic string
	for topics.Scan(&topic) {
		q := s.read(listOffsetsAll, group, topic)
		if topic == after.Topic {
			q = s.read(listOffsetsAfter, group, topic, after.Partition)
		}
		more, err := appendOffsets(ctx, q, topic, limit, &out)
		if err != nil {
			_ = topics.Close()
			return nil, false, wrap(err)
		}
		if more {
			if err := topics.Close(); err != nil {
				return nil, false, wrap(err)
			}
			return out, true, nil
		}
	}
	if err := topics.Close(); err != nil {
		return nil, false, wrap(err)
	}
	return out, false, nil
}

// appendOffsets appends the committed offsets q returns to out until out
// holds limit entries; more reports that q had another one.
func appendOffsets(ctx context.Context, q *gocql.Query, topic string, limit int, out *[]bookkeeping.GroupOffset) (more bool, err error) {
	iter := q.IterContext(ctx)
	g := bookkeeping.GroupOffset{Topic: topic}
	for iter.Scan(&g.Partition, &g.Offset, &g.Metadata, &g.Epoch, &g.TopicID) {
		if g.Offset == bookkeeping.NoOffset {
			continue // a lease without a commit
		}
		if len(*out) == limit {
			more = true
			break
		}
		*out = append(*out, g)
	}
	return more, iter.Close()
}

// maxTxnOffsetRounds bounds the rounds of CommitTxnOffsets on one (group,
// topic): a round fails only when a commit or lease move of the group
// changed a row between its read and its batch.
const maxTxnOffsetRounds = 8

// CommitTxnOffsets implements bookkeeping.Offsets: per (group, topic), a
// serial read of the rows, then one conditional batch pinned to them that
// writes each offset the rule lets through (leaving owner and epoch as
// they are); a row that changed in between fails the batch, and the round
// runs again on what is stored then.
func (s *store) CommitTxnOffsets(ctx context.Context, offsets []bookkeeping.TxnOffset) error {
	type gt struct{ group, topic string }
	byTopic := make(map[gt][]bookkeeping.TxnOffset)
	var order []gt
	for _, o := range offsets {
		k := gt{o.Group, o.Topic}
		if _, ok := byTopic[k]; !ok {
			order = append(order, k)
		}
		byTopic[k] = append(byTopic[k], o)
	}
	for _, k := range order {
		if err := s.commitTxnOffsets(ctx, k.group, k.topic, byTopic[k]); err != nil {
			return fmt.Errorf("commit transaction offsets %s/%s: %w", k.group, k.topic, err)
		}
	}
	return nil
}

func (s *store) commitTxnOffsets(ctx context.Context, group, topic string, offsets []bookkeeping.TxnOffset) error {
	// Recorded first, so the offsets are never unlisted (as commitUnowned).
	if err := s.recordTopic(ctx, group, topic); err != nil {
		return err
	}
	if err := s.recordGroup(ctx, group); err != nil {
		return err
	}
	parts := make([]int32, len(offsets))
	for i, o := range offsets {
		parts[i] = o.Partition
	}
	for range maxTxnOffsetRounds {
		cur := make(map[int32]partitionRow, len(parts))
		iter := s.serialRead(selectPartitionsIn, group, topic, parts).IterContext(ctx)
		var (
			p int32
			r partitionRow
		)
		for iter.Scan(&p, &r.owner, &r.epoch, &r.offset, &r.topicID) {
			cur[p] = r
		}
		if err := iter.Close(); err != nil {
			return err
		}
		b := s.lwtBatch()
		n := 0
		for _, o := range offsets {
			r, ok := cur[o.Partition]
			switch {
			case !ok:
				b.Query(unownedInsert, group, topic, o.Partition, o.Offset, "", o.TopicID)
			case r.topicID == o.TopicID && r.offset > o.Offset:
				continue // the group moved on since
			default:
				b.Query(txnOffsetCommit, o.Offset, o.TopicID, group, topic, o.Partition, r.owner, r.epoch, r.offset, nullable(r.topicID))
			}
			n++
		}
		if n == 0 {
			return nil
		}
		_, applied, err := execCAS(ctx, b)
		if err != nil {
			return err
		}
		if applied {
			return nil
		}
	}
	return fmt.Errorf("%w: the partitions kept changing while committing; retry", bookkeeping.ErrConflict)
}
