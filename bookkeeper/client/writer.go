package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

type writerState uint8

const (
	writerOpen    writerState = iota + 1 // takes appends
	writerClosing                        // Close asked; settling
	writerDone                           // the loop finished: sealed, stopped or aborted
)

// Writer appends entries to one ledger it created, and seals it. Its
// methods are safe for concurrent use.
//
// One goroutine (the loop, writerLoop) owns the ledger.Writer state
// machine and everything it drives: the AddEntries streams, the timers,
// the catalog calls of ensemble changes and the seal. Appends reach it
// through a channel; callbacks leave it through a queue that one dispatcher
// goroutine runs, in entry order, so a slow callback never stalls the
// protocol.
type Writer struct {
	c           *Client
	id          catalog.LedgerID
	firstOffset int64
	maxInFlight int
	maxEntry    int

	// ctx is the writer's lifetime: cancelled (with a cause) by Abort, by
	// Close when its context ends, by Client.Close, and by the loop when it
	// finishes.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// mu guards the fields below. Leaf lock: held only to check and update
	// them and to put a request on reqs, which never blocks (its capacity
	// covers every request mu lets in).
	mu    sync.Mutex
	state writerState
	// err is what appends get once the loop finished (ledger.ErrClosed
	// after a seal, else why the writer stopped).
	err error
	// outstanding counts appends accepted and not yet handed to their
	// callback. Invariant: <= maxInFlight, so the machine (whose pending
	// entries are a subset) never refuses an append with ErrInFlightLimit,
	// and the callback queue stays bounded.
	outstanding int
	// space is closed and replaced when outstanding drops.
	space chan struct{}
	// announce makes the close known to the bookies once (announceClose).
	announce sync.Once
	// reqs carries appends and the close request to the loop, in order.
	// Capacity maxInFlight+1.
	reqs chan writerReq

	meta atomic.Pointer[catalog.LedgerMetadata]
	lac  atomic.Int64

	cbs *callbackQueue

	// finished is closed once every goroutine of the writer exited; result
	// is written before.
	finished chan struct{}
	result   closeResult
}

type writerReq struct {
	payload    []byte
	done       func(entry int64, err error)
	span       trace.Span // the append's span, nil when not traced
	close      bool
	lastOffset int64
}

type closeResult struct {
	meta catalog.LedgerMetadata
	err  error
}

// CreateLedger creates a ledger in the catalog and returns its Writer. When
// spec.Ensemble is empty the client picks E live, writable bookies from the
// registry (see registry.pick: spread over this client's ledgers, then by
// free space, at random among equals). The replication must be valid for
// the state machines (E >= Qw >= Qa >= 1).
func (c *Client) CreateLedger(ctx context.Context, spec catalog.LedgerSpec) (*Writer, error) {
	ctx, leave, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	cfg := c.cfg.ledgerConfig(spec.Replication)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if len(spec.Ensemble) == 0 {
		ens, err := c.bookies.pick(ctx, spec.Replication.Ensemble, nil)
		if err != nil {
			return nil, fmt.Errorf("create ledger: pick ensemble: %w", err)
		}
		spec.Ensemble = ens
	}
	lw, err := ledger.NewWriter(cfg, spec.Ensemble)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CatalogTimeout)
	m, err := c.cfg.Ledgers.CreateLedger(cctx, spec)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	c.stats.ledgersCreated.Add(1)
	w := &Writer{
		c: c, id: m.ID, firstOffset: m.FirstOffset,
		maxInFlight: c.cfg.MaxInFlight, maxEntry: c.cfg.MaxEntryBytes,
		state:    writerOpen,
		space:    make(chan struct{}),
		reqs:     make(chan writerReq, c.cfg.MaxInFlight+1),
		cbs:      newCallbackQueue(),
		finished: make(chan struct{}),
	}
	w.meta.Store(&m)
	w.lac.Store(-1)
	w.ctx, w.cancel = context.WithCancelCause(c.ctx)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		w.cancel(ErrClientClosed)
		return nil, ErrClientClosed // the ledger stays OPEN and empty; recovery closes it
	}
	c.wg.Add(1)
	c.mu.Unlock()
	c.log.Debug("ledger created", slog.Int64("ledger", int64(m.ID)), slog.Any("ensemble", spec.Ensemble))
	go w.run(lw, m)
	return w, nil
}

// ID is the ledger's id.
func (w *Writer) ID() catalog.LedgerID { return w.id }

// LeavingBookies returns the bookies of the ledger's segments that the
// registry says are draining (being decommissioned) or no longer lists
// (down longer than their registration lasts), from a listing at most
// RegistryRefreshInterval old. Its new entries avoid them (they refuse or
// fail adds, so the writer replaces them); the copies of its earlier
// entries are moved or rebuilt only once it is sealed, so its user rolls
// over to a new ledger.
func (w *Writer) LeavingBookies(ctx context.Context) ([]string, error) {
	var ids []string
	for _, seg := range w.Metadata().Ensembles {
		ids = append(ids, seg.Bookies...)
	}
	return w.c.bookies.leavingOf(ctx, ids)
}

// Metadata is the ledger's catalog record as the writer last stored or read
// it.
func (w *Writer) Metadata() catalog.LedgerMetadata { return *w.meta.Load() }

// LAC is the last entry acknowledged, or -1.
func (w *Writer) LAC() int64 { return w.lac.Load() }

// AppendAsync sends payload as the ledger's next entry and returns at once.
// done runs exactly once per accepted append, on the writer's callback
// goroutine, in entry order: with the entry id once Qa bookies stored it
// durably, or with an error — then the entry's outcome is unknown (see
// ledger.ErrFenced): it may still be found by recovery. The writer keeps
// payload until done runs; do not modify it.
//
// Errors (done is not called): ledger.ErrInFlightLimit (MaxInFlight
// appends await their callback: backpressure, retry once some completed),
// ledger.ErrEntryTooLarge, ledger.ErrClosed (Close was called), or why
// the writer stopped (ledger.ErrFenced, ledger.ErrTooManyEnsembleChanges,
// ErrAborted, ErrClientClosed, ...).
//
// done must not call Close or Abort, nor wait for anything that waits for
// them: Close waits for every callback to return.
func (w *Writer) AppendAsync(payload []byte, done func(entry int64, err error)) error {
	return w.AppendAsyncContext(context.Background(), payload, done)
}

// AppendAsyncContext is AppendAsync within the caller's trace: when ctx
// carries a span and the client has a tracer, the append gets a span
// (SpanAdd), a child of ctx's, from here to its acknowledgement or
// failure, whose context goes with the entry to the bookies. ctx is used
// for nothing else: it does not bound the append.
func (w *Writer) AppendAsyncContext(ctx context.Context, payload []byte, done func(entry int64, err error)) error {
	if done == nil {
		return fmt.Errorf("append to ledger %d: %w: nil callback", w.id, ErrInvalidArgument)
	}
	if len(payload) > w.maxEntry {
		return fmt.Errorf("append to ledger %d: %w: %d bytes, limit %d", w.id, ledger.ErrEntryTooLarge, len(payload), w.maxEntry)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case writerClosing:
		return fmt.Errorf("append to ledger %d: %w", w.id, ledger.ErrClosed)
	case writerDone:
		return fmt.Errorf("append to ledger %d: %w", w.id, w.err)
	}
	if w.outstanding >= w.maxInFlight {
		return fmt.Errorf("append to ledger %d: %w: %d appends await their callback", w.id, ledger.ErrInFlightLimit, w.outstanding)
	}
	w.outstanding++
	span := w.c.meters.startAdd(ctx, w.id, len(payload))          // nil unless traced
	w.reqs <- writerReq{payload: payload, done: done, span: span} // never blocks: see reqs
	return nil
}

// Append appends payload and waits until it is acknowledged, returning its
// entry id. While MaxInFlight appends are outstanding it waits for room.
// If ctx ends first the entry's outcome is unknown: it may still be
// acknowledged. A traced ctx traces the append (AppendAsyncContext).
func (w *Writer) Append(ctx context.Context, payload []byte) (int64, error) {
	type result struct {
		entry int64
		err   error
	}
	ch := make(chan result, 1)
	for {
		w.mu.Lock()
		space := w.space
		w.mu.Unlock()
		err := w.AppendAsyncContext(ctx, payload, func(entry int64, err error) { ch <- result{entry, err} })
		if err == nil {
			break
		}
		if !errors.Is(err, ledger.ErrInFlightLimit) {
			return -1, err
		}
		select {
		case <-space:
		case <-ctx.Done():
			return -1, fmt.Errorf("append to ledger %d: waiting for room: %w", w.id, ctx.Err())
		}
	}
	select {
	case r := <-ch:
		return r.entry, r.err
	case <-ctx.Done():
		return -1, fmt.Errorf("append to ledger %d: outcome unknown: %w", w.id, ctx.Err())
	}
}

// Close seals the ledger: it stops taking appends, waits until every
// pending append settled (and its callback returned), then stores the
// ledger CLOSED at the last acknowledged entry with compare-and-set (OPEN →
// CLOSED), recording lastOffset — the caller's offset of the last record in
// the ledger; ignored for an empty ledger, which gets FirstOffset-1. It
// returns the sealed metadata. Every goroutine of the writer has exited
// when Close returns.
//
// If the catalog says the ledger is no longer OPEN (a recovery began) the
// error is ledger.ErrFenced: the recovery decides the end. If the writer
// had already stopped, Close returns why. If ctx ends first the writer is
// aborted (the ledger is left OPEN, or sealed if the catalog write had
// landed) and Close returns ctx's error. Calling Close again returns the
// same result.
func (w *Writer) Close(ctx context.Context, lastOffset int64) (catalog.LedgerMetadata, error) {
	if lastOffset < w.firstOffset-1 {
		return catalog.LedgerMetadata{}, fmt.Errorf("close ledger %d: %w: last offset %d is below first offset %d - 1",
			w.id, ErrInvalidArgument, lastOffset, w.firstOffset)
	}
	w.mu.Lock()
	if w.state == writerOpen {
		w.state = writerClosing
		w.reqs <- writerReq{close: true, lastOffset: lastOffset} // never blocks: see reqs
	}
	w.mu.Unlock()
	select {
	case <-w.finished:
	case <-ctx.Done():
		w.cancel(fmt.Errorf("close ledger %d: %w", w.id, ctx.Err()))
		<-w.finished
	}
	if w.result.err == nil && w.result.meta.State.Sealed() {
		w.announce.Do(func() { w.c.announceClose(ctx, w.result.meta) })
	}
	return w.result.meta, w.result.err
}

// Abort stops the writer without sealing the ledger: pending appends fail
// with ErrAborted (outcome unknown) and the ledger stays OPEN until someone
// recovers it. It waits for the writer's goroutines to exit.
func (w *Writer) Abort() {
	w.cancel(ErrAborted)
	<-w.finished
}

// release hands one callback back: outstanding drops and waiters wake.
func (w *Writer) release() {
	w.mu.Lock()
	w.outstanding--
	close(w.space)
	w.space = make(chan struct{})
	w.mu.Unlock()
}

// writerLoop is the writer's loop goroutine state. Only that goroutine
// touches it.
type writerLoop struct {
	w    *Writer
	lw   *ledger.Writer
	meta catalog.LedgerMetadata // the catalog record as last stored or read
	adds *addSet
	// wg counts the writer's goroutines other than the loop: catalog
	// operations and the callback dispatcher (its streams are the
	// client's, shared).
	wg sync.WaitGroup

	// waiting are the callbacks of the machine's pending entries, in entry
	// order (waiting[i] is entry LAC+1+i).
	waiting []waitingAppend

	lastOffset int64
	// op carries the result of the catalog operation in flight (at most
	// one: the machine never asks for a seal during an ensemble change).
	op        chan opResult
	opRunning bool
	// change is the ensemble change in flight (its failed bookies) and
	// why each failed, for sluice.ledger.ensemble_changes.
	change        []string
	changeReasons []string
	// retry delays reporting a failed ensemble change, so retries are
	// spaced by the backoff rather than by ticks.
	retry    *time.Timer
	retryErr error
	failures int
	// relac delays pushing the LAC again to bookies whose stream broke
	// after a push (addSet.relacDue), backing off while they stay down.
	relac      *time.Timer
	relacTries int

	finished bool
	result   closeResult
}

type waitingAppend struct {
	entry int64
	done  func(int64, error)
	start time.Time    // when the writer took it
	bytes int          // payload size
	acks  []bookieTime // answers so far, in arrival order (for the slow-add log)
	span  trace.Span   // nil when not traced
	trace []byte       // Add.trace_context of its adds: span's context, when sampled
}

// bookieTime is when a bookie answered an add, after the writer took it.
type bookieTime struct {
	bookie string
	after  time.Duration
	failed bool
}

type opKind uint8

const (
	opEnsemble opKind = iota + 1
	opSeal
)

type opResult struct {
	kind opKind
	ev   ledger.Event            // opEnsemble: BookieReplaced, EnsembleChangeFailed or Stop
	meta *catalog.LedgerMetadata // the record stored or read, if any
	err  error                   // opSeal
}

func (w *Writer) run(lw *ledger.Writer, m catalog.LedgerMetadata) {
	defer w.c.wg.Done()
	l := &writerLoop{w: w, lw: lw, meta: m, op: make(chan opResult, 1)}
	l.adds = newAddSet(w.c, m, w.ctx, &l.wg, true)
	l.wg.Add(1)
	go w.dispatch(&l.wg)
	// The ticker runs only while there is something to time: it stops
	// after quietTicks ticks without any event once nothing is pending (the
	// machine has pushed its LAC by then), and restarts with the next
	// event, so idle writers cost no wake-ups.
	interval := w.c.cfg.TickInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	ticking, quiet := true, 0
	wake := func() {
		quiet = 0
		if !ticking {
			tick.Reset(interval)
			ticking = true
		}
	}
	stop := w.ctx.Done()
	for !l.finished {
		var retryC, relacC <-chan time.Time
		if l.retry != nil {
			retryC = l.retry.C
		}
		if l.relac != nil {
			relacC = l.relac.C
		}
		select {
		case r := <-w.reqs:
			wake()
			l.request(r)
		case <-l.adds.in.wake:
			wake()
			evs := l.adds.answerAll()
			l.noteAnswers(evs)
			for _, ev := range evs {
				if _, ok := ev.(ledger.AddAcked); ok {
					l.relacTries = 0 // a stream works again
					break
				}
			}
			l.stepAll(evs)
			l.scheduleRelac()
		case <-relacC:
			l.relac = nil
			if !l.finished {
				// The LAC the machine acknowledged up to: every add after
				// it carries it anyway.
				l.adds.repushLac(w.lac.Load())
			}
		case res := <-l.op:
			wake()
			l.opDone(res)
		case <-retryC:
			wake()
			l.retry = nil
			l.step(ledger.EnsembleChangeFailed{Err: l.retryErr})
		case <-tick.C:
			l.stepAll(l.adds.timeouts(w.c.cfg.Now()))
			l.step(ledger.Tick{})
			if quiet++; quiet >= quietTicks && l.lw.Pending() == 0 && !l.adds.busy() && !l.opRunning && l.retry == nil {
				tick.Stop()
				ticking = false
			}
		case <-stop:
			stop = nil // a seal in flight finishes (its context ended too)
			l.step(ledger.Stop{Err: context.Cause(w.ctx)})
		}
	}
	l.teardown()
}

// scheduleRelac arms the timer that pushes the LAC again to bookies whose
// stream broke after a push (a bookie restarted while the ledger was idle
// would otherwise keep a LAC one entry short until the next add, and a
// reader asking only such bookies would see a short end). The delay starts
// at RetryBackoff and doubles up to maxRelacDelay while pushes keep
// failing; an add answered resets it.
func (l *writerLoop) scheduleRelac() {
	if l.relac != nil || l.finished || !l.adds.relacDue() {
		return
	}
	d := l.w.c.cfg.RetryBackoff << min(l.relacTries, 10)
	l.relac = time.NewTimer(min(d, maxRelacDelay))
	l.relacTries++
}

// maxRelacDelay bounds the delay between pushes of the LAC to a bookie
// whose stream keeps breaking: the time a reader asking only restarted
// bookies may see a short end, at worst.
const maxRelacDelay = 2 * time.Second

// quietTicks is how many ticks without events an idle writer's ticker
// runs: the machine pushes its LAC on the first tick of an interval
// without adds, at most the second after the last event.
const quietTicks = 3

func (l *writerLoop) request(r writerReq) {
	if r.close {
		l.lastOffset = r.lastOffset
		acts, err := l.lw.Step(ledger.Close{})
		if err != nil {
			l.finish(closeResult{err: fmt.Errorf("close ledger %d: %w", l.w.id, err)})
			return
		}
		l.do(acts)
		return
	}
	entry := l.lw.NextEntry()
	acts, err := l.lw.Step(ledger.Append{Payload: r.payload})
	if err != nil {
		// The machine stopped meanwhile (the loop then finishes) — never
		// ErrInFlightLimit: outstanding bounds pending.
		err = fmt.Errorf("append to ledger %d: %w", l.w.id, err)
		endSpan(r.span, err)
		l.w.c.meters.addFailed.Add(1)
		l.w.cbs.push(callback{fn: r.done, entry: -1, err: err})
		return
	}
	wa := waitingAppend{entry: entry, done: r.done, start: l.w.c.cfg.Now(), bytes: len(r.payload), span: r.span}
	if r.span != nil {
		r.span.SetAttributes(attrEntry.Int64(entry))
		wa.trace = traceContext(r.span)
	}
	l.waiting = append(l.waiting, wa)
	l.do(acts)
}

func (l *writerLoop) stepAll(evs []ledger.Event) {
	for _, ev := range evs {
		l.step(ev)
	}
}

// step feeds the machine. A refused event is a bug in this wrapper (the
// machine's state is unchanged, but the wrapper's view is wrong): crash.
func (l *writerLoop) step(ev ledger.Event) {
	if l.finished {
		return
	}
	acts, err := l.lw.Step(ev)
	if err != nil {
		panic(fmt.Sprintf("ledger client: writer of ledger %d refused %v: %v", l.w.id, ev, err))
	}
	l.do(acts)
}

func (l *writerLoop) do(acts []ledger.Action) {
	w := l.w
	for _, a := range acts {
		switch a := a.(type) {
		case ledger.SendAdd:
			l.adds.send(a, l.traceOf(a.Entry))
		case ledger.SendWriteLac:
			l.adds.pushLac(a.Bookie, a.LAC)
		case ledger.Acknowledge:
			w.lac.Store(a.Entry)
			l.settle(a.Entry, nil)
		case ledger.FailAppend:
			l.settle(a.Entry, fmt.Errorf("append to ledger %d: %w", w.id, a.Err))
		case ledger.EnsembleChangeNeeded:
			l.change, l.changeReasons = a.Failed, make([]string, len(a.Failed))
			for i, b := range a.Failed {
				l.changeReasons[i] = l.adds.failReason(b)
			}
			m := l.meta
			l.startOp(func(ctx context.Context) opResult { return l.changeEnsemble(ctx, m, a) })
		case ledger.CloseLedger:
			m, lastOffset := l.meta, l.lastOffset
			l.startOp(func(ctx context.Context) opResult {
				out, err := w.c.seal(ctx, m, a.LastEntry, lastOffset)
				return opResult{kind: opSeal, meta: &out, err: err}
			})
		case ledger.Stopped:
			if !errors.Is(a.Err, ErrAborted) && !errors.Is(a.Err, ErrClientClosed) {
				w.c.log.Warn("ledger writer stopped", slog.Int64("ledger", int64(w.id)), slog.Any("err", a.Err))
			}
			l.finish(closeResult{err: fmt.Errorf("ledger %d writer stopped: %w", w.id, a.Err)})
		default:
			panic(fmt.Sprintf("ledger client: unexpected writer action %v", a))
		}
	}
}

// traceOf is the trace context the adds of a pending entry carry (nil
// when it is not traced).
func (l *writerLoop) traceOf(entry int64) []byte {
	if len(l.waiting) == 0 {
		return nil
	}
	if i := entry - l.waiting[0].entry; i >= 0 && i < int64(len(l.waiting)) {
		return l.waiting[i].trace
	}
	return nil
}

// settle hands entry's outcome to its callback (entries settle in order).
func (l *writerLoop) settle(entry int64, err error) {
	if len(l.waiting) == 0 || l.waiting[0].entry != entry {
		panic(fmt.Sprintf("ledger client: ledger %d settled entry %d out of order", l.w.id, entry))
	}
	wa := l.waiting[0]
	l.waiting[0] = waitingAppend{}
	l.waiting = l.waiting[1:]
	c := l.w.c
	if err == nil {
		c.slow.note(c, int64(l.w.id), &wa)
		c.meters.acked(c.cfg.Now().Sub(wa.start), wa.bytes)
	} else {
		c.meters.addFailed.Add(1)
	}
	endSpan(wa.span, err)
	l.w.cbs.push(callback{fn: wa.done, entry: entry, err: err})
}

// noteAnswers records when each bookie answered a waiting append.
func (l *writerLoop) noteAnswers(evs []ledger.Event) {
	if len(l.waiting) == 0 {
		return
	}
	now := l.w.c.cfg.Now()
	first := l.waiting[0].entry
	for _, ev := range evs {
		var bt bookieTime
		var entry int64
		switch e := ev.(type) {
		case ledger.AddAcked:
			bt, entry = bookieTime{bookie: e.Bookie}, e.Entry
		case ledger.AddFailed:
			bt, entry = bookieTime{bookie: e.Bookie, failed: true}, e.Entry
		default:
			continue
		}
		if i := entry - first; i >= 0 && i < int64(len(l.waiting)) {
			wa := &l.waiting[i]
			if wa.span != nil {
				noteAnswer(wa.span, ev)
			}
			if len(wa.acks) < maxNotedAnswers {
				bt.after = now.Sub(wa.start)
				wa.acks = append(wa.acks, bt)
			}
		}
	}
}

// maxNotedAnswers bounds the answers kept per waiting append (an
// ensemble change resends it to new bookies).
const maxNotedAnswers = 8

func (l *writerLoop) startOp(f func(context.Context) opResult) {
	if l.opRunning {
		panic("ledger client: two catalog operations in flight")
	}
	l.opRunning = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.op <- f(l.w.ctx) // capacity 1, one op at a time: never blocks
	}()
}

func (l *writerLoop) opDone(res opResult) {
	l.opRunning = false
	if res.meta != nil && res.meta.Version > l.meta.Version {
		l.meta = *res.meta
		l.w.meta.Store(res.meta)
	}
	switch res.kind {
	case opSeal:
		if res.err == nil {
			l.w.c.stats.ledgersClosed.Add(1)
			l.finish(closeResult{meta: *res.meta})
		} else {
			l.finish(closeResult{err: res.err})
		}
	case opEnsemble:
		l.countChange(res.ev)
		if f, ok := res.ev.(ledger.EnsembleChangeFailed); ok {
			d := l.w.c.cfg.backoff(l.failures)
			l.w.c.stats.ensembleChangeFailures.Add(1)
			// A state, not an event per attempt: with no spare bookie
			// (three bookies, one down) every writer retries for as long
			// as it lasts. The first failure of a run is a warning, the
			// retries are debug lines, the end of the run is noted.
			level := slog.LevelDebug
			if l.failures == 0 {
				level = slog.LevelWarn
			}
			l.failures++
			l.w.c.log.Log(l.w.ctx, level, "ensemble change failed; retrying until a bookie can take the place (later failures of this ledger at debug level)",
				slog.Int64("ledger", int64(l.w.id)), slog.Int("attempt", l.failures), slog.Duration("backoff", d), slog.Any("err", f.Err))
			l.retry, l.retryErr = time.NewTimer(d), f.Err
			return
		}
		if _, ok := res.ev.(ledger.BookieReplaced); ok {
			if l.failures > 0 {
				l.w.c.log.Info("ensemble change done after failures", slog.Int64("ledger", int64(l.w.id)), slog.Int("failed_attempts", l.failures))
			}
			l.failures = 0
		}
		l.step(res.ev)
	}
}

// countChange counts an ensemble change's outcome per bookie it was to
// replace, by the reason that bookie failed.
func (l *writerLoop) countChange(ev ledger.Event) {
	ms := l.w.c.meters
	switch e := ev.(type) {
	case ledger.EnsembleChangeFailed:
		for _, r := range l.changeReasons {
			ms.ensembleChange(r, resultFailed)
		}
	case ledger.BookieReplaced:
		for i, b := range l.change {
			result := resultReplaced
			if slices.Contains(e.Rejoined, b) {
				result = resultRejoined
			}
			ms.ensembleChange(l.changeReasons[i], result)
		}
	}
}

func (l *writerLoop) finish(r closeResult) {
	l.finished = true
	l.result = r
}

// teardown runs once the loop finished: refuse appends, fail the queued
// ones, end every goroutine and wait for them.
func (l *writerLoop) teardown() {
	w := l.w
	if l.relac != nil {
		l.relac.Stop()
	}
	errAfter := l.result.err
	if errAfter == nil {
		errAfter = ledger.ErrClosed
	}
	w.mu.Lock()
	w.state = writerDone
	w.err = errAfter
	w.mu.Unlock()
drain:
	for {
		select {
		case r := <-w.reqs:
			if !r.close {
				err := fmt.Errorf("append to ledger %d: %w", w.id, errAfter)
				endSpan(r.span, err)
				w.c.meters.addFailed.Add(1)
				w.cbs.push(callback{fn: r.done, entry: -1, err: err})
			}
		default:
			break drain
		}
	}
	for _, wa := range l.waiting { // empty: a machine that stops fails its pending entries first
		err := fmt.Errorf("append to ledger %d: %w", w.id, errAfter)
		endSpan(wa.span, err)
		w.c.meters.addFailed.Add(1)
		w.cbs.push(callback{fn: wa.done, entry: wa.entry, err: err})
	}
	l.waiting = nil
	if l.retry != nil {
		l.retry.Stop()
	}
	if l.result.err == nil {
		// Sealed: the last entries may still be on their way to replicas
		// beyond the ack quorum. Let them land (bounded, as after a
		// recovery) before the streams end, or a healthy ensemble keeps
		// fewer than Qw copies of them.
		drainWriteBacks(l.adds.ctx, l.adds, writeBackWait)
	}
	l.adds.closeAll()
	w.cancel(errAfter)
	w.cbs.close()
	l.wg.Wait()
	w.result = l.result
	close(w.finished)
}
