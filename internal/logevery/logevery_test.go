package logevery

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var l Limiter
	t0 := time.Unix(100, 0)
	steps := []struct {
		at   time.Duration
		ok   bool
		held int
	}{
		{0, true, 0},
		{10 * time.Millisecond, false, 0},
		{900 * time.Millisecond, false, 0},
		{time.Second, true, 2},
		{1500 * time.Millisecond, false, 0},
		{5 * time.Second, true, 1},
	}
	for _, s := range steps {
		ok, held := l.Allow(t0.Add(s.at))
		if ok != s.ok || held != s.held {
			t.Fatalf("at %v: Allow = %v, %d; want %v, %d", s.at, ok, held, s.ok, s.held)
		}
	}
}
