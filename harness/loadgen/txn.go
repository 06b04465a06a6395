package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// TxnBatcher is the part of a TransactionalDriver's producer that is the
// same for every system: messages go into the open transaction, every Size
// messages the transaction is committed on the sending goroutine, and the
// messages of a transaction complete (their done is called) once it
// committed or failed. Flush and Close may come from another goroutine
// than Send.
//
// A commit blocks the sending goroutine, as a Kafka producer's
// commitTransaction does: CommittingSince tells the run when the one in
// progress started, so that its rate search does not take that wait for
// a producer falling behind (see run.searchLag).
type TxnBatcher struct {
	Size int
	// Begin opens a transaction; Commit ends it (flushing what was sent)
	// and reports whether it committed — on failure the driver aborts it.
	Begin  func() error
	Commit func(ctx context.Context) error

	mu   sync.Mutex
	done []func(error)

	committing atomic.Pointer[time.Time] // the commit in progress's start; nil when none is
}

// CommittingSince returns when the commit in progress started (ok false
// when none is). Safe from any goroutine.
func (b *TxnBatcher) CommittingSince() (start time.Time, ok bool) {
	if t := b.committing.Load(); t != nil {
		return *t, true
	}
	return time.Time{}, false
}

// Send adds a message: send hands it to the system's producer.
func (b *TxnBatcher) Send(ctx context.Context, send func() error, done func(error)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.done) == 0 {
		if err := b.Begin(); err != nil {
			done(err)
			return
		}
	}
	if err := send(); err != nil {
		done(err)
		return
	}
	b.done = append(b.done, done)
	if len(b.done) >= b.Size {
		b.commitLocked(ctx)
	}
}

// Flush commits the open transaction, if any.
func (b *TxnBatcher) Flush(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.commitLocked(ctx)
}

func (b *TxnBatcher) commitLocked(ctx context.Context) {
	if len(b.done) == 0 {
		return
	}
	start := time.Now()
	b.committing.Store(&start)
	err := b.Commit(ctx)
	b.committing.Store(nil)
	for _, d := range b.done {
		d(err)
	}
	b.done = b.done[:0]
}
