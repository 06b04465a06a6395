package bookkeepingtest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

var offsetTests = []test{
	{"CommitFetchList", testCommitFetchList},
	{"FetchNeverCommitted", testFetchNeverCommitted},
	{"StaleEpochRejectsWholeCommit", testStaleEpochRejectsWholeCommit},
	{"CommitWithoutLease", testCommitWithoutLease},
	{"NeverBackwards", testNeverBackwards},
	{"ConcurrentCommitsNeverGoBackwards", testConcurrentCommitsNeverGoBackwards},
	{"NoZombieCommitAfterSteal", testNoZombieCommitAfterSteal},
	{"Commit256PartitionsInOneCall", testCommit256PartitionsInOneCall},
	{"StandaloneCommit", testStandaloneCommit},
	{"Reset", testReset},
	{"ListOffsetsPaging", testListOffsetsPaging},
	{"Validation", testOffsetValidation},
	{"NewIncarnationReplacesOffsets", testNewIncarnationReplacesOffsets},
	{"StandaloneCommitOfNewIncarnation", testStandaloneCommitOfNewIncarnation},
	{"ResetWithNewIncarnation", testResetWithNewIncarnation},
	{"ListOffsetsReturnsTopicIDs", testListOffsetsReturnsTopicIDs},
	{"TopicIDRequired", testTopicIDRequired},
	{"CommitTxnOffsets", testCommitTxnOffsets},
}

func po(p int32, offset, epoch int64) bookkeeping.PartitionOffset {
	return bookkeeping.PartitionOffset{Partition: p, Offset: offset, Epoch: epoch}
}

func testCommitFetchList(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	ep0, ep1 := e.acquire(g, topic, 0, m), e.acquire(g, topic, 1, m)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{
		{Partition: 1, Offset: 7, Epoch: ep1, Metadata: "seven"},
		{Partition: 0, Offset: 0, Epoch: ep0},
	}})
	if c := e.fetch(g, topic, 1); c != (bookkeeping.Committed{Offset: 7, Metadata: "seven", Epoch: ep1, TopicID: tid}) {
		t.Fatalf("FetchOffset(1) = %+v, want offset 7, metadata \"seven\", epoch %d", c, ep1)
	}
	if c := e.fetch(g, topic, 0); c != (bookkeeping.Committed{Offset: 0, Epoch: ep0, TopicID: tid}) {
		t.Fatalf("FetchOffset(0) = %+v, want offset 0 (0 is a real offset)", c)
	}
	// An equal offset is accepted (a retried commit) and replaces the metadata.
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{{Partition: 1, Offset: 7, Epoch: ep1, Metadata: "again"}}})
	if c := e.fetch(g, topic, 1); c.Offset != 7 || c.Metadata != "again" {
		t.Fatalf("FetchOffset after an equal commit = %+v, want offset 7, metadata \"again\"", c)
	}

	got, more, err := e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{}, 10)
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	want := []bookkeeping.GroupOffset{
		{Topic: topic, Partition: 0, Committed: bookkeeping.Committed{Offset: 0, Epoch: ep0, TopicID: tid}},
		{Topic: topic, Partition: 1, Committed: bookkeeping.Committed{Offset: 7, Metadata: "again", Epoch: ep1, TopicID: tid}},
	}
	if more || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListOffsets = %+v (more %v), want %+v (more false)", got, more, want)
	}
}

func testFetchNeverCommitted(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	_, err := e.Offsets.FetchOffset(e.ctx, g, topic, 0)
	wantErr(t, "FetchOffset of an unknown group", err, bookkeeping.ErrNotFound)
	m := e.member(g, "m", longLived)
	e.acquire(g, topic, 0, m) // a lease record without an offset
	_, err = e.Offsets.FetchOffset(e.ctx, g, topic, 0)
	wantErr(t, "FetchOffset of a leased, never committed partition", err, bookkeeping.ErrNotFound)
	got, more, err := e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{}, 10)
	if err != nil || len(got) != 0 || more {
		t.Fatalf("ListOffsets with nothing committed = %+v, %v, %v; want none", got, more, err)
	}
}

func testStaleEpochRejectsWholeCommit(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	a := e.member(g, "a", longLived)
	b := e.member(g, "b", longLived)
	var eps [4]int64
	for p := range int32(4) {
		eps[p] = e.acquire(g, topic, p, a)
	}
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{
		po(0, 10, eps[0]), po(1, 10, eps[1]), po(2, 10, eps[2]), po(3, 10, eps[3]),
	}})
	// A hands partitions 1 and 3 over to B.
	for _, p := range []int32{3, 1} {
		if err := e.Leases.Release(e.ctx, g, topic, p, a, eps[p]); err != nil {
			t.Fatalf("Release(%d): %v", p, err)
		}
		e.acquire(g, topic, p, b)
	}
	err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{
		po(3, 20, eps[3]), po(0, 20, eps[0]), po(1, 20, eps[1]), po(2, 20, eps[2]),
	}})
	wantFenced(t, "commit with two stale leases", err, 1, 3)
	var fe *bookkeeping.FencedError
	if errors.As(err, &fe); fe.Group != g || fe.Topic != topic {
		t.Fatalf("FencedError names group %q topic %q, want %q %q", fe.Group, fe.Topic, g, topic)
	}
	for p := range int32(4) {
		if c := e.fetch(g, topic, p); c.Offset != 10 {
			t.Fatalf("partition %d: offset %d after a rejected commit, want 10 (nothing applied)", p, c.Offset)
		}
	}
	// A wrong epoch on a lease the member does hold is stale too.
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{po(0, 30, eps[0]+1)}})
	wantFenced(t, "commit with a future epoch", err, 0)
}

func testCommitWithoutLease(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(4, 1, 1)}})
	wantFenced(t, "commit on a never-leased partition", err, 4)
	_, err = e.Offsets.FetchOffset(e.ctx, g, topic, 4)
	wantErr(t, "FetchOffset after the fenced commit", err, bookkeeping.ErrNotFound)
}

func testNeverBackwards(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	ep0, ep1 := e.acquire(g, topic, 0, m), e.acquire(g, topic, 1, m)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 100, ep0), po(1, 100, ep1)}})

	err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 150, ep0), po(1, 99, ep1)}})
	var re *bookkeeping.OffsetRegressionError
	if !errors.As(err, &re) || !errors.Is(err, bookkeeping.ErrConflict) || fmt.Sprint(re.Partitions) != "[1]" {
		t.Fatalf("commit moving partition 1 back: got %v, want an *OffsetRegressionError for [1]", err)
	}
	if c0, c1 := e.fetch(g, topic, 0), e.fetch(g, topic, 1); c0.Offset != 100 || c1.Offset != 100 {
		t.Fatalf("offsets %d, %d after a rejected commit, want 100, 100", c0.Offset, c1.Offset)
	}
	// A new owner cannot move it back either.
	if err := e.Members.Leave(e.ctx, g, m); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	n := e.member(g, "n", longLived)
	ep := e.acquire(g, topic, 1, n)
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: n, Offsets: []bookkeeping.PartitionOffset{po(1, 5, ep)}})
	wantErr(t, "new owner moving the offset back", err, bookkeeping.ErrConflict)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: n, Offsets: []bookkeeping.PartitionOffset{po(1, 101, ep)}})
	if c := e.fetch(g, topic, 1); c.Offset != 101 || c.Epoch != ep {
		t.Fatalf("FetchOffset = %+v, want offset 101 at epoch %d", c, ep)
	}
}

// testConcurrentCommitsNeverGoBackwards: goroutines of one member commit
// interleaved offsets at once; whatever the order they land in, the final
// offset is the highest one that was accepted and every refusal is a
// regression.
func testConcurrentCommitsNeverGoBackwards(t *testing.T, e *env) {
	const writers, each = 4, 12
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	ep := e.acquire(g, topic, 0, m)
	var maxAccepted atomic.Int64
	maxAccepted.Store(-1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				off := int64(i*writers + w)
				err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, off, ep)}})
				switch {
				case err == nil:
					for cur := maxAccepted.Load(); off > cur && !maxAccepted.CompareAndSwap(cur, off); cur = maxAccepted.Load() {
					}
				case errors.Is(err, bookkeeping.ErrConflict):
				default:
					t.Errorf("commit %d: %v", off, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if c := e.fetch(g, topic, 0); c.Offset != maxAccepted.Load() {
		t.Fatalf("final offset %d, want the highest accepted %d", c.Offset, maxAccepted.Load())
	}
	if maxAccepted.Load() != writers*each-1 {
		// The highest offset can never be refused: nothing is above it.
		t.Fatalf("highest accepted offset %d, want %d", maxAccepted.Load(), writers*each-1)
	}
}

// testNoZombieCommitAfterSteal: a member keeps committing while its lease is
// taken over; no commit it starts after the takeover completed may land.
func testNoZombieCommitAfterSteal(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	a := e.member(g, "a", longLived)
	b := e.member(g, "b", longLived)
	epA := e.acquire(g, topic, 0, a)

	var stolen atomic.Bool
	stop := make(chan struct{})
	var zombie, attemptsAfter atomic.Int64
	zombie.Store(-1)
	var exited atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer exited.Store(true)
		for off := int64(1); ; off++ {
			select {
			case <-stop:
				return
			default:
			}
			after := stolen.Load() // read before the commit starts
			err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{po(0, off, epA)}})
			if after {
				attemptsAfter.Add(1)
			}
			switch {
			case err == nil && after:
				zombie.Store(off)
			case err == nil, errors.Is(err, bookkeeping.ErrFenced):
			default:
				t.Errorf("zombie commit %d: %v", off, err)
				return
			}
		}
	})
	// Let A commit a few times, then take the lease away.
	pollUntil(t, "the member committed a few times", func() bool {
		c, err := e.Offsets.FetchOffset(e.ctx, g, topic, 0)
		return (err == nil && c.Offset >= 3) || exited.Load()
	})
	if err := e.Members.Leave(e.ctx, g, a); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	epB := e.acquire(g, topic, 0, b)
	stolen.Store(true)
	before := e.fetch(g, topic, 0).Offset
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: b, Offsets: []bookkeeping.PartitionOffset{po(0, 1_000_000, epB)}})
	// Let the zombie try a few more times against the new owner.
	pollUntil(t, "the old owner tried to commit after the takeover", func() bool { return attemptsAfter.Load() >= 3 || exited.Load() })
	close(stop)
	wg.Wait()
	if z := zombie.Load(); z >= 0 {
		t.Fatalf("commit of offset %d by the old owner landed after the lease moved", z)
	}
	if c := e.fetch(g, topic, 0); c.Offset != 1_000_000 || c.Epoch != epB {
		t.Fatalf("FetchOffset = %+v, want the new owner's 1000000 at epoch %d (offset before its commit: %d)", c, epB, before)
	}
}

func testCommit256PartitionsInOneCall(t *testing.T, e *env) {
	const n = 256
	g, topic := e.group("g"), "wide"
	m := e.member(g, "m", longLived)
	offsets := make([]bookkeeping.PartitionOffset, n)
	for p := range int32(n) {
		offsets[p] = bookkeeping.PartitionOffset{Partition: p, Offset: int64(p) * 10, Epoch: e.acquire(g, topic, p, m), Metadata: fmt.Sprintf("p%d", p)}
	}
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: offsets})
	ls := e.listLeases(g, topic)
	if len(ls) != n {
		t.Fatalf("ListLeases returned %d partitions, want %d", len(ls), n)
	}
	for i, l := range ls {
		if l.Partition != int32(i) || l.Owner != m || l.Offset != int64(i)*10 || l.Metadata != fmt.Sprintf("p%d", i) {
			t.Fatalf("ListLeases[%d] = %+v, want partition %d owned by %s at offset %d", i, l, i, m, i*10)
		}
	}
	// One stale partition among 256 rejects all of them.
	if err := e.Leases.Release(e.ctx, g, topic, 200, m, offsets[200].Epoch); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for i := range offsets {
		offsets[i].Offset++
	}
	wantFenced(t, "256-partition commit with one released lease", e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: offsets}), 200)
	if c := e.fetch(g, topic, 0); c.Offset != 0 {
		t.Fatalf("partition 0 offset %d after a rejected commit, want 0", c.Offset)
	}
}

func testStandaloneCommit(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	// No members: standalone commits are accepted, and never move back.
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(0, 5, 0), po(1, 6, 0)}})
	if c := e.fetch(g, topic, 1); c != (bookkeeping.Committed{Offset: 6, TopicID: tid}) {
		t.Fatalf("FetchOffset after a standalone commit = %+v, want offset 6 epoch 0", c)
	}
	err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(0, 4, 0)}})
	wantErr(t, "standalone commit moving back", err, bookkeeping.ErrConflict)

	// A live member (even without leases) blocks standalone commits.
	m := e.member(g, "m", e.Timing.SessionTimeout)
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(0, 7, 0)}})
	wantErr(t, "standalone commit while the group has a live member", err, bookkeeping.ErrConflict)
	ep := e.acquire(g, topic, 0, m)
	if ep != 1 {
		t.Fatalf("first Acquire after standalone commits: epoch %d, want 1", ep)
	}

	// Once the member expired, standalone commits work again, and they
	// clear its ownership: the member cannot commit over them even though
	// nobody else acquired the lease.
	e.waitExpired(g, m)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(0, 8, 0)}})
	if ls := e.listLeases(g, topic); ls[0].Owner != "" || ls[0].Epoch != ep {
		t.Fatalf("lease after a standalone commit = %+v, want no owner at epoch %d", ls[0], ep)
	}
	e.member(g, "m", longLived)
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 9, ep)}})
	wantFenced(t, "commit by the old owner after a standalone commit", err, 0)
	if ep2 := e.acquire(g, topic, 0, m); ep2 != ep+1 {
		t.Fatalf("Acquire after a standalone commit: epoch %d, want %d", ep2, ep+1)
	}
	if c := e.fetch(g, topic, 0); c.Offset != 8 {
		t.Fatalf("offset %d, want 8", c.Offset)
	}
}

func testReset(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	ep := e.acquire(g, topic, 0, m)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 500, ep)}})

	reset := bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(0, 20, 0), po(3, 30, 0)}}
	wantErr(t, "Reset while the group has a live member", e.Offsets.Reset(e.ctx, reset), bookkeeping.ErrConflict)
	if err := e.Members.Leave(e.ctx, g, m); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := e.Offsets.Reset(e.ctx, reset); err != nil {
		t.Fatalf("Reset of an empty group: %v", err)
	}
	if c := e.fetch(g, topic, 0); c.Offset != 20 {
		t.Fatalf("offset after Reset %d, want 20 (moved back)", c.Offset)
	}
	if c := e.fetch(g, topic, 3); c.Offset != 30 {
		t.Fatalf("offset of a never-committed partition after Reset %d, want 30", c.Offset)
	}
	// The old owner comes back: its epoch is stale, it must acquire anew.
	e.member(g, "m", longLived)
	err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 501, ep)}})
	wantFenced(t, "commit by the pre-Reset owner", err, 0)
	ep2 := e.acquire(g, topic, 0, m)
	if ep2 != ep+1 {
		t.Fatalf("Acquire after Reset: epoch %d, want %d", ep2, ep+1)
	}
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 21, ep2)}})

	wantValidation(t, "Reset with a member", e.Offsets.Reset(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 1, ep2)}}), "member")
}

func testListOffsetsPaging(t *testing.T, e *env) {
	g := e.group("g")
	var want []bookkeeping.GroupOffset
	for _, topic := range []string{"a", "a.b", "b", "c"} {
		var offs []bookkeeping.PartitionOffset
		for p := range int32(3) {
			off := int64(len(want) * 10)
			offs = append(offs, bookkeeping.PartitionOffset{Partition: p, Offset: off, Metadata: topic})
			want = append(want, bookkeeping.GroupOffset{Topic: topic, Partition: p, Committed: bookkeeping.Committed{Offset: off, Metadata: topic, TopicID: tid}})
		}
		e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Offsets: offs})
	}
	// Leases without offsets are not listed; other groups are not listed.
	m := e.member(g, "m", longLived)
	e.acquire(g, "a", 7, m)
	e.acquire(g, "bb", 0, m)
	e.commit(bookkeeping.Commit{Group: e.group("other"), Topic: "a", TopicID: tid, Offsets: []bookkeeping.PartitionOffset{po(0, 1, 0)}})

	for _, limit := range []int{1, 4, 5, 12, 100} {
		var got []bookkeeping.GroupOffset
		var after bookkeeping.Cursor
		for pages := 0; ; pages++ {
			if pages > len(want) {
				t.Fatalf("limit %d: more than %d pages", limit, len(want))
			}
			page, more, err := e.Offsets.ListOffsets(e.ctx, g, after, limit)
			if err != nil {
				t.Fatalf("ListOffsets(after %+v, limit %d): %v", after, limit, err)
			}
			if len(page) > limit || (more && len(page) == 0) {
				t.Fatalf("ListOffsets(limit %d) returned %d entries, more=%v", limit, len(page), more)
			}
			got = append(got, page...)
			if !more {
				break
			}
			last := page[len(page)-1]
			after = bookkeeping.Cursor{Topic: last.Topic, Partition: last.Partition}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d: ListOffsets pages =\n  %+v\nwant\n  %+v", limit, got, want)
		}
	}
	// A cursor in the middle of a topic and one between topics.
	page, _, err := e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{Topic: "a.b", Partition: 1}, 2)
	if err != nil || fmt.Sprint(page) != fmt.Sprint(want[5:7]) {
		t.Fatalf("ListOffsets after a.b/1 = %+v, %v; want %+v", page, err, want[5:7])
	}
	page, _, err = e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{Topic: "az", Partition: 99}, 1)
	if err != nil || fmt.Sprint(page) != fmt.Sprint(want[6:7]) {
		t.Fatalf("ListOffsets after az/99 = %+v, %v; want %+v", page, err, want[6:7])
	}
}

func testOffsetValidation(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	base := func() bookkeeping.Commit {
		return bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: "m", Offsets: []bookkeeping.PartitionOffset{po(0, 1, 1)}}
	}
	with := func(f func(*bookkeeping.Commit)) bookkeeping.Commit { c := base(); f(&c); return c }
	tooMany := make([]bookkeeping.PartitionOffset, bookkeeping.MaxCommitPartitions+1)
	for i := range tooMany {
		tooMany[i] = po(int32(i), 1, 1)
	}
	cases := []struct {
		name  string
		c     bookkeeping.Commit
		field string
	}{
		{"empty group", with(func(c *bookkeeping.Commit) { c.Group = "" }), "group"},
		{"empty topic", with(func(c *bookkeeping.Commit) { c.Topic = "" }), "topic"},
		{"bad member", with(func(c *bookkeeping.Commit) { c.Member = "m\x7f" }), "member"},
		{"no offsets", with(func(c *bookkeeping.Commit) { c.Offsets = nil }), "offsets"},
		{"too many offsets", with(func(c *bookkeeping.Commit) { c.Offsets = tooMany }), "offsets"},
		{"duplicate partition", with(func(c *bookkeeping.Commit) { c.Offsets = append(c.Offsets, po(0, 2, 1)) }), "offsets[1].partition"},
		{"negative partition", with(func(c *bookkeeping.Commit) { c.Offsets[0].Partition = -1 }), "offsets[0].partition"},
		{"negative offset", with(func(c *bookkeeping.Commit) { c.Offsets[0].Offset = -1 }), "offsets[0].offset"},
		{"long metadata", with(func(c *bookkeeping.Commit) {
			c.Offsets[0].Metadata = strings.Repeat("x", bookkeeping.MaxMetadataBytes+1)
		}), "offsets[0].metadata"},
		{"member with epoch 0", with(func(c *bookkeeping.Commit) { c.Offsets[0].Epoch = 0 }), "offsets[0].epoch"},
		{"standalone with an epoch", with(func(c *bookkeeping.Commit) { c.Member = "" }), "offsets[0].epoch"},
		{"empty topic id", with(func(c *bookkeeping.Commit) { c.TopicID = "" }), "topicID"},
		{"topic id with a control character", with(func(c *bookkeeping.Commit) { c.TopicID = "a\nb" }), "topicID"},
		{"long topic id", with(func(c *bookkeeping.Commit) { c.TopicID = strings.Repeat("i", bookkeeping.MaxNameBytes+1) }), "topicID"},
	}
	for _, c := range cases {
		wantValidation(t, "Commit with "+c.name, e.Offsets.Commit(e.ctx, c.c), c.field)
	}
	_, err := e.Offsets.FetchOffset(e.ctx, g, topic, bookkeeping.MaxPartitions)
	wantValidation(t, "FetchOffset of a too large partition", err, "partition")
	for _, limit := range []int{0, -1, bookkeeping.MaxListLimit + 1} {
		_, _, err := e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{}, limit)
		wantValidation(t, fmt.Sprintf("ListOffsets with limit %d", limit), err, "limit")
	}
	_, _, err = e.Offsets.ListOffsets(e.ctx, "", bookkeeping.Cursor{}, 1)
	wantValidation(t, "ListOffsets with empty group", err, "group")
	_, _, err = e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{Partition: 3}, 1)
	wantValidation(t, "ListOffsets after a cursor without a topic", err, "after.topic")
	_, _, err = e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{Topic: "t", Partition: -1}, 1)
	wantValidation(t, "ListOffsets after a negative partition", err, "after.partition")
	wantValidation(t, "Reset with no offsets", e.Offsets.Reset(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid}), "offsets")
}

// testNewIncarnationReplacesOffsets: offsets committed for a topic that was
// then deleted and created again (a new TopicID) do not hold back the new
// incarnation's commits — issue 30: a member of the re-created topic,
// holding 10 records, commits offset 10 over the old incarnation's 500 —
// while within one incarnation offsets still never move back.
func testNewIncarnationReplacesOffsets(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	ep0, ep1, ep2 := e.acquire(g, topic, 0, m), e.acquire(g, topic, 1, m), e.acquire(g, topic, 2, m)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidA, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 500, ep0), po(1, 500, ep1)}})

	// The topic is re-created: one commit of the new incarnation over a
	// higher offset of the old one, a lower one, and a never-committed
	// partition, applied together.
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Member: m, Offsets: []bookkeeping.PartitionOffset{
		{Partition: 0, Offset: 10, Epoch: ep0, Metadata: "new"}, po(1, 700, ep1), po(2, 3, ep2),
	}})
	want := map[int32]bookkeeping.Committed{
		0: {Offset: 10, Metadata: "new", Epoch: ep0, TopicID: tidB},
		1: {Offset: 700, Epoch: ep1, TopicID: tidB},
		2: {Offset: 3, Epoch: ep2, TopicID: tidB},
	}
	for p, w := range want {
		if c := e.fetch(g, topic, p); c != w {
			t.Fatalf("FetchOffset(%d) after the new incarnation's commit = %+v, want %+v", p, c, w)
		}
	}
	// ListLeases carries the incarnation of each committed offset too.
	leases, err := e.Leases.ListLeases(e.ctx, g, topic)
	if err != nil || len(leases) != 3 {
		t.Fatalf("ListLeases = %+v, %v; want 3 leases", leases, err)
	}
	for _, l := range leases {
		if w := want[l.Partition]; l.Offset != w.Offset || l.TopicID != w.TopicID {
			t.Fatalf("ListLeases partition %d = offset %d of %q, want %d of %q", l.Partition, l.Offset, l.TopicID, w.Offset, w.TopicID)
		}
	}

	// Within the new incarnation offsets never move back, and a
	// regression of one partition rejects the whole commit.
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 11, ep0), po(1, 9, ep1)}})
	var re *bookkeeping.OffsetRegressionError
	if !errors.As(err, &re) || !errors.Is(err, bookkeeping.ErrConflict) || fmt.Sprint(re.Partitions) != "[1]" {
		t.Fatalf("commit moving partition 1 back within one incarnation: got %v, want an *OffsetRegressionError for [1]", err)
	}
	if c := e.fetch(g, topic, 0); c.Offset != 10 || c.TopicID != tidB {
		t.Fatalf("FetchOffset(0) after a rejected commit = %+v, want offset 10 of %s (nothing applied)", c, tidB)
	}
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 10, ep0)}}) // equal: a retry

	// The lease is the topic name's: a stale epoch is fenced whatever the
	// topic id, and nothing changes.
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidA, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 1, ep0+1)}})
	wantFenced(t, "commit of another incarnation with a stale epoch", err, 0)
	if c := e.fetch(g, topic, 0); c.Offset != 10 || c.TopicID != tidB {
		t.Fatalf("FetchOffset(0) after a fenced commit = %+v, want offset 10 of %s", c, tidB)
	}

	// Ids are not ordered: a commit that names the old incarnation again
	// replaces the offset like any change of id (callers must pass the id
	// of the incarnation they read).
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidA, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 4, ep0)}})
	if c := e.fetch(g, topic, 0); c != (bookkeeping.Committed{Offset: 4, Epoch: ep0, TopicID: tidA}) {
		t.Fatalf("FetchOffset(0) after a commit naming the old id = %+v, want offset 4 of %s", c, tidA)
	}
}

// testStandaloneCommitOfNewIncarnation: the regression rule of standalone
// commits is the same — checked within an incarnation only.
func testStandaloneCommitOfNewIncarnation(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidA, Offsets: []bookkeeping.PartitionOffset{po(0, 500, 0), po(1, 500, 0)}})
	err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidA, Offsets: []bookkeeping.PartitionOffset{po(0, 10, 0)}})
	wantErr(t, "standalone commit moving back within one incarnation", err, bookkeeping.ErrConflict)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Offsets: []bookkeeping.PartitionOffset{po(0, 10, 0)}})
	if c := e.fetch(g, topic, 0); c != (bookkeeping.Committed{Offset: 10, TopicID: tidB}) {
		t.Fatalf("FetchOffset(0) after a standalone commit of a new incarnation = %+v, want offset 10 of %s", c, tidB)
	}
	if c := e.fetch(g, topic, 1); c != (bookkeeping.Committed{Offset: 500, TopicID: tidA}) {
		t.Fatalf("FetchOffset(1), not in the commit = %+v, want offset 500 of %s", c, tidA)
	}
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Offsets: []bookkeeping.PartitionOffset{po(0, 9, 0)}})
	wantErr(t, "standalone commit moving back within the new incarnation", err, bookkeeping.ErrConflict)
}

// testResetWithNewIncarnation: Reset writes its topic id with the offsets,
// after which the new incarnation's member commits are checked against them.
func testResetWithNewIncarnation(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	ep := e.acquire(g, topic, 0, m)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidA, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 500, ep)}})
	if err := e.Members.Leave(e.ctx, g, m); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	reset := bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Offsets: []bookkeeping.PartitionOffset{po(0, 20, 0), po(1, 0, 0)}}
	if err := e.Offsets.Reset(e.ctx, reset); err != nil {
		t.Fatalf("Reset with a new topic id: %v", err)
	}
	for p, w := range map[int32]bookkeeping.Committed{0: {Offset: 20, TopicID: tidB}, 1: {Offset: 0, TopicID: tidB}} {
		if c := e.fetch(g, topic, p); c != w {
			t.Fatalf("FetchOffset(%d) after Reset = %+v, want %+v", p, c, w)
		}
	}
	// A Reset within the incarnation moves offsets back too, of course.
	if err := e.Offsets.Reset(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Offsets: []bookkeeping.PartitionOffset{po(0, 5, 0)}}); err != nil {
		t.Fatalf("Reset back within the incarnation: %v", err)
	}
	e.member(g, "m", longLived)
	ep2 := e.acquire(g, topic, 0, m)
	err := e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 4, ep2)}})
	wantErr(t, "member commit below the Reset offset of the same incarnation", err, bookkeeping.ErrConflict)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tidB, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 6, ep2)}})
	if c := e.fetch(g, topic, 0); c != (bookkeeping.Committed{Offset: 6, Epoch: ep2, TopicID: tidB}) {
		t.Fatalf("FetchOffset(0) = %+v, want offset 6 of %s at epoch %d", c, tidB, ep2)
	}
}

// testListOffsetsReturnsTopicIDs: every listed offset carries the topic id
// it was committed with.
func testListOffsetsReturnsTopicIDs(t *testing.T, e *env) {
	g := e.group("g")
	e.commit(bookkeeping.Commit{Group: g, Topic: "a", TopicID: tidA, Offsets: []bookkeeping.PartitionOffset{po(0, 1, 0), po(1, 2, 0)}})
	e.commit(bookkeeping.Commit{Group: g, Topic: "b", TopicID: tidA, Offsets: []bookkeeping.PartitionOffset{po(0, 3, 0)}})
	e.commit(bookkeeping.Commit{Group: g, Topic: "b", TopicID: tidB, Offsets: []bookkeeping.PartitionOffset{po(1, 4, 0)}})
	m := e.member(g, "m", longLived)
	e.acquire(g, "b", 2, m) // a lease without an offset: not listed
	got, more, err := e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{}, 10)
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	want := []bookkeeping.GroupOffset{
		{Topic: "a", Partition: 0, Committed: bookkeeping.Committed{Offset: 1, TopicID: tidA}},
		{Topic: "a", Partition: 1, Committed: bookkeeping.Committed{Offset: 2, TopicID: tidA}},
		{Topic: "b", Partition: 0, Committed: bookkeeping.Committed{Offset: 3, TopicID: tidA}},
		{Topic: "b", Partition: 1, Committed: bookkeeping.Committed{Offset: 4, TopicID: tidB}},
	}
	if more || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListOffsets = %+v (more %v), want %+v (more false)", got, more, want)
	}
	page, _, err := e.Offsets.ListOffsets(e.ctx, g, bookkeeping.Cursor{Topic: "b", Partition: 0}, 1)
	if err != nil || fmt.Sprint(page) != fmt.Sprint(want[3:]) {
		t.Fatalf("ListOffsets after b/0 = %+v, %v; want %+v", page, err, want[3:])
	}
}

// testTopicIDRequired: a commit or reset without a topic id is refused
// before anything is read or written, member or not.
func testTopicIDRequired(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	m := e.member(g, "m", longLived)
	ep := e.acquire(g, topic, 0, m)
	wantValidation(t, "member Commit without a topic id",
		e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 1, ep)}}), "topicID")
	if err := e.Members.Leave(e.ctx, g, m); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	wantValidation(t, "standalone Commit without a topic id",
		e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, Offsets: []bookkeeping.PartitionOffset{po(0, 1, 0)}}), "topicID")
	wantValidation(t, "Reset without a topic id",
		e.Offsets.Reset(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, Offsets: []bookkeeping.PartitionOffset{po(0, 1, 0)}}), "topicID")
	_, err := e.Offsets.FetchOffset(e.ctx, g, topic, 0)
	wantErr(t, "FetchOffset after refused commits", err, bookkeeping.ErrNotFound)
}

// testCommitTxnOffsets: a committed transaction's offsets are written over
// lower ones and ones of another incarnation, never over a higher one of
// the same incarnation, with the leases' owners and epochs untouched —
// also while a live member holds them, and into partitions never leased
// or committed; applying them again changes nothing.
func testCommitTxnOffsets(t *testing.T, e *env) {
	g, g2, topic := e.group("g"), e.group("h"), "orders"
	m := e.member(g, "m", longLived)
	ep0, ep1, ep2 := e.acquire(g, topic, 0, m), e.acquire(g, topic, 1, m), e.acquire(g, topic, 2, m)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{
		po(0, 5, ep0), po(1, 50, ep1)}})
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: "other-incarnation", Member: m, Offsets: []bookkeeping.PartitionOffset{po(2, 500, ep2)}})
	offsets := []bookkeeping.TxnOffset{
		{Group: g, Topic: topic, TopicID: tid, Partition: 0, Offset: 10},   // moves 5 on
		{Group: g, Topic: topic, TopicID: tid, Partition: 1, Offset: 20},   // 50 stays: the group moved on
		{Group: g, Topic: topic, TopicID: tid, Partition: 2, Offset: 30},   // replaces another incarnation's 500
		{Group: g, Topic: topic, TopicID: tid, Partition: 3, Offset: 40},   // never leased nor committed
		{Group: g2, Topic: "other", TopicID: tid, Partition: 0, Offset: 1}, // another group, in the same call
	}
	for round := range 2 {
		if err := e.Offsets.CommitTxnOffsets(e.ctx, offsets); err != nil {
			t.Fatalf("CommitTxnOffsets (round %d): %v", round, err)
		}
		for _, w := range []struct {
			p      int32
			offset int64
			epoch  int64
		}{{0, 10, 0}, {1, 50, ep1}, {2, 30, 0}, {3, 40, 0}} {
			c := e.fetch(g, topic, w.p)
			if c.Offset != w.offset || c.TopicID != tid || c.Epoch != w.epoch {
				t.Fatalf("round %d: partition %d: %+v; want offset %d of %s, commit epoch %d", round, w.p, c, w.offset, tid, w.epoch)
			}
		}
		if c := e.fetch(g2, "other", 0); c.Offset != 1 {
			t.Fatalf("round %d: the other group's offset: %+v; want 1", round, c)
		}
	}
	leases := e.listLeases(g, topic)
	for _, l := range leases {
		want := map[int32]int64{0: ep0, 1: ep1, 2: ep2}[l.Partition]
		if l.Partition < 3 && (l.Owner != m || l.Epoch != want) {
			t.Fatalf("lease %d after CommitTxnOffsets: %+v; want owner %s at epoch %d, untouched", l.Partition, l, m, want)
		}
	}
	// The member goes on committing at its epochs, above the transaction's.
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: m, Offsets: []bookkeeping.PartitionOffset{po(0, 11, ep0), po(2, 31, ep2)}})

	err := e.Offsets.CommitTxnOffsets(e.ctx, nil)
	wantValidation(t, "CommitTxnOffsets with no offset", err, "offsets")
	err = e.Offsets.CommitTxnOffsets(e.ctx, []bookkeeping.TxnOffset{{Group: g, Topic: topic, TopicID: tid, Offset: -1}})
	wantValidation(t, "CommitTxnOffsets with a negative offset", err, "offsets[0].offset")
}
