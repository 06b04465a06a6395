package bookkeepingtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

var leaseTests = []test{
	{"AcquireFreeAndAgain", testAcquireFreeAndAgain},
	{"AcquireNeedsLiveMember", testAcquireNeedsLiveMember},
	{"ReleaseFencesStaleHolder", testReleaseFencesStaleHolder},
	{"LeaveFreesLeasesAtOnce", testLeaveFreesLeasesAtOnce},
	{"ExpiryThenSteal", testExpiryThenSteal},
	{"RaceOneWinnerPerEpoch", testRaceOneWinnerPerEpoch},
	{"ListLeases", testListLeases},
	{"Validation", testLeaseValidation},
}

func testAcquireFreeAndAgain(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	a := e.member(g, "a", longLived)
	b := e.member(g, "b", longLived)

	if ep := e.acquire(g, topic, 3, a); ep != 1 {
		t.Fatalf("first Acquire epoch = %d, want 1", ep)
	}
	// Acquire of a lease already held is idempotent: same epoch.
	if ep := e.acquire(g, topic, 3, a); ep != 1 {
		t.Fatalf("repeated Acquire epoch = %d, want 1 (unchanged)", ep)
	}
	_, err := e.Leases.Acquire(e.ctx, g, topic, 3, b)
	wantErr(t, "Acquire of a lease held by a live member", err, bookkeeping.ErrLeaseHeld)

	// Other partitions, topics and groups are separate leases.
	if ep := e.acquire(g, topic, 4, b); ep != 1 {
		t.Fatalf("Acquire of another partition: epoch %d, want 1", ep)
	}
	if ep := e.acquire(g, "payments", 3, b); ep != 1 {
		t.Fatalf("Acquire of another topic: epoch %d, want 1", ep)
	}
	g2 := e.group("other")
	c := e.member(g2, "c", longLived)
	if ep := e.acquire(g2, topic, 3, c); ep != 1 {
		t.Fatalf("Acquire in another group: epoch %d, want 1", ep)
	}
}

func testAcquireNeedsLiveMember(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	_, err := e.Leases.Acquire(e.ctx, g, topic, 0, "never-joined")
	wantErr(t, "Acquire by a member that never joined", err, bookkeeping.ErrNotFound)

	m := e.member(g, "m", longLived)
	if err := e.Members.Leave(e.ctx, g, m); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	_, err = e.Leases.Acquire(e.ctx, g, topic, 0, m)
	wantErr(t, "Acquire by a member that left", err, bookkeeping.ErrNotFound)
	if ls := e.listLeases(g, topic); len(ls) != 0 {
		t.Fatalf("failed Acquires left lease records: %+v", ls)
	}
}

func testReleaseFencesStaleHolder(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	a := e.member(g, "a", longLived)
	b := e.member(g, "b", longLived)

	wantFenced(t, "Release of a never-leased partition", e.Leases.Release(e.ctx, g, topic, 0, a, 1), 0)

	ep := e.acquire(g, topic, 0, a)
	wantFenced(t, "Release with a wrong epoch", e.Leases.Release(e.ctx, g, topic, 0, a, ep+1), 0)
	wantFenced(t, "Release by a member that does not hold it", e.Leases.Release(e.ctx, g, topic, 0, b, ep), 0)
	if err := e.Leases.Release(e.ctx, g, topic, 0, a, ep); err != nil {
		t.Fatalf("Release by the holder: %v", err)
	}
	wantFenced(t, "second Release", e.Leases.Release(e.ctx, g, topic, 0, a, ep), 0)

	ls := e.listLeases(g, topic)
	if len(ls) != 1 || ls[0].Owner != "" || ls[0].Epoch != ep {
		t.Fatalf("ListLeases after Release = %+v, want partition 0 free at epoch %d", ls, ep)
	}
	// The next owner — even the same member — gets a higher epoch.
	if ep2 := e.acquire(g, topic, 0, a); ep2 != ep+1 {
		t.Fatalf("Acquire after Release: epoch %d, want %d", ep2, ep+1)
	}
	_, err := e.Leases.Acquire(e.ctx, g, topic, 0, b)
	wantErr(t, "Acquire after re-acquire", err, bookkeeping.ErrLeaseHeld)
}

func testLeaveFreesLeasesAtOnce(t *testing.T, e *env) {
	g := e.group("g")
	a := e.member(g, "a", longLived)
	b := e.member(g, "b", longLived)
	for p := range int32(3) {
		e.acquire(g, "t1", p, a)
	}
	e.acquire(g, "t2", 0, a)

	if err := e.Members.Leave(e.ctx, g, a); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	// No waiting: a member that left owns nothing.
	for _, l := range e.listLeases(g, "t1") {
		if l.Owner != "" {
			t.Fatalf("lease %+v still owned after its owner left", l)
		}
	}
	for p := range int32(3) {
		if ep := e.acquire(g, "t1", p, b); ep != 2 {
			t.Fatalf("Acquire of t1/%d after the owner left: epoch %d, want 2", p, ep)
		}
	}
	if ep := e.acquire(g, "t2", 0, b); ep != 2 {
		t.Fatalf("Acquire of t2/0 after the owner left: epoch %d, want 2", ep)
	}
}

func testExpiryThenSteal(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	a := e.member(g, "a", e.Timing.SessionTimeout)
	b := e.member(g, "b", longLived)
	epA := e.acquire(g, topic, 0, a)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{{Partition: 0, Offset: 10, Epoch: epA}}})

	_, err := e.Leases.Acquire(e.ctx, g, topic, 0, b)
	wantErr(t, "steal from a live member", err, bookkeeping.ErrLeaseHeld)

	e.waitExpired(g, a)

	// Nobody took the lease yet: the expired holder's commit is no zombie
	// commit (no other owner existed since) and is accepted.
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{{Partition: 0, Offset: 11, Epoch: epA}}})

	epB := e.acquire(g, topic, 0, b)
	if epB != epA+1 {
		t.Fatalf("steal after expiry: epoch %d, want %d", epB, epA+1)
	}
	err = e.Offsets.Commit(e.ctx, bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{{Partition: 0, Offset: 12, Epoch: epA}}})
	wantFenced(t, "commit by the expired holder after the steal", err, 0)
	wantFenced(t, "Release by the expired holder", e.Leases.Release(e.ctx, g, topic, 0, a, epA), 0)
	if c := e.fetch(g, topic, 0); c.Offset != 11 {
		t.Fatalf("committed offset %d, want 11 (the fenced commit changed it)", c.Offset)
	}

	// The old holder joins again under the same id: the lease stays with B.
	e.member(g, "a", longLived)
	_, err = e.Leases.Acquire(e.ctx, g, topic, 0, a)
	wantErr(t, "Acquire by the old holder after rejoining", err, bookkeeping.ErrLeaseHeld)
}

// testRaceOneWinnerPerEpoch: 16 live members race for one lease, round after
// round; each round exactly one wins, with the next epoch, and every loser
// gets ErrLeaseHeld.
func testRaceOneWinnerPerEpoch(t *testing.T, e *env) {
	const racers, rounds = 16, 4
	g, topic := e.group("g"), "orders"
	members := make([]string, racers)
	for i := range members {
		members[i] = e.member(g, fmt.Sprintf("m%02d", i), longLived)
	}
	for round := int64(1); round <= rounds; round++ {
		type result struct {
			member string
			epoch  int64
			err    error
		}
		results := make([]result, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Go(func() {
				<-start
				ep, err := e.Leases.Acquire(e.ctx, g, topic, 7, m)
				results[i] = result{m, ep, err}
			})
		}
		close(start)
		wg.Wait()

		var winners []result
		for _, r := range results {
			switch {
			case r.err == nil:
				winners = append(winners, r)
			case errors.Is(r.err, bookkeeping.ErrLeaseHeld):
			default:
				t.Fatalf("round %d: Acquire by %s: unexpected error %v", round, r.member, r.err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %+v, want exactly 1", round, len(winners), winners)
		}
		w := winners[0]
		if w.epoch != round {
			t.Fatalf("round %d: winner's epoch %d, want %d", round, w.epoch, round)
		}
		ls := e.listLeases(g, topic)
		if len(ls) != 1 || ls[0].Owner != w.member || ls[0].Epoch != w.epoch {
			t.Fatalf("round %d: ListLeases = %+v, want %s at epoch %d", round, ls, w.member, w.epoch)
		}
		if err := e.Leases.Release(e.ctx, g, topic, 7, w.member, w.epoch); err != nil {
			t.Fatalf("round %d: Release by the winner: %v", round, err)
		}
	}
}

func testListLeases(t *testing.T, e *env) {
	g, topic := e.group("g"), "orders"
	if ls := e.listLeases(g, topic); len(ls) != 0 {
		t.Fatalf("ListLeases of an unused topic = %+v, want none", ls)
	}
	a := e.member(g, "a", longLived)
	b := e.member(g, "b", longLived)
	epA := e.acquire(g, topic, 9, a)
	e.acquire(g, topic, 2, b)
	epA5 := e.acquire(g, topic, 5, a)
	e.acquire(g, "elsewhere", 1, a)
	e.commit(bookkeeping.Commit{Group: g, Topic: topic, TopicID: tid, Member: a, Offsets: []bookkeeping.PartitionOffset{
		{Partition: 9, Offset: 100, Epoch: epA, Metadata: "m9"},
		{Partition: 5, Offset: 50, Epoch: epA5},
	}})
	if err := e.Members.Leave(e.ctx, g, b); err != nil {
		t.Fatalf("Leave: %v", err)
	}

	got := e.listLeases(g, topic)
	want := []bookkeeping.Lease{
		{Partition: 2, Owner: "", Epoch: 1, Offset: bookkeeping.NoOffset},
		{Partition: 5, Owner: a, Epoch: 1, Offset: 50, TopicID: tid},
		{Partition: 9, Owner: a, Epoch: 1, Offset: 100, Metadata: "m9", TopicID: tid},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListLeases =\n  %+v\nwant (sorted, non-live owner shown as \"\")\n  %+v", got, want)
	}
}

func testLeaseValidation(t *testing.T, e *env) {
	g := e.group("g")
	m := e.member(g, "m", longLived)
	cases := []struct {
		name         string
		group, topic string
		p            int32
		member       string
		field        string
	}{
		{"empty group", "", "t", 0, m, "group"},
		{"empty topic", g, "", 0, m, "topic"},
		{"control char in topic", g, "t\n", 0, m, "topic"},
		{"negative partition", g, "t", -1, m, "partition"},
		{"partition too large", g, "t", bookkeeping.MaxPartitions, m, "partition"},
		{"empty member", g, "t", 0, "", "member"},
	}
	for _, c := range cases {
		_, err := e.Leases.Acquire(e.ctx, c.group, c.topic, c.p, c.member)
		wantValidation(t, "Acquire with "+c.name, err, c.field)
		wantValidation(t, "Release with "+c.name, e.Leases.Release(e.ctx, c.group, c.topic, c.p, c.member, 1), c.field)
	}
	wantValidation(t, "Release with epoch 0", e.Leases.Release(e.ctx, g, "t", 0, m, 0), "epoch")
	_, err := e.Leases.ListLeases(e.ctx, g, "")
	wantValidation(t, "ListLeases with empty topic", err, "topic")
	_, err = e.Leases.ListLeases(e.ctx, "", "t")
	wantValidation(t, "ListLeases with empty group", err, "group")
}
