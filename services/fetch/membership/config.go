package membership

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/services/fetch/assign"
)

// Config describes one member. Every field is required except Assign
// (zero fields take assign's defaults); New refuses a Config that
// Validate refuses.
type Config struct {
	// MemberID is the member's id in the group (bookkeeping.Member.ID).
	MemberID string
	// Topics are the topics the member subscribes to, sorted and distinct;
	// a round balances them in this order.
	Topics []string
	// SessionTimeout is the member's session timeout in the store: a
	// heartbeat is due a third of it after the last one, and Live trusts
	// the leases for three quarters of it after the store last confirmed
	// the member.
	SessionTimeout time.Duration
	// RevokeTimeout is how long a revoked lease is kept for the owner to
	// commit what it processed before the machine releases it anyway.
	RevokeTimeout time.Duration
	// Assign bounds the lease moves of one round (assign.Decide).
	Assign assign.Config

	// unsafe switches off safety rules, so the simulation can show that
	// it catches what each rule prevents (export_test.go); never set
	// outside tests.
	unsafe struct {
		// keepLeasesWhenForgotten: MemberForgotten keeps the leases
		// instead of dropping them as lost.
		keepLeasesWhenForgotten bool
		// beatAtAnswer: liveness counts from a heartbeat's answer rather
		// than from when it was sent.
		beatAtAnswer bool
		// keepStrays: a view's strays (leases the store names the member
		// owner of that it does not hold) are neither released nor
		// acquired, but count as the member's in the plan.
		keepStrays bool
		// followKept: a lease acquired at an epoch no higher than the
		// view showed is followed, not released.
		followKept bool
	}
}

// Validate reports every field out of range, joined.
func (c Config) Validate() error {
	var errs []error
	if err := bookkeeping.ValidateName("member id", c.MemberID); err != nil {
		errs = append(errs, fmt.Errorf("membership config: %w", err))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("membership config: no topics"))
	}
	if !slices.IsSorted(c.Topics) || len(slices.Compact(slices.Clone(c.Topics))) != len(c.Topics) {
		errs = append(errs, fmt.Errorf("membership config: topics %q are not sorted and distinct", c.Topics))
	}
	if c.SessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("membership config: session timeout %v is not positive", c.SessionTimeout))
	}
	if c.RevokeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("membership config: revoke timeout %v is not positive", c.RevokeTimeout))
	}
	if err := c.Assign.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Key names a partition of a topic.
type Key struct {
	Topic     string
	Partition int32
}

func (k Key) String() string { return fmt.Sprintf("%s/%d", k.Topic, k.Partition) }

// compareKeys orders keys by topic, then partition.
func compareKeys(a, b Key) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// Lease is a lease as the machine announces it: the partition, the epoch
// the member holds it at, and Offset, the lease's position (where work
// starts, for Follow and an added lease; the owner's delivery position,
// for a revoked or lost one).
type Lease struct {
	Key
	Epoch  int64
	Offset int64
}

func (l Lease) String() string { return fmt.Sprintf("%v e%d at %d", l.Key, l.Epoch, l.Offset) }

// Held is what the machine knows of a lease the member holds.
type Held struct {
	Epoch int64
	// Next is the owner's position: the offset it was acquired at, moved
	// by Advance (a session's delivery position).
	Next int64
	// Revoking: revoked, kept until RevokeDone or Deadline.
	Revoking bool
	Deadline time.Time
}
