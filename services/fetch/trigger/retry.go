package trigger

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Rand is the random source of the backoff jitter; *math/rand/v2.Rand
// satisfies it. Tests inject a seeded or fixed one.
type Rand interface {
	// Int64N returns a uniform value in [0, n); n > 0.
	Int64N(n int64) int64
}

// RetryPolicy is a trigger's retry settings, resolved. The decisions are
// pure functions of it, so the runtime loop asks them and does the
// waiting.
type RetryPolicy struct {
	// MaxRetries is how many times a failed batch is invoked again (0:
	// never) before its records go to the DLQ or stop the partition.
	// Throttled invocations do not count.
	MaxRetries int
	// Initial and Max bound the backoff: 0 < Initial <= Max.
	Initial, Max time.Duration
	// Bisect splits a failing batch of more than one record.
	Bisect bool
}

// PolicyOf is the retry policy of a trigger spec (defaults resolved).
func PolicyOf(s catalog.TriggerSpec) RetryPolicy {
	s = s.WithDefaults()
	return RetryPolicy{
		MaxRetries: s.Retries(),
		Initial:    time.Duration(s.RetryBackoffInitialMs) * time.Millisecond,
		Max:        time.Duration(s.RetryBackoffMaxMs) * time.Millisecond,
		Bisect:     s.BisectOnError,
	}
}

// Validate reports a policy the decisions below cannot use.
func (p RetryPolicy) Validate() error {
	if p.MaxRetries < 0 || p.Initial <= 0 || p.Max < p.Initial {
		return fmt.Errorf("retry policy %+v: want MaxRetries >= 0 and 0 < Initial <= Max", p)
	}
	return nil
}

// Backoff is the wait before the attempt-th retry (attempt >= 1), with
// "full jitter": uniform in [0, min(Max, Initial·2^(attempt-1))]. Full
// jitter spreads the retries of many partitions failing at once (a
// function down) instead of having them hit it in waves. Throttling uses
// the same curve with its own attempt count (it spends no retries), reset
// by a success.
func (p RetryPolicy) Backoff(attempt int, rnd Rand) time.Duration {
	if attempt < 1 {
		panic(fmt.Sprintf("trigger: backoff for attempt %d", attempt))
	}
	ceil := p.Initial
	for i := 1; i < attempt && ceil < p.Max; i++ {
		ceil *= 2 // Max <= 15 min, so doubling below it cannot overflow
	}
	ceil = min(ceil, p.Max)
	return time.Duration(rnd.Int64N(int64(ceil) + 1))
}

// CanRetry says whether a batch that has been retried `retries` times may
// be invoked again after a function error.
func (p RetryPolicy) CanRetry(retries int) bool { return retries < p.MaxRetries }

// Split is the bisect rule: a failing batch of n > 1 records, under a
// policy with Bisect, is split into its first `first` records and the
// rest (first = n/2 rounded up), each invoked on its own from then on
// with its own invocation id; the first half goes first to keep partition
// order. ok is false when the batch is not split (Bisect off, or one
// record: a poison record is isolated).
func (p RetryPolicy) Split(n int) (first int, ok bool) {
	if !p.Bisect || n < 2 {
		return 0, false
	}
	return n - n/2, true
}
