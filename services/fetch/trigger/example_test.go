package trigger_test

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// Example shows how a runtime loop (services/fetch/trigger_worker.go is the real one) uses the
// pieces for one partition: cut a batch, name it, invoke, and act on the
// outcome. Committing, the DLQ and bisection's bookkeeping are left out.
func Example() {
	var (
		ctx        = context.Background()
		tr         catalog.Trigger // from the catalog
		leaseEpoch int64           // of the partition's lease
		recs       []record.Record // read from the partition
		cfg        aws.Config
	)
	enc, err := trigger.NewEncoder("fetch-0:9092", tr.BatchSize, tr.MaxBatchBytes)
	if err != nil || len(recs) == 0 {
		return
	}
	policy := trigger.PolicyOf(tr.TriggerSpec)
	iv := trigger.NewInvoker(cfg, "http://127.0.0.1:9100")
	rnd := rand.New(rand.NewPCG(1, 2))
	wait := func(d time.Duration) bool { // false: stopped
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}

	batch, payload, err := enc.Take(tr.Topic, 0, recs)
	if err != nil {
		return // a *RecordTooLargeError: to the DLQ, or stop the partition
	}
	id := trigger.InvocationID(trigger.InvocationKey{
		Trigger: tr.Name, Topic: tr.Topic, TopicID: tr.TopicID, Partition: 0,
		FirstOffset: batch.FirstOffset(), LastOffset: batch.LastOffset(), LeaseEpoch: leaseEpoch,
	})
	for retries, waits := 0, 0; ; {
		res := iv.Invoke(ctx, tr.Function, id, batch, payload)
		switch res.Outcome {
		case trigger.Success:
			// Commit up to res.Failed[0] (all of the batch if none), retry from there.
			return
		case trigger.FunctionError:
			if !policy.CanRetry(retries) {
				return // to the DLQ, or stop the partition
			}
			retries++
			if !wait(policy.Backoff(retries, rnd)) {
				return
			}
		case trigger.Throttled, trigger.Transient:
			waits++
			if !wait(max(policy.Backoff(waits, rnd), res.RetryAfter)) {
				return
			}
		case trigger.Rejected:
			return // report and stop the partition
		}
	}
}
