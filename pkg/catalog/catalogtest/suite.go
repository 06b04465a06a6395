// Package catalogtest is the catalog conformance suite: one set of tests
// that every catalog implementation passes (STYLE practice 1). A backend's
// test calls Run with a Harness that builds fresh, empty instances.
//
// The suite is deterministic: time is a manual Clock, races are decided by
// the backend's compare-and-set (not by timing), and nothing sleeps.
package catalogtest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Backend is every catalog aggregate at once, which only a test of all of
// them needs. Production code depends on the small interfaces.
type Backend interface {
	catalog.Topics
	catalog.DeletedTopics
	catalog.Partitions
	catalog.Writers
	catalog.LedgerTrimmer
	catalog.Owners
	catalog.Ledgers
	catalog.LedgerLister
	catalog.Bookies
	catalog.Triggers
	catalog.Schemas
	catalog.ACLs
}

// Harness builds backends for the suite.
type Harness struct {
	// New returns a fresh, empty backend that reads the time from clock.
	// It registers its own cleanup with t.Cleanup.
	New func(t *testing.T, clock catalog.Clock) Backend
}

// Start is the suite clock's initial time: millisecond-aligned, like every
// time the catalog stores.
var Start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the whole suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("Topics", func(t *testing.T) { runTopics(t, h) })
	t.Run("Owners", func(t *testing.T) { runOwners(t, h) })
	t.Run("Writers", func(t *testing.T) { runWriters(t, h) })
	t.Run("Ledgers", func(t *testing.T) { runLedgers(t, h) })
	t.Run("Bookies", func(t *testing.T) { runBookies(t, h) })
	t.Run("Races", func(t *testing.T) { runRaces(t, h) })
	t.Run("Triggers", func(t *testing.T) { runTriggers(t, h) })
	t.Run("Schemas", func(t *testing.T) { runSchemas(t, h) })
	t.Run("ACLs", func(t *testing.T) { runACLs(t, h) })
}

// env is one test's backend, clock and context.
type env struct {
	t   *testing.T
	ctx context.Context
	clk *Clock
	b   Backend
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	clk := NewClock(Start)
	return &env{t: t, ctx: t.Context(), clk: clk, b: h.New(t, clk)}
}

// subtests runs each named case against its own fresh backend.
func subtests(t *testing.T, h Harness, cases map[string]func(e *env)) {
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		t.Run(name, func(t *testing.T) { cases[name](newEnv(t, h)) })
	}
}

func (e *env) topic(name string, partitions int) catalog.Topic {
	e.t.Helper()
	tp, err := e.b.CreateTopic(e.ctx, name, partitions, catalog.DefaultTopicConfig())
	if err != nil {
		e.t.Fatalf("CreateTopic(%q, %d): %v", name, partitions, err)
	}
	return tp
}

func (e *env) heartbeat(owner string, ttl time.Duration) catalog.Owner {
	e.t.Helper()
	o, err := e.b.HeartbeatOwner(e.ctx, owner, owner+".ingest.local:7420", ttl)
	if err != nil {
		e.t.Fatalf("HeartbeatOwner(%q): %v", owner, err)
	}
	return o
}

func (e *env) acquire(topic string, partition int, owner string) catalog.Partition {
	e.t.Helper()
	p, err := e.b.AcquireWriter(e.ctx, topic, partition, owner)
	if err != nil {
		e.t.Fatalf("AcquireWriter(%s/%d, %q): %v", topic, partition, owner, err)
	}
	return p
}

func (e *env) partition(topic string, partition int) catalog.Partition {
	e.t.Helper()
	p, err := e.b.GetPartition(e.ctx, topic, partition)
	if err != nil {
		e.t.Fatalf("GetPartition(%s/%d): %v", topic, partition, err)
	}
	return p
}

// ledgerFor creates a ledger for the lease's partition starting at firstOffset.
func (e *env) ledgerFor(l catalog.WriterLease, firstOffset int64) catalog.LedgerMetadata {
	e.t.Helper()
	m, err := e.b.CreateLedger(e.ctx, spec(l, firstOffset))
	if err != nil {
		e.t.Fatalf("CreateLedger(%v, %d): %v", l, firstOffset, err)
	}
	return m
}

func (e *env) getLedger(id catalog.LedgerID) catalog.LedgerMetadata {
	e.t.Helper()
	m, err := e.b.GetLedger(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetLedger(%d): %v", id, err)
	}
	return m
}

func (e *env) updateLedger(m catalog.LedgerMetadata) catalog.LedgerMetadata {
	e.t.Helper()
	got, err := e.b.UpdateLedger(e.ctx, m)
	if err != nil {
		e.t.Fatalf("UpdateLedger(%d to %v at v%d): %v", m.ID, m.State, m.Version, err)
	}
	return got
}

func spec(l catalog.WriterLease, firstOffset int64) catalog.LedgerSpec {
	return catalog.LedgerSpec{
		Topic: l.Topic, TopicID: l.TopicID, Partition: l.Partition,
		Replication: catalog.DefaultReplication,
		Ensemble:    []string{"bookie-1:3181", "bookie-2:3181", "bookie-3:3181"},
		FirstOffset: firstOffset,
		WriterOwner: l.Owner, WriterEpoch: l.Epoch,
	}
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// wantInvalid fails unless err holds a *catalog.ValidationError for field.
func wantInvalid(t *testing.T, err error, field, what string) {
	t.Helper()
	if !errors.Is(err, catalog.ErrInvalid) {
		t.Fatalf("%s: err = %v, want a validation error for %q", what, err, field)
	}
	for _, e := range flatten(err) {
		var ve *catalog.ValidationError
		if errors.As(e, &ve) && ve.Field == field {
			return
		}
	}
	t.Fatalf("%s: err = %v, want a validation error naming field %q", what, err, field)
}

// flatten lists err and everything it joins or wraps.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	out := []error{err}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, flatten(e)...)
		}
	case interface{ Unwrap() error }:
		out = append(out, flatten(u.Unwrap())...)
	}
	return out
}
