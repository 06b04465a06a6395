package bookkeepingtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

var groupTests = []test{
	{"JoinListsGroupsInOrder", testJoinListsGroupsInOrder},
	{"StandaloneCommitAndResetListGroups", testOffsetsListGroups},
	{"ReadsAndRejectedCallsListNothing", testReadsListNothing},
	{"Validation", testGroupValidation},
}

// ownGroups pages through ListGroups, limit names a page, over the range of
// this test's group names (other tests' groups may be listed around it on
// a shared store) and checks every page: at most limit names, strictly
// increasing, strictly after the cursor, more only with a non-empty page.
func (e *env) ownGroups(limit int) []string {
	e.t.Helper()
	prefix := e.groupPrefix()
	var own []string
	after := prefix
	for pages := 0; ; pages++ {
		if pages > 1000 {
			e.t.Fatalf("ListGroups(limit %d): more than %d pages", limit, pages)
		}
		page, more := e.listGroups(after, limit)
		for _, g := range page {
			if !strings.HasPrefix(g, prefix) {
				return own // past this test's range
			}
			own = append(own, g)
		}
		if !more {
			return own
		}
		after = page[len(page)-1]
	}
}

// listGroups calls ListGroups and checks the page.
func (e *env) listGroups(after string, limit int) ([]string, bool) {
	e.t.Helper()
	page, more, err := e.Groups.ListGroups(e.ctx, after, limit)
	if err != nil {
		e.t.Fatalf("ListGroups(%q, %d): %v", after, limit, err)
	}
	if len(page) > limit || (more && len(page) == 0) {
		e.t.Fatalf("ListGroups(%q, %d) returned %d names, more=%v", after, limit, len(page), more)
	}
	prev := after
	for _, g := range page {
		if g <= prev {
			e.t.Fatalf("ListGroups(%q, %d) = %q: %q does not sort after %q", after, limit, page, g, prev)
		}
		prev = g
	}
	return page, more
}

// testJoinListsGroupsInOrder: a Join lists its group; names come in byte
// order, page by page, strictly after the cursor; a group stays listed
// when its last member leaves.
func testJoinListsGroupsInOrder(t *testing.T, e *env) {
	var want []string
	for _, suffix := range []string{"m", "A", "z", "a", "é", "a.b", "ab", "a b", "Z9"} {
		g := e.group(suffix)
		e.member(g, "m", longLived)
		want = append(want, g)
	}
	e.member(want[0], "again", longLived) // a second member lists nothing new
	slices.Sort(want)                     // byte order

	for _, limit := range []int{1, 2, 4, len(want) - 1, len(want), bookkeeping.MaxListLimit} {
		if got := e.ownGroups(limit); !slices.Equal(got, want) {
			t.Fatalf("ListGroups pages of %d = %q, want %q", limit, got, want)
		}
	}
	// Cursors on a stored name, just after one and between two.
	for _, after := range []string{want[2], want[2] + " ", want[4] + "~", e.groupPrefix() + "a ~"} {
		rest := slices.DeleteFunc(slices.Clone(want), func(g string) bool { return g <= after })
		page, more := e.listGroups(after, 2)
		n := min(len(rest), 2)
		if len(page) < n || !slices.Equal(page[:n], rest[:n]) {
			t.Fatalf("ListGroups(%q, 2) = %q, want it to start with %q", after, page, rest[:n])
		}
		if len(rest) > 2 && !more {
			t.Fatalf("ListGroups(%q, 2) says no more names; %q remain", after, rest[2:])
		}
	}
	// Nothing sorts after the greatest name.
	top := strings.Repeat("\U0010FFFF", bookkeeping.MaxNameBytes/4)
	if page, more := e.listGroups(top, 10); len(page) != 0 || more {
		t.Fatalf("ListGroups after the greatest name = %q, more %v; want nothing", page, more)
	}

	for _, m := range e.listMembers(want[0]) {
		if err := e.Members.Leave(e.ctx, want[0], m.ID); err != nil {
			t.Fatalf("Leave: %v", err)
		}
	}
	if got := e.ownGroups(100); !slices.Equal(got, want) {
		t.Fatalf("ListGroups after a group's members left = %q, want %q (groups stay listed)", got, want)
	}
}

// testOffsetsListGroups: a standalone Commit or a Reset lists a group that
// never had a member.
func testOffsetsListGroups(t *testing.T, e *env) {
	committed, reset, joined := e.group("commit"), e.group("reset"), e.group("joined")
	e.commit(bookkeeping.Commit{Group: committed, Topic: "orders", TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(0, 5, 0)}})
	if err := e.Offsets.Reset(e.ctx, bookkeeping.Commit{Group: reset, Topic: "orders", TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(3, 0, 0)}}); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	m := e.member(joined, "m", longLived)
	e.commit(bookkeeping.Commit{Group: joined, Topic: "orders", TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 1, e.acquire(joined, "orders", 0, m))}})

	want := []string{committed, joined, reset}
	if got := e.ownGroups(2); !slices.Equal(got, want) {
		t.Fatalf("ListGroups = %q, want %q", got, want)
	}
}

// testReadsListNothing: reads, and calls that are rejected before they
// change anything, do not make a group.
func testReadsListNothing(t *testing.T, e *env) {
	g, topic := e.group("untouched"), "orders"
	if _, err := e.Members.ListMembers(e.ctx, g); err != nil {
		t.Fatalf("ListMembers: %v", err)
	}
	_, err := e.Offsets.FetchOffset(e.ctx, g, topic, 0)
	wantErr(t, "FetchOffset", err, bookkeeping.ErrNotFound)
	if _, _, err := e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{}, 10); err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	if _, err := e.Leases.ListLeases(e.ctx, g, topic); err != nil {
		t.Fatalf("ListLeases: %v", err)
	}
	wantErr(t, "Heartbeat of nobody", e.Members.Heartbeat(e.ctx, g, "nobody"), bookkeeping.ErrNotFound)
	wantErr(t, "Leave of nobody", e.Members.Leave(e.ctx, g, "nobody"), bookkeeping.ErrNotFound)
	_, err = e.Leases.Acquire(e.ctx, g, topic, 0, "nobody")
	wantErr(t, "Acquire by nobody", err, bookkeeping.ErrNotFound)
	wantFenced(t, "Release by nobody", e.Leases.Release(e.ctx, g, topic, 0, "nobody", 1), 0)
	wantFenced(t, "Commit by nobody", e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: "nobody", Offsets: []bookkeeping.PartitionOffset{po(0, 1, 1)}}), 0)
	wantValidation(t, "Join with a bad topic", e.Members.Join(e.ctx, g, bookkeeping.Member{ID: "m", SessionTimeout: longLived, Topics: []string{""}}), "member.topics")
	wantValidation(t, "Reset without offsets", e.Offsets.Reset(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid}), "offsets")

	if got := e.ownGroups(10); len(got) != 0 {
		t.Fatalf("ListGroups = %q, want none of this test's groups", got)
	}
}

func testGroupValidation(t *testing.T, e *env) {
	for _, limit := range []int{0, -1, bookkeeping.MaxListLimit + 1} {
		_, _, err := e.Groups.ListGroups(e.ctx, "", limit)
		wantValidation(t, fmt.Sprintf("ListGroups with limit %d", limit), err, "limit")
	}
	for _, after := range []string{"g\x00", "g\n", "\xff", strings.Repeat("g", bookkeeping.MaxNameBytes+1)} {
		_, _, err := e.Groups.ListGroups(e.ctx, after, 1)
		wantValidation(t, fmt.Sprintf("ListGroups after %q", after), err, "after")
	}
}
