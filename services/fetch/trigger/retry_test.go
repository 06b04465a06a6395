package trigger

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// maxRand returns the top of every range: the backoff's ceiling.
type maxRand struct{}

func (maxRand) Int64N(n int64) int64 { return n - 1 }

// zeroRand returns 0.
type zeroRand struct{}

func (zeroRand) Int64N(int64) int64 { return 0 }

func TestBackoffCeiling(t *testing.T) {
	p := RetryPolicy{MaxRetries: 5, Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, w := range want {
		if got := p.Backoff(i+1, maxRand{}); got != w*time.Millisecond {
			t.Errorf("attempt %d: ceiling %v, want %v", i+1, got, w*time.Millisecond)
		}
		if got := p.Backoff(i+1, zeroRand{}); got != 0 {
			t.Errorf("attempt %d: floor %v, want 0", i+1, got)
		}
	}
	// A huge attempt count stays at Max (no overflow).
	if got := p.Backoff(1_000_000, maxRand{}); got != time.Second {
		t.Errorf("attempt 1e6: %v, want 1s", got)
	}
}

// TestBackoffJitterSeeded: with a seeded source the sequence is
// reproducible and every value lies in [0, ceiling].
func TestBackoffJitterSeeded(t *testing.T) {
	p := PolicyOf(catalog.TriggerSpec{RetryBackoffInitialMs: 50, RetryBackoffMaxMs: 400})
	run := func() []time.Duration {
		rnd := rand.New(rand.NewPCG(1, 2))
		var out []time.Duration
		for a := 1; a <= 50; a++ {
			out = append(out, p.Backoff(a, rnd))
		}
		return out
	}
	a, b := run(), run()
	distinct := map[time.Duration]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("attempt %d: %v then %v with the same seed", i+1, a[i], b[i])
		}
		ceil := 400 * time.Millisecond
		if i < 3 {
			ceil = 50 * time.Millisecond << i
		}
		if a[i] < 0 || a[i] > ceil {
			t.Fatalf("attempt %d: %v outside [0, %v]", i+1, a[i], ceil)
		}
		distinct[a[i]] = true
	}
	if len(distinct) < 40 {
		t.Fatalf("only %d distinct backoffs in 50: no jitter?", len(distinct))
	}
}

func TestPolicyOf(t *testing.T) {
	got := PolicyOf(catalog.TriggerSpec{})
	want := RetryPolicy{MaxRetries: 3, Initial: 100 * time.Millisecond, Max: 30 * time.Second}
	if got != want {
		t.Fatalf("defaults: %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	none := PolicyOf(catalog.TriggerSpec{MaxRetries: -1, BisectOnError: true})
	if none.MaxRetries != 0 || !none.Bisect || none.CanRetry(0) {
		t.Fatalf("max retries -1: %+v", none)
	}
	if !got.CanRetry(2) || got.CanRetry(3) {
		t.Fatal("3 retries: CanRetry(2) must hold and CanRetry(3) not")
	}
	if (RetryPolicy{Initial: time.Second, Max: time.Millisecond}).Validate() == nil {
		t.Fatal("Initial > Max accepted")
	}
}

func TestSplit(t *testing.T) {
	on := RetryPolicy{Bisect: true}
	for _, c := range []struct{ n, first int }{{2, 1}, {3, 2}, {4, 2}, {5, 3}, {100, 50}, {10_000, 5000}} {
		first, ok := on.Split(c.n)
		if !ok || first != c.first {
			t.Errorf("Split(%d) = %d, %v; want %d, true", c.n, first, ok, c.first)
		}
	}
	if _, ok := on.Split(1); ok {
		t.Error("a single record was split")
	}
	if _, ok := (RetryPolicy{}).Split(10); ok {
		t.Error("split without Bisect")
	}
	// Bisecting repeatedly isolates any record in ceil(log2(n)) splits.
	for poison := range 37 {
		lo, hi, splits := 0, 37, 0
		for hi-lo > 1 {
			first, ok := on.Split(hi - lo)
			if !ok {
				t.Fatal("no split")
			}
			if poison < lo+first {
				hi = lo + first
			} else {
				lo += first
			}
			splits++
		}
		if lo != poison || splits > 6 {
			t.Fatalf("poison %d: isolated %d after %d splits", poison, lo, splits)
		}
	}
}
