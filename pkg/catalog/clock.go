package catalog

import "time"

// Clock is where an implementation reads the time for heartbeat expiry and
// record timestamps. Inject a fake in tests to advance time without sleeping.
//
// Leases built on it are for liveness, not safety: a skewed clock can only
// make a steal too early or too late, and a too-early steal is caught by
// epoch fencing (ErrFenced here, ledger fencing on the bookies).
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// ClockFunc is a Clock that calls the function.
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

// Timestamp truncates t to the millisecond precision the catalog stores, so
// what a backend returns equals what it will return after a re-read.
func Timestamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}
