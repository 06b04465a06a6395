package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Repeated log lines. A fault that lasts (a bookie down with no spare to
// replace it, a peer that refuses connections) makes the same line come
// again and again from every goroutine that meets it, and buries what else
// is said. repeatLimiter lets through the first RepeatBurst records of each
// (level, message) per RepeatWindow and drops the rest; the first record
// of that level and message after the window ends is preceded by a
// summary saying how many were dropped. Only warnings and errors are
// limited: info lines are events (a partition taken, a trigger's worker
// ended), each with its own attributes, and debug output is asked for.
const (
	RepeatBurst  = 10
	RepeatWindow = time.Minute
)

// maxRepeatKeys bounds the messages tracked; past it the tracking starts
// over (at worst some lines more get through).
const maxRepeatKeys = 10_000

type repeatKey struct {
	level slog.Level
	msg   string
}

type repeatCount struct {
	start   time.Time // the window's start
	passed  int       // records let through in the window
	dropped int       // records dropped in the window
}

// repeatState is shared by a handler and every handler derived from it
// (WithAttrs, WithGroup).
type repeatState struct {
	mu   sync.Mutex
	now  func() time.Time
	seen map[repeatKey]*repeatCount
}

// repeatLimiter wraps a handler with the limit above.
type repeatLimiter struct {
	next slog.Handler
	st   *repeatState
}

func newRepeatLimiter(next slog.Handler, now func() time.Time) *repeatLimiter {
	if now == nil {
		now = time.Now
	}
	return &repeatLimiter{next: next, st: &repeatState{now: now, seen: make(map[repeatKey]*repeatCount)}}
}

func (h *repeatLimiter) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *repeatLimiter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	pass, dropped, since := h.st.admit(repeatKey{r.Level, r.Message})
	if !pass {
		return nil
	}
	if dropped > 0 {
		s := slog.NewRecord(r.Time, r.Level, fmt.Sprintf("%s (dropped %d more such lines in the %v before this one)", r.Message, dropped, since.Round(time.Second)), 0)
		s.AddAttrs(slog.Int("dropped", dropped))
		if err := h.next.Handle(ctx, s); err != nil {
			return err
		}
	}
	return h.next.Handle(ctx, r)
}

// admit counts one record of k: whether it passes, and — when it opens a
// new window after lines were dropped — how many and over how long.
func (s *repeatState) admit(k repeatKey) (pass bool, dropped int, since time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c := s.seen[k]
	if c == nil {
		if len(s.seen) >= maxRepeatKeys {
			clear(s.seen)
		}
		c = &repeatCount{start: now}
		s.seen[k] = c
	}
	if now.Sub(c.start) >= RepeatWindow {
		dropped, since = c.dropped, now.Sub(c.start)
		*c = repeatCount{start: now}
	}
	if c.passed >= RepeatBurst {
		c.dropped++
		return false, 0, 0
	}
	c.passed++
	return true, dropped, since
}

func (h *repeatLimiter) WithAttrs(as []slog.Attr) slog.Handler {
	return &repeatLimiter{next: h.next.WithAttrs(as), st: h.st}
}

func (h *repeatLimiter) WithGroup(name string) slog.Handler {
	return &repeatLimiter{next: h.next.WithGroup(name), st: h.st}
}
