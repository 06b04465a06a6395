package bookkeepingtest

import (
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

func equalMembers(got, want []bookkeeping.Member) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
