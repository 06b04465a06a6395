package catalog

import (
	"errors"
	"fmt"
)

// The catalog's error taxonomy. Implementations wrap these with context
// (fmt.Errorf("acquire writer %s/%d: %w", ...)); callers test with errors.Is
// and errors.As. Only the RPC edge maps them to connect codes.
var (
	// ErrNotFound: the topic, partition, ledger, owner or bookie does not
	// exist (a deleted topic counts as not found).
	ErrNotFound = errors.New("catalog: not found")

	// ErrAlreadyExists: a create found the name taken.
	ErrAlreadyExists = errors.New("catalog: already exists")

	// ErrVersionConflict: a compare-and-set lost — the record's version is not
	// the one the caller read, or a concurrent writer won the race. Re-read and
	// decide again; never retry the same write blindly.
	ErrVersionConflict = errors.New("catalog: version conflict")

	// ErrFenced: the caller's writer lease (owner, epoch) is no longer the
	// partition's current one. The caller must stop writing the partition.
	ErrFenced = errors.New("catalog: fenced: writer epoch is stale")

	// ErrOwned: the partition is owned by another owner whose heartbeat is live.
	ErrOwned = errors.New("catalog: partition owned by another live owner")

	// ErrOwnerExpired: the calling owner has no live heartbeat record, so it
	// may not take partitions (anyone could steal them from it at once).
	// Heartbeat first.
	ErrOwnerExpired = errors.New("catalog: owner heartbeat missing or expired")

	// ErrLimitExceeded: the operation would grow stored state past a fixed
	// bound (see limits.go), e.g. a partition's ledger list. Not bad input as
	// such: the caller must shrink the state first (trim ledgers).
	ErrLimitExceeded = errors.New("catalog: limit exceeded")

	// ErrInvalid matches every *ValidationError with errors.Is.
	ErrInvalid = errors.New("catalog: invalid argument")
)

// ValidationError reports bad input: which field, and why. Several of them
// may be joined with errors.Join (ParseTopicConfig reports every bad key).
// errors.Is(err, ErrInvalid) is true for any ValidationError.
type ValidationError struct {
	Field  string // the argument or config key, e.g. "name", "retention.ms"
	Reason string // human-readable, says what is allowed
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("catalog: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) hold for every ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Invalid builds a *ValidationError with a formatted reason. Exported for the
// implementation packages, which validate backend-specific input (page
// tokens) with the same error type.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
