package catalog

import (
	"context"
	"time"
)

// Owner is an ingest copy's heartbeat record. One per copy, not per
// partition: it is what makes all the copy's partitions "owned" (DESIGN §2.5).
type Owner struct {
	ID        string
	Address   string // where other copies forward produce requests
	ExpiresAt time.Time
}

// LiveAt reports whether the heartbeat has not expired at now.
func (o Owner) LiveAt(now time.Time) bool { return now.Before(o.ExpiresAt) }

// Owners is the ingest copies' heartbeat registry.
type Owners interface {
	// HeartbeatOwner creates or renews the owner's record, expiring ttl
	// after the store's clock now. Errors: *ValidationError (id, address,
	// ttl), ErrLimitExceeded (MaxOwners records).
	HeartbeatOwner(ctx context.Context, id, address string, ttl time.Duration) (Owner, error)

	// GetOwner returns the record, live or expired. Errors: ErrNotFound.
	GetOwner(ctx context.Context, id string) (Owner, error)

	// ListLiveOwners returns the unexpired records in id order (at most
	// MaxOwners; the registry never holds more).
	ListLiveOwners(ctx context.Context) ([]Owner, error)

	// RemoveOwner deletes the record, so the owner's partitions are free at
	// once (graceful shutdown). Errors: ErrNotFound.
	RemoveOwner(ctx context.Context, id string) error
}

// ValidateHeartbeat checks HeartbeatOwner's arguments.
func ValidateHeartbeat(id, address string, ttl time.Duration) error {
	if err := ValidateID("id", id); err != nil {
		return err
	}
	if err := ValidateAddress("address", address); err != nil {
		return err
	}
	return ValidateTTL(ttl)
}
