// Package logevery decides when a repeated event gets a log line: at most
// one per interval, with how many were held back since the last line, so
// a burst is visible in a log without flooding it.
package logevery

import (
	"sync"
	"time"
)

// Limiter allows one line per Every. The zero Every means one a second.
// Safe for concurrent use.
type Limiter struct {
	Every time.Duration

	mu   sync.Mutex
	last time.Time
	held int
}

// Allow reports whether an event at now gets a line and, when it does, how
// many events were held back since the previous line.
func (l *Limiter) Allow(now time.Time) (ok bool, held int) {
	every := l.Every
	if every <= 0 {
		every = time.Second
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.held++
		return false, 0
	}
	held, l.held, l.last = l.held, 0, now
	return true, held
}
