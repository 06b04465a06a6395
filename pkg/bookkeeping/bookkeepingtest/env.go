package bookkeepingtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// env is what one test works with: the store, names of its own, and helpers
// that fail the test on unexpected errors.
type env struct {
	t   *testing.T
	ctx context.Context
	Store
	id string // unique per test: keeps tests apart on a shared store
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	s := h.Open(t)
	if s.Members == nil || s.Leases == nil || s.Offsets == nil || s.Groups == nil || s.Producers == nil || s.Transactions == nil ||
		s.Timing.Advance == nil {
		t.Fatal("harness returned a Store with a nil field")
	}
	if s.Timing.PollInterval <= 0 {
		s.Timing.PollInterval = 100 * time.Millisecond
	}
	return &env{
		t:     t,
		ctx:   t.Context(),
		Store: s,
		id:    fmt.Sprintf("%s-%08x", path.Base(t.Name()), rand.Uint32()),
	}
}

// group returns a group name of this test's own. All of them start with
// groupPrefix and sort after it.
func (e *env) group(suffix string) string { return e.groupPrefix() + suffix }

// groupPrefix is the prefix of every group name of this test.
func (e *env) groupPrefix() string { return "g-" + e.id + "-" }

// member joins a new member to group with the given session timeout and
// returns its id.
func (e *env) member(group, name string, timeout time.Duration) string {
	e.t.Helper()
	id := name + "-" + e.id
	if err := e.Members.Join(e.ctx, group, bookkeeping.Member{ID: id, ClientInfo: "conformance " + name, SessionTimeout: timeout}); err != nil {
		e.t.Fatalf("Join(%q, %q): %v", group, id, err)
	}
	return id
}

// longLived is a session timeout no test outlives.
const longLived = 10 * time.Minute

// tid is the topic id (Commit.TopicID) of every commit of a test that is
// not about topic incarnations; tidA and tidB are two incarnations of one
// topic for the tests that are.
const (
	tid  = "topic-id-1"
	tidA = "6f1c0a2e9b7d4c35a8e21f0d3b4c5a69"
	tidB = "0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a"
)

func (e *env) acquire(group, topic string, p int32, member string) int64 {
	e.t.Helper()
	epoch, err := e.Leases.Acquire(e.ctx, group, topic, p, member)
	if err != nil {
		e.t.Fatalf("Acquire(%q, %q, %d, %q): %v", group, topic, p, member, err)
	}
	return epoch
}

func (e *env) commit(c bookkeeping.Commit) {
	e.t.Helper()
	if err := e.Offsets.Commit(e.ctx, c); err != nil {
		e.t.Fatalf("Commit(%+v): %v", c, err)
	}
}

func (e *env) fetch(group, topic string, p int32) bookkeeping.Committed {
	e.t.Helper()
	c, err := e.Offsets.FetchOffset(e.ctx, group, topic, p)
	if err != nil {
		e.t.Fatalf("FetchOffset(%q, %q, %d): %v", group, topic, p, err)
	}
	return c
}

func (e *env) listMembers(group string) []bookkeeping.Member {
	e.t.Helper()
	ms, err := e.Members.ListMembers(e.ctx, group)
	if err != nil {
		e.t.Fatalf("ListMembers(%q): %v", group, err)
	}
	return ms
}

func (e *env) isLive(group, member string) bool {
	e.t.Helper()
	for _, m := range e.listMembers(group) {
		if m.ID == member {
			return true
		}
	}
	return false
}

func (e *env) listLeases(group, topic string) []bookkeeping.Lease {
	e.t.Helper()
	ls, err := e.Leases.ListLeases(e.ctx, group, topic)
	if err != nil {
		e.t.Fatalf("ListLeases(%q, %q): %v", group, topic, err)
	}
	return ls
}

// waitExpired lets the session timeout pass and then polls, advancing time a
// step per look, until member is no longer live; it fails the test when the
// member is still live ExpiryGrace after its timeout.
func (e *env) waitExpired(group, member string) {
	e.t.Helper()
	e.Timing.Advance(e.Timing.SessionTimeout)
	e.waitFor(fmt.Sprintf("member %q of group %q expires", member, group), func() bool {
		return !e.isLive(group, member)
	})
}

// waitFor polls cond, advancing time by PollInterval between looks, for at
// most ExpiryGrace.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	for waited := time.Duration(0); ; waited += e.Timing.PollInterval {
		if cond() {
			return
		}
		if waited >= e.Timing.ExpiryGrace {
			e.t.Fatalf("%s: still not so %v past the session timeout %v", what, waited, e.Timing.SessionTimeout)
		}
		e.Timing.Advance(e.Timing.PollInterval)
	}
}

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantValidation fails the test unless err is a *bookkeeping.ValidationError
// for field.
func wantValidation(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ve *bookkeeping.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%s: got error %v, want a *ValidationError for %q", what, err, field)
	}
	if ve.Field != field {
		t.Fatalf("%s: ValidationError for field %q (%s), want field %q", what, ve.Field, ve.Reason, field)
	}
}

// wantFenced fails the test unless err is a *bookkeeping.FencedError naming
// exactly partitions.
func wantFenced(t *testing.T, what string, err error, partitions ...int32) {
	t.Helper()
	var fe *bookkeeping.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, bookkeeping.ErrFenced) {
		t.Fatalf("%s: got error %v, want a *FencedError", what, err)
	}
	if fmt.Sprint(fe.Partitions) != fmt.Sprint(partitions) {
		t.Fatalf("%s: FencedError names partitions %v, want %v", what, fe.Partitions, partitions)
	}
}

// pollUntil waits for cond, which depends on other goroutines' progress, not
// on the store's clock; it fails the test after a generous wall-clock
// deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
