//go:build integration

package processtest

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/lambdatest"
	"github.com/sluicemq/sluice/internal/lambdapool"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// A paused fetch copy whose invocation in flight fails must not retry it
// once it continues, nor send the round's records to the on_failure_topic
// again: the new owner already ran the round. Commits are fenced by the
// lease epoch; invocations and DLQ writes are held back until the member
// is confirmed live (fetch's member.live), and a member that finds itself
// expired drops its leases. (Without that check this failed every run:
// the zombie retried ~5 ms after SIGCONT and doubled the DLQ.)
//
// Two copies run a trigger (batch 4, max_retries 1, backoff 1 ms, a DLQ);
// the copy holding partition P is paused while it invokes a round that
// sleeps 2.5 s and then fails (a "poison" record); the other copy takes P
// over, runs the round twice (it fails), sends its 4 records to the DLQ and
// commits past them; then the paused copy continues. Checked: the paused
// copy sends no invocation after it continued, and the DLQ holds the 4
// records once.
func TestIntegrationTriggerZombieRetriesNothingAfterItsLeaseMoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tc := startTriggerCluster(ctx, t, lambdatest.Function{Name: "recorder", Instances: 4})
	const topic, dlq, name, partitions = "orders", "orders-dlq", "zombie-retry", 4
	tc.createTopic(ctx, t, topic, partitions)
	tc.createTopic(ctx, t, dlq, 1)
	const p = int32(0)
	tr, w, s, ends, victim, survivor := tc.runOnTwoCopies(ctx, t, time.Now(), name, topic, partitions, p, &sluicev1.TriggerSpec{
		Topic: topic, Function: "recorder", Enabled: true,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST, BatchSize: 4,
		MaxRetries: 1, RetryBackoffInitialMs: 1, RetryBackoffMaxMs: 1, OnFailureTopic: dlq})
	epoch := s.parts[p].GetEpoch()
	w.use(ctx, t, survivor)

	round := tc.produce(ctx, t, topic, p, values("sleep:2500", "poison", "r-2", "r-3")...)
	ends[p] = round[3] + 1
	id := idOf(tr, p, round[0], round[3], epoch)
	waitUntil(ctx, t, 20*time.Second, fmt.Sprintf("%s invoking %s", victim, id), func() bool {
		return tc.invokes.inFlight(victim, id) && slices.ContainsFunc(tc.pool.Instances("recorder"), func(in lambdapool.InstanceState) bool { return in.Busy })
	})
	if err := tc.procs[victim].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = tc.procs[victim].Signal(syscall.SIGCONT)
		}
	}()
	s = w.waitFor(ctx, t, triggerTakeover+5*time.Second, "the survivor holding every partition and P's round sent to the DLQ", func(s triggerState) bool {
		return len(tc.owners(s)[survivor]) == partitions && caughtUp(s, ends)
	})
	if err := tc.procs[victim].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	resumed = true
	waitUntil(ctx, t, 20*time.Second, fmt.Sprintf("%s's worker of partition %d at epoch %d ending", victim, p, epoch), func() bool {
		for _, e := range logEntries(tc.procs[victim], "trigger partition ended") {
			if num(e, "partition") == int64(p) && num(e, "epoch") == epoch {
				return true
			}
		}
		return false
	})
	lines := tc.recorded(t, "recorder")
	calls, _ := tc.attempts(t, id, lines)
	for _, c := range calls {
		if c.copy == victim && c.sent.After(resumedAt) {
			t.Errorf("%s invoked %s at %s, after it continued (%s) and its lease had moved: calls %v", victim, id, stamp(c.sent), stamp(resumedAt), calls)
		}
	}
	got := tc.readAll(ctx, t, dlq, 4)
	if len(got) != 4 {
		t.Errorf("%s holds %d records: %v; want the round's 4 records once", dlq, len(got), dlqValues(got))
	}
}
