package storage

import (
	"sync/atomic"
	"time"
)

// paceStep is how many frame bytes a paced flush writes between checks of
// its schedule: one entry log writeback chunk.
const paceStep = syncChunk

// paceIdle: a flush waits for its schedule only while adds arrive, that is
// while the last add is more recent than this.
const paceIdle = 100 * time.Millisecond

// flushPacer spreads one flush's entry log writes over a time span (see
// Options.MaxFlushSpread). It belongs to the flush that made it; hurry is
// closed when adds wait for buffer space or the storage closes, and from
// then on the flush writes at full speed.
type flushPacer struct {
	start  time.Time
	spread time.Duration
	total  int64
	next   int64 // written bytes at which the schedule is checked next
	hurry  <-chan struct{}
	// lastAdd is the storage's time of the last add (UnixNano).
	lastAdd *atomic.Int64
	slept   time.Duration
	hurried bool
}

// newPacer returns the pacer of a flush of buf that starts now, or nil
// when the flush goes at full speed: pacing off, or a buffer of at most
// one step (too small to hold up a journal fsync for long).
func (s *Storage) newPacer(buf *writeBuffer, now time.Time, hurry <-chan struct{}) *flushPacer {
	spread := min(now.Sub(buf.since)/2, s.opts.MaxFlushSpread)
	if s.opts.MaxFlushSpread < 0 || spread <= 0 || buf.bytes <= paceStep {
		return nil
	}
	return &flushPacer{start: now, spread: spread, total: buf.bytes, next: paceStep, hurry: hurry, lastAdd: &s.lastAdd}
}

// wait is called with the frame bytes written so far; at each step it
// sleeps until the schedule catches up, unless no add arrived lately
// (nobody to protect: shutdown, an idle checkpoint) or the flush was
// hurried.
func (p *flushPacer) wait(written int64) {
	if p == nil || written < p.next {
		return
	}
	p.next = written + paceStep
	select {
	case <-p.hurry:
		// Hurried before this check: adds blocked on buffer space stop
		// arriving, so the idle check below would return too, but the
		// flush is hurried, and says so.
		p.next, p.hurried = p.total+1, true
		return
	default:
	}
	if time.Since(time.Unix(0, p.lastAdd.Load())) > paceIdle {
		return
	}
	d := time.Until(p.start.Add(time.Duration(float64(p.spread) * float64(written) / float64(p.total))))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	began := time.Now()
	defer func() { p.slept += time.Since(began) }()
	select {
	case <-t.C:
	case <-p.hurry:
		p.next = p.total + 1 // never again
		p.hurried = true
	}
}

// report returns how long the flush waited for its schedule, the span of
// that schedule, and whether it was hurried (adds waited for buffer space,
// or the storage closed) while it had writes left: a wait cut short, or a
// check that found the hurry.
func (p *flushPacer) report() (paced, spread time.Duration, hurried bool) {
	if p == nil {
		return 0, 0, false
	}
	return p.slept, p.spread, p.hurried
}
