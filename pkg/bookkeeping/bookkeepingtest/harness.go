// Package bookkeepingtest is the conformance suite every bookkeeping backend
// passes. A backend's test calls Run with a Harness that opens its store:
//
//	func TestConformance(t *testing.T) { bookkeepingtest.Run(t, harness{}) }
//
// # Time
//
// Member expiry depends on time, and backends measure it differently: the
// embedded store reads an injected clock, Cassandra expires rows by
// server-side TTL. The harness hides the difference behind Timing: Advance(d)
// jumps a fake clock, or really waits d for a backend on wall-clock time.
// Every expectation that depends on expiry is checked by polling — Advance a
// step, look again — until SessionTimeout+ExpiryGrace has passed, so the same
// test is exact on a fake clock and tolerant of TTL granularity on a real one,
// and never sleeps on the hope that something happened.
//
// # Isolation
//
// A harness may hand every test the same store (one Cassandra keyspace per run
// is much faster than one per test): the suite never assumes an empty store
// and gives each test group names, topics and transactional ids of its own.
// ListGroups sees every test's groups on a shared store; the group tests
// look only at the range of names that starts with their own prefix.
// Tests run in parallel (t.Parallel), so Open must be safe to call
// concurrently.
package bookkeepingtest

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// Harness opens the backend under test.
type Harness interface {
	// Open returns the store one test uses. Whatever it must clean up, it
	// registers with t.Cleanup. It is called from parallel tests.
	Open(t *testing.T) Store
}

// HarnessFunc adapts a function to Harness.
type HarnessFunc func(t *testing.T) Store

// Open calls f(t).
func (f HarnessFunc) Open(t *testing.T) Store { return f(t) }

// Store is one backend's implementations of the contract (usually one value
// implementing all six: the *bookkeeping.Store) and how time passes for it.
type Store struct {
	Members      bookkeeping.Members
	Leases       bookkeeping.Leases
	Offsets      bookkeeping.Offsets
	Groups       bookkeeping.Groups
	Producers    bookkeeping.Producers
	Transactions bookkeeping.Transactions
	Timing       Timing
	// ListTxnsInIDOrder: the backend's ListTxns lists transactional ids in
	// byte order (the embedded store), and the suite checks that order.
	// Without it (Cassandra lists in (bucket, id) order) the suite checks only
	// what the contract asks of any order: one total order that every page
	// size and every cursor follows.
	ListTxnsInIDOrder bool
}

// Timing tells the suite how time passes for a store.
type Timing struct {
	// Advance lets at least d pass on the clock the store measures session
	// timeouts with: a fake clock jumps, a wall clock waits.
	Advance func(d time.Duration)
	// SessionTimeout is the session timeout the suite gives members it lets
	// expire: short on wall-clock backends (≥ bookkeeping.MinSessionTimeout).
	SessionTimeout time.Duration
	// ExpiryGrace bounds how long past SessionTimeout an expired member may
	// still be seen live (TTL granularity, clock skew). 0 for exact clocks.
	ExpiryGrace time.Duration
	// PollInterval is the step of Advance between two looks while waiting
	// for an expiry; 100 ms when zero.
	PollInterval time.Duration
}

// WallClock is the Timing of a backend that expires members on real time.
func WallClock(sessionTimeout, expiryGrace time.Duration) Timing {
	return Timing{Advance: time.Sleep, SessionTimeout: sessionTimeout, ExpiryGrace: expiryGrace}
}

// FakeClock is a manual clock for backends with an injectable clock. It is
// safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock that stands at start until advanced.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Timing is the exact Timing of a store reading c: expiry happens exactly at
// the session timeout.
func (c *FakeClock) Timing(sessionTimeout time.Duration) Timing {
	return Timing{Advance: c.Advance, SessionTimeout: sessionTimeout}
}
