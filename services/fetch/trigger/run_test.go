package trigger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
)

// runScenario is one transcript: a batch, a policy and the answers the
// function gives, in order.
type runScenario struct {
	name    string
	first   int64
	n       int
	pol     RetryPolicy
	answers []Result
}

func ok(failed ...int64) Result { return Result{Outcome: Success, Failed: failed} }

var (
	fnErr     = Result{Outcome: FunctionError, Err: &FunctionErr{Type: "Unhandled", Payload: []byte(`{"errorMessage":"boom"}`)}}
	throttled = Result{Outcome: Throttled, Err: errors.New("429 TooManyRequestsException")}
	slowDown  = Result{Outcome: Throttled, Err: errors.New("429 TooManyRequestsException"), RetryAfter: 3 * time.Second}
	transient = Result{Outcome: Transient, Err: errors.New("connection reset")}
	rejected  = Result{Outcome: Rejected, Err: errors.New("404 ResourceNotFoundException")}
)

var policy = RetryPolicy{MaxRetries: 2, Initial: 100 * time.Millisecond, Max: 2 * time.Second}

var runScenarios = []runScenario{
	{name: "success", first: 10, n: 5, pol: policy, answers: []Result{ok()}},
	{name: "partial failure retried from the first failed record", first: 10, n: 5, pol: policy, answers: []Result{ok(12, 14), ok()}},
	{name: "partial failure out of retries: the named records fail, the rest is done", first: 10, n: 5, pol: policy, answers: []Result{ok(12, 14), ok(12), ok(12, 13)}},
	{name: "function errors retried, then failed", first: 0, n: 3, pol: policy, answers: []Result{fnErr, fnErr, fnErr}},
	{name: "a retry that succeeds resets the count", first: 0, n: 3, pol: policy, answers: []Result{fnErr, ok()}},
	{name: "no retries", first: 0, n: 2, pol: RetryPolicy{MaxRetries: 0, Initial: time.Millisecond, Max: time.Millisecond}, answers: []Result{fnErr}},
	{name: "bisect isolates the poison record", first: 20, n: 5, pol: RetryPolicy{MaxRetries: 1, Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Bisect: true},
		// 20-24 → 20-22 | 23-24; 20-22 → 20-21 | 22; 20-21 ok; 22 poison twice; 23-24 ok
		answers: []Result{fnErr, fnErr, ok(), fnErr, fnErr, ok()}},
	{name: "throttling and transient errors spend no retry, back off growing, reset by a success", first: 0, n: 2, pol: policy,
		answers: []Result{throttled, throttled, transient, throttled, throttled, throttled, fnErr, throttled, ok()}},
	{name: "Retry-After is a floor, the policy's Max a ceiling", first: 0, n: 1, pol: policy, answers: []Result{slowDown, ok()}},
	{name: "rejected waits the longest backoff", first: 0, n: 1, pol: policy, answers: []Result{rejected, rejected, ok()}},
}

// The retry rules as transcripts (testdata/run.transcript; -rewrite to
// regenerate after an intended change): each line is an invocation with
// its answer, or a step the runtime takes.
func TestRunTranscripts(t *testing.T) {
	var b strings.Builder
	for _, sc := range runScenarios {
		fmt.Fprintf(&b, "== %s (policy: %d retries, backoff %v..%v, bisect %v)\n", sc.name, sc.pol.MaxRetries, sc.pol.Initial, sc.pol.Max, sc.pol.Bisect)
		recs := make([]record.Record, sc.n)
		for i := range recs {
			recs[i] = record.Record{Offset: sc.first + int64(i)}
		}
		run := NewRun(sc.pol, recs)
		answers := sc.answers
		for {
			next, more := run.Next()
			if !more {
				break
			}
			if len(answers) == 0 {
				t.Fatalf("%s: the run wants another invocation of %s after the scripted answers", sc.name, span(next))
			}
			res := answers[0]
			answers = answers[1:]
			fmt.Fprintf(&b, "invoke %s (retries %d) -> %s\n", span(next), run.Retries(), answer(res))
			before := run.Finished()
			st := run.Observe(res, maxRand{})
			if run.Finished() < before {
				t.Fatalf("%s: finished went back from %d to %d", sc.name, before, run.Finished())
			}
			if len(st.Fail) > 0 {
				fmt.Fprintf(&b, "  fail %s after %d attempts (position if it cannot be failed: %d): %v\n", offsets(st.Fail), st.Attempts, st.FailAt, st.Cause)
			}
			if st.Progress {
				fmt.Fprintf(&b, "  progress: %d of %d finished\n", run.Finished(), sc.n)
			}
			if st.BackingOff != nil {
				fmt.Fprintf(&b, "  backing off %v: %v\n", st.Wait, st.BackingOff)
			}
		}
		if len(answers) > 0 {
			t.Fatalf("%s: %d scripted answers left over", sc.name, len(answers))
		}
		if run.Finished() != sc.n {
			t.Fatalf("%s: finished %d of %d", sc.name, run.Finished(), sc.n)
		}
		b.WriteString("\n")
	}
	path := filepath.Join("testdata", "run.transcript")
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if string(want) != b.String() {
		t.Fatalf("transcript differs from %s (run with -rewrite if intended):\n%s", path, b.String())
	}
}

func span(recs []record.Record) string {
	if len(recs) == 1 {
		return fmt.Sprintf("[%d]", recs[0].Offset)
	}
	return fmt.Sprintf("[%d-%d]", recs[0].Offset, recs[len(recs)-1].Offset)
}

func offsets(recs []record.Record) string {
	var s []string
	for _, r := range recs {
		s = append(s, fmt.Sprint(r.Offset))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func answer(res Result) string {
	switch {
	case res.Outcome == Success && len(res.Failed) > 0:
		return fmt.Sprintf("success, batchItemFailures %v", res.Failed)
	case res.RetryAfter > 0:
		return fmt.Sprintf("%v (Retry-After %v)", res.Outcome, res.RetryAfter)
	}
	return res.Outcome.String()
}
