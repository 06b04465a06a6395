package client

import (
	"log/slog"
	"sync"
)

// lacPusher pushes a writer's LAC to one bookie (WriteLac), one call at a
// time, always the newest value; a goroutine runs only while there is
// something to push.
type lacPusher struct {
	mu      sync.Mutex
	want    int64
	sent    int64
	running bool
}

func (l *writerLoop) pushLac(bookie string, lac int64) {
	p := l.pushers[bookie]
	if p == nil {
		p = &lacPusher{want: -1, sent: -1}
		l.pushers[bookie] = p
	}
	p.mu.Lock()
	p.want = max(p.want, lac)
	start := !p.running
	p.running = true
	p.mu.Unlock()
	if start {
		l.wg.Add(1)
		go l.runPusher(bookie, p, l.adds.key)
	}
}

func (l *writerLoop) runPusher(bookie string, p *lacPusher, key []byte) {
	defer l.wg.Done()
	w := l.w
	for {
		p.mu.Lock()
		lac := p.want
		if lac <= p.sent || w.ctx.Err() != nil {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		// Fire and forget (no event goes back to the machine): a failure
		// only delays readers until the next add carries the LAC.
		if err := w.c.writeLac(w.ctx, w.id, bookie, key, lac); err != nil && w.ctx.Err() == nil {
			w.c.log.Debug("write lac failed", slog.Int64("ledger", int64(w.id)), slog.String("bookie", bookie), slog.Any("err", err))
		}
		p.mu.Lock()
		p.sent = max(p.sent, lac)
		p.mu.Unlock()
	}
}

// callbackQueue carries settled appends from the loop to the dispatcher
// without ever blocking the loop. Bounded by Writer.outstanding.
type callbackQueue struct {
	mu     sync.Mutex
	items  []callback
	closed bool
	wake   chan struct{} // capacity 1
}

type callback struct {
	fn    func(int64, error)
	entry int64
	err   error
}

func newCallbackQueue() *callbackQueue { return &callbackQueue{wake: make(chan struct{}, 1)} }

func (q *callbackQueue) push(cb callback) {
	q.mu.Lock()
	q.items = append(q.items, cb)
	q.mu.Unlock()
	q.signal()
}

func (q *callbackQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *callbackQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// dispatch runs callbacks in order until the queue is closed and empty.
func (w *Writer) dispatch(wg *sync.WaitGroup) {
	defer wg.Done()
	q := w.cbs
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		for _, cb := range items {
			w.release()
			cb.fn(cb.entry, cb.err)
		}
		if len(items) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.wake
	}
}
