//go:build integration

package processtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch"
)

// sessionTimeout is the members' session timeout: the server's default,
// which `sluice consume` asks for (it has no flag to choose one).
const sessionTimeout = fetch.DefaultSessionTimeout

// pauseSlack is how long after the session timeout a paused member's
// partitions may take to be consumed by another. The fetch copy checks the
// keepalive every balance interval, and the others look for free leases
// every balance interval too, then acquire them one LWT each: the session
// timeout + 1 s cannot hold with the default 500 ms interval.
const pauseSlack = 2*fetch.DefaultBalanceInterval + time.Second

// One group of `sluice consume` processes over a 12-partition topic on a
// `sluice fetch` copy with real Cassandra, while a producer writes to every
// partition all along:
//
//  1. three members get 4 partitions each, and each process prints the
//     records of exactly its 4;
//  2. one is killed with SIGKILL: its partitions move to the two others
//     within the session timeout + 1 s (its stream breaks, so at once);
//  3. one is paused with SIGSTOP: past its session timeout its partitions
//     move to the last one; continued, its old lease epochs are fenced (a
//     commit with them fails FAILED_PRECONDITION) and it comes back as a new
//     member taking its share;
//  4. a fourth joins and takes its share while the others keep printing;
//  5. every acknowledged record was printed by someone with its value (none
//     skipped; duplicates, allowed by at-least-once, are counted), and
//     after the members stop everything is committed.
//
// All along, every DescribeGroup answer is checked against the ones before:
// epochs and committed offsets never go down, one epoch has one owner.
func TestIntegrationGroupMembersCrashPauseAndJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startCluster(ctx, t)
	const topic, group, partitions = "orders", "billing", 12
	if _, err := c.admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: topic, Partitions: partitions})); err != nil {
		t.Fatal(err)
	}
	prod := startProducer(ctx, c.producer, topic, partitions)
	defer prod.halt()
	waitUntil(ctx, t, time.Minute, "a batch acknowledged on every partition", prod.everyPartition)

	watch := newGroupWatch(c.groups, group)
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watch.run(wctx, 200*time.Millisecond)
	}()
	defer func() { stopWatch(); <-watchDone }()

	// 1. Three members, 4 partitions each.
	out := &printLog{}
	started := time.Now()
	a := c.startConsumer(t, "consumer-a", group, topic, out)
	b := c.startConsumer(t, "consumer-b", group, topic, out)
	k := c.startConsumer(t, "consumer-c", group, topic, out)
	s := watch.waitFor(ctx, t, 30*time.Second, "3 members with 4 partitions each", func(s groupState) bool { return s.balanced(3, partitions) })
	ids, s := members(ctx, t, watch, out, s.at.Add(300*time.Millisecond), a, b, k)
	t.Logf("3 members with 4 partitions each, seen by a DescribeGroup asked %v after the processes started: %s %v, %s %v, %s %v",
		ms(s.asked.Sub(started)), a.name, s.owned(ids[a.name]), b.name, s.owned(ids[b.name]), k.name, s.owned(ids[k.name]))

	// 2. kill -9 one: its partitions move to the two others.
	victim := ids[k.name]
	victimParts := s.owned(victim)
	killedAt := time.Now()
	if err := k.kill(); err != nil {
		t.Fatal(err)
	}
	// Moved means consumed again: each of the killed member's partitions
	// printed by one of the two others.
	var moved time.Duration
	for _, p := range victimParts {
		waitUntil(ctx, t, sessionTimeout+5*time.Second, fmt.Sprintf("a record of partition %d printed by a survivor after the kill", p), func() bool {
			return !out.first(p, killedAt, a.name, b.name).IsZero()
		})
		moved = max(moved, out.first(p, killedAt, a.name, b.name).Sub(killedAt))
	}
	s = watch.waitFor(ctx, t, 20*time.Second, "the killed member's partitions held by the two others", func(s groupState) bool {
		return len(s.members) == 2 && s.members[ids[a.name]] && s.members[ids[b.name]] && s.balanced(2, partitions)
	})
	t.Logf("kill -9 %s: each of its partitions %v printed by the two others within %v (session timeout %v); DescribeGroup asked %v after the kill shows them holding 6 each",
		k.name, victimParts, ms(moved), sessionTimeout, ms(s.asked.Sub(killedAt)))
	if limit := sessionTimeout + time.Second; moved > limit {
		t.Errorf("after kill -9 the partitions were consumed again only %v later; want within the session timeout + 1 s (%v)", moved, limit)
	}
	checkRunning(t, a, b)

	// 3. SIGSTOP one past its session timeout: it loses its partitions, and
	// its old epochs are fenced when it continues.
	paused := ids[b.name]
	held := map[int32]int64{} // partition → the paused member's epoch
	for _, p := range s.owned(paused) {
		held[p] = s.parts[p].GetEpoch()
	}
	stoppedAt := time.Now()
	if err := b.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Lost means consumed by the other: each partition printed by it.
	lost, lostFirst := time.Duration(0), time.Duration(-1)
	for p := range held {
		waitUntil(ctx, t, sessionTimeout+10*time.Second, fmt.Sprintf("a record of partition %d printed by %s after the pause", p, a.name), func() bool {
			return !out.first(p, stoppedAt, a.name).IsZero()
		})
		d := out.first(p, stoppedAt, a.name).Sub(stoppedAt)
		lost = max(lost, d)
		if lostFirst < 0 || d < lostFirst {
			lostFirst = d
		}
	}
	s = watch.waitFor(ctx, t, 20*time.Second, "the paused member's partitions taken by "+a.name, func(s groupState) bool {
		return len(s.members) == 1 && s.members[ids[a.name]] && s.balanced(1, partitions)
	})
	t.Logf("SIGSTOP %s: its partitions %v printed by %s from %v to %v after the pause (session timeout %v)",
		b.name, slices.Sorted(maps.Keys(held)), a.name, ms(lostFirst), ms(lost), sessionTimeout)
	// The session's last keepalive came at most a heartbeat interval (a
	// third of the timeout) before the pause.
	if lostFirst < sessionTimeout*2/3 {
		t.Errorf("the paused member's partitions were consumed by another %v after the pause, before its session could time out (%v)", lostFirst, sessionTimeout)
	}
	if limit := sessionTimeout + pauseSlack; lost > limit {
		t.Errorf("the paused member's partitions were consumed by another only %v after the pause; want within %v", lost, limit)
	}
	if err := b.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continuedAt := time.Now()
	// What the paused member would commit: its member id and epochs, at the
	// offset the group has now (neither a regression nor a skip, so only
	// the fence can refuse it). One commit per partition: each is fenced.
	for p, epoch := range held {
		off := max(s.parts[p].GetCommittedOffset(), 0)
		_, err := c.consumer.Commit(ctx, connect.NewRequest(&sluicev1.CommitRequest{Group: group, MemberId: paused,
			Offsets: []*sluicev1.CommitOffset{{Topic: topic, Partition: p, Offset: off, LeaseEpoch: epoch}}}))
		if info := leaseFenced(err); info == nil || info.GetMetadata()["partitions"] != strconv.Itoa(int(p)) {
			t.Errorf("commit of partition %d by the paused member with its old epoch %d (now %d): %v; want FAILED_PRECONDITION %s naming the partition",
				p, epoch, s.parts[p].GetEpoch(), err, fetch.ReasonLeaseFenced)
		}
	}
	s = watch.waitFor(ctx, t, 30*time.Second, b.name+" back in the group as a new member with its share", func(s groupState) bool {
		return len(s.members) == 2 && s.members[ids[a.name]] && !s.members[paused] && s.balanced(2, partitions)
	})
	ids2, s := members(ctx, t, watch, out, s.at.Add(300*time.Millisecond), a, b)
	if ids2[a.name] != ids[a.name] || ids2[b.name] == paused {
		t.Errorf("members after the pause: %v, before: %v; want %s unchanged and %s a new member", ids2, ids, a.name, b.name)
	}
	var rejoined time.Duration
	for _, p := range s.owned(ids2[b.name]) {
		rejoined = max(rejoined, out.first(p, continuedAt, b.name).Sub(continuedAt))
	}
	t.Logf("SIGCONT %s: its old epochs fenced; back as a new member, each of its partitions %v printed by it within %v",
		b.name, s.owned(ids2[b.name]), ms(rejoined))
	checkRunning(t, a, b)

	// 4. A new member takes its share while the others keep consuming.
	joinAt := time.Now()
	d := c.startConsumer(t, "consumer-d", group, topic, out)
	s = watch.waitFor(ctx, t, 30*time.Second, "3 members with 4 partitions each after "+d.name+" joined", func(s groupState) bool {
		return len(s.members) == 3 && s.members[ids2[a.name]] && s.members[ids2[b.name]] && s.balanced(3, partitions)
	})
	balancedAt := s.at
	ids3, s := members(ctx, t, watch, out, balancedAt.Add(300*time.Millisecond), a, b, d)
	var joined time.Duration
	for _, p := range s.owned(ids3[d.name]) {
		joined = max(joined, out.first(p, joinAt, d.name).Sub(joinAt))
	}
	to := balancedAt.Add(time.Second)
	prodGap := prod.maxGap(joinAt, to)
	for _, p := range []*consumerProc{a, b} {
		gap, n := out.maxGap(p.name, joinAt, to)
		t.Logf("%s while %s joined: %d records in %v, longest pause %v (producer's longest %v)", p.name, d.name, n, ms(to.Sub(joinAt)), ms(gap), ms(prodGap))
		if gap > prodGap+time.Second {
			t.Errorf("%s printed nothing for %v while %s joined (the producer's longest pause was %v): the others must keep consuming", p.name, gap, d.name, prodGap)
		}
	}
	t.Logf("%s joined: each of its partitions printed by it within %v of its start; 4 each: %s %v, %s %v, %s %v", d.name, ms(joined),
		a.name, s.owned(ids3[a.name]), b.name, s.owned(ids3[b.name]), d.name, s.owned(ids3[d.name]))
	checkRunning(t, a, b, d)

	// 5. Everything acknowledged is printed; stopped members commit it all.
	prod.halt()
	acked, bad, failures, lastErr := prod.results()
	if len(bad) > 0 {
		t.Errorf("produce answers that do not match the requests: %q", bad)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n, example := out.missing(acked); n > 0; n, example = out.missing(acked) {
		if time.Now().After(deadline) {
			t.Fatalf("%d acknowledged records never printed by any member, e.g. partition %d offset %d", n, example.partition, example.offset)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range []*consumerProc{a, b, d} {
		if err := p.stop(); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
	}
	watch.waitFor(ctx, t, 20*time.Second, "no member left and every partition committed to its end", func(s groupState) bool {
		if len(s.members) != 0 || len(s.parts) != partitions {
			return false
		}
		for _, gp := range s.parts {
			if gp.GetCommittedOffset() != gp.GetEndOffset() {
				return false
			}
		}
		return true
	})

	prints := out.byRecord()
	dups, unacked, wrong := 0, 0, 0
	again := map[string]int{} // duplicates by the process that printed them again
	valueAt := map[string]po{}
	for rec, ps := range prints {
		dups += len(ps) - 1
		for _, p := range ps[1:] {
			again[p.proc]++
		}
		want, ok := acked[rec]
		if !ok {
			unacked++
		}
		for _, p := range ps {
			if ok && p.value != want {
				wrong++
				if wrong <= 5 {
					t.Errorf("partition %d offset %d printed by %s as %q; acknowledged as %q", rec.partition, rec.offset, p.proc, p.value, want)
				}
			}
		}
		if prev, ok := valueAt[ps[0].value]; ok && prev != rec {
			t.Errorf("value %q stored twice: partition %d offset %d and partition %d offset %d", ps[0].value, prev.partition, prev.offset, rec.partition, rec.offset)
		}
		valueAt[ps[0].value] = rec
	}
	if unacked > 0 && failures == 0 {
		t.Errorf("%d records printed that no produce acknowledged, though every produce succeeded", unacked)
	}
	if err := out.problems(); err != nil {
		t.Error(err)
	}
	samples, mean, slowest, violations := watch.report()
	for _, v := range violations {
		t.Errorf("group state: %s", v)
	}
	t.Logf("%d records acknowledged (%d produce failures, last: %v), all printed; %d printings again (at-least-once; by %v), %d unacknowledged printed; per process: %s %d, %s %d, %s %d, %s %d; %d DescribeGroup answers checked (mean %v, slowest %v)",
		len(acked), failures, lastErr, dups, again, unacked, a.name, out.count(a.name), b.name, out.count(b.name), k.name, out.count(k.name), d.name, out.count(d.name),
		samples, ms(mean), ms(slowest))
}
