package bookkeeping

import (
	"errors"
	"fmt"
	"slices"
)

// Sentinel errors. Implementations wrap them with context; test with errors.Is.
var (
	// ErrNotFound: the member, or the committed offset, does not exist
	// (a member that expired or left does not exist).
	ErrNotFound = errors.New("bookkeeping: not found")

	// ErrFenced: the caller's lease is stale — the lease moved to another
	// member, was released, or its epoch is not the one the caller holds.
	// The caller must stop working on the partition. Commit and Release
	// return it as a *FencedError naming the partitions.
	ErrFenced = errors.New("bookkeeping: fenced: lease epoch is not current")

	// ErrLeaseHeld: Acquire found the partition leased to another live member.
	ErrLeaseHeld = errors.New("bookkeeping: lease held by another live member")

	// ErrConflict: the stored state does not allow the operation now — a
	// standalone commit or Reset while the group has live members, an offset
	// that would move backwards (*OffsetRegressionError), a full group, or a
	// concurrent change that won a race; re-read and decide again.
	ErrConflict = errors.New("bookkeeping: conflict")
)

// FencedError is returned by Commit and Release when the caller's lease on one
// or more partitions is not current. A Commit that returns it changed nothing.
type FencedError struct {
	Group, Topic string
	Partitions   []int32 // sorted ascending
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("bookkeeping: fenced: group %q topic %q partitions %v: lease moved or epoch is not current",
		e.Group, e.Topic, e.Partitions)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// NewFencedError returns a *FencedError with the partitions sorted, so every
// backend reports them the same way.
func NewFencedError(group, topic string, partitions []int32) *FencedError {
	ps := slices.Clone(partitions)
	slices.Sort(ps)
	return &FencedError{Group: group, Topic: topic, Partitions: ps}
}

// OffsetRegressionError is returned by Commit when an offset is lower than the
// one already committed. The commit changed nothing. Use Reset to move
// offsets back on purpose.
type OffsetRegressionError struct {
	Group, Topic string
	Partitions   []int32 // sorted ascending
}

func (e *OffsetRegressionError) Error() string {
	return fmt.Sprintf("bookkeeping: conflict: group %q topic %q partitions %v: offset lower than the committed offset",
		e.Group, e.Topic, e.Partitions)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *OffsetRegressionError) Is(target error) bool { return target == ErrConflict }

// NewOffsetRegressionError returns an *OffsetRegressionError with the
// partitions sorted.
func NewOffsetRegressionError(group, topic string, partitions []int32) *OffsetRegressionError {
	ps := slices.Clone(partitions)
	slices.Sort(ps)
	return &OffsetRegressionError{Group: group, Topic: topic, Partitions: ps}
}

// ValidationError reports bad input: which field and why. Nothing was read or
// written.
type ValidationError struct {
	Field  string // e.g. "group", "offsets[3].epoch"
	Reason string
}

func (e *ValidationError) Error() string {
	return "bookkeeping: invalid " + e.Field + ": " + e.Reason
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
