//go:build integration

package processtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/harness/lambdatest"
	"github.com/sluicemq/sluice/internal/lambdapool"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch"
)

// The trigger runtime's guarantees as processes (docs/DESIGN.md §2.10,
// issue 22): two `sluice fetch` copies run a trigger whose function is the
// recorder under the Runtime Interface Emulator; a copy is paused with
// SIGSTOP or killed with SIGKILL while an invocation is in flight.

const (
	// sleepRound is the first value of the round a test holds in flight:
	// the recorder sleeps that long, so the round is still running when
	// the copy is paused or killed.
	sleepRound = "sleep:2500"
	// triggerTakeover bounds how long after a copy stops answering its
	// partitions take to be run by the other copy and a slept round to
	// finish there: the session timeout, balancing rounds, the sleep again.
	triggerTakeover = triggerSessionTimeout + 15*time.Second
)

// inFlightRound produces, to a partition owned by victim at epoch, a round
// of 4 records whose first sleeps (sleepRound), then 8 more records, and
// waits until victim has sent the round's invocation, the pool runs it
// and victim has no answer yet. It returns the round's invocation id and offsets, and the offsets
// after it.
func (tc *triggerCluster) inFlightRound(ctx context.Context, t *testing.T, tr *sluicev1.TriggerInfo, victim string, partition int32, epoch int64) (id string, round, after []int64) {
	t.Helper()
	topic := tr.GetSpec().GetTopic()
	round = tc.produce(ctx, t, topic, partition, values(sleepRound, "r-1", "r-2", "r-3")...)
	after = tc.produce(ctx, t, topic, partition, values("a-1", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7", "a-8")...)
	id = idOf(tr, partition, round[0], round[3], epoch)
	// Sent and not answered, and the pool has handed it to an instance
	// (which runs it to its end whatever the caller does): nothing else
	// runs now, the other partitions have no records to invoke.
	waitUntil(ctx, t, 20*time.Second, fmt.Sprintf("%s invoking %s", victim, id), func() bool {
		return tc.invokes.inFlight(victim, id) && slices.ContainsFunc(tc.pool.Instances(tr.GetSpec().GetFunction()), func(in lambdapool.InstanceState) bool { return in.Busy })
	})
	return id, round, after
}

// warmUp produces 4 records to every partition and waits until they are
// processed and committed; it returns the partitions' ends.
func (tc *triggerCluster) warmUp(ctx context.Context, t *testing.T, w *triggerWatch, topic string, partitions int32, prefix string, ends map[int32]int64) {
	t.Helper()
	for p := range partitions {
		offs := tc.produce(ctx, t, topic, p, values(fmt.Sprintf("%s-%d-0", prefix, p), fmt.Sprintf("%s-%d-1", prefix, p),
			fmt.Sprintf("%s-%d-2", prefix, p), fmt.Sprintf("%s-%d-3", prefix, p))...)
		ends[p] = offs[len(offs)-1] + 1
	}
	w.waitFor(ctx, t, 30*time.Second, prefix+" records processed and committed", func(s triggerState) bool { return caughtUp(s, ends) })
}

// A paused fetch copy cannot commit after its trigger partitions moved.
// Two copies run a trigger on 4 partitions; the copy holding partition P
// is paused (SIGSTOP) while it invokes a round of P (a record sleeps in
// the function); the other copy takes its partitions over past the session
// timeout, runs P's unfinished round again — under the invocation id of the
// first attempt — and the records after it; then the paused copy
// continues. Checked:
//   - every record was invoked, and only the paused round twice;
//   - the round was run again by the new owner under the same invocation id;
//   - after it continued, the paused copy invoked nothing under the lease
//     epochs it held (the recorder's start times, and its Invoke calls);
//   - its late commit (the paused round's) was refused: per partition the
//     committed offset and the epoch it was committed under never went
//     down (every DescribeTrigger answer and bookkeeping read, checked in
//     order), and P's committed epoch stayed the new owner's;
//   - it comes back as a member and takes its share, and records produced
//     afterwards are invoked once.
func TestIntegrationTriggerZombieFetchCannotCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	tc := startTriggerCluster(ctx, t, lambdatest.Function{Name: "recorder", Instances: 4})
	const topic, name, partitions = "orders", "zombie", 4
	// The copy holding partition 0 is the victim; the watch asks the other.
	const p = int32(0)
	tc.createTopic(ctx, t, topic, partitions)
	tr, w, s, ends, victim, survivor := tc.runOnTwoCopies(ctx, t, began, name, topic, partitions, p, nil)
	held := map[int32]int64{} // the victim's partitions → lease epoch
	for _, q := range tc.owners(s)[victim] {
		held[q] = s.parts[q].GetEpoch()
	}
	w.use(ctx, t, survivor)

	id, round, after := tc.inFlightRound(ctx, t, tr, victim, p, held[p])
	ends[p] = after[len(after)-1] + 1
	if err := tc.procs[victim].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = tc.procs[victim].Signal(syscall.SIGCONT)
		}
	}()
	t.Logf("%s paused while invoking %s; it held %v (partition → epoch)", victim, id, held)

	// The survivor takes everything over and processes the rest of P.
	s = w.waitFor(ctx, t, triggerTakeover, "the survivor holding every partition and P's records processed", func(s triggerState) bool {
		return len(tc.owners(s)[survivor]) == partitions && caughtUp(s, ends)
	})
	took := s.asked.Sub(pausedAt)
	newEpoch := s.parts[p].GetEpoch()
	if newEpoch <= held[p] || s.committed[p].Epoch != newEpoch {
		t.Fatalf("partition %d: lease epoch %d and committed epoch %d after the takeover; want above the paused copy's %d: %s",
			p, newEpoch, s.committed[p].Epoch, held[p], tc.describe(s))
	}
	t.Logf("%v after the pause the survivor held every partition and had processed P: %s", ms(took), tc.describe(s))

	// Continue the paused copy; its worker of P at the old epoch must end
	// without invoking or committing anything.
	var afterResume []triggerState
	w.onSample(func(s triggerState) { afterResume = append(afterResume, s) })
	if err := tc.procs[victim].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	resumed = true
	var ended map[string]any
	waitUntil(ctx, t, 20*time.Second, fmt.Sprintf("%s's worker of partition %d at epoch %d ending", victim, p, held[p]), func() bool {
		for _, e := range logEntries(tc.procs[victim], "trigger partition ended") {
			if num(e, "partition") == int64(p) && num(e, "epoch") == held[p] {
				ended = e
				return true
			}
		}
		return false
	})
	t.Logf("%s continued at %s; its worker of partition %d at epoch %d ended at %v: %v", victim, resumedAt.UTC().Format("15:04:05.000"), p, held[p], ended["time"], ended["cause"])
	s = w.waitFor(ctx, t, 30*time.Second, "the trigger balanced again over both copies", func(s triggerState) bool { return tc.balanced(s, partitions) })
	t.Logf("balanced again %v after the continue: %s", ms(s.asked.Sub(resumedAt)), tc.describe(s))
	tc.warmUp(ctx, t, w, topic, partitions, "z", ends)

	// The late commit changed nothing: after the continue, P's offset was
	// always committed under an epoch above the paused copy's.
	w.halt()
	for _, s := range afterResume {
		if c := s.committed[p]; c.Epoch <= held[p] {
			t.Errorf("partition %d: at %s the offset %d is committed under epoch %d, the paused copy's (%d) or older",
				p, s.at.Format("15:04:05.000"), c.Offset, c.Epoch, held[p])
		}
	}

	lines := tc.recorded(t, "recorder")
	checkInvocations(t, tc, lines, topic, ends, map[string]bool{id: true})
	// The round: first attempt by the victim before the pause, again by
	// the survivor after it and before the continue, same id.
	calls, starts := tc.attempts(t, id, lines)
	if len(calls) != 2 || calls[0].copy != victim || !calls[0].sent.Before(pausedAt) ||
		calls[1].copy != survivor || !calls[1].sent.After(pausedAt) || !calls[1].sent.Before(resumedAt) {
		t.Errorf("round %d..%d of partition %d (%s): Invoke calls %v; want one by %s before the pause (%s) and one by %s after it, before the continue (%s)",
			round[0], round[3], p, id, calls, victim, stamp(pausedAt), survivor, stamp(resumedAt))
	} else if len(starts) != 2 || !starts[0].Before(calls[1].sent) || starts[1].Before(calls[1].sent) || !starts[1].Before(resumedAt) {
		t.Errorf("round %d..%d of partition %d (%s): the function started it at %v; want once before the survivor's call (%s) and once after it, before the continue (%s)",
			round[0], round[3], p, id, starts, stamp(calls[1].sent), stamp(resumedAt))
	}
	// Nothing under the paused copy's epochs after it continued.
	for _, l := range lines {
		iid, err := parseInvocationID(l.InvocationID)
		if err != nil {
			t.Error(err)
			continue
		}
		if e, ok := held[iid.partition]; ok && iid.epoch == e && l.started().After(resumedAt) {
			t.Errorf("the function started %s at %s, after the paused copy continued (%s): an invocation under its old epoch",
				l.InvocationID, l.started().Format("15:04:05.000"), resumedAt.Format("15:04:05.000"))
		}
	}
	for _, c := range tc.invokes.snapshot() {
		if c.copy != victim || !c.sent.After(pausedAt) {
			continue
		}
		if iid, err := parseInvocationID(c.id); err == nil && iid.epoch == held[iid.partition] {
			t.Errorf("%s sent %s at %s, after it was paused: an invocation under its old epoch", victim, c.id, c.sent.Format("15:04:05.000"))
		}
	}
	t.Logf("round %s: %v; %d invocations in all; the test took %v", id, calls, len(lines), ms(time.Since(began)))
}

// kill -9 of the fetch copy running a trigger's round: two copies run a
// trigger on 4 partitions; the copy holding partition P is killed while it
// invokes a round of P (a record sleeps in the function) and started again
// at once. The rounds in flight are read from bookkeeping right after the
// kill (the round's range and epoch are committed before it runs). Checked:
//   - P's round was in flight, and its new owner (a higher lease epoch)
//     ran it again under the invocation id of the first attempt;
//   - every record was invoked; none outside the rounds in flight at the
//     kill was invoked twice, and every invocation of a record of those
//     rounds carried the same id;
//   - per partition the committed offset and its epoch never went down;
//   - the restarted copy takes its share, and records produced afterwards
//     are invoked once.
func TestIntegrationTriggerKill9MidBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	tc := startTriggerCluster(ctx, t, lambdatest.Function{Name: "recorder", Instances: 4})
	const topic, name, partitions = "payments", "kill9", 4
	const p = int32(1)
	tc.createTopic(ctx, t, topic, partitions)
	tr, w, s, ends, victim, survivor := tc.runOnTwoCopies(ctx, t, began, name, topic, partitions, p, nil)
	held := map[int32]int64{}
	for _, q := range tc.owners(s)[victim] {
		held[q] = s.parts[q].GetEpoch()
	}
	w.use(ctx, t, survivor)

	id, round, after := tc.inFlightRound(ctx, t, tr, victim, p, held[p])
	ends[p] = after[len(after)-1] + 1
	group := tc.triggerGroup(ctx, t, name)
	if err := tc.procs[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	// The rounds in flight, as the killed copy committed them before
	// running them: the ones allowed (and due) to run again.
	inFlight := map[string]bool{}
	for q, epoch := range held {
		c, err := tc.bk.FetchOffset(ctx, group, topic, q)
		if err != nil {
			t.Fatalf("partition %d: %v", q, err)
		}
		var md roundMetadata
		if err := json.Unmarshal([]byte(c.Metadata), &md); err != nil {
			t.Fatalf("partition %d: commit metadata %q: %v", q, c.Metadata, err)
		}
		if md.Round == nil {
			continue
		}
		if c.Epoch != epoch || md.Round.Epoch != epoch || c.Offset != md.Round.First {
			t.Errorf("partition %d: committed %d under epoch %d with round %+v; want the round's first offset under the lease epoch %d",
				q, c.Offset, c.Epoch, *md.Round, epoch)
		}
		// A round of one lane and at most batch_size records is one batch.
		inFlight[idOf(tr, q, md.Round.First, md.Round.Last, md.Round.Epoch)] = true
	}
	if !inFlight[id] {
		t.Fatalf("kill -9 of %s while it invoked %s: the rounds committed as in flight are %v", victim, id, slices.Sorted(maps.Keys(inFlight)))
	}
	if err := tc.procs[victim].Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed while invoking %s (rounds in flight: %v) and started again in %v; it held %v (partition → epoch)",
		victim, id, slices.Sorted(maps.Keys(inFlight)), ms(time.Since(killedAt)), held)

	s = w.waitFor(ctx, t, triggerTakeover, "partition P taken over at a new epoch and its records processed", func(s triggerState) bool {
		return s.parts[p].GetEpoch() > held[p] && s.parts[p].GetOwner() != "" && caughtUp(s, ends)
	})
	t.Logf("%v after the kill partition %d was run by %s at epoch %d and every record was processed: %s",
		ms(s.asked.Sub(killedAt)), p, tc.copyOf(s.parts[p].GetOwner()), s.parts[p].GetEpoch(), tc.describe(s))
	s = w.waitFor(ctx, t, triggerTakeover, "the trigger balanced again over both copies", func(s triggerState) bool { return tc.balanced(s, partitions) })
	t.Logf("balanced again %v after the kill: %s", ms(s.asked.Sub(killedAt)), tc.describe(s))
	tc.warmUp(ctx, t, w, topic, partitions, "z", ends)
	w.halt()

	lines := tc.recorded(t, "recorder")
	checkInvocations(t, tc, lines, topic, ends, inFlight)
	calls, starts := tc.attempts(t, id, lines)
	if len(calls) != 2 || calls[0].copy != victim || !calls[0].sent.Before(killedAt) || !calls[1].sent.After(killedAt) {
		t.Errorf("round %d..%d of partition %d (%s): Invoke calls %v; want one by %s before the kill (%s) and one after it",
			round[0], round[3], p, id, calls, victim, stamp(killedAt))
	} else if len(starts) != 2 || !starts[0].Before(calls[1].sent) || starts[1].Before(calls[1].sent) {
		t.Errorf("round %d..%d of partition %d (%s): the function started it at %v; want once before the second call (%s) and once after it",
			round[0], round[3], p, id, starts, stamp(calls[1].sent))
	}
	t.Logf("round %s: %v; %d invocations in all; the test took %v", id, calls, len(lines), ms(time.Since(began)))
}

// A fetch copy stopped gracefully (SIGTERM) while it invokes a round lets
// the invocation finish, commits it and leaves the trigger's group
// (services/fetch/triggers.go: "workers finish the invocation in flight
// and commit it (within the grace), then the member leaves so its leases
// are free at once"). Checked: the other copy takes its partitions over
// well within the session timeout, and no record — the round in flight
// included — is invoked twice.
func TestIntegrationTriggerGracefulStopCommitsTheRoundInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	tc := startTriggerCluster(ctx, t, lambdatest.Function{Name: "recorder", Instances: 4})
	const topic, name, partitions = "refunds", "graceful", 4
	const p = int32(2)
	tc.createTopic(ctx, t, topic, partitions)
	tr, w, s, ends, victim, survivor := tc.runOnTwoCopies(ctx, t, began, name, topic, partitions, p, nil)
	epoch := s.parts[p].GetEpoch()
	w.use(ctx, t, survivor)

	id, _, after := tc.inFlightRound(ctx, t, tr, victim, p, epoch)
	ends[p] = after[len(after)-1] + 1
	stoppedAt := time.Now()
	if err := tc.procs[victim].Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s stopped (SIGTERM) while invoking %s; it exited %v later", victim, id, ms(time.Since(stoppedAt)))
	s = w.waitFor(ctx, t, triggerTakeover, "the survivor holding every partition and P's records processed", func(s triggerState) bool {
		return len(tc.owners(s)[survivor]) == partitions && caughtUp(s, ends)
	})
	took := s.asked.Sub(stoppedAt)
	t.Logf("%v after the SIGTERM the survivor held every partition and had processed P: %s", ms(took), tc.describe(s))
	if took >= triggerSessionTimeout {
		t.Errorf("the survivor took the stopped copy's partitions over only %v after the SIGTERM; a copy that left should not wait for the session timeout (%v)", ms(took), triggerSessionTimeout)
	}
	w.halt()
	lines := tc.recorded(t, "recorder")
	checkInvocations(t, tc, lines, topic, ends, nil)
	if calls, starts := tc.attempts(t, id, lines); len(calls) != 1 || len(starts) != 1 {
		t.Errorf("the round in flight at the SIGTERM (%s): Invoke calls %v, started by the function at %v; want once, committed before the copy left", id, calls, starts)
	}
	t.Logf("the test took %v", ms(time.Since(began)))
}

// Failures under the real emulator, on two fetch copies at once:
//   - a poison record (the function fails every batch holding it) goes to
//     the on_failure_topic after the retries — bisect_on_error isolates it,
//     so it alone is sent — with headers naming the trigger, the function,
//     the source and the error; the records after it are processed, and
//     DescribeTrigger reports what went to the DLQ;
//   - a function with one instance behind a trigger running 4 partitions
//     with parallelization 4 is throttled (the pool answers 429 when its
//     instance is busy): the trigger backs off without spending retries
//     (it has none: max_retries -1, so a throttle counted as a failure
//     would send the batch to the DLQ), every record is invoked exactly
//     once, in key order, and its DLQ stays empty.
func TestIntegrationTriggerPoisonAndThrottleUnderRIE(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	tc := startTriggerCluster(ctx, t, lambdatest.Function{Name: "recorder", Instances: 2}, lambdatest.Function{Name: "narrow", Instances: 1})
	const orders, clicks = "orders", "clicks"
	const ordersDLQ, clicksDLQ = "orders-dlq", "clicks-dlq"
	tc.createTopic(ctx, t, orders, 2)
	tc.createTopic(ctx, t, ordersDLQ, 1)
	tc.createTopic(ctx, t, clicks, 4)
	tc.createTopic(ctx, t, clicksDLQ, 1)
	const maxRetries = 2
	tc.createTrigger(ctx, t, "poison", &sluicev1.TriggerSpec{Topic: orders, Function: "recorder", Enabled: true,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST, BatchSize: 10,
		MaxRetries: maxRetries, RetryBackoffInitialMs: 50, RetryBackoffMaxMs: 200, BisectOnError: true, OnFailureTopic: ordersDLQ})
	tc.createTrigger(ctx, t, "throttled", &sluicev1.TriggerSpec{Topic: clicks, Function: "narrow", Enabled: true,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST, BatchSize: 2, Parallelization: 4,
		MaxRetries: -1, RetryBackoffInitialMs: 20, RetryBackoffMaxMs: 300, OnFailureTopic: clicksDLQ})
	wp := tc.watch(ctx, t, "poison", orders, 2)
	wt := tc.watch(ctx, t, "throttled", clicks, 4)
	wp.waitFor(ctx, t, 30*time.Second, "both fetch copies running the poison trigger", func(s triggerState) bool { return tc.balanced(s, 2) })
	s := wt.waitFor(ctx, t, 30*time.Second, "both fetch copies running the throttled trigger", func(s triggerState) bool { return tc.balanced(s, 4) })
	t.Logf("cluster up and both triggers balanced %v after the start: throttled: %s", ms(time.Since(began)), tc.describe(s))

	// Orders: a poison record in the middle of a batch, records after it.
	ordersEnds := map[int32]int64{}
	batch := values("o-0", "o-1", "o-2", "o-3", "poison", "o-5", "o-6", "o-7", "o-8", "o-9")
	offs := tc.produce(ctx, t, orders, 0, batch...)
	poisonAt := offs[4]
	later := tc.produce(ctx, t, orders, 0, values("l-0", "l-1", "l-2", "l-3", "l-4")...)
	ordersEnds[0] = later[len(later)-1] + 1
	offs = tc.produce(ctx, t, orders, 1, values("q-0", "q-1", "q-2", "q-3", "q-4", "q-5")...)
	ordersEnds[1] = offs[len(offs)-1] + 1
	// Clicks: 12 records of 6 keys on each partition, each sleeping 100 ms
	// in the function, so the lanes of both copies collide on its one
	// instance.
	clicksEnds := map[int32]int64{}
	sent := time.Now()
	for p := range int32(4) {
		recs := make([]*sluicev1.Record, 12)
		for i := range recs {
			recs[i] = &sluicev1.Record{Key: fmt.Appendf(nil, "k-%d-%d", p, i%6), Value: []byte("sleep:100")}
		}
		offs := tc.produce(ctx, t, clicks, p, recs...)
		clicksEnds[p] = offs[len(offs)-1] + 1
	}

	s = wp.waitFor(ctx, t, 60*time.Second, "the orders processed", func(s triggerState) bool { return caughtUp(s, ordersEnds) })
	if e := s.parts[0].GetLastError(); !strings.Contains(e, ordersDLQ) || !strings.Contains(e, "poison record") {
		t.Errorf("DescribeTrigger's last error of partition 0 is %q; want it to say a record went to %s, and why", e, ordersDLQ)
	}
	t.Logf("orders processed %v after they were produced: %s", ms(time.Since(sent)), tc.describe(s))
	s = wt.waitFor(ctx, t, 60*time.Second, "the clicks processed", func(s triggerState) bool { return caughtUp(s, clicksEnds) })
	t.Logf("clicks processed %v after they were produced: %s", ms(time.Since(sent)), tc.describe(s))
	wp.halt()
	wt.halt()

	// The poison record, and it alone, in the DLQ.
	dlq := tc.readAll(ctx, t, ordersDLQ, 1)
	if len(dlq) != 1 || string(dlq[0].GetValue()) != "poison" {
		t.Fatalf("%s holds %d records (%v); want the poison record alone", ordersDLQ, len(dlq), dlqValues(dlq))
	}
	h := map[string]string{}
	for _, hd := range dlq[0].GetHeaders() {
		h[hd.GetKey()] = string(hd.GetValue())
	}
	for k, want := range map[string]string{fetch.DLQHeaderTrigger: "poison", fetch.DLQHeaderFunction: "recorder", fetch.DLQHeaderTopic: orders,
		fetch.DLQHeaderPartition: "0", fetch.DLQHeaderOffset: fmt.Sprint(poisonAt), fetch.DLQHeaderAttempts: fmt.Sprint(maxRetries + 1)} {
		if h[k] != want {
			t.Errorf("DLQ header %s is %q; want %q (headers %v)", k, h[k], want, h)
		}
	}
	if e := h[fetch.DLQHeaderError]; !strings.Contains(e, fmt.Sprintf("poison record at %s-0 offset %d", orders, poisonAt)) {
		t.Errorf("DLQ header %s is %q; want the function's error", fetch.DLQHeaderError, e)
	}
	if at, err := strconv.ParseInt(h[fetch.DLQHeaderFailedAt], 10, 64); err != nil || at < began.UnixMilli() || at > time.Now().UnixMilli() {
		t.Errorf("DLQ header %s is %q; want the time it failed, in ms", fetch.DLQHeaderFailedAt, h[fetch.DLQHeaderFailedAt])
	}

	// The function: the poison record alone max_retries+1 times, every
	// other record processed, the ones after it after its last attempt.
	lines := tc.recorded(t, "recorder")
	var alone, lastPoison time.Time
	attempts := 0
	ok := map[po]time.Time{} // first successful start
	for _, l := range lines {
		if l.Outcome == "poison" && len(l.Records) == 1 && l.Records[0].Offset == poisonAt && l.Records[0].Partition == 0 {
			attempts++
			if alone.IsZero() {
				alone = l.started()
			}
			lastPoison = l.started()
		}
		if l.Outcome != "ok" {
			continue
		}
		for _, r := range l.Records {
			k := po{r.Partition, r.Offset}
			if _, seen := ok[k]; !seen {
				ok[k] = l.started()
			}
			if r.Value == "poison" {
				t.Errorf("the poison record at offset %d was processed: %+v", r.Offset, l)
			}
		}
	}
	if attempts != maxRetries+1 {
		t.Errorf("the function was invoked with the poison record alone %d times; want %d (max_retries %d + 1)", attempts, maxRetries+1, maxRetries)
	}
	for p, end := range ordersEnds {
		for off := range end {
			if p == 0 && off == poisonAt {
				continue
			}
			at, done := ok[po{p, off}]
			switch {
			case !done:
				t.Errorf("%s partition %d offset %d was never processed", orders, p, off)
			case p == 0 && off > poisonAt && !at.After(lastPoison):
				t.Errorf("%s partition 0 offset %d was processed at %s, before the poison record's last attempt (%s)",
					orders, off, at.Format("15:04:05.000"), lastPoison.Format("15:04:05.000"))
			}
		}
	}

	// Throttling: 429s, no DLQ, every click once, in key order.
	calls := tc.invokes.snapshot()
	throttles := map[string]int{}
	for _, c := range calls {
		if c.function == "narrow" && c.status == 429 {
			throttles[c.id]++
		}
	}
	total, most := 0, 0
	for _, n := range throttles {
		total += n
		most = max(most, n)
	}
	if total == 0 {
		t.Errorf("no Invoke of the one-instance function was throttled (429) in %d calls", countCalls(calls, func(c invokeCall) bool { return c.function == "narrow" }))
	}
	if got := tc.readAll(ctx, t, clicksDLQ, 0); len(got) != 0 {
		t.Errorf("%s holds %d records (%v); want none: throttling must not fail records", clicksDLQ, len(got), dlqValues(got))
	}
	nl := tc.recorded(t, "narrow")
	counts := invoked(nl, clicks)
	for p, end := range clicksEnds {
		for off := range end {
			if n := counts[po{p, off}]; n != 1 {
				t.Errorf("%s partition %d offset %d was invoked %d times; want once", clicks, p, off, n)
			}
		}
	}
	type keyed struct {
		partition int32
		key       string
	}
	last := map[keyed]int64{}
	for _, l := range nl { // in start order
		if l.Outcome != "ok" {
			t.Errorf("an invocation of %s failed: %+v", clicks, l)
		}
		for _, r := range l.Records {
			k := keyed{r.Partition, r.Key}
			if prev, seen := last[k]; seen && r.Offset < prev {
				t.Errorf("key %s of partition %d: offset %d invoked after offset %d", r.Key, r.Partition, r.Offset, prev)
			}
			last[k] = r.Offset
		}
	}
	t.Logf("%d invocations of %s, %d throttled (429) calls of %d batches (at most %d for one batch), none DLQ'd; the test took %v",
		len(nl), clicks, total, len(throttles), most, ms(time.Since(began)))
}

// readAll reads every record of partition 0 of topic, which holds want
// records once they are readable (the high watermark of a partition this
// fetch copy does not follow may lag behind an acknowledged produce).
func (tc *triggerCluster) readAll(ctx context.Context, t *testing.T, topic string, want int64) []*sluicev1.ConsumedRecord {
	t.Helper()
	var hw int64
	waitUntil(ctx, t, 10*time.Second, fmt.Sprintf("%s's high watermark at %d", topic, want), func() bool {
		resp, err := tc.consumer.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Offset: 0, MaxRecords: 1}))
		if err != nil {
			t.Logf("fetch %s: %v", topic, err)
			return false
		}
		hw = resp.Msg.GetHighWatermark()
		return hw >= want
	})
	var out []*sluicev1.ConsumedRecord
	for next := int64(0); next < hw; {
		resp, err := tc.consumer.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Offset: next, MaxRecords: 1000}))
		if err != nil {
			t.Fatalf("fetch %s at %d: %v", topic, next, err)
		}
		if len(resp.Msg.GetRecords()) == 0 {
			t.Fatalf("fetch %s: no records at %d below the high watermark %d", topic, next, hw)
		}
		out = append(out, resp.Msg.GetRecords()...)
		next = resp.Msg.GetNextOffset()
	}
	return out
}

func dlqValues(recs []*sluicev1.ConsumedRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d:%s", r.GetOffset(), r.GetValue())
	}
	return out
}

// attempts returns the Invoke calls carrying invocation id, in the order
// sent, and when the function started it.
func (tc *triggerCluster) attempts(t *testing.T, id string, lines []recLine) (calls []invokeCall, starts []time.Time) {
	t.Helper()
	for _, c := range tc.invokes.snapshot() {
		if c.id == id {
			calls = append(calls, c)
		}
	}
	for _, l := range lines {
		if l.InvocationID == id {
			starts = append(starts, l.started())
		}
	}
	return calls, starts
}

func (c invokeCall) String() string {
	return fmt.Sprintf("%s sent %s answered %d", c.copy, stamp(c.sent), c.status)
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// checkInvocations checks the recorder's lines of a topic: every record
// below ends was invoked, and a record invoked more than once belongs to
// an invocation id of repeat (the rounds allowed to run again), whose every
// invocation carried the same id.
func checkInvocations(t *testing.T, tc *triggerCluster, lines []recLine, topic string, ends map[int32]int64, repeat map[string]bool) {
	t.Helper()
	counts := invoked(lines, topic)
	repeated := map[po]bool{}
	for _, l := range lines {
		if repeat[l.InvocationID] {
			for _, r := range l.Records {
				repeated[po{r.Partition, r.Offset}] = true
			}
		}
	}
	missing, dups := 0, 0
	for p, end := range ends {
		for off := range end {
			k := po{p, off}
			switch n := counts[k]; {
			case n == 0:
				if missing++; missing <= 10 {
					t.Errorf("partition %d offset %d was never invoked", p, off)
				}
			case n > 1 && !repeated[k]:
				if dups++; dups <= 10 {
					t.Errorf("partition %d offset %d was invoked %d times, outside the round in flight: %s", p, off, n, idsOf(lines, topic, k))
				}
			}
		}
	}
	for k := range counts {
		if end, ok := ends[k.partition]; !ok || k.offset >= end {
			t.Errorf("partition %d offset %d was invoked, but no such record was produced", k.partition, k.offset)
		}
	}
	for k := range repeated {
		if ids := idsOf(lines, topic, k); len(ids) != 1 {
			t.Errorf("partition %d offset %d of the round in flight was invoked under several ids: %v", k.partition, k.offset, ids)
		}
	}
}

// idsOf lists the distinct invocation ids that carried a record.
func idsOf(lines []recLine, topic string, k po) []string {
	ids := map[string]bool{}
	for _, l := range lines {
		for _, r := range l.Records {
			if r.Topic == topic && r.Partition == k.partition && r.Offset == k.offset {
				ids[l.InvocationID] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

func countCalls(calls []invokeCall, f func(invokeCall) bool) int {
	n := 0
	for _, c := range calls {
		if f(c) {
			n++
		}
	}
	return n
}
