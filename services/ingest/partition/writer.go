package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
)

// Errors of the partition writer; the service maps them to codes.
var (
	// ErrFenced: the writer lost its lease (another ingest copy took the
	// partition, or recovery fenced its ledger). It stops for good; the
	// caller drops it and routes to the new owner.
	ErrFenced = errors.New("partition: writer fenced: partition moved to another writer")
	// ErrBusy: MaxBufferedBytes stayed full for QueueWait. Backpressure:
	// retry after a delay.
	ErrBusy = errors.New("partition: writer busy")
	// ErrUnavailable: the writer is replacing a failed ledger (or closing).
	// The append's outcome is unknown when it had been accepted: retry
	// (with an idempotent producer, a retry is deduplicated).
	ErrUnavailable = errors.New("partition: writer unavailable")
	// ErrClosed: the writer was closed.
	ErrClosed = errors.New("partition: writer closed")
)

// Ledger is an open ledger as the writer uses it (bookkeeper/client's
// ledger writer): entries appended in order, acknowledged in order.
type Ledger interface {
	ID() catalog.LedgerID
	// AppendAsync sends payload as the next entry; done runs once, in entry
	// order, when the entry is durable on an ack quorum or failed — never
	// on the caller's goroutine before AppendAsync returned (the writer
	// calls it holding its lock, which done takes).
	AppendAsync(payload []byte, done func(entry int64, err error)) error
	// Close seals the ledger once its pending entries settled, recording
	// lastOffset (the offset of its last record).
	Close(ctx context.Context, lastOffset int64) (catalog.LedgerMetadata, error)
}

// Ledgers is what the writer needs of the ledger client and the catalog.
type Ledgers interface {
	CreateLedger(ctx context.Context, spec catalog.LedgerSpec) (Ledger, error)
	// Recover closes a ledger whose writer is gone (fence + recovery) and
	// returns its sealed metadata; lastOffset derives the offset of its last
	// record from its last entry's payload.
	Recover(ctx context.Context, id catalog.LedgerID, lastOffset func(lastEntry int64, payload []byte) (int64, error)) (catalog.LedgerMetadata, error)
	// ReadEntries returns the payloads of entries first..last of a sealed
	// ledger.
	ReadEntries(ctx context.Context, id catalog.LedgerID, first, last int64) ([][]byte, error)
}

// Chain is the catalog's writer interface, fenced by the lease.
type Chain interface {
	AppendLedger(ctx context.Context, lease catalog.WriterLease, ref catalog.LedgerRef) (catalog.Partition, error)
	ReleaseWriter(ctx context.Context, lease catalog.WriterLease) error
}

// Appended is where an appended batch landed.
type Appended struct {
	BaseOffset, LastOffset int64
	// Duplicate: an idempotent producer's retry of a batch already
	// accepted; the offsets are the original's and nothing was written.
	Duplicate bool
}

// Writer is the single writer of one partition under one lease: it packs
// batches into ledger entries, gives them offsets, answers each append once
// its entry is durable on an ack quorum, and rolls to a new ledger by size
// and age or when a ledger fails.
//
// Goroutines: Open starts one maintenance goroutine (ledger replacement and
// roll-over, which call the catalog and bookies); Close stops and waits for
// it. Ledger callbacks run on the ledger client's goroutine and take mu.
type Writer struct {
	cfg    Config
	log    *slog.Logger
	lease  catalog.WriterLease
	spec   catalog.LedgerSpec // template for new ledgers
	ledgrs Ledgers
	chain  Chain

	mu sync.Mutex
	// next is the offset the next accepted batch gets.
	next int64
	// ledger is the ledger being written (nil while replacing it);
	// ledgerFirst its first offset; ledgerBytes, ledgerBorn for roll-over.
	ledger      Ledger
	ledgerFirst int64
	ledgerBytes int64
	ledgerBorn  time.Time
	// lastSent is the last offset of the last entry sent to ledger.
	lastSent int64
	// queue holds entries not yet sent; the last one may still be filling.
	queue []*entry
	// inflight are entries sent and not yet acknowledged, in entry order.
	inflight []*entry
	buffered int64
	// space is closed and replaced whenever buffered bytes are freed.
	space chan struct{}
	state state
	err   error // why the writer stopped (stateFenced, stateClosed)
	// lingerArmed: a linger timer is pending for the filling entry.
	lingerArmed bool
	// producers is the idempotent producers' state; byBase finds the
	// waiter of a pending batch by its base offset (a retry of a batch in
	// flight is attached to it).
	producers *dedup.State
	byBase    map[int64]*waiter

	kick chan struct{} // wakes the maintenance goroutine
	stop chan struct{}
	done chan struct{}
}

type state uint8

const (
	stateOpen      state = iota // appending to ledger
	stateRolling                // draining ledger before closing it; new batches queue
	stateReplacing              // ledger failed or drained: maintenance is replacing it
	stateFenced
	stateClosed
)

// entry is one ledger entry: batches back to back.
type entry struct {
	buf     []byte
	waiters []*waiter
	last    int64 // offset of the last record in it
	sealed  bool
}

type waiter struct {
	res  Appended
	err  error
	done chan struct{}
}

// Appended.Duplicate marks a retry answered with the original offsets.

// Open starts the writer of p under lease, which the caller just acquired
// (AcquireWriter): it recovers the chain's tail ledger if its writer left it
// open (fencing a previous writer still running), opens a new ledger at the
// next offset and appends it to the chain.
func Open(ctx context.Context, cfg Config, ledgers Ledgers, chain Chain, p catalog.Partition, lease catalog.WriterLease, repl catalog.Replication) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	w := &Writer{
		cfg: cfg, log: cfg.Logger.With(slog.String("topic", lease.Topic), slog.Int("partition", lease.Partition), slog.Int64("epoch", lease.Epoch)),
		lease: lease, ledgrs: ledgers, chain: chain,
		spec: catalog.LedgerSpec{
			Topic: lease.Topic, TopicID: lease.TopicID, Partition: lease.Partition, Replication: repl,
			WriterOwner: lease.Owner, WriterEpoch: lease.Epoch,
		},
		space:  make(chan struct{}),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		state:  stateReplacing,
		byBase: make(map[int64]*waiter),
	}
	var err error
	if w.producers, err = dedup.New(cfg.Dedup); err != nil {
		return nil, err
	}
	next := p.LogStartOffset
	if n := len(p.Ledgers); n > 0 {
		tail := p.Ledgers[n-1]
		m, err := ledgers.Recover(ctx, tail.ID, lastOffsetOf)
		if err != nil {
			return nil, fmt.Errorf("recover tail ledger %d of %s/%d: %w", tail.ID, lease.Topic, lease.Partition, err)
		}
		next = m.LastOffset + 1
		if err := w.rebuild(ctx, p.Ledgers); err != nil {
			return nil, fmt.Errorf("rebuild producer state of %s/%d: %w", lease.Topic, lease.Partition, err)
		}
	}
	w.next, w.lastSent = next, next-1
	if err := w.openLedger(ctx); err != nil {
		return nil, err
	}
	go w.maintain()
	return w, nil
}

// rebuild feeds the idempotent producers' batches at the end of the chain
// (the last RebuildEntries entries, across ledgers) to the dedup state, so
// a producer's retry after a failover is still recognised.
func (w *Writer) rebuild(ctx context.Context, chain []catalog.LedgerRef) error {
	type span struct {
		id          catalog.LedgerID
		first, last int64
	}
	var spans []span
	budget := int64(w.cfg.RebuildEntries)
	for i := len(chain) - 1; i >= 0 && budget > 0; i-- {
		m, err := w.ledgrs.Recover(ctx, chain[i].ID, lastOffsetOf) // sealed: returns its metadata
		if err != nil {
			return err
		}
		if m.LastEntry < 0 {
			continue
		}
		first := max(0, m.LastEntry-budget+1)
		spans = append(spans, span{chain[i].ID, first, m.LastEntry})
		budget -= m.LastEntry - first + 1
	}
	now := w.cfg.Now()
	for i := len(spans) - 1; i >= 0; i-- {
		sp := spans[i]
		ents, err := w.ledgrs.ReadEntries(ctx, sp.id, sp.first, sp.last)
		if err != nil {
			return err
		}
		for _, e := range ents {
			for rest := e; len(rest) > 0; {
				b, r, err := record.Split(rest)
				if err != nil {
					return err
				}
				if b.ProducerID() != record.NoProducerID {
					if err := w.producers.Rebuild(dedup.HeaderOf(b), b.BaseOffset(), now); err != nil {
						return err
					}
				}
				rest = r
			}
		}
	}
	return nil
}

// lastOffsetOf is the offset of the last record in an entry's payload.
func lastOffsetOf(_ int64, payload []byte) (int64, error) { return record.EntryLastOffset(payload) }

// openLedger creates a ledger starting at the next unsent offset and
// appends it to the chain; then the writer is open.
func (w *Writer) openLedger(ctx context.Context) error {
	w.mu.Lock()
	spec := w.spec
	spec.FirstOffset = w.lastSent + 1
	w.mu.Unlock()
	l, err := w.ledgrs.CreateLedger(ctx, spec)
	if err != nil {
		return fmt.Errorf("create ledger: %w", err)
	}
	if _, err := w.chain.AppendLedger(ctx, w.lease, catalog.LedgerRef{ID: l.ID(), FirstOffset: spec.FirstOffset}); err != nil {
		// The created ledger is an orphan (never in the chain); the
		// compactor removes orphans. Close it so it holds nothing open.
		_, cerr := l.Close(ctx, spec.FirstOffset-1)
		if errors.Is(err, catalog.ErrFenced) || errors.Is(err, catalog.ErrNotFound) {
			return errors.Join(fmt.Errorf("%w: %w", ErrFenced, err), cerr)
		}
		return errors.Join(fmt.Errorf("append ledger %d to the chain: %w", l.ID(), err), cerr)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == stateClosed || w.state == stateFenced {
		// Closed or fenced meanwhile.
		return errors.Join(w.stoppedErr(), closeQuietly(l, spec.FirstOffset-1))
	}
	w.ledger, w.ledgerFirst, w.ledgerBytes, w.ledgerBorn = l, spec.FirstOffset, 0, w.cfg.Now()
	w.state = stateOpen
	w.log.Info("partition writer opened ledger", slog.Int64("ledger", int64(l.ID())), slog.Int64("first_offset", spec.FirstOffset))
	w.flushLocked(false)
	return nil
}

func closeQuietly(l Ledger, last int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCloseTimeout)
	defer cancel()
	_, err := l.Close(ctx, last)
	return err
}

func (w *Writer) stoppedErr() error {
	if w.err != nil {
		return w.err
	}
	return ErrClosed
}

// Append adds a validated batch (record.Validate passed) to the partition
// and returns where it landed once it is durable. The batch's base offset
// and partition leader epoch are set in place; the writer keeps batch until
// it is acknowledged, so the caller must not reuse it.
//
// If ctx ends after the batch was accepted, Append returns ctx's error and
// the batch may or may not be stored (an indeterminate outcome).
func (w *Writer) Append(ctx context.Context, batch []byte) (Appended, error) {
	p, err := w.Enqueue(ctx, batch)
	if err != nil {
		return Appended{}, err
	}
	return p.Wait(ctx)
}

// Pending is an accepted batch waiting for its entry to be acknowledged.
type Pending struct {
	wt  *waiter
	dup bool // a retry attached to the original batch
}

// Enqueue accepts a batch (giving it its offsets) and returns at once; Wait
// then waits for durability. Batches enqueued one after the other by one
// goroutine get increasing offsets in that order — what a pipelined stream
// needs to keep a producer's order. ctx bounds only the wait for buffer
// space.
func (w *Writer) Enqueue(ctx context.Context, batch []byte) (Pending, error) {
	return w.enqueue(ctx, batch)
}

// Wait returns where the batch landed once it is durable, or why it will
// not be acknowledged. If ctx ends first the outcome is unknown.
func (p Pending) Wait(ctx context.Context) (Appended, error) {
	select {
	case <-p.wt.done:
		res := p.wt.res
		res.Duplicate = res.Duplicate || p.dup
		return res, p.wt.err
	case <-ctx.Done():
		return Appended{}, context.Cause(ctx)
	}
}

func (w *Writer) enqueue(ctx context.Context, batch []byte) (Pending, error) {
	if len(batch) > MaxEntryBytesLimit {
		return Pending{}, fmt.Errorf("%w: batch of %d bytes exceeds the entry limit %d", record.ErrInvalid, len(batch), MaxEntryBytesLimit)
	}
	size := int64(len(batch))
	var deadline <-chan time.Time
	w.mu.Lock()
	for {
		switch w.state {
		case stateFenced, stateClosed:
			err := w.stoppedErr()
			w.mu.Unlock()
			return Pending{}, err
		case stateReplacing:
			// Offsets after a failed ledger are known only once its
			// recovery decided where it ends: refuse until then.
			w.mu.Unlock()
			return Pending{}, fmt.Errorf("%w: %s/%d is replacing a failed ledger", ErrUnavailable, w.lease.Topic, w.lease.Partition)
		}
		if w.buffered+size <= w.cfg.MaxBufferedBytes {
			break
		}
		space := w.space
		w.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(w.cfg.QueueWait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-space:
		case <-deadline:
			return Pending{}, fmt.Errorf("%w: %d bytes buffered for %s/%d", ErrBusy, w.cfg.MaxBufferedBytes, w.lease.Topic, w.lease.Partition)
		case <-ctx.Done():
			return Pending{}, context.Cause(ctx)
		}
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	b := record.Batch(batch)
	h := dedup.HeaderOf(b)
	now := w.cfg.Now()
	d, err := w.producers.Check(h, now)
	if err != nil {
		return Pending{}, err
	}
	sabotaged := sabotageDedup && d.Kind != dedup.Append
	if sabotaged {
		d.Kind = dedup.Append // chaos sabotage build only: write the retry again
	}
	switch d.Kind {
	case dedup.Duplicate:
		wt := &waiter{res: Appended{BaseOffset: d.BaseOffset, LastOffset: d.LastOffset, Duplicate: true}, done: make(chan struct{})}
		close(wt.done)
		return Pending{wt: wt}, nil
	case dedup.DuplicateInFlight:
		orig := w.byBase[d.BaseOffset]
		if orig == nil {
			return Pending{}, fmt.Errorf("%w: retry of a batch in flight at offset %d whose outcome is being decided", ErrUnavailable, d.BaseOffset)
		}
		return Pending{wt: orig, dup: true}, nil
	}
	base := w.next
	record.SetBaseOffset(batch, base)
	record.SetPartitionLeaderEpoch(batch, int32(w.lease.Epoch))
	w.next = b.NextOffset()
	w.buffered += size
	wt := &waiter{res: Appended{BaseOffset: base, LastOffset: b.LastOffset()}, done: make(chan struct{})}
	if h.ProducerID != dedup.NoProducerID && !sabotaged {
		w.producers.Pending(h, base, now)
		w.byBase[base] = wt
	}
	e := w.fillingLocked(len(batch))
	e.buf = append(e.buf, batch...)
	e.waiters = append(e.waiters, wt)
	e.last = wt.res.LastOffset
	if len(e.buf) >= w.cfg.MaxEntryBytes {
		e.sealed = true
	}
	w.flushLocked(false)
	return Pending{wt: wt}, nil
}

// fillingLocked returns the entry to put n more bytes in: the last queued
// one if it is not sealed and has room, else a new one.
func (w *Writer) fillingLocked(n int) *entry {
	if k := len(w.queue); k > 0 {
		e := w.queue[k-1]
		if !e.sealed && len(e.buf)+n <= w.cfg.MaxEntryBytes {
			return e
		}
		e.sealed = true
	}
	e := &entry{}
	w.queue = append(w.queue, e)
	return e
}

// flushLocked sends queued entries while the ledger is open and has room in
// flight. A filling entry is sent at once unless Linger asks to wait (then
// the linger timer, or lingerExpired, sends it).
func (w *Writer) flushLocked(lingerExpired bool) {
	for w.state == stateOpen && len(w.queue) > 0 && len(w.inflight) < w.cfg.MaxInFlightEntries {
		e := w.queue[0]
		if !e.sealed && w.cfg.Linger > 0 && !lingerExpired {
			if !w.lingerArmed {
				w.lingerArmed = true
				time.AfterFunc(w.cfg.Linger, func() {
					w.mu.Lock()
					w.lingerArmed = false
					w.flushLocked(true)
					w.mu.Unlock()
				})
			}
			return
		}
		e.sealed = true
		w.queue = w.queue[1:]
		w.inflight = append(w.inflight, e)
		w.lastSent = e.last
		w.ledgerBytes += int64(len(e.buf))
		l := w.ledger
		if err := l.AppendAsync(e.buf, func(_ int64, err error) { w.settled(l, e, err) }); err != nil {
			// The ledger refused at once (stopped, or over its own
			// in-flight bound, which MaxInFlightEntries keeps us under):
			// treat as a ledger failure.
			w.inflight = w.inflight[:len(w.inflight)-1]
			w.failLedgerLocked(l, err, e)
			return
		}
	}
	if w.state == stateOpen && (w.ledgerBytes >= w.cfg.RollBytes || w.cfg.Now().Sub(w.ledgerBorn) >= w.cfg.RollAge) {
		w.state = stateRolling
		w.wakeMaintenance()
	}
}

// settled is the ledger's answer for entry e (in entry order).
func (w *Writer) settled(l Ledger, e *entry, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l != w.ledger || len(w.inflight) == 0 || w.inflight[0] != e {
		// An answer from a ledger already given up; its waiters were
		// failed then.
		return
	}
	if err != nil {
		w.failLedgerLocked(l, err, nil)
		return
	}
	w.inflight = w.inflight[1:]
	w.producers.Commit(e.last)
	for _, wt := range e.waiters {
		delete(w.byBase, wt.res.BaseOffset)
		close(wt.done)
	}
	w.freeLocked(int64(len(e.buf)))
	switch w.state {
	case stateOpen:
		w.flushLocked(false)
	case stateRolling:
		if len(w.inflight) == 0 {
			w.wakeMaintenance()
		}
	}
}

func (w *Writer) freeLocked(n int64) {
	w.buffered -= n
	close(w.space)
	w.space = make(chan struct{})
}

// failLedgerLocked gives up on ledger l: every entry sent to it and not
// acknowledged, and every queued one, fails with an indeterminate outcome
// (some of them may survive the ledger's recovery, and an idempotent
// producer's retry is then deduplicated). also is an entry not in a list.
func (w *Writer) failLedgerLocked(l Ledger, cause error, also *entry) {
	stop := errors.Is(cause, ErrFenced)
	err := fmt.Errorf("%w: ledger %d failed: %w", ErrUnavailable, l.ID(), cause)
	if stop {
		err = fmt.Errorf("%w: ledger %d: %w", ErrFenced, l.ID(), cause)
	}
	failed := append(w.inflight, w.queue...)
	if also != nil {
		failed = append(failed, also)
	}
	var n int64
	for _, e := range failed {
		for _, wt := range e.waiters {
			wt.err = err
			close(wt.done)
		}
		n += int64(len(e.buf))
	}
	w.inflight, w.queue = nil, nil
	// The failed batches stay pending in the producers' state: recovery
	// decides which were stored (Commit) and which not (Abort).
	clear(w.byBase)
	w.freeLocked(n)
	w.log.Warn("partition writer ledger failed", slog.Int64("ledger", int64(l.ID())), slog.Int("entries_failed", len(failed)), slog.Any("err", cause))
	if stop {
		w.state, w.err = stateFenced, err
		return
	}
	w.state = stateReplacing
	w.wakeMaintenance()
}

func (w *Writer) wakeMaintenance() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// maintain replaces failed ledgers and rolls full ones, off the append path.
func (w *Writer) maintain() {
	defer close(w.done)
	backoff := 10 * time.Millisecond
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		}
		for {
			w.mu.Lock()
			st, l := w.state, w.ledger
			var last int64
			switch {
			case st == stateRolling && l != nil && len(w.inflight) == 0:
				// New batches keep queueing (their offsets follow
				// lastSent) while the ledger is sealed and the next opened.
				last = w.lastSent
				w.ledger = nil
			case st == stateRolling:
				l = nil // still draining, or already sealed (retrying the open)
			case st == stateReplacing && l != nil:
				w.ledger = nil
			}
			w.mu.Unlock()
			var err error
			ctx, cancel := context.WithTimeout(context.Background(), w.cfg.CloseTimeout)
			switch {
			case st == stateRolling && l != nil:
				if _, err = l.Close(ctx, last); err != nil {
					// Seal it the other way: recovery finds the same end
					// (every entry was acknowledged) and closes it.
					_, err = w.ledgrs.Recover(ctx, l.ID(), lastOffsetOf)
				}
				if err != nil {
					w.mu.Lock()
					w.ledger = l // retry the seal
					w.mu.Unlock()
				} else {
					err = w.openLedger(ctx)
				}
			case st == stateRolling:
				w.mu.Lock()
				drained := w.ledger == nil
				w.mu.Unlock()
				if drained {
					err = w.openLedger(ctx)
				}
			case st == stateReplacing:
				if l != nil {
					var m catalog.LedgerMetadata
					if m, err = w.ledgrs.Recover(ctx, l.ID(), lastOffsetOf); err == nil {
						w.mu.Lock()
						w.next, w.lastSent = m.LastOffset+1, m.LastOffset
						// Batches up to the recovered end are stored; the
						// rest never will be, so their retries are new.
						w.producers.Commit(m.LastOffset)
						w.producers.Abort(m.LastOffset + 1)
						w.mu.Unlock()
					} else {
						// Keep it for the retry: a new ledger must not
						// follow one whose end is not sealed (readers
						// could not tell where it ends).
						w.mu.Lock()
						w.ledger = l
						w.mu.Unlock()
					}
				}
				if err == nil {
					err = w.openLedger(ctx)
				}
			}
			cancel()
			if err == nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrClosed) {
				if err != nil {
					w.mu.Lock()
					if w.state != stateClosed {
						w.state, w.err = stateFenced, err
					}
					w.failQueuedLocked(err)
					w.mu.Unlock()
				}
				backoff = 10 * time.Millisecond
				break
			}
			w.log.Warn("partition writer could not replace its ledger; retrying", slog.Any("err", err), slog.Duration("backoff", backoff))
			select {
			case <-w.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

func (w *Writer) failQueuedLocked(err error) {
	var n int64
	for _, e := range w.queue {
		for _, wt := range e.waiters {
			wt.err = err
			close(wt.done)
		}
		n += int64(len(e.buf))
	}
	w.queue = nil
	w.freeLocked(n)
}

// NextOffset is the offset the next accepted batch gets (the partition's
// end offset as this writer sees it, acknowledged or not).
func (w *Writer) NextOffset() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Lease is the writer's lease.
func (w *Writer) Lease() catalog.WriterLease { return w.lease }

// Err is why the writer stopped, or nil while it runs.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == stateFenced || w.state == stateClosed {
		return w.stoppedErr()
	}
	return nil
}

// Close hands the partition over gracefully: no new appends, pending ones
// settle (up to CloseTimeout), the ledger is sealed, and the lease released
// so the next owner need not wait for it to expire or recover the ledger.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.state == stateClosed {
		w.mu.Unlock()
		return nil
	}
	fenced := w.state == stateFenced
	w.state, w.err = stateClosed, ErrClosed
	w.mu.Unlock()
	close(w.stop)
	<-w.done

	ctx, cancel := context.WithTimeout(ctx, w.cfg.CloseTimeout)
	defer cancel()
	// Wait for in-flight entries (queued ones are failed: they were never
	// sent).
	for {
		w.mu.Lock()
		if len(w.inflight) == 0 || w.ledger == nil {
			w.failQueuedLocked(ErrClosed)
			break
		}
		space := w.space
		w.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			w.mu.Lock()
			w.failQueuedLocked(ErrClosed)
			w.mu.Unlock()
			return fmt.Errorf("close %s/%d: pending entries did not settle: %w", w.lease.Topic, w.lease.Partition, ctx.Err())
		}
	}
	l, last, clean := w.ledger, w.lastSent, len(w.inflight) == 0
	w.mu.Unlock()
	if fenced {
		return nil
	}
	var errs []error
	if l != nil && clean {
		if _, err := l.Close(ctx, last); err != nil {
			errs = append(errs, fmt.Errorf("seal ledger %d: %w", l.ID(), err))
		}
	}
	if len(errs) == 0 {
		if err := w.chain.ReleaseWriter(ctx, w.lease); err != nil && !errors.Is(err, catalog.ErrFenced) {
			errs = append(errs, fmt.Errorf("release %v: %w", w.lease, err))
		}
	}
	return errors.Join(errs...)
}
