package ingest

import (
	"context"
	"sync"
	"time"
)

// budget bounds the bytes a copy holds for requests not yet answered. A
// request larger than the whole budget is admitted alone (when nothing else
// is held), so it cannot wait forever.
type budget struct {
	mu    sync.Mutex
	used  int64
	max   int64
	space chan struct{} // closed and replaced when bytes are freed
}

func newBudget(max int64) *budget { return &budget{max: max, space: make(chan struct{})} }

// acquire takes n bytes, waiting up to wait for room; false if none came.
func (b *budget) acquire(ctx context.Context, n int64, wait time.Duration) bool {
	var deadline <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.max || b.used == 0 {
			b.used += n
			b.mu.Unlock()
			return true
		}
		space := b.space
		b.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-space:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.space)
	b.space = make(chan struct{})
	b.mu.Unlock()
}

// inUse is the bytes held now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
