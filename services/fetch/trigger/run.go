package trigger

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
)

// Run is one batch's way through the retry rules: a pure state machine the
// runtime asks what to invoke next (Next) and tells each answer (Observe),
// doing the waiting, committing, invoking and DLQ writes itself. It holds
// no clock and no I/O, so every path is a transcript test
// (testdata/run.transcript).
//
// The rules, per answer:
//
//   - Success: the invocation's records are finished. With
//     batchItemFailures, the records before the first failed one are
//     finished and the rest is invoked again (a retry spent); out of
//     retries, the records named failed are to be failed (DLQ) and the
//     rest is finished.
//   - FunctionError: with bisect, an invocation of more than one record is
//     split in halves, each invoked on its own (first half first; no retry
//     spent); else retried with backoff, a retry spent; out of retries its
//     records are to be failed.
//   - Throttled, Transient: retried after max(Retry-After, backoff of the
//     consecutive waits), bounded by the policy's Max; no retry spent.
//   - Rejected: retried after the policy's Max; no retry spent.
//
// Invariants: the queue's invocations are consecutive runs of the batch's
// records in offset order, the first starting at the first record not
// finished; finished only grows; retries counts the function failures of
// queue[0] since it became queue[0] (a split or a finished invocation
// resets it), waits the answers in a row that were not the function's
// (throttled, transient, rejected): any answer of the function resets it.
type Run struct {
	pol      RetryPolicy
	queue    [][]record.Record
	retries  int
	waits    int
	finished int
}

// NewRun starts the run of a batch (records in offset order, non-empty)
// under a valid policy.
func NewRun(pol RetryPolicy, recs []record.Record) *Run {
	if len(recs) == 0 {
		panic("trigger: NewRun of no records")
	}
	return &Run{pol: pol, queue: [][]record.Record{recs}}
}

// Next returns the records of the next invocation; ok is false once every
// record is finished.
func (r *Run) Next() (recs []record.Record, ok bool) {
	if len(r.queue) == 0 {
		return nil, false
	}
	return r.queue[0], true
}

// Finished is how many leading records of the batch are finished (invoked
// successfully, or handed to Step.Fail).
func (r *Run) Finished() int { return r.finished }

// Retries is how many retries the next invocation's records have spent.
func (r *Run) Retries() int { return r.retries }

// Step is what the runtime does after an answer, in this order: fail the
// records of Fail (DLQ, or stop the partition at FailAt), then, if
// Progress, store the position after the finished records, then wait Wait
// before the next invocation. BackingOff is the error to report while
// retrying (nil: running).
type Step struct {
	Fail []record.Record
	// FailAt is Finished() before the failed part: where the partition
	// stands if the failed records cannot be dealt with.
	FailAt   int
	Cause    error
	Attempts int
	Progress bool
	Wait     time.Duration
	// BackingOff is set when the next invocation is a retry.
	BackingOff error
}

// Observe takes the answer to the invocation of Next's records and returns
// what to do. res.Failed must name offsets of those records (Classify
// guarantees it).
func (r *Run) Observe(res Result, rnd Rand) Step {
	recs := r.queue[0]
	switch res.Outcome {
	case Success:
		if len(res.Failed) == 0 {
			r.finish(len(recs))
			return Step{Progress: true}
		}
		i := 0
		for recs[i].Offset < res.Failed[0] {
			i++
		}
		r.finished += i
		r.waits = 0
		rest := recs[i:]
		cause := fmt.Errorf("the function reported %s failed (batchItemFailures), the first at offset %d", Plural(len(res.Failed), "record"), res.Failed[0])
		if r.pol.CanRetry(r.retries) {
			r.retries++
			r.queue[0] = rest
			return Step{Progress: i > 0, Wait: r.pol.Backoff(r.retries, rnd), BackingOff: cause}
		}
		var failed []record.Record
		for _, rec := range rest {
			if slices.Contains(res.Failed, rec.Offset) {
				failed = append(failed, rec)
			}
		}
		at := r.finished
		attempts := r.retries + 1
		r.queue[0] = rest
		r.finish(len(rest))
		return Step{Fail: failed, FailAt: at, Cause: cause, Attempts: attempts, Progress: true}
	case FunctionError:
		r.waits = 0
		if first, ok := r.pol.Split(len(recs)); ok {
			r.queue = append([][]record.Record{recs[:first], recs[first:]}, r.queue[1:]...)
			r.retries = 0
			return Step{BackingOff: res.Err}
		}
		if r.pol.CanRetry(r.retries) {
			r.retries++
			return Step{Wait: r.pol.Backoff(r.retries, rnd), BackingOff: res.Err}
		}
		at, attempts := r.finished, r.retries+1
		r.finish(len(recs))
		return Step{Fail: recs, FailAt: at, Cause: res.Err, Attempts: attempts, Progress: true}
	case Throttled, Transient:
		r.waits++
		return Step{Wait: min(max(res.RetryAfter, r.pol.Backoff(r.waits, rnd)), r.pol.Max), BackingOff: fmt.Errorf("%v: %w", res.Outcome, res.Err)}
	case Rejected:
		r.waits++
		return Step{Wait: r.pol.Max, BackingOff: fmt.Errorf("%v: %w", res.Outcome, res.Err)}
	}
	panic(fmt.Sprintf("trigger: Observe of outcome %v", res.Outcome))
}

// finish drops queue[0], n records long, as finished.
func (r *Run) finish(n int) {
	r.finished += n
	r.queue = r.queue[1:]
	r.retries, r.waits = 0, 0
}

// Plural is "1 record", "2 records", "3 fetch copies": the runtime's
// messages count with it.
func Plural(n int, noun string) string {
	if n != 1 {
		if strings.HasSuffix(noun, "y") {
			noun = strings.TrimSuffix(noun, "y") + "ies"
		} else {
			noun += "s"
		}
	}
	return strconv.Itoa(n) + " " + noun
}
