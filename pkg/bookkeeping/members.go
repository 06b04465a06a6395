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
}

// Validate checks m's fields against the limits.
func (m Member) Validate() error {
	if err := ValidateName("member.id", m.ID); err != nil {
		return err
	}
	if len(m.ClientInfo) > MaxClientInfoBytes {
		return invalid("member.client_info", "is %d bytes, longer than %d", len(m.ClientInfo), MaxClientInfoBytes)
	}
	return ValidateSessionTimeout("member.session_timeout", m.SessionTimeout)
}

// Members is group membership with per-member liveness.
type Members interface {
	// Join makes m a live member of group, or — if m.ID is already live —
	// replaces its client info and session timeout and renews it. Errors:
	// *ValidationError; ErrConflict when the group already has
	// MaxGroupMembers live members.
	Join(ctx context.Context, group string, m Member) error

	// Heartbeat keeps a live member live for another session timeout.
	// Errors: ErrNotFound when the member is not live (it expired or left) —
	// it must Join again, and must assume its leases are gone; *ValidationError.
	Heartbeat(ctx context.Context, group, memberID string) error

	// Leave ends the membership now. The member's leases become free at once
	// (a lease whose owner is not live is free). Errors: ErrNotFound when the
	// member is not live; *ValidationError.
	Leave(ctx context.Context, group, memberID string) error

	// ListMembers returns the live members of group, sorted by ID; an empty
	// group gives an empty slice. Errors: *ValidationError.
	ListMembers(ctx context.Context, group string) ([]Member, error)
}
