package bookkeeping

import (
	"context"
	"time"
)

// Member is one member of a consumer group.
type Member struct {
	// ID identifies the member within its group. Make it unique per process
	// incarnation (see the package doc on rejoining).
	ID string
	// ClientInfo is free-form text for operators (host, client version), at
	// most MaxClientInfoBytes.
	ClientInfo string
	// SessionTimeout is how long the member stays live after its last Join or
	// Heartbeat, within [MinSessionTimeout, MaxSessionTimeout].
	SessionTimeout time.Duration
	// Topics are the topics the member subscribes to, for the group planner:
	// at most MaxMemberTopics distinct valid topic names. ListMembers returns
	// them in the order of the last Join, nil when there are none.
	Topics []string
	// LastHeartbeat is when the store last saw the member Join or Heartbeat,
	// by the store's clock (embedded: its clock; Cassandra: the clock of the
	// process that wrote it, to the millisecond). The store sets it; Join
	// ignores the value given.
	LastHeartbeat time.Time
}

// Validate checks m's fields against the limits.
func (m Member) Validate() error {
	if err := ValidateName("member.id", m.ID); err != nil {
		return err
	}
	if len(m.ClientInfo) > MaxClientInfoBytes {
		return invalid("member.client_info", "is %d bytes, longer than %d", len(m.ClientInfo), MaxClientInfoBytes)
	}
	if err := ValidateSessionTimeout("member.session_timeout", m.SessionTimeout); err != nil {
		return err
	}
	return ValidateTopics("member.topics", m.Topics)
}

// Members is group membership with per-member liveness.
type Members interface {
	// Join makes m a live member of group, or — if m.ID is already live —
	// replaces its client info, session timeout and topics and renews it.
	// It records group for Groups.ListGroups. Errors: *ValidationError;
	// ErrConflict when the group already has MaxGroupMembers live members.
	Join(ctx context.Context, group string, m Member) error

	// Heartbeat keeps a live member live for another session timeout and
	// sets its LastHeartbeat; client info and topics stay as they are.
	// Errors: ErrNotFound when the member is not live (it expired or left) —
	// it must Join again, and must assume its leases are gone; *ValidationError.
	Heartbeat(ctx context.Context, group, memberID string) error

	// Leave ends the membership now. The member's leases become free at once
	// (a lease whose owner is not live is free). Errors: ErrNotFound when the
	// member is not live; *ValidationError.
	Leave(ctx context.Context, group, memberID string) error

	// ListMembers returns the live members of group, sorted by ID, each with
	// its topics and LastHeartbeat; an empty group gives an empty slice.
	// Errors: *ValidationError.
	ListMembers(ctx context.Context, group string) ([]Member, error)
}
