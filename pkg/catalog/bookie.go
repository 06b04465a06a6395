package catalog

import (
	"context"
	"time"
)

// Bookie is a ledger node's registry record, renewed by its heartbeat.
// Writers pick ensembles from the live, writable ones.
type Bookie struct {
	ID         string
	Address    string
	FreeBytes  int64
	TotalBytes int64
	ReadOnly   bool // serves reads, takes no new entries (near disk-full, or draining)
	// Draining: being decommissioned (`sluice bookie decommission`). The
	// bookie set it itself and keeps it across restarts; it is also
	// ReadOnly. The compactor moves its ledgers' copies to other bookies
	// at once, while it still serves reads.
	Draining  bool
	ExpiresAt time.Time // set by the store: its clock now + ttl
}

// LiveAt reports whether the heartbeat has not expired at now.
func (b Bookie) LiveAt(now time.Time) bool { return now.Before(b.ExpiresAt) }

// Bookies is the bookie registry.
type Bookies interface {
	// HeartbeatBookie creates or replaces b's record, expiring ttl after the
	// store's clock now (b.ExpiresAt is ignored). Errors: *ValidationError,
	// ErrLimitExceeded (MaxBookies records).
	HeartbeatBookie(ctx context.Context, b Bookie, ttl time.Duration) (Bookie, error)

	// ListLiveBookies returns the unexpired records in id order.
	ListLiveBookies(ctx context.Context) ([]Bookie, error)

	// RemoveBookie deletes the record (decommissioning). Errors: ErrNotFound.
	RemoveBookie(ctx context.Context, id string) error
}

// ValidateBookie checks HeartbeatBookie's arguments.
func ValidateBookie(b Bookie, ttl time.Duration) error {
	if err := ValidateID("id", b.ID); err != nil {
		return err
	}
	if err := ValidateAddress("address", b.Address); err != nil {
		return err
	}
	if b.TotalBytes < 0 {
		return Invalid("totalBytes", "%d is negative", b.TotalBytes)
	}
	if b.FreeBytes < 0 || b.FreeBytes > b.TotalBytes {
		return Invalid("freeBytes", "%d is outside [0, totalBytes %d]", b.FreeBytes, b.TotalBytes)
	}
	if b.Draining && !b.ReadOnly {
		return Invalid("draining", "a draining bookie must also be read-only (it takes no new entries)")
	}
	return ValidateTTL(ttl)
}
