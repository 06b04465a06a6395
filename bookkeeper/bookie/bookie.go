package bookie

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
	"github.com/sluicemq/sluice/bookkeeper/journal"
	"github.com/sluicemq/sluice/bookkeeper/storage"
	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// Errors of the bookie itself (the storage's and the journal's pass through
// wrapped; test with errors.Is).
var (
	// ErrReadOnly: the bookie refuses normal adds because its disks are
	// nearly full (or an operator set it read-only). Reads go on.
	ErrReadOnly = errors.New("bookie: read-only")
	// ErrUnavailable: the bookie is closing, or failed and must restart.
	ErrUnavailable = errors.New("bookie: unavailable")
	// ErrInvalid: a request argument is out of range; the message names it.
	ErrInvalid = errors.New("bookie: invalid argument")
	// ErrBusy: a bound on concurrent work was reached (ReadLac waiters);
	// retry later.
	ErrBusy = errors.New("bookie: busy")
)

// Bookie is one ledger storage node: a journal and a ledger storage, composed
// as bookkeeper/storage's package doc prescribes. Its methods are safe for
// concurrent use. Open it, serve Handler, call Run for the background work,
// Close when done.
type Bookie struct {
	cfg    Config
	log    *slog.Logger
	st     *storage.Storage
	j      *journal.Journal
	cookie storage.Cookie
	lacs   *lacWatch
	meters *meters

	readOnly     atomic.Bool   // disk watermark reached
	operatorRO   atomic.Bool   // SetReadOnly
	drainingMs   atomic.Int64  // SetDraining: Unix ms it began, 0 when not draining; written under drainMu
	drainMu      sync.Mutex    // serialises SetDraining's file changes
	beatKick     chan struct{} // SetDraining asks Heartbeat for a renewal now
	sinceCkpt    atomic.Int64
	ckptKick     chan struct{}
	diskUsage    atomic.Pointer[diskStatus]
	failed       atomic.Pointer[failure]
	closing      atomic.Bool
	closeOnce    sync.Once
	closeErr     error
	recordBuffer sync.Pool
}

type failure struct{ err error }

type diskStatus struct {
	free, total int64
	usage       float64
}

// Open opens (or formats) the bookie's directories, checks every cookie,
// replays the journal into the storage, and returns the bookie ready to
// serve. It refuses to start, naming what happened, when a directory was
// wiped, swapped or belongs to another bookie or cluster.
func Open(cfg Config) (*Bookie, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	b := &Bookie{
		cfg:      cfg,
		log:      cfg.Logger,
		lacs:     newLacWatch(cfg.MaxLacWaiters),
		ckptKick: make(chan struct{}, 1),
		beatKick: make(chan struct{}, 1),
	}
	b.recordBuffer.New = func() any { return new([]byte) }
	ms, err := newMeters(cfg)
	if err != nil {
		return nil, fmt.Errorf("bookie metrics: %w", err)
	}
	b.meters = ms
	st, cookie, err := openStorage(cfg)
	if err != nil {
		return nil, err
	}
	b.st, b.cookie = st, cookie
	since, err := readDrain(cfg.FS, cfg.JournalDir)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	if !since.IsZero() {
		b.drainingMs.Store(since.UnixMilli())
	}
	replayed := 0
	jc := cfg.journalConfig()
	slow := jc.Hooks.GroupCommitted
	jc.Hooks.GroupCommitted = func(g journal.GroupInfo) {
		slow(g)
		ms.groupCommitted(g)
	}
	j, err := journal.Open(jc, func(seq uint64, rec []byte) error {
		r, err := decodeRecord(rec)
		if err != nil {
			return fmt.Errorf("journal record %d: %w", seq, err)
		}
		replayed++
		return st.AddEntry(context.Background(), storage.AddRequest{
			Ledger: r.ledger, Entry: r.entry, LAC: r.lac, Payload: r.payload,
			Checksum: r.checksum, MasterKey: r.masterKey, Recovery: r.recovery, Replay: true,
		})
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open journal %s: %w", cfg.JournalDir, err), st.Close())
	}
	b.j = j
	ri := j.Recovery()
	b.log.Info("bookie opened",
		slog.String("bookie_id", cfg.ID), slog.String("storage_id", cookie.StorageID),
		slog.Int("replayed", replayed), slog.Uint64("checkpoint", ri.Checkpoint),
		slog.Int64("torn_bytes", ri.TornBytes))
	// Everything replayed is in the storage's buffer; make it durable there
	// and trim the journal, so a crash loop never replays more and more.
	if replayed > 0 {
		if err := b.checkpoint(); err != nil {
			return nil, errors.Join(err, b.closeStores())
		}
	}
	if err := ms.observe(cfg, b); err != nil {
		return nil, errors.Join(fmt.Errorf("bookie metrics: %w", err), b.closeStores())
	}
	b.checkDisk()
	return b, nil
}

// openStorage opens the storage and checks the journal directory's cookie
// against it. Start-up cases:
//   - journal cookie present: the storage must be the one it names
//     (RequireStorageID), so a wiped ledger or index disk is refused;
//   - journal cookie missing and journal files present: refused (the cookie
//     was deleted, or the directory is another install's);
//   - journal cookie missing, no journal files: the journal is new. That is
//     safe only if the storage never took an add — a wiped journal may have
//     held acknowledged entries the storage had not flushed — so a storage
//     holding any ledger is refused; otherwise the cookie is written.
func openStorage(cfg Config) (*storage.Storage, storage.Cookie, error) {
	so := cfg.storageOptions()
	jc, err := storage.ReadCookie(cfg.FS, cfg.JournalDir)
	switch {
	case err == nil:
		if err := jc.Check(cfg.JournalDir, storage.Cookie{BookieID: cfg.ID, InstanceID: cfg.InstanceID, Role: storage.RoleJournal, StorageID: cfg.RequireStorageID}); err != nil {
			return nil, storage.Cookie{}, err
		}
		so.RequireStorageID = jc.StorageID
	case errors.Is(err, os.ErrNotExist):
		has, lerr := hasJournalFiles(cfg.FS, cfg.JournalDir)
		if lerr != nil {
			return nil, storage.Cookie{}, lerr
		}
		if has {
			return nil, storage.Cookie{}, fmt.Errorf("%w: journal dir %s holds journal files but no cookie: the cookie was deleted "+
				"or the directory is another install's; refusing to replay records of unknown origin", storage.ErrCookieMissing, cfg.JournalDir)
		}
	default:
		return nil, storage.Cookie{}, fmt.Errorf("journal dir cookie: %w", err)
	}
	st, err := storage.Open(so)
	if err != nil {
		return nil, storage.Cookie{}, err
	}
	cookie := st.Cookie()
	if jc.StorageID != "" {
		return st, cookie, nil
	}
	has, err := st.HasLedgers()
	if err == nil && has {
		err = fmt.Errorf("%w: journal dir %s has no cookie, but storage %s in %s holds ledgers: the journal disk was "+
			"wiped or replaced, and acknowledged entries not yet flushed may be gone; re-replicate this bookie's "+
			"ledgers and format it anew", storage.ErrCookieMissing, cfg.JournalDir, cookie.StorageID, cfg.LedgerDir)
	}
	if err == nil {
		jc = cookie
		jc.Role = storage.RoleJournal
		if err = durable.MkdirAll(cfg.FS, cfg.JournalDir); err == nil {
			err = storage.WriteCookie(cfg.FS, cfg.JournalDir, jc)
		}
	}
	if err != nil {
		return nil, storage.Cookie{}, errors.Join(err, st.Close())
	}
	return st, cookie, nil
}

func hasJournalFiles(fs vfs.FS, dir string) (bool, error) {
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("list journal dir %s: %w", dir, err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "journal-") || n == "CHECKPOINT" {
			return true, nil
		}
	}
	return false, nil
}

// Cookie is the bookie's identity: its id, cluster and storage id.
func (b *Bookie) Cookie() storage.Cookie { return b.cookie }

// err returns why the bookie cannot serve, or nil.
func (b *Bookie) err() error {
	if f := b.failed.Load(); f != nil {
		return fmt.Errorf("%w: failed, restart required: %w", ErrUnavailable, f.err)
	}
	if b.closing.Load() {
		return fmt.Errorf("%w: closing", ErrUnavailable)
	}
	return nil
}

// fail records the first fatal error: a journal or storage write that
// failed. The bookie stops serving (every call answers UNAVAILABLE) and Run
// returns the error so the process restarts; Open then rebuilds from what
// is really on disk (see "fsyncgate" in bookkeeper/journal).
func (b *Bookie) fail(err error) {
	if b.failed.CompareAndSwap(nil, &failure{err}) {
		b.log.Error("bookie failed; restart required", slog.Any("err", err))
	}
}

// ReadOnly reports whether the bookie refuses normal adds: its disks are
// near full, the operator said so (SetReadOnly), or it is draining.
func (b *Bookie) ReadOnly() bool {
	return b.readOnly.Load() || b.operatorRO.Load() || b.drainingMs.Load() != 0
}

// SetReadOnly forces the bookie read-only (true) or lets the disk
// watermark decide again (false).
func (b *Bookie) SetReadOnly(ro bool) { b.operatorRO.Store(ro) }

// AddRequest is one add as the bookie takes it.
type AddRequest = storage.AddRequest

// Add stores an entry and journals it, calling done once the journal synced
// it (err nil) or with why it will not be acknowledged. The entry is visible
// to reads before done runs (see bookkeeper/storage, "Durability"). Add
// returns an error, and does not call done, when the entry was refused up
// front: fenced (storage.ErrFenced), wrong master key, bad checksum, too
// large, read-only, buffer or queue full after AddQueueWait. done runs on
// the journal's completion goroutine: it must be quick and must not block.
func (b *Bookie) Add(ctx context.Context, r AddRequest, done func(error)) error {
	if err := b.err(); err != nil {
		return err
	}
	if !r.Recovery && b.ReadOnly() {
		// Recovery adds are still taken: they re-replicate the last entries
		// of a ledger being closed, a few per ledger, and refusing them
		// could leave a ledger that cannot close while disks are full.
		return ErrReadOnly
	}
	if len(r.Payload) > b.cfg.MaxEntryBytes {
		return fmt.Errorf("%w: payload of %d bytes exceeds %d", storage.ErrEntryTooLarge, len(r.Payload), b.cfg.MaxEntryBytes)
	}
	r.Replay = false
	wctx, cancel := context.WithTimeout(ctx, b.cfg.AddQueueWait)
	defer cancel()
	if err := b.st.AddEntry(wctx, r); err != nil {
		if errors.Is(err, storage.ErrFailed) {
			b.fail(err)
		}
		return err
	}
	b.lacs.update(r.Ledger, r.LAC)
	bufp := b.recordBuffer.Get().(*[]byte)
	head := appendRecordHead((*bufp)[:0], addRecord{
		ledger: r.Ledger, entry: r.Entry, lac: r.LAC, checksum: r.Checksum,
		recovery: r.Recovery, masterKey: r.MasterKey,
	})
	size := int64(len(head) + len(r.Payload))
	err := b.j.AppendParts(wctx, func(_ uint64, err error) {
		if err == nil && b.sinceCkpt.Add(size) >= b.cfg.CheckpointBytes {
			select {
			case b.ckptKick <- struct{}{}:
			default:
			}
		}
		done(err)
	}, head, r.Payload)
	*bufp = head
	b.recordBuffer.Put(bufp)
	if errors.Is(err, journal.ErrFailed) {
		b.fail(err)
	}
	return err
}

// Read returns entries first..last of ledger (storage.ReadRange: stops at the
// first missing entry or at maxBytes, at least one entry), with the ledger's
// LAC and fenced flag. Regular reads are not limited by the LAC: the ledger
// client never asks beyond the LAC it learned (possibly from another bookie,
// whose LAC may be ahead of this one's), as in BookKeeper. With fence set
// (a recovery read, BookKeeper PR #2616) the ledger is fenced first, durably,
// with masterKey.
func (b *Bookie) Read(ledger, first, last int64, maxBytes int, fence bool, masterKey []byte) ([]storage.Entry, storage.LedgerInfo, error) {
	if err := b.err(); err != nil {
		return nil, storage.LedgerInfo{}, err
	}
	if ledger < 0 || first < 0 || last < first {
		return nil, storage.LedgerInfo{}, fmt.Errorf("%w: ledger %d entries %d..%d", ErrInvalid, ledger, first, last)
	}
	if maxBytes <= 0 || maxBytes > b.cfg.MaxReadBytes {
		maxBytes = b.cfg.MaxReadBytes
	}
	if fence {
		if _, err := b.Fence(ledger, masterKey); err != nil {
			return nil, storage.LedgerInfo{}, err
		}
	}
	ents, err := b.st.ReadRange(ledger, first, last, maxBytes)
	if err != nil {
		return nil, storage.LedgerInfo{}, err
	}
	info, err := b.st.Ledger(ledger)
	return ents, info, err
}

// Fence fences ledger (durably, before returning) and returns what this
// bookie has of it.
func (b *Bookie) Fence(ledger int64, masterKey []byte) (storage.LedgerInfo, error) {
	if err := b.err(); err != nil {
		return storage.LedgerInfo{}, err
	}
	info, err := b.st.Fence(ledger, masterKey)
	if errors.Is(err, storage.ErrFailed) {
		b.fail(err)
	}
	if err == nil {
		b.lacs.fence(ledger)
		b.meters.fences.Add(1)
	}
	return info, err
}

// WriteLAC raises the ledger's LAC (an idle writer's explicit LAC) and wakes
// ReadLAC waiters.
func (b *Bookie) WriteLAC(ledger int64, masterKey []byte, lac int64) error {
	if err := b.err(); err != nil {
		return err
	}
	if err := b.st.WriteLAC(ledger, masterKey, lac); err != nil {
		return err
	}
	b.lacs.update(ledger, lac)
	return nil
}

// ReadLAC returns the ledger's LAC once it exceeds previous or the ledger
// is fenced (reported too), or when wait runs out (then whatever it is: -1
// for a ledger this bookie has not seen).
func (b *Bookie) ReadLAC(ctx context.Context, ledger, previous int64, wait time.Duration) (lac int64, fenced bool, err error) {
	if err := b.err(); err != nil {
		return 0, false, err
	}
	if ledger < 0 || previous < -1 {
		return 0, false, fmt.Errorf("%w: ledger %d previous lac %d", ErrInvalid, ledger, previous)
	}
	wait = min(max(wait, 0), b.cfg.MaxLacWait)
	return b.lacs.wait(ctx, ledger, previous, wait, func() (int64, bool, error) { return b.lacInfo(ledger) })
}

// lacInfo reads the ledger's stored LAC and fenced flag (-1, false for a
// ledger this bookie has not seen).
func (b *Bookie) lacInfo(ledger int64) (int64, bool, error) {
	info, err := b.st.Ledger(ledger)
	if errors.Is(err, storage.ErrNoSuchLedger) {
		return -1, false, nil
	}
	return info.LAC, info.Fenced, err
}

// watchLAC registers a WatchLac watch; it fires (r.s.push) once the
// ledger's LAC is above r.prev or the ledger is fenced, at once if it
// already is.
func (b *Bookie) watchLAC(r *lacReg) error {
	if err := b.err(); err != nil {
		return err
	}
	if r.ledger < 0 || r.prev < -1 || r.maxBytes < 0 {
		return fmt.Errorf("%w: ledger %d previous lac %d max entry bytes %d", ErrInvalid, r.ledger, r.prev, r.maxBytes)
	}
	return b.lacs.register(r, func() (int64, bool, error) { return b.lacInfo(r.ledger) })
}

// MaxMissingLedgersIDs bounds the ids of one MissingLedgers call.
const MaxMissingLedgersIDs = wire.MaxMissingLedgersIDs

// MissingLedgers returns those of ids this bookie holds nothing of (never
// had, deleted, or lost with a wiped disk), in order: the compactor's audit
// of the copies the catalog names this bookie for.
func (b *Bookie) MissingLedgers(ids []int64) ([]int64, error) {
	if err := b.err(); err != nil {
		return nil, err
	}
	if len(ids) > MaxMissingLedgersIDs {
		return nil, fmt.Errorf("%w: %d ledger ids, at most %d a call", ErrInvalid, len(ids), MaxMissingLedgersIDs)
	}
	var missing []int64
	for _, id := range ids {
		_, err := b.st.Ledger(id)
		switch {
		case errors.Is(err, storage.ErrNoSuchLedger):
			missing = append(missing, id)
		case errors.Is(err, storage.ErrInvalidArgument):
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		case err != nil:
			if errors.Is(err, storage.ErrFailed) {
				b.fail(err)
			}
			return nil, err
		}
	}
	return missing, nil
}

// DeleteLedger drops a ledger; GC reclaims its space.
func (b *Bookie) DeleteLedger(ledger int64) error {
	if err := b.err(); err != nil {
		return err
	}
	err := b.st.DeleteLedger(ledger)
	if errors.Is(err, storage.ErrFailed) {
		b.fail(err)
	}
	return err
}

// Status is a bookie's identity, disk use and mode.
type Status struct {
	Cookie            storage.Cookie
	FreeBytes         int64
	TotalBytes        int64
	Usage             float64
	ReadOnly          bool
	Draining          bool      // SetDraining; then ReadOnly too
	DrainingSince     time.Time // when Draining
	Failed            error
	Journal           journal.Stats
	Storage           storage.Stats
	JournalCheckpoint uint64
}

// Status reports the bookie's state.
func (b *Bookie) Status() Status {
	s := Status{Cookie: b.cookie, ReadOnly: b.ReadOnly(), Journal: b.j.Stats(), Storage: b.st.Stats(), JournalCheckpoint: b.j.Checkpointed()}
	if d := b.diskUsage.Load(); d != nil {
		s.FreeBytes, s.TotalBytes, s.Usage = d.free, d.total, d.usage
	}
	s.DrainingSince, s.Draining = b.Draining()
	if f := b.failed.Load(); f != nil {
		s.Failed = f.err
	}
	return s
}

// checkpoint makes everything journaled durable in the storage and trims the
// journal: mark := Durable(); storage.Checkpoint(); journal.Checkpoint(mark)
// (the recipe of bookkeeper/storage's "Durability").
func (b *Bookie) checkpoint() error {
	mark := b.j.Durable()
	pending := b.sinceCkpt.Load()
	if err := b.st.Checkpoint(); err != nil {
		b.fail(err)
		return fmt.Errorf("checkpoint storage: %w", err)
	}
	if err := b.j.Checkpoint(mark); err != nil {
		if errors.Is(err, journal.ErrFailed) || errors.Is(err, journal.ErrClosed) {
			b.fail(err)
		}
		return fmt.Errorf("checkpoint journal at %d: %w", mark, err)
	}
	b.sinceCkpt.Add(-pending)
	return nil
}

// checkDisk refreshes the disk usage and the read-only flag (hysteresis
// between WritableBelow and ReadOnlyAt).
func (b *Bookie) checkDisk() {
	var d diskStatus
	var dirs [3]dirUsage // for the disk gauges, in diskDirNames' order
	known := false
	for i, dir := range []string{b.cfg.JournalDir, b.cfg.LedgerDir, b.cfg.IndexDir} {
		u, err := b.cfg.DiskUsage(dir)
		if err != nil || u.TotalBytes == 0 {
			continue
		}
		dirs[i] = dirUsage{known: true, used: int64(u.UsedBytes), available: int64(u.AvailBytes), total: int64(u.TotalBytes)}
		usage := float64(u.UsedBytes) / float64(u.TotalBytes)
		if !known || usage > d.usage {
			d.usage = usage
		}
		if !known || int64(u.AvailBytes) < d.free {
			d.free, d.total = int64(u.AvailBytes), int64(u.TotalBytes)
		}
		known = true
	}
	b.meters.disks.Store(&dirs)
	if !known {
		return
	}
	b.diskUsage.Store(&d)
	switch {
	case d.usage >= b.cfg.ReadOnlyAt && !b.readOnly.Load():
		b.readOnly.Store(true)
		b.log.Warn("bookie read-only: disk usage at watermark", slog.Float64("usage", d.usage), slog.Float64("read_only_at", b.cfg.ReadOnlyAt))
	case d.usage < b.cfg.WritableBelow && b.readOnly.Load():
		b.readOnly.Store(false)
		b.log.Info("bookie writable again", slog.Float64("usage", d.usage))
	}
}

// Run does the bookie's background work until ctx ends or the bookie fails:
// checkpoints (by time and by journaled bytes), garbage collection, disk
// checks. It returns nil when ctx ended and the failure otherwise.
func (b *Bookie) Run(ctx context.Context) error {
	ckpt := time.NewTicker(b.cfg.CheckpointInterval)
	defer ckpt.Stop()
	disk := time.NewTicker(b.cfg.DiskCheckInterval)
	defer disk.Stop()
	var gcC <-chan time.Time
	if b.cfg.GCInterval > 0 {
		gc := time.NewTicker(b.cfg.GCInterval)
		defer gc.Stop()
		gcC = gc.C
	}
	gcStopped := false
	b.countLedgers(time.Now())
	for {
		if f := b.failed.Load(); f != nil {
			return f.err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ckpt.C:
			b.runCheckpoint()
		case <-b.ckptKick:
			b.runCheckpoint()
		case now := <-disk.C:
			b.checkDisk()
			b.countLedgers(now)
		case <-gcC:
			if gcStopped {
				continue
			}
			res, err := b.st.GC(ctx)
			switch {
			case err == nil:
				if res.FilesRemoved > 0 {
					b.log.Info("gc reclaimed entry logs", slog.Int("files", res.FilesRemoved), slog.Int64("bytes", res.BytesReclaimed), slog.Int("entries_moved", res.EntriesMoved))
				}
			case errors.Is(err, storage.ErrCorrupt):
				// Never copy or skip a corrupt entry: stop collecting, stop
				// taking new data, and leave the decision to an operator
				// (the ledger's other replicas are intact).
				gcStopped = true
				b.operatorRO.Store(true)
				b.log.Error("gc found a corrupt entry; gc stopped and bookie set read-only", slog.Any("err", err))
			case ctx.Err() != nil:
				return nil
			default:
				b.log.Warn("gc failed", slog.Any("err", err))
			}
		}
	}
}

func (b *Bookie) runCheckpoint() {
	if err := b.checkpoint(); err != nil && b.failed.Load() == nil {
		// The journal keeps everything not checkpointed; a later checkpoint
		// retries. (A storage or journal failure already failed the bookie.)
		b.log.Warn("checkpoint failed", slog.Any("err", err))
	}
}

// Close stops serving, makes what the journal holds durable in the storage
// (a last checkpoint, so the next start replays little), and closes both.
// The caller stops the RPC server first.
func (b *Bookie) Close() error {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		var errs []error
		if b.failed.Load() == nil {
			if err := b.checkpoint(); err != nil {
				errs = append(errs, err)
			}
		}
		if r := b.meters.collecting; r != nil {
			errs = append(errs, r.Unregister())
		}
		errs = append(errs, b.closeStores())
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

func (b *Bookie) closeStores() error {
	return errors.Join(b.j.Close(), b.st.Close())
}
