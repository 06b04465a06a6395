package bookkeeping

import (
	"context"
	"fmt"
)

// Commit is one member's commit of offsets on several partitions of one
// topic — one call, applied atomically or not at all.
type Commit struct {
	Group, Topic string
	// TopicID is the id of the topic incarnation the offsets belong to (the
	// catalog's TopicID of the topic the records were read from): a topic
	// deleted and created again under the same name has a new id, and its
	// offsets start afresh (see Offsets.Commit). Required, bounded like a
	// name. It is a plain string, not catalog.TopicID, because bookkeeping
	// imports nothing of Sluice (a contract of its own, usable without the
	// catalog); the store only compares ids for equality.
	TopicID string
	// Member is the committing member, or "" for a standalone commit (see
	// the package doc: allowed only while the group has no live members).
	Member  string
	Offsets []PartitionOffset
}

// PartitionOffset is the commit of one partition.
type PartitionOffset struct {
	Partition int32
	// Offset is the next offset to consume (Kafka's convention), in
	// [0, MaxOffset].
	Offset int64
	// Epoch is the lease epoch the member holds on the partition; 0 for a
	// standalone commit and for Reset.
	Epoch int64
	// Metadata is free-form text stored with the offset, at most
	// MaxMetadataBytes.
	Metadata string
}

// Committed is the committed offset of one partition.
type Committed struct {
	Offset   int64
	Metadata string
	// Epoch is the lease epoch the offset was committed under; 0 for a
	// standalone commit or Reset.
	Epoch int64
	// TopicID is the Commit.TopicID the offset was committed with: the
	// topic incarnation it belongs to. It is "" for an offset committed
	// before stores recorded ids (Cassandra schema v3 and older, embedded
	// partition records of version 1): the incarnation is unknown, and the
	// caller decides what that means (it may be the live incarnation's
	// offset, or a deleted one's).
	TopicID string
}

// GroupOffset is a committed offset in a listing of a whole group.
type GroupOffset struct {
	Topic     string
	Partition int32
	Committed
}

// Cursor is a position in the (topic, partition) order of ListOffsets; a page
// starts strictly after it. The zero Cursor starts at the beginning (no topic
// is named "").
type Cursor struct {
	Topic     string
	Partition int32
}

// Offsets stores committed offsets, fenced by the lease epochs of Leases.
//
// Committed offsets are keyed by (group, topic name, partition) and each
// carries the TopicID of the topic incarnation it was committed for (issue
// 30, "Topic identity": a re-created topic is a new id — no old records, no
// old group offsets). Leases are keyed by name only: a lease and its epochs
// survive a re-creation, and fencing works across it unchanged.
type Offsets interface {
	// Commit applies c atomically. With a member, every partition must be
	// leased to c.Member at the given epoch, else nothing changes and the
	// error is a *FencedError naming the partitions that are not. An offset
	// lower than the committed one of the same incarnation (stored TopicID
	// equal to c.TopicID) fails the whole commit with an
	// *OffsetRegressionError; an equal offset is accepted (retries are
	// harmless) and replaces the metadata. A partition whose stored offset
	// has another TopicID — or none, written before ids were stored — is
	// replaced whatever its value: that offset belongs to a deleted
	// incarnation (or an unknown one) and says nothing about this one's
	// positions. Every written offset takes c.TopicID. Without a member
	// (standalone) the group must have no live members, else ErrConflict;
	// the touched leases lose their (non-live) owners; the regression rule
	// is the same. Errors: also *ValidationError (c.TopicID "" is refused,
	// field "topicID").
	//
	// Ids are not ordered, so the store cannot tell a newer incarnation
	// from an older one: a commit carrying a deleted incarnation's id (a
	// caller with a stale view of the topic) replaces the live one's offset
	// like any other change of id. Callers pass the id of the incarnation
	// they read the records from, and treat a stored offset whose TopicID is
	// not the live topic's as no offset.
	Commit(ctx context.Context, c Commit) error

	// Reset sets offsets like a standalone commit (c.Member "", epochs 0)
	// but may move them backwards; every written offset takes c.TopicID
	// (required, like Commit's). Allowed only while the group has no live
	// members, else ErrConflict. Errors: also *ValidationError.
	Reset(ctx context.Context, c Commit) error

	// FetchOffset returns the committed offset of a partition with the
	// TopicID it was committed for ("" when committed before ids were
	// stored). Errors: ErrNotFound when nothing was committed;
	// *ValidationError.
	FetchOffset(ctx context.Context, group, topic string, partition int32) (Committed, error)

	// ListOffsets returns up to limit committed offsets of group ordered by
	// (topic, partition), starting strictly after the cursor after, each
	// with its TopicID as FetchOffset returns it; more reports whether
	// entries remain (continue from the last one returned). Errors:
	// *ValidationError (limit in [1, MaxListLimit], after not valid).
	ListOffsets(ctx context.Context, group string, after Cursor, limit int) (offsets []GroupOffset, more bool, err error)

	// CommitTxnOffsets applies the offsets of a committed transaction
	// (Txn.Offsets): each is written unless the stored offset of the same
	// incarnation is higher (the group moved on since); an offset of
	// another incarnation, or none, is replaced. Leases — owners and
	// epochs — are untouched: the lease epochs were checked when the
	// offsets joined the transaction, and the transaction's outcome, once
	// decided, must not depend on a lease moving after. Written with
	// metadata "" and commit epoch 0. Idempotent: a coordinator that
	// finishes a transaction again applies them again. Atomic per (group,
	// topic), not across them. Errors: *ValidationError (ValidateTxnOffsets;
	// at least one offset).
	CommitTxnOffsets(ctx context.Context, offsets []TxnOffset) error
}

// Validate checks c as a Commit: names, a non-empty topic id,
// 1..MaxCommitPartitions distinct partitions, offsets, metadata, and epochs
// — all ≥ 1 with a member, all 0 without one.
func (c Commit) Validate() error { return c.validate(false) }

// ValidateReset checks c as a Reset: like Validate, but c.Member must be "".
func (c Commit) ValidateReset() error { return c.validate(true) }

func (c Commit) validate(reset bool) error {
	if err := ValidateName("group", c.Group); err != nil {
		return err
	}
	if err := ValidateName("topic", c.Topic); err != nil {
		return err
	}
	if err := ValidateTopicID("topicID", c.TopicID); err != nil {
		return err
	}
	standalone := c.Member == ""
	if reset && !standalone {
		return invalid("member", "must be empty: a reset is not made by a group member")
	}
	if !standalone {
		if err := ValidateName("member", c.Member); err != nil {
			return err
		}
	}
	if len(c.Offsets) == 0 {
		return invalid("offsets", "must not be empty")
	}
	if len(c.Offsets) > MaxCommitPartitions {
		return invalid("offsets", "has %d partitions, more than %d", len(c.Offsets), MaxCommitPartitions)
	}
	seen := make(map[int32]struct{}, len(c.Offsets))
	for i, o := range c.Offsets {
		field := func(name string) string { return fmt.Sprintf("offsets[%d].%s", i, name) }
		if err := ValidatePartition(field("partition"), o.Partition); err != nil {
			return err
		}
		if _, dup := seen[o.Partition]; dup {
			return invalid(field("partition"), "partition %d appears more than once", o.Partition)
		}
		seen[o.Partition] = struct{}{}
		if o.Offset < 0 || o.Offset > MaxOffset {
			return invalid(field("offset"), "%d is outside [0, %d]", o.Offset, int64(MaxOffset))
		}
		if len(o.Metadata) > MaxMetadataBytes {
			return invalid(field("metadata"), "is %d bytes, longer than %d", len(o.Metadata), MaxMetadataBytes)
		}
		if standalone {
			if o.Epoch != 0 {
				return invalid(field("epoch"), "must be 0 without a member, got %d", o.Epoch)
			}
		} else if err := ValidateEpoch(field("epoch"), o.Epoch); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a ListOffsets cursor: the zero Cursor, or a valid topic
// name with a valid partition.
func (c Cursor) Validate() error {
	if c == (Cursor{}) {
		return nil
	}
	if err := ValidateName("after.topic", c.Topic); err != nil {
		return err
	}
	return ValidatePartition("after.partition", c.Partition)
}
