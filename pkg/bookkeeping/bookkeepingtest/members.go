package bookkeepingtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

var memberTests = []test{
	{"JoinListLeave", testJoinListLeave},
	{"JoinAgainUpdates", testJoinAgainUpdates},
	{"HeartbeatExtendsThenExpiry", testHeartbeatExtendsThenExpiry},
	{"UnknownMember", testUnknownMember},
	{"GroupsAreIndependent", testGroupsAreIndependent},
	{"Topics", testMemberTopics},
	{"LastHeartbeat", testLastHeartbeat},
	{"Validation", testMemberValidation},
}

func testJoinListLeave(t *testing.T, e *env) {
	g := e.group("g")
	if ms := e.listMembers(g); len(ms) != 0 {
		t.Fatalf("ListMembers of a new group = %v, want none", ms)
	}
	c := e.member(g, "c", longLived)
	a := e.member(g, "a", 90*time.Second)
	b := e.member(g, "b", longLived)

	ms := e.listMembers(g)
	want := []bookkeeping.Member{
		{ID: a, ClientInfo: "conformance a", SessionTimeout: 90 * time.Second},
		{ID: b, ClientInfo: "conformance b", SessionTimeout: longLived},
		{ID: c, ClientInfo: "conformance c", SessionTimeout: longLived},
	}
	if !equalMembers(ms, want) {
		t.Fatalf("ListMembers = %+v, want %+v (sorted by id)", ms, want)
	}

	if err := e.Members.Leave(e.ctx, g, b); err != nil {
		t.Fatalf("Leave(%q): %v", b, err)
	}
	if ms := e.listMembers(g); !equalMembers(ms, []bookkeeping.Member{want[0], want[2]}) {
		t.Fatalf("ListMembers after Leave = %+v, want %+v", ms, []bookkeeping.Member{want[0], want[2]})
	}
	wantErr(t, "Leave twice", e.Members.Leave(e.ctx, g, b), bookkeeping.ErrNotFound)
	wantErr(t, "Heartbeat after Leave", e.Members.Heartbeat(e.ctx, g, b), bookkeeping.ErrNotFound)
	if err := e.Members.Heartbeat(e.ctx, g, a); err != nil {
		t.Fatalf("Heartbeat of a live member: %v", err)
	}
}

func testJoinAgainUpdates(t *testing.T, e *env) {
	g := e.group("g")
	id := e.member(g, "m", longLived)
	m := bookkeeping.Member{ID: id, ClientInfo: "v2", SessionTimeout: 2 * longLived}
	if err := e.Members.Join(e.ctx, g, m); err != nil {
		t.Fatalf("Join again: %v", err)
	}
	if ms := e.listMembers(g); !equalMembers(ms, []bookkeeping.Member{m}) {
		t.Fatalf("ListMembers after a second Join = %+v, want only %+v", ms, m)
	}
}

func testHeartbeatExtendsThenExpiry(t *testing.T, e *env) {
	g := e.group("g")
	timeout := e.Timing.SessionTimeout
	m := e.member(g, "m", timeout)
	keep := e.member(g, "keep", longLived)

	// Heartbeats at half the timeout keep the member live well past one
	// timeout after its Join.
	for range 3 {
		e.Timing.Advance(timeout / 2)
		if err := e.Members.Heartbeat(e.ctx, g, m); err != nil {
			t.Fatalf("Heartbeat within the session timeout: %v", err)
		}
	}
	e.Timing.Advance(timeout / 2)
	if !e.isLive(g, m) {
		t.Fatalf("member not live %v after its last heartbeat (session timeout %v)", timeout/2, timeout)
	}

	// Without heartbeats it expires; then it is gone for every call.
	e.waitExpired(g, m)
	wantErr(t, "Heartbeat after expiry", e.Members.Heartbeat(e.ctx, g, m), bookkeeping.ErrNotFound)
	wantErr(t, "Leave after expiry", e.Members.Leave(e.ctx, g, m), bookkeeping.ErrNotFound)
	if !e.isLive(g, keep) {
		t.Fatal("a member with a long session expired with its neighbour")
	}

	// Joining again makes it live again.
	e.member(g, "m", longLived)
	if !e.isLive(g, m) {
		t.Fatal("member not live after joining again")
	}
}

func testUnknownMember(t *testing.T, e *env) {
	g := e.group("g")
	wantErr(t, "Heartbeat of a never-joined member", e.Members.Heartbeat(e.ctx, g, "nobody"), bookkeeping.ErrNotFound)
	wantErr(t, "Leave of a never-joined member", e.Members.Leave(e.ctx, g, "nobody"), bookkeeping.ErrNotFound)
}

func testGroupsAreIndependent(t *testing.T, e *env) {
	g1, g2 := e.group("one"), e.group("two")
	m := e.member(g1, "m", longLived)
	if err := e.Members.Join(e.ctx, g2, bookkeeping.Member{ID: m, SessionTimeout: longLived}); err != nil {
		t.Fatalf("Join the same id to a second group: %v", err)
	}
	if err := e.Members.Leave(e.ctx, g1, m); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if e.isLive(g1, m) || !e.isLive(g2, m) {
		t.Fatal("Leave of one group changed another group's membership")
	}
}

func testMemberValidation(t *testing.T, e *env) {
	g := e.group("g")
	ok := bookkeeping.Member{ID: "m", SessionTimeout: time.Minute}
	with := func(f func(*bookkeeping.Member)) bookkeeping.Member { m := ok; f(&m); return m }
	cases := []struct {
		name  string
		group string
		m     bookkeeping.Member
		field string
	}{
		{"empty group", "", ok, "group"},
		{"long group", strings.Repeat("g", bookkeeping.MaxNameBytes+1), ok, "group"},
		{"control char in group", "g\x00x", ok, "group"},
		{"invalid UTF-8 group", "g\xff", ok, "group"},
		{"empty member id", g, with(func(m *bookkeeping.Member) { m.ID = "" }), "member.id"},
		{"long client info", g, with(func(m *bookkeeping.Member) { m.ClientInfo = strings.Repeat("x", bookkeeping.MaxClientInfoBytes+1) }), "member.client_info"},
		{"short timeout", g, with(func(m *bookkeeping.Member) { m.SessionTimeout = bookkeeping.MinSessionTimeout - 1 }), "member.session_timeout"},
		{"long timeout", g, with(func(m *bookkeeping.Member) { m.SessionTimeout = bookkeeping.MaxSessionTimeout + 1 }), "member.session_timeout"},
		{"too many topics", g, with(func(m *bookkeeping.Member) { m.Topics = topicNames(bookkeeping.MaxMemberTopics+1, 1) }), "member.topics"},
		{"repeated topic", g, with(func(m *bookkeeping.Member) { m.Topics = []string{"a", "b", "a"} }), "member.topics"},
		{"empty topic", g, with(func(m *bookkeeping.Member) { m.Topics = []string{"a", ""} }), "member.topics"},
		{"long topic", g, with(func(m *bookkeeping.Member) { m.Topics = topicNames(1, bookkeeping.MaxNameBytes+1) }), "member.topics"},
		{"control char in topic", g, with(func(m *bookkeeping.Member) { m.Topics = []string{"t\x1b"} }), "member.topics"},
		{"invalid UTF-8 topic", g, with(func(m *bookkeeping.Member) { m.Topics = []string{"t\xc3"} }), "member.topics"},
	}
	for _, c := range cases {
		wantValidation(t, "Join with "+c.name, e.Members.Join(e.ctx, c.group, c.m), c.field)
	}
	wantValidation(t, "Heartbeat with empty group", e.Members.Heartbeat(e.ctx, "", "m"), "group")
	wantValidation(t, "Heartbeat with empty member", e.Members.Heartbeat(e.ctx, g, ""), "member")
	wantValidation(t, "Leave with empty member", e.Members.Leave(e.ctx, g, ""), "member")
	_, err := e.Members.ListMembers(e.ctx, "")
	wantValidation(t, "ListMembers with empty group", err, "group")
	// Nothing was written by the rejected calls.
	if ms := e.listMembers(g); len(ms) != 0 {
		t.Fatalf("rejected Joins left members behind: %+v", ms)
	}
}

// equalMembers compares everything but LastHeartbeat, which the store sets
// (testLastHeartbeat checks it). Topics nil and empty are equal.
func equalMembers(got, want []bookkeeping.Member) bool {
	return slices.EqualFunc(got, want, func(g, w bookkeeping.Member) bool {
		return g.ID == w.ID && g.ClientInfo == w.ClientInfo && g.SessionTimeout == w.SessionTimeout && slices.Equal(g.Topics, w.Topics)
	})
}

// topicNames returns n distinct topic names of size bytes each (at least
// 1 + the digits of n-1 bytes).
func topicNames(n, size int) []string {
	ts := make([]string, n)
	for i := range ts {
		ts[i] = fmt.Sprintf("t%0*d", size-1, i)
	}
	return ts
}

// testMemberTopics: topics are stored with the member, in the order given,
// kept by Heartbeat and replaced by a Join of the live member.
func testMemberTopics(t *testing.T, e *env) {
	g := e.group("g")
	topics := []string{"payments", "orders", "a.b/ü"}
	m := bookkeeping.Member{ID: "m-" + e.id, ClientInfo: "with topics", SessionTimeout: longLived, Topics: slices.Clone(topics)}
	if err := e.Members.Join(e.ctx, g, m); err != nil {
		t.Fatalf("Join with topics: %v", err)
	}
	m.Topics[0] = "changed by the caller" // the store keeps its own copy
	m.Topics = topics
	n := bookkeeping.Member{ID: e.member(g, "n", longLived), ClientInfo: "conformance n", SessionTimeout: longLived}
	check := func(what string, want ...bookkeeping.Member) {
		t.Helper()
		ms := e.listMembers(g)
		if !equalMembers(ms, want) {
			t.Fatalf("ListMembers %s = %+v, want %+v", what, ms, want)
		}
		for _, got := range ms {
			if got.Topics != nil && len(got.Topics) == 0 {
				t.Fatalf("ListMembers %s: member %q has an empty non-nil topic list, want nil", what, got.ID)
			}
		}
	}
	check("after Join with topics", m, n)

	if err := e.Members.Heartbeat(e.ctx, g, m.ID); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	check("after Heartbeat", m, n)

	for _, replace := range [][]string{{"orders"}, nil, topicNames(bookkeeping.MaxMemberTopics, bookkeeping.MaxNameBytes)} {
		m.Topics = replace
		if err := e.Members.Join(e.ctx, g, m); err != nil {
			t.Fatalf("Join again with %d topics: %v", len(replace), err)
		}
		check(fmt.Sprintf("after Join again with %d topics", len(replace)), m, n)
	}
}

// testLastHeartbeat: the store sets LastHeartbeat on Join and Heartbeat, by
// its clock; the caller's value is ignored and reads do not change it.
func testLastHeartbeat(t *testing.T, e *env) {
	g := e.group("g")
	step := e.Timing.SessionTimeout / 2
	// Stores may keep LastHeartbeat to the millisecond only.
	const precision = time.Millisecond
	bogus := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	id := "m-" + e.id
	join := func() {
		t.Helper()
		if err := e.Members.Join(e.ctx, g, bookkeeping.Member{ID: id, SessionTimeout: longLived, LastHeartbeat: bogus}); err != nil {
			t.Fatalf("Join: %v", err)
		}
	}
	last := func(member string) time.Time {
		t.Helper()
		for _, m := range e.listMembers(g) {
			if m.ID == member {
				if m.LastHeartbeat.IsZero() {
					t.Fatalf("member %q has no LastHeartbeat", member)
				}
				return m.LastHeartbeat
			}
		}
		t.Fatalf("member %q is not live", member)
		return time.Time{}
	}
	advanced := func(what string, before, after time.Time) {
		t.Helper()
		// At least the time that passed; at most that plus the time the
		// calls took (nothing on a fake clock) — a minute is generous.
		if d := after.Sub(before); d < step-precision || d > step+time.Minute {
			t.Fatalf("%s moved LastHeartbeat by %v (%v → %v) after %v passed", what, d, before, after, step)
		}
	}

	join()
	// Joined right after, with a much longer session: LastHeartbeat is
	// when the member was seen, not when it expires.
	keep := e.member(g, "keep", bookkeeping.MaxSessionTimeout)
	joined, keepJoined := last(id), last(keep)
	if joined.Equal(bogus) {
		t.Fatal("Join stored the caller's LastHeartbeat")
	}
	if d := keepJoined.Sub(joined); d < -precision || d > time.Minute {
		t.Fatalf("members joined one after the other (session timeouts %v and %v) have LastHeartbeat %v apart", longLived, bookkeeping.MaxSessionTimeout, d)
	}
	if again := last(id); !again.Equal(joined) {
		t.Fatalf("LastHeartbeat changed from %v to %v without a Heartbeat", joined, again)
	}

	e.Timing.Advance(step)
	if err := e.Members.Heartbeat(e.ctx, g, id); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	beat := last(id)
	advanced("Heartbeat", joined, beat)
	if got := last(keep); !got.Equal(keepJoined) {
		t.Fatalf("a Heartbeat of %q moved the LastHeartbeat of %q from %v to %v", id, keep, keepJoined, got)
	}

	e.Timing.Advance(step)
	join()
	advanced("Join of a live member", beat, last(id))
}
