package bookkeeping

import "context"

// NoOffset is Lease.Offset when nothing was committed for the partition.
const NoOffset int64 = -1

// Lease is the record of one (group, topic, partition): who owns it, at which
// epoch, and what was committed.
type Lease struct {
	Partition int32
	// Owner is the member holding the lease, or "" when the lease is free:
	// never leased, released, cleared by a standalone commit or Reset, or
	// held by a member that is no longer live.
	Owner string
	// Epoch is the epoch of the latest owner; 0 when never leased. It keeps
	// its value when the lease is freed, so the next owner gets Epoch+1.
	Epoch int64
	// Offset is the committed offset, or NoOffset.
	Offset int64
	// Metadata is the metadata committed with Offset.
	Metadata string
	// TopicID is the topic incarnation Offset was committed for (Commit's
	// TopicID); "" when none is stored (no offset, or one committed before
	// offsets carried it). An offset of another incarnation than the live
	// topic's belongs to a deleted topic: callers treat it as no offset.
	TopicID string
}

// Leases hands partitions of a topic to members of a group. Liveness comes
// from Members; a lease has no expiry of its own.
type Leases interface {
	// Acquire gives the lease on (group, topic, partition) to member and
	// returns its epoch. It succeeds when the lease is free (no owner, or
	// the owner is no longer live) — the member then gets an epoch one higher
	// than the lease's previous epoch — and when the member already holds
	// it, returning the current epoch unchanged (so a retried Acquire is
	// harmless). Errors: ErrNotFound when member is not a live member of
	// group; ErrLeaseHeld when another live member holds it;
	// *ValidationError.
	Acquire(ctx context.Context, group, topic string, partition int32, member string) (epoch int64, err error)

	// Release frees the lease that member holds at epoch, so another member
	// can take it at once (the epoch stays; the next owner gets epoch+1).
	// Errors: *FencedError when member does not hold the lease at epoch;
	// *ValidationError.
	Release(ctx context.Context, group, topic string, partition int32, member string, epoch int64) error

	// ListLeases returns the record of every partition of topic that was
	// ever leased or committed in group, sorted by partition; owners that
	// are not live are reported as "". Errors: *ValidationError.
	ListLeases(ctx context.Context, group, topic string) ([]Lease, error)
}
