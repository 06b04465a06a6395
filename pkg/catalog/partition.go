package catalog

import (
	"context"
	"fmt"
)

// LedgerRef places a ledger in a partition's log: the ledger's first record
// is at FirstOffset. A ledger's last offset is the next ref's FirstOffset-1
// (or, for the tail, in its LedgerMetadata).
type LedgerRef struct {
	ID          LedgerID
	FirstOffset int64
}

// Partition is a partition record: its writer ownership and its log as an
// ordered chain of ledgers (DESIGN §2.1, §2.3).
//
// Invariants: Ledgers are in strictly increasing ID order with
// non-decreasing FirstOffset, all >= LogStartOffset;
// len(Ledgers) <= MaxLedgersPerPartition; Epoch never decreases.
type Partition struct {
	Topic   string
	TopicID TopicID
	Index   int

	// Owner is the ingest copy that may write the partition, "" when free.
	// It counts as free, too, once that owner's heartbeat expired.
	Owner string
	// Epoch increases with every AcquireWriter and is kept across
	// ReleaseWriter; 0 means never owned.
	Epoch int64

	Ledgers        []LedgerRef
	LogStartOffset int64 // first offset still retained

	// Version increases by one with every change. A partition never written
	// reads as Version 0 with no owner and no ledgers.
	Version int64
}

// Lease returns the writer lease the partition's current owner holds.
func (p Partition) Lease() WriterLease {
	return WriterLease{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, Owner: p.Owner, Epoch: p.Epoch}
}

// WriterLease is what AcquireWriter hands the new writer; every fenced call
// carries it. It names the topic incarnation (TopicID), so a lease never
// applies to a later topic of the same name.
type WriterLease struct {
	Topic     string
	TopicID   TopicID
	Partition int
	Owner     string
	Epoch     int64
}

func (l WriterLease) String() string {
	return fmt.Sprintf("%s/%d owner %q epoch %d", l.Topic, l.Partition, l.Owner, l.Epoch)
}

// Partitions reads partition records. Fetch, admin and the compactor depend
// on this.
type Partitions interface {
	// GetPartition returns the partition of a live topic. Errors:
	// *ValidationError, ErrNotFound (topic, or index >= its partition count).
	GetPartition(ctx context.Context, topic string, partition int) (Partition, error)

	// ListPartitions returns a live topic's partitions in index order.
	// Errors: *ValidationError (limit, pageToken), ErrNotFound.
	ListPartitions(ctx context.Context, topic string, pageToken string, limit int) (Page[Partition], error)
}

// Writers moves partition ownership and extends a partition's ledger chain.
// Ingest depends on this.
//
// Ownership is decided per partition but liveness is per owner (DESIGN
// §2.5): AcquireWriter takes a partition whose owner's heartbeat record
// (Owners) is missing or expired, so a dead ingest copy frees all its
// partitions by not heartbeating, with no per-partition renewals.
type Writers interface {
	// AcquireWriter makes owner the partition's writer and bumps the epoch.
	// It succeeds when the partition has no owner, when owner already owns
	// it, or when the current owner's heartbeat is missing or expired.
	//
	// Re-acquiring a partition one already owns bumps the epoch too: it
	// means "a new writer session starts here" (e.g. after a restart under
	// the same owner id), which must fence the previous session's lease and
	// recover its open ledger. Do not call it to renew anything — liveness
	// is Owners.HeartbeatOwner.
	//
	// The caller's own heartbeat must be live, or the partition could be
	// stolen from it the moment it got it.
	//
	// Errors: *ValidationError, ErrNotFound (topic or partition),
	// ErrOwnerExpired (the caller's heartbeat), ErrOwned (a live other owner
	// holds it), ErrVersionConflict (lost a race with a concurrent change;
	// re-read and decide again).
	AcquireWriter(ctx context.Context, topic string, partition int, owner string) (Partition, error)

	// ReleaseWriter gives the partition up: no owner, epoch kept, so the
	// next AcquireWriter fences the released lease. Errors: ErrFenced (the
	// lease is not current).
	ReleaseWriter(ctx context.Context, lease WriterLease) error

	// AppendLedger adds ref at the end of the partition's ledger chain. The
	// lease must be current and the topic live; the ledger must exist with
	// the lease's topic and partition and start at ref.FirstOffset; ref.ID
	// must exceed, and ref.FirstOffset must not precede, the current tail.
	// Errors: ErrFenced, ErrNotFound (topic deleted, or no such ledger),
	// *ValidationError, ErrLimitExceeded (MaxLedgersPerPartition; trim first).
	AppendLedger(ctx context.Context, lease WriterLease, ref LedgerRef) (Partition, error)
}

// LedgerTrimmer removes ledgers from the front of a partition's chain
// (retention; the compactor). It uses the partition's version, not the
// writer's epoch: the trimmer is not the writer.
type LedgerTrimmer interface {
	// TrimLedgers removes the ledgers up to and including through, if the
	// partition's version is still expectVersion, and moves LogStartOffset
	// to the first offset of the first remaining ledger. The tail ledger
	// (the one being written) is never trimmed. Errors: *ValidationError
	// (through not in the chain, or the tail), ErrNotFound (no such
	// partition record), ErrVersionConflict.
	TrimLedgers(ctx context.Context, topicID TopicID, partition int, through LedgerID, expectVersion int64) (Partition, error)
}

// The rules below are pure functions of stored state, shared by every
// implementation so the backends cannot disagree about what is legal. The
// backends only make the read-check-write atomic.

// CanAcquire decides AcquireWriter for owner on p, given whether p's current
// owner has a live heartbeat: nil or ErrOwned.
func CanAcquire(p Partition, owner string, currentOwnerLive bool) error {
	if p.Owner == "" || p.Owner == owner || !currentOwnerLive {
		return nil
	}
	return fmt.Errorf("%s/%d is owned by %q (epoch %d): %w", p.Topic, p.Index, p.Owner, p.Epoch, ErrOwned)
}

// Acquired returns p owned by owner under the next epoch.
func Acquired(p Partition, owner string) Partition {
	p.Owner = owner
	p.Epoch++
	p.Version++
	return p
}

// CheckLease returns ErrFenced unless l is p's current lease.
func CheckLease(p Partition, l WriterLease) error {
	if p.Owner == "" || p.Owner != l.Owner || p.Epoch != l.Epoch || p.TopicID != l.TopicID {
		return fmt.Errorf("lease %v; partition owner %q epoch %d: %w", l, p.Owner, p.Epoch, ErrFenced)
	}
	return nil
}

// Released returns p without an owner, if l is current.
func Released(p Partition, l WriterLease) (Partition, error) {
	if err := CheckLease(p, l); err != nil {
		return Partition{}, err
	}
	p.Owner = ""
	p.Version++
	return p, nil
}

// ValidateLease checks a lease's fields, before any store access.
func ValidateLease(l WriterLease) error {
	if err := ValidateTopicName(l.Topic); err != nil {
		return err
	}
	if err := ValidateID("topicID", string(l.TopicID)); err != nil {
		return err
	}
	if err := ValidatePartitionIndex(l.Partition); err != nil {
		return err
	}
	if err := ValidateID("owner", l.Owner); err != nil {
		return err
	}
	if l.Epoch < 1 {
		return Invalid("epoch", "%d: leases start at epoch 1", l.Epoch)
	}
	return nil
}

// CheckLedgerForLease checks that ledger m may be appended as ref under l:
// same topic incarnation and partition, same first offset.
func CheckLedgerForLease(m LedgerMetadata, l WriterLease, ref LedgerRef) error {
	if m.TopicID != l.TopicID || m.Partition != l.Partition {
		return Invalid("ref", "ledger %d belongs to topic %s partition %d, not %s partition %d", m.ID, m.TopicID, m.Partition, l.TopicID, l.Partition)
	}
	if m.FirstOffset != ref.FirstOffset {
		return Invalid("ref", "ledger %d starts at offset %d, not %d", m.ID, m.FirstOffset, ref.FirstOffset)
	}
	return nil
}

// AppendedLedger returns p with ref appended, checking the lease, the chain's
// order and its bound.
func AppendedLedger(p Partition, l WriterLease, ref LedgerRef) (Partition, error) {
	if err := CheckLease(p, l); err != nil {
		return Partition{}, err
	}
	if ref.ID < 1 {
		return Partition{}, Invalid("ref", "ledger id %d is not positive", ref.ID)
	}
	if ref.FirstOffset < p.LogStartOffset {
		return Partition{}, Invalid("ref", "first offset %d precedes the log start offset %d", ref.FirstOffset, p.LogStartOffset)
	}
	if n := len(p.Ledgers); n > 0 {
		tail := p.Ledgers[n-1]
		if ref.ID <= tail.ID {
			return Partition{}, Invalid("ref", "ledger %d does not follow the tail ledger %d", ref.ID, tail.ID)
		}
		if ref.FirstOffset < tail.FirstOffset {
			return Partition{}, Invalid("ref", "first offset %d precedes the tail ledger's %d", ref.FirstOffset, tail.FirstOffset)
		}
		if n >= MaxLedgersPerPartition {
			return Partition{}, fmt.Errorf("%s/%d holds %d ledgers: %w", p.Topic, p.Index, n, ErrLimitExceeded)
		}
	}
	p.Ledgers = append(append([]LedgerRef(nil), p.Ledgers...), ref)
	p.Version++
	return p, nil
}

// TrimmedLedgers returns p without the ledgers up to and including through.
func TrimmedLedgers(p Partition, through LedgerID) (Partition, error) {
	i := -1
	for j, r := range p.Ledgers {
		if r.ID == through {
			i = j
			break
		}
	}
	if i < 0 {
		return Partition{}, Invalid("through", "ledger %d is not in %s/%d's chain", through, p.Topic, p.Index)
	}
	if i == len(p.Ledgers)-1 {
		return Partition{}, Invalid("through", "ledger %d is the tail of %s/%d, which is never trimmed", through, p.Topic, p.Index)
	}
	p.Ledgers = append([]LedgerRef(nil), p.Ledgers[i+1:]...)
	p.LogStartOffset = max(p.LogStartOffset, p.Ledgers[0].FirstOffset)
	p.Version++
	return p, nil
}
