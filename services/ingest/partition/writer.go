package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
	"github.com/sluicemq/sluice/services/ingest/partition/machine"
)

// Errors of the partition writer (package machine's; see there); the
// service maps them to codes at its RPC edge.
var (
	ErrFenced           = machine.ErrFenced
	ErrBusy             = machine.ErrBusy
	ErrUnavailable      = machine.ErrUnavailable
	ErrClosed           = machine.ErrClosed
	ErrLostAcknowledged = machine.ErrLostAcknowledged
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
	// LeavingBookies returns the bookies the ledger names that are being
	// drained (decommissioned) or are missing from the registry, per a
	// recent listing.
	LeavingBookies(ctx context.Context) ([]string, error)
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

// Writer is the single writer of one partition under one lease. The
// decisions are package machine's (a pure state machine, with transcripts);
// Writer is its driver: it serialises the machine's steps, carries out the
// cheap actions at once (ledger sends, answers, timers) and the slow ones
// (create, seal, recover, release) on its maintenance goroutine.
//
// Goroutines: Open starts the maintenance goroutine (maintain), which runs
// the machine's I/O steps one at a time and steps their outcome; Close
// stops and waits for it. Ledger callbacks (on the ledger client's
// goroutine), the linger and retry timers, enqueuers and the maintenance
// goroutine each step the machine under mu.
//
// Lock order: mu is a leaf. Held, it runs only the machine's step and
// non-blocking work: Ledger.AppendAsync (which never calls back on the
// caller's goroutine), closing waiters' channels, arming timers.
type Writer struct {
	cfg    Config
	log    *slog.Logger
	lease  catalog.WriterLease
	spec   catalog.LedgerSpec // template for new ledgers
	ledgrs Ledgers
	chain  Chain

	mu sync.Mutex
	m  *machine.Writer
	// space is closed and replaced on every SpaceFreed: enqueuers waiting
	// after NoSpace wake on it.
	space chan struct{}
	// work is the I/O steps for maintain, in the order the machine asked.
	work []machine.Action
	// linger and retry are the timers last armed, stopped by Close.
	linger, retry *time.Timer
	// closing: Close ran; finished is closed once the machine's Finished
	// came (closeErr is its error).
	closing  bool
	finished chan struct{}
	closeErr error

	kick chan struct{} // wakes maintain
	stop chan struct{}
	done chan struct{}
}

// waiter is an accepted batch's answer to come; the machine's tag.
type waiter struct {
	res  Appended
	err  error
	done chan struct{}
	// trace is the span context of the Enqueue's ctx (the request's
	// "append" span): an entry's ledger append is traced in the first
	// traced batch's trace (tracedLedger).
	trace trace.SpanContext
}

// tracedLedger is a Ledger whose appends can join a trace (the ledger
// client's AppendAsyncContext); the others append untraced.
type tracedLedger interface {
	AppendAsyncContext(ctx context.Context, payload []byte, done func(entry int64, err error)) error
}

// appendAsync sends an entry, in the trace of the first of its batches
// (tags) that has one.
func appendAsync(l Ledger, tags []any, payload []byte, done func(int64, error)) error {
	if tl, ok := l.(tracedLedger); ok {
		for _, t := range tags {
			if wt, ok := t.(*waiter); ok && wt.trace.IsValid() {
				return tl.AppendAsyncContext(trace.ContextWithSpanContext(context.Background(), wt.trace), payload, done)
			}
		}
	}
	return l.AppendAsync(payload, done)
}

// Open starts the writer of p under lease, which the caller just acquired
// (AcquireWriter): it recovers the chain's tail ledger if its writer left it
// open (fencing a previous writer still running), rebuilds the idempotent
// producers' state from the chain's tail, opens a new ledger at the next
// offset and appends it to the chain.
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
		space:    make(chan struct{}),
		finished: make(chan struct{}),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	producers, err := dedup.New(cfg.Dedup)
	if err != nil {
		return nil, err
	}
	next := p.LogStartOffset
	var openTxns []machine.OpenTxn
	if n := len(p.Ledgers); n > 0 {
		tail := p.Ledgers[n-1]
		m, err := ledgers.Recover(ctx, tail.ID, lastOffsetOf)
		if err != nil {
			return nil, fmt.Errorf("recover tail ledger %d of %s/%d: %w", tail.ID, lease.Topic, lease.Partition, err)
		}
		next = m.LastOffset + 1
		if openTxns, err = w.rebuild(ctx, producers, p.Ledgers); err != nil {
			return nil, fmt.Errorf("rebuild producer state of %s/%d: %w", lease.Topic, lease.Partition, err)
		}
	}
	m, acts := machine.New(machine.Config{
		Topic: lease.Topic, Partition: lease.Partition, Epoch: lease.Epoch,
		MaxEntryBytes: cfg.MaxEntryBytes, MaxInFlightEntries: cfg.MaxInFlightEntries, MaxBufferedBytes: cfg.MaxBufferedBytes,
		Linger: cfg.Linger, RollBytes: cfg.RollBytes, RollAge: cfg.RollAge,
	}, producers, openTxns, next-1)
	w.m = m
	// The first step is OpenLedger; Open carries it out itself, so a
	// writer that cannot open is never returned.
	open, ok := acts[0].(machine.OpenLedger)
	if len(acts) != 1 || !ok {
		return nil, fmt.Errorf("partition machine: unexpected first actions %v", acts)
	}
	l, err := w.openLedger(ctx, open.FirstOffset)
	if err != nil {
		return nil, err
	}
	w.event(machine.Opened{Handle: l, ID: l.ID(), FirstOffset: open.FirstOffset, Now: cfg.Now()})
	go w.maintain()
	return w, nil
}

// rebuild reads the end of the chain back into the writer's state: the
// idempotent producers' batches of the last RebuildEntries entries (across
// ledgers), so a producer's retry after a failover is still recognised,
// and the transactions open at the tail. The last entry's header says the
// LSO (pkg/record, "entry header"): every open transaction began at or
// after it, so the replay starts at the entry holding the LSO when that is
// further back than the window — found by a binary search over the ledger
// holding it — and streams forward. The open transactions found must
// agree with the header: if they do not, the log is not what the writer
// wrote, and Open fails rather than guess.
//
// Entries are read from the bookies, so the window stops at an offloaded
// ledger: producers seen only before it are unknown here (their next batch
// gets UNKNOWN_PRODUCER_ID unless it starts over at sequence 0, as after
// an eviction). The compactor offloads no ledger a transaction open at the
// tail began in, and no last ledger with a transaction open at its end
// (compactor.offloadable), so the open transactions are always on the
// bookies; a partition whose every ledger with entries is offloaded has
// none.
func (w *Writer) rebuild(ctx context.Context, producers *dedup.State, chain []catalog.LedgerRef) ([]machine.OpenTxn, error) {
	type pos struct {
		ledger int // index in chain
		entry  int64
	}
	// lastEntry[i] is ledger i's last entry id (-1: none), once known;
	// offloaded[i] whether its entries left the bookies.
	lastEntry := make([]int64, len(chain))
	known := make([]bool, len(chain))
	offloaded := make([]bool, len(chain))
	meta := func(i int) error {
		if known[i] {
			return nil
		}
		m, err := w.ledgrs.Recover(ctx, chain[i].ID, lastOffsetOf) // sealed: returns its metadata
		if err != nil {
			return err
		}
		lastEntry[i], known[i], offloaded[i] = m.LastEntry, true, m.State == catalog.LedgerOffloaded
		return nil
	}
	// The window: the last RebuildEntries entries.
	start := pos{len(chain), 0}
	budget := int64(w.cfg.RebuildEntries)
	for i := len(chain) - 1; i >= 0 && budget > 0; i-- {
		if err := meta(i); err != nil {
			return nil, err
		}
		if offloaded[i] {
			break
		}
		if lastEntry[i] < 0 {
			continue
		}
		first := max(0, lastEntry[i]-budget+1)
		start = pos{i, first}
		budget -= lastEntry[i] - first + 1
	}
	if start.ledger == len(chain) {
		return nil, nil // no entry on the bookies
	}
	// The LSO at the tail, from the last entry.
	tail := len(chain) - 1
	for lastEntry[tail] < 0 {
		tail--
	}
	ents, err := w.ledgrs.ReadEntries(ctx, chain[tail].ID, lastEntry[tail], lastEntry[tail])
	if err != nil {
		return nil, err
	}
	tailLast, lso, err := record.EntryStableOffset(ents[0])
	if err != nil {
		return nil, fmt.Errorf("ledger %d entry %d: %w", chain[tail].ID, lastEntry[tail], err)
	}
	if lso <= tailLast {
		// A transaction is open: start at the entry holding the LSO if the
		// window begins after it.
		j := tail
		for j > 0 && chain[j].FirstOffset > lso {
			j--
		}
		if j <= start.ledger {
			if err := meta(j); err != nil {
				return nil, err
			}
			if offloaded[j] {
				return nil, fmt.Errorf("the tail's last stable offset %d is in ledger %d, which is offloaded: the transactions open at the tail cannot be read back (the compactor must keep such a ledger on the bookies)", lso, chain[j].ID)
			}
			e, err := w.entryHolding(ctx, chain[j].ID, lastEntry[j], lso)
			if err != nil {
				return nil, err
			}
			if p := (pos{j, e}); p.ledger < start.ledger || p.ledger == start.ledger && p.entry < start.entry {
				start = p
			}
		}
	}
	now := w.cfg.Now()
	open := map[int64]machine.OpenTxn{}
	for i := start.ledger; i < len(chain); i++ {
		if err := meta(i); err != nil {
			return nil, err
		}
		first := int64(0)
		if i == start.ledger {
			first = start.entry
		}
		for e := first; e <= lastEntry[i]; e += rebuildChunk {
			ents, err := w.ledgrs.ReadEntries(ctx, chain[i].ID, e, min(e+rebuildChunk-1, lastEntry[i]))
			if err != nil {
				return nil, err
			}
			for k, en := range ents {
				if err := replayEntry(en, producers, open, now); err != nil {
					return nil, fmt.Errorf("ledger %d entry %d: %w", chain[i].ID, e+int64(k), err)
				}
			}
		}
	}
	txns := make([]machine.OpenTxn, 0, len(open))
	found := tailLast + 1
	for _, o := range open {
		txns = append(txns, o)
		found = min(found, o.First)
	}
	if found != lso {
		return nil, fmt.Errorf("the tail's entry header says the last stable offset is %d, but the open transactions read back begin at %d: the log is inconsistent", lso, found)
	}
	return txns, nil
}

// rebuildChunk is how many entries rebuild reads at once.
const rebuildChunk = 256

// replayEntry feeds one entry read back to the producers' state and the
// open transactions: a transactional batch opens its producer's
// transaction unless one is open, a marker ends it (the machine's rules).
func replayEntry(entry []byte, producers *dedup.State, open map[int64]machine.OpenTxn, now time.Time) error {
	_, batches, err := record.EntryBatches(entry)
	if err != nil {
		return err
	}
	for rest := batches; len(rest) > 0; {
		b, r, err := record.Split(rest)
		if err != nil {
			return err
		}
		rest = r
		pid := b.ProducerID()
		switch {
		case pid == record.NoProducerID:
		case b.Attributes().Control():
			// A transaction marker: it ends the producer's open
			// transaction and fences the ended transaction's epoch
			// (dedup's RebuildMarker).
			delete(open, pid)
			if err := producers.RebuildMarker(pid, b.ProducerEpoch(), b.BaseOffset(), now); err != nil {
				return err
			}
		default:
			if _, ok := open[pid]; !ok && b.Attributes().Transactional() {
				open[pid] = machine.OpenTxn{ProducerID: pid, Epoch: b.ProducerEpoch(), First: b.BaseOffset()}
			}
			if err := producers.Rebuild(dedup.HeaderOf(b), b.BaseOffset(), now); err != nil {
				return err
			}
		}
	}
	return nil
}

// entryHolding finds, by binary search over ledger id's entries 0..last,
// the first entry whose records reach offset (its last offset >= offset).
func (w *Writer) entryHolding(ctx context.Context, id catalog.LedgerID, last, offset int64) (int64, error) {
	lo, hi := int64(0), last
	for lo < hi {
		mid := lo + (hi-lo)/2
		ents, err := w.ledgrs.ReadEntries(ctx, id, mid, mid)
		if err != nil {
			return 0, err
		}
		l, err := record.EntryLastOffset(ents[0])
		if err != nil {
			return 0, fmt.Errorf("ledger %d entry %d: %w", id, mid, err)
		}
		if l < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// lastOffsetOf is the offset of the last record in an entry's payload.
func lastOffsetOf(_ int64, payload []byte) (int64, error) { return record.EntryLastOffset(payload) }

// openLedger creates a ledger starting at first and appends it to the
// chain.
func (w *Writer) openLedger(ctx context.Context, first int64) (Ledger, error) {
	spec := w.spec
	spec.FirstOffset = first
	l, err := w.ledgrs.CreateLedger(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	if _, err := w.chain.AppendLedger(ctx, w.lease, catalog.LedgerRef{ID: l.ID(), FirstOffset: first}); err != nil {
		// The created ledger is an orphan (never in the chain); the
		// compactor removes orphans. Close it so it holds nothing open.
		_, cerr := l.Close(ctx, first-1)
		if errors.Is(err, catalog.ErrFenced) || errors.Is(err, catalog.ErrNotFound) {
			return nil, errors.Join(fmt.Errorf("%w: %w", ErrFenced, err), cerr)
		}
		return nil, errors.Join(fmt.Errorf("append ledger %d to the chain: %w", l.ID(), err), cerr)
	}
	w.log.Info("partition writer opened ledger", slog.Int64("ledger", int64(l.ID())), slog.Int64("first_offset", first))
	return l, nil
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

// Enqueue accepts a batch (giving it its offsets) and returns at once; Wait
// then waits for durability. Batches enqueued one after the other by one
// goroutine get increasing offsets in that order — what a pipelined stream
// needs to keep a producer's order. While MaxBufferedBytes is full it waits
// up to QueueWait (then ErrBusy); ctx bounds only that wait.
func (w *Writer) Enqueue(ctx context.Context, batch []byte) (Pending, error) {
	sc := trace.SpanContextFromContext(ctx)
	return w.offer(ctx, func(wt *waiter) (machine.Verdict, []machine.Action) {
		wt.trace = sc
		return w.m.Enqueue(machine.Enqueue{Batch: batch, Tag: wt, Now: w.cfg.Now()})
	})
}

// Mark writes a transaction marker — the end, committed or aborted, of
// producer producerID's transaction, at epoch, the epoch the coordinator
// bumped to when it ended it — and returns its offset once it is durable.
// A marker the partition has nothing left to end (a retry, or a late one:
// the producer already wrote at epoch or later here) writes nothing and
// answers Duplicate, offsets -1. Its errors are Append's.
func (w *Writer) Mark(ctx context.Context, producerID int64, epoch int16, commit bool) (Appended, error) {
	p, err := w.offer(ctx, func(wt *waiter) (machine.Verdict, []machine.Action) {
		return w.m.Mark(machine.Mark{ProducerID: producerID, Epoch: epoch, Commit: commit, Tag: wt, Now: w.cfg.Now()})
	})
	if err != nil {
		return Appended{}, err
	}
	return p.Wait(ctx)
}

// offer steps an Enqueue or a Mark (step, under the lock, with the
// waiter as its tag) until the machine has room for it.
func (w *Writer) offer(ctx context.Context, step func(*waiter) (machine.Verdict, []machine.Action)) (Pending, error) {
	wt := &waiter{done: make(chan struct{})}
	var deadline <-chan time.Time
	for {
		w.mu.Lock()
		v, acts := step(wt)
		switch v.Kind {
		case machine.KindAccepted:
			wt.res = Appended{BaseOffset: v.Base, LastOffset: v.Last}
		case machine.KindDuplicate:
			wt.res = Appended{BaseOffset: v.Base, LastOffset: v.Last, Duplicate: true}
			close(wt.done)
		}
		space := w.space
		w.runLocked(acts)
		w.mu.Unlock()
		switch v.Kind {
		case machine.KindAccepted, machine.KindDuplicate:
			return Pending{wt: wt}, nil
		case machine.KindAttach:
			return Pending{wt: v.To.(*waiter), dup: true}, nil
		case machine.KindRefused:
			return Pending{}, v.Err
		}
		// NoSpace: wait for bytes to be released, up to QueueWait.
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
	}
}

// event steps the machine with ev and carries out what it asks.
func (w *Writer) event(ev machine.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runLocked(w.m.Step(ev))
}

// runLocked carries out acts. A ledger
// that refuses a Send at once is reported as the entry's Settled once the
// others ran; the Sends after it to the same ledger are skipped (the
// machine fails them with the ledger).
func (w *Writer) runLocked(acts []machine.Action) {
	var refused *machine.Settled
	for _, a := range acts {
		switch a := a.(type) {
		case machine.Send:
			if refused != nil && refused.Gen == a.Gen {
				continue
			}
			gen, seq := a.Gen, a.Seq
			if err := appendAsync(a.Handle.(Ledger), a.Tags, a.Payload, func(_ int64, err error) {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.runLocked(w.m.Settle(machine.Settled{Gen: gen, Seq: seq, Err: err, Now: w.cfg.Now()}))
			}); err != nil && refused == nil {
				// The ledger refused at once (stopped, or over its own
				// in-flight bound, which MaxInFlightEntries keeps us under).
				refused = &machine.Settled{Gen: gen, Seq: seq, Err: err, Now: w.cfg.Now()}
			}
		case machine.Acknowledge:
			for _, t := range a.Tags {
				close(t.(*waiter).done)
			}
		case machine.Answer:
			wt := a.Tag.(*waiter)
			wt.err = a.Err
			close(wt.done)
		case machine.SpaceFreed:
			close(w.space)
			w.space = make(chan struct{})
		case machine.ArmLinger:
			w.linger = time.AfterFunc(a.After, func() { w.event(machine.LingerExpired{Now: w.cfg.Now()}) })
		case machine.RetryAfter:
			w.retry = time.AfterFunc(a.After, func() { w.event(machine.RetryDue{}) })
		case machine.OpenLedger, machine.SealLedger, machine.RecoverLedger, machine.ReleaseLease, machine.Discard:
			w.work = append(w.work, a)
			select {
			case w.kick <- struct{}{}:
			default:
			}
		case machine.LedgerFailed:
			w.log.Warn("partition writer ledger failed", slog.Int64("ledger", int64(a.Handle.(Ledger).ID())),
				slog.Int("entries_failed", a.Entries), slog.Bool("fenced", a.Fenced), slog.Any("err", a.Cause))
		case machine.Finished:
			w.closeErr = a.Err
			close(w.finished)
		}
	}
	if refused != nil {
		w.runLocked(w.m.Settle(*refused))
	}
}

// maintain carries out the machine's I/O steps, one at a time, off the
// append path, and steps their outcome.
func (w *Writer) maintain() {
	defer close(w.done)
	for {
		w.mu.Lock()
		var a machine.Action
		if len(w.work) > 0 {
			a = w.work[0]
			w.work[0] = nil
			w.work = w.work[1:]
		}
		w.mu.Unlock()
		if a == nil {
			select {
			case <-w.kick:
				continue
			case <-w.stop:
				return
			}
		}
		if ev := w.carryOut(a); ev != nil {
			w.event(ev)
		}
	}
}

// carryOut runs one I/O step, bounded by CloseTimeout, and returns the
// event that answers it.
func (w *Writer) carryOut(a machine.Action) machine.Event {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.CloseTimeout)
	defer cancel()
	switch a := a.(type) {
	case machine.OpenLedger:
		l, err := w.openLedger(ctx, a.FirstOffset)
		if err != nil {
			w.logRetry("open a ledger", err)
			return machine.OpenFailed{Err: err}
		}
		return machine.Opened{Handle: l, ID: l.ID(), FirstOffset: a.FirstOffset, Now: w.cfg.Now()}
	case machine.SealLedger:
		l := a.Handle.(Ledger)
		_, err := l.Close(ctx, a.LastOffset)
		if err != nil {
			// Seal it the other way: recovery finds the same end (every
			// entry was acknowledged) and closes it.
			_, err = w.ledgrs.Recover(ctx, l.ID(), lastOffsetOf)
		}
		if err != nil {
			w.logRetry(fmt.Sprintf("seal ledger %d", l.ID()), err)
		}
		return machine.SealDone{Err: err}
	case machine.RecoverLedger:
		l := a.Handle.(Ledger)
		m, err := w.ledgrs.Recover(ctx, l.ID(), lastOffsetOf)
		if err != nil {
			w.logRetry(fmt.Sprintf("recover ledger %d", l.ID()), err)
			return machine.Recovered{Err: err}
		}
		return machine.Recovered{LastOffset: m.LastOffset}
	case machine.ReleaseLease:
		err := w.chain.ReleaseWriter(ctx, w.lease)
		if errors.Is(err, catalog.ErrFenced) {
			err = nil // taken over meanwhile: nothing to give back
		}
		if err != nil {
			err = fmt.Errorf("release %v: %w", w.lease, err)
		}
		return machine.Released{Err: err}
	case machine.Discard:
		_, _ = a.Handle.(Ledger).Close(ctx, a.LastOffset)
	}
	return nil
}

// RollOffLeaving rolls the ledger being written over to a new one when
// it names a bookie being drained or missing from the registry: the copies
// such a bookie holds of this ledger are moved off it, or rebuilt
// elsewhere, only once the ledger is sealed (bookkeeper/DESIGN.md §4.1,
// §4.2); an idle partition would otherwise keep it open for good. It
// reports whether it asked for a roll.
func (w *Writer) RollOffLeaving(ctx context.Context) (bool, error) {
	w.mu.Lock()
	h, gen, ok := w.m.Current()
	w.mu.Unlock()
	if !ok {
		return false, nil // rolling, replacing or closing: a new ledger comes anyway
	}
	l := h.(Ledger)
	draining, err := l.LeavingBookies(ctx)
	if err != nil || len(draining) == 0 {
		return false, err
	}
	w.log.Info("rolling over: the ledger names a bookie that is draining or missing", slog.Int64("ledger", int64(l.ID())), slog.Any("bookies", draining))
	w.event(machine.Roll{Gen: gen})
	return true, nil
}

func (w *Writer) logRetry(what string, err error) {
	if !errors.Is(err, ErrFenced) {
		w.log.Warn("partition writer could not "+what+"; retrying", slog.Any("err", err))
	}
}

// NextOffset is the offset the next accepted batch gets (the partition's
// end offset as this writer sees it, acknowledged or not).
func (w *Writer) NextOffset() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m.NextOffset()
}

// AckedEnd is the partition's end as readers may see it, its high
// watermark as this writer knows it: the offset after the last record
// stored for good — acknowledged, in the chain when the writer opened, or
// kept by a failed ledger's recovery. It only rises and is never beyond
// what a reader can read. NextOffset, by contrast, counts batches accepted
// and not yet acknowledged, and moves back when a failed ledger's recovery
// ends it before them.
func (w *Writer) AckedEnd() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m.AckedOffset() + 1
}

// StableEnd is the partition's last stable offset as this writer knows
// it: the first offset of the oldest transaction open at the durable end,
// else AckedEnd. It only rises. A read_committed reader reads below it.
func (w *Writer) StableEnd() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m.StableOffset()
}

// Lease is the writer's lease.
func (w *Writer) Lease() catalog.WriterLease { return w.lease }

// Err is why the writer stopped, or nil while it runs.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m.Err()
}

// Close hands the partition over gracefully: no new appends, pending ones
// settle (up to CloseTimeout), the ledger is sealed, and the lease released
// so the next owner need not wait for it to expire or recover the ledger.
// A fenced writer has nothing to hand over: Close only stops it. A second
// Close returns nil.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	w.runLocked(w.m.Step(machine.Close{}))
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, w.cfg.CloseTimeout)
	defer cancel()
	select {
	case <-w.finished:
	case <-ctx.Done():
		w.event(machine.CloseTimedOut{}) // emits Finished
	}
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range []*time.Timer{w.linger, w.retry} {
		if t != nil {
			t.Stop()
		}
	}
	return w.closeErr
}
