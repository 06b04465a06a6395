package ingest

import (
	"errors"
	"fmt"
)

// Errors inside ingest are typed; only the RPC edge turns them into Connect
// codes: produceError for everything the write path returns, and the
// handlers' own argument checks (apierr). Routing, takeovers and
// forwarding return these, the partition writer its own sentinels
// (partition.ErrFenced, ...), the stores theirs.

// retryError is a condition that passes: the partition is moving or being
// handed over, the copy is shutting down or not registered yet, a
// forwarding stream broke, the topic was re-created meanwhile. The client
// retries, here or on another copy: UNAVAILABLE at the edge.
type retryError struct{ err error }

func (e retryError) Error() string { return e.err.Error() }
func (e retryError) Unwrap() error { return e.err }

// retry returns a retryError with the message (which should say "retry").
func retry(format string, args ...any) error { return retryError{fmt.Errorf(format, args...)} }

// limitError is this copy at one of its own limits (MaxWriters):
// RESOURCE_EXHAUSTED with the copy's RetryAfter at the edge.
type limitError struct{ err error }

func (e limitError) Error() string { return e.err.Error() }
func (e limitError) Unwrap() error { return e.err }

// isRetry reports whether err is (or wraps) a retryError.
func isRetry(err error) bool {
	var re retryError
	return errors.As(err, &re)
}
