package client

import (
	"sync"
)

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
