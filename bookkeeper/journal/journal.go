package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// DoneFunc is told the outcome of one Append: the record's sequence number
// once its group is written and fsynced (err nil), or the error that failed
// it (seq 0). It runs on the journal's completion goroutine, in sequence
// order, exactly once per accepted record; it must be quick and must not
// block or call Append, since the next group's completions wait for it.
type DoneFunc func(seq uint64, err error)

// Journal is a write-ahead log with group commit. Its methods are safe for
// concurrent use.
//
// Goroutines: Open starts a writer (groups records, writes, fsyncs, rotates)
// and a completer (runs DoneFuncs, frees queue space), connected by a channel
// in group order. Close stops both and waits for them.
//
// Lock order: ckptMu before filesMu; mu is never held with either.
type Journal struct {
	cfg   Config
	fs    vfs.FS
	log   *slog.Logger
	lock  io.Closer
	info  RecoveryInfo
	stats stats

	// durable is the sequence number of the last record of the last group
	// that was written and fsynced.
	durable atomic.Uint64

	mu sync.Mutex
	// Guarded by mu.
	open          *batch   // the batch taking appends, if any
	sealed        []*batch // full batches waiting for the writer, oldest first
	free          []*batch // recycled batches
	nextSeq       uint64   // sequence number of the next accepted record
	queuedBytes   int      // framed bytes of accepted, unacknowledged records
	queuedRecords int      // count of accepted, unacknowledged records
	err           error    // non-nil once appends are refused: ErrClosed or ErrFailed
	failErr       error    // the ErrFailed error, if the journal failed
	closing       bool     // Close asked the writer to drain and stop
	spaceWaiters  int      // Appends blocked on queue space
	spaceCh       chan struct{}

	wake        chan struct{} // writer wake-up, capacity 1
	completions chan *batch   // writer → completer, in sequence order
	writerDone  chan struct{}
	complDone   chan struct{}

	w writerState // owned by the writer goroutine

	filesMu sync.Mutex
	files   []fileMeta // guarded by filesMu: live journal files, oldest first
	pool    []string   // guarded by filesMu: recycled files to reuse, oldest first

	ckptMu     sync.Mutex
	ckpt       atomic.Uint64 // written under ckptMu
	ckptClosed bool          // guarded by ckptMu

	closeOnce sync.Once
	closeErr  error
}

// batch is a group in the making: framed records back to back, ready to be
// written with one call, and the DoneFuncs of its records.
type batch struct {
	buf      []byte
	dones    []DoneFunc
	firstSeq uint64
	queuedAt time.Time // when its first record was accepted
	err      error     // set by the writer if the group failed
}

// Open recovers the journal in cfg.Dir (creating it if needed), calling
// replay (which may be nil) for every record after the persisted checkpoint
// in order, and returns a Journal that appends after the last record found.
// It holds the directory's LOCK file until Close.
//
// If Open fails, replay may already have seen some records; the caller must
// discard what it built from them. A journal whose data is damaged in a way
// a crash cannot explain fails with ErrCorrupt.
func Open(cfg Config, replay ReplayFunc) (*Journal, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	fs := cfg.FS
	if err := durable.MkdirAll(fs, cfg.Dir); err != nil {
		return nil, fmt.Errorf("journal: create dir: %w", err)
	}
	lock, err := fs.Lock(fs.PathJoin(cfg.Dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("journal: lock dir: %w", err)
	}
	j, err := open(cfg, lock, replay)
	if err != nil {
		return nil, errors.Join(err, lock.Close())
	}
	return j, nil
}

func open(cfg Config, lock io.Closer, replay ReplayFunc) (*Journal, error) {
	rec, err := recoverDir(cfg.FS, cfg.Dir, cfg.Logger, replay, cfg.RecycleFiles)
	if err != nil {
		return nil, err
	}
	// Never append to a file written before: start a new one, so every
	// file but the newest is complete and was synced in full.
	h := fileHeader{firstSeq: rec.info.LastSeq + 1, fileSeq: 1, version: formatVersion}
	if n := len(rec.files); n > 0 {
		h.fileSeq = rec.files[n-1].fileSeq + 1
	}
	j := &Journal{
		cfg:         cfg,
		fs:          cfg.FS,
		log:         cfg.Logger,
		lock:        lock,
		info:        rec.info,
		nextSeq:     h.firstSeq,
		spaceCh:     make(chan struct{}),
		wake:        make(chan struct{}, 1),
		completions: make(chan *batch, 16),
		writerDone:  make(chan struct{}),
		complDone:   make(chan struct{}),
		pool:        rec.pool,
	}
	f, err := j.startFile(h)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j.w = writerState{file: f, fileSeq: h.fileSeq, seed: h.seed(), off: FileHeaderSize}
	j.files = append(rec.files, fileMeta{fileSeq: h.fileSeq, firstSeq: h.firstSeq, version: formatVersion})
	j.durable.Store(rec.info.LastSeq)
	j.ckpt.Store(rec.info.Checkpoint)
	j.log.Info("journal opened",
		slog.String("dir", cfg.Dir),
		slog.Uint64("checkpoint", rec.info.Checkpoint),
		slog.Uint64("last_seq", rec.info.LastSeq),
		slog.Int("replayed", rec.info.Replayed),
		slog.Int("files", rec.info.Files),
		slog.Int("removed_files", rec.info.RemovedFiles),
		slog.Int64("torn_bytes", rec.info.TornBytes))
	if rec.info.TornBytes > 0 {
		j.log.Warn("journal torn tail truncated",
			slog.String("dir", cfg.Dir),
			slog.Uint64("last_seq", rec.info.LastSeq),
			slog.Int64("torn_bytes", rec.info.TornBytes))
	}
	go j.runWriter()
	go j.runCompleter()
	return j, nil
}

// Append queues rec for the next group commit and returns once it is
// queued; done is called when the group holding it is durable or failed.
// The journal copies rec, so the caller may reuse it when Append returns.
//
// Append does not wait for disk. It waits only while the queue is full
// (Config.MaxQueueBytes / MaxQueueRecords), and ctx bounds that wait: when
// ctx ends first, Append returns an error wrapping ErrQueueFull and ctx's
// cause, and rec is not queued. A record that finds room is queued even if
// ctx is already done, so passing a done context turns Append into a
// try-append that never blocks. Once queued a record cannot be withdrawn
// (it may already be on disk).
//
// Append fails at once with ErrRecordTooLarge for a record above
// Config.MaxRecordSize, ErrClosed after Close, and ErrFailed after a write
// or fsync failed.
func (j *Journal) Append(ctx context.Context, rec []byte, done DoneFunc) error {
	return j.AppendParts(ctx, done, rec)
}

// AppendParts is Append of the record made of parts, in order, copied
// straight into the group buffer (no joined copy of a large payload first).
func (j *Journal) AppendParts(ctx context.Context, done DoneFunc, parts ...[]byte) error {
	if done == nil {
		panic("journal: Append with a nil DoneFunc")
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > j.cfg.MaxRecordSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, n, j.cfg.MaxRecordSize)
	}
	size := RecordHeaderSize + n
	j.mu.Lock()
	for j.err == nil && (j.queuedRecords >= j.cfg.MaxQueueRecords || j.queuedBytes+size > j.cfg.MaxQueueBytes) {
		ch := j.spaceCh
		j.spaceWaiters++
		j.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = fmt.Errorf("%w: %w", ErrQueueFull, context.Cause(ctx))
		}
		j.mu.Lock()
		j.spaceWaiters--
		if err != nil {
			j.mu.Unlock()
			j.stats.queueFull.Add(1)
			return err
		}
	}
	if err := j.err; err != nil {
		j.mu.Unlock()
		return err
	}
	wake := j.enqueueLocked(parts, n, size, done)
	j.mu.Unlock()
	if wake {
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// enqueueLocked frames the record (parts, n bytes) into the open batch and
// reports whether the writer needs a wake-up (a batch was sealed, or a new
// one opened).
func (j *Journal) enqueueLocked(parts [][]byte, n, size int, done DoneFunc) bool {
	wake := false
	b := j.open
	if b != nil && len(b.buf)+size > j.cfg.GroupBytes {
		j.sealLocked()
		b = nil
	}
	if b == nil {
		b = j.newBatchLocked(size)
		b.firstSeq = j.nextSeq
		b.queuedAt = time.Now()
		j.open = b
		wake = true
	}
	off := len(b.buf)
	b.buf = append(b.buf, make([]byte, RecordHeaderSize)...)
	putRecordHeader(b.buf[off:], n, j.nextSeq, 0)
	for _, p := range parts {
		b.buf = append(b.buf, p...)
	}
	b.dones = append(b.dones, done)
	j.nextSeq++
	j.queuedBytes += size
	j.queuedRecords++
	if len(b.buf) >= j.cfg.GroupBytes {
		j.sealLocked()
		wake = true
	}
	return wake
}

func (j *Journal) sealLocked() {
	j.sealed = append(j.sealed, j.open)
	j.open = nil
}

func (j *Journal) newBatchLocked(size int) *batch {
	// Room for the terminator the writer appends (see commit).
	if n := len(j.free); n > 0 && cap(j.free[n-1].buf) >= size+terminatorSize {
		b := j.free[n-1]
		j.free[n-1] = nil
		j.free = j.free[:n-1]
		return b
	}
	return &batch{buf: make([]byte, 0, max(size, j.cfg.GroupBytes)+terminatorSize)}
}

// AppendWait appends rec and waits until it is durable, returning its
// sequence number. ctx bounds both the wait for queue space (see Append)
// and the wait for durability; if it ends after rec was queued, the error is
// ctx's cause and rec may or may not become durable.
func (j *Journal) AppendWait(ctx context.Context, rec []byte) (uint64, error) {
	type result struct {
		seq uint64
		err error
	}
	ch := make(chan result, 1)
	if err := j.Append(ctx, rec, func(seq uint64, err error) { ch <- result{seq, err} }); err != nil {
		return 0, err
	}
	select {
	case r := <-ch:
		return r.seq, r.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// Durable returns the sequence number of the last record known to be
// written and fsynced (0 if none): the highest valid Checkpoint argument.
func (j *Journal) Durable() uint64 { return j.durable.Load() }

// Checkpointed returns the persisted checkpoint.
func (j *Journal) Checkpointed() uint64 { return j.ckpt.Load() }

// Recovery describes what Open found.
func (j *Journal) Recovery() RecoveryInfo { return j.info }

// Stats returns the cumulative counters.
func (j *Journal) Stats() Stats { return j.stats.snapshot() }

// Close refuses new appends, writes and syncs every record already queued
// (their DoneFuncs run), stops the goroutines, and releases the directory.
// It returns the ErrFailed error if the journal failed, nil otherwise.
// Calling it again returns the same result.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.mu.Lock()
		if j.err == nil {
			j.err = ErrClosed
		}
		j.closing = true
		j.broadcastSpaceLocked()
		j.mu.Unlock()
		select {
		case j.wake <- struct{}{}:
		default:
		}
		<-j.writerDone
		<-j.complDone

		j.ckptMu.Lock()
		j.ckptClosed = true
		j.ckptMu.Unlock()

		j.mu.Lock()
		err := j.failErr
		j.mu.Unlock()
		if j.w.file != nil {
			err = errors.Join(err, j.w.file.Close())
		}
		j.closeErr = errors.Join(err, j.lock.Close())
	})
	return j.closeErr
}

// broadcastSpaceLocked wakes every Append waiting for queue space.
func (j *Journal) broadcastSpaceLocked() {
	if j.spaceWaiters > 0 {
		close(j.spaceCh)
		j.spaceCh = make(chan struct{})
	}
}
