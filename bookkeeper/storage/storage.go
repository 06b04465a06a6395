package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// Storage is a bookie's ledger storage: entry log, index, ledger metadata
// and cookies. Safe for concurrent use. Close it when done.
//
// Lock order (a goroutine holding one may take only those after it):
// gcMu → flushMu → metaMu → filesMu → mu. mu is never held across I/O
// except the index reads that load a ledger's metadata.
type Storage struct {
	opts      Options
	fs        vfs.FS
	log       *slog.Logger
	db        *pebble.DB
	lock      io.Closer
	storageID [storageIDSize]byte
	cookie    Cookie
	cache     *fileCache
	stats     stats

	// gcMu admits one GC or Verify at a time; Close takes it to wait for
	// them (they check for closing between steps).
	gcMu sync.Mutex

	// flushMu serializes every writer of the entry log and of index
	// entries: flushes, GC steps, DeleteLedger. It guards w and nextFile.
	flushMu  sync.Mutex
	w        *logWriter
	nextFile uint64 // lowest file id never used; persisted before use

	// metaMu is held from encoding ledger metadata rows to committing
	// them, so a row written by a fence (synced at once) is never
	// overwritten by an older row from a flush in progress.
	metaMu sync.Mutex

	// filesMu: readers hold it shared from the index lookup to the frame
	// read; GC holds it exclusively to remove a file, so no reader can
	// follow an index value to a file removed under it.
	filesMu sync.RWMutex

	mu sync.Mutex
	// active takes adds; flushing is the buffer a flush is writing (nil
	// between flushes). Reads look in both before the index.
	active, flushing *writeBuffer
	// ledgers caches ledger state; every ledger with buffered entries or
	// unpersisted metadata is here (dirty), others may be evicted.
	ledgers map[int64]*ledgerState
	files   map[uint64]bool // entry log files that exist
	// spaceCh is closed (and replaced) whenever adds may proceed again:
	// buffer space freed, or the storage closed or failed.
	spaceCh chan struct{}
	closed  bool
	failErr error // sticky; wraps ErrFailed
	// hurry is closed (once; hurried) to make the flush in progress write
	// at full speed; each flush starts with a fresh one.
	hurry   chan struct{}
	hurried bool
	lastAdd atomic.Int64 // UnixNano of the last add (flush pacing)

	kick chan struct{} // asks the flusher for a flush
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// Open opens the storage in o.Dir and o.IndexDir, formatting a new one if
// neither holds anything (and o.RequireStorageID is empty). It checks the
// cookies (ErrCookieMissing, ErrCookieMismatch), that every entry log the
// index refers to exists (ErrDataLoss), and every entry log header
// (ErrCorrupt); removes entry logs the index does not refer to (left by a
// crash mid-flush or mid-GC); and starts a new entry log file.
//
// Entries that were only buffered when the process stopped are not here:
// the bookie replays its journal from its last checkpoint into AddEntry
// with Replay set. See "Durability" in the package doc.
func Open(o Options) (*Storage, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	fs := o.FS
	for _, d := range []string{o.Dir, o.IndexDir} {
		if err := durable.MkdirAll(fs, d); err != nil {
			return nil, fmt.Errorf("storage: create %s: %w", d, err)
		}
	}
	lock, err := fs.Lock(fs.PathJoin(o.Dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("storage: lock %s: %w", o.Dir, err)
	}
	db, id, cookie, err := openIdentity(o, o.Logger)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("storage: open: %w", err), lock.Close())
	}
	s := &Storage{
		opts: o, fs: fs, log: o.Logger, db: db, lock: lock, storageID: id, cookie: cookie,
		cache:   newFileCache(fs, o.Dir, o.MaxOpenFiles),
		active:  newWriteBuffer(),
		ledgers: map[int64]*ledgerState{},
		files:   map[uint64]bool{},
		spaceCh: make(chan struct{}),
		hurry:   make(chan struct{}),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	s.w = &logWriter{
		fs: fs, dir: o.Dir, storageID: id, maxSize: o.MaxLogFileSize,
		newFile: s.allocFileID, fileCreated: s.fileCreated,
		pending: map[usageRef]uint64{},
	}
	if err := s.loadFiles(); err != nil {
		return nil, errors.Join(fmt.Errorf("storage: open: %w", err), db.Close(), lock.Close())
	}
	if err := s.w.rotate(); err != nil {
		return nil, errors.Join(fmt.Errorf("storage: open: %w", err), s.w.close(), db.Close(), lock.Close())
	}
	s.wg.Add(1)
	go s.flusher()
	s.log.Info("storage opened", slog.String("dir", o.Dir), slog.String("storage_id", cookie.StorageID),
		slog.Int("entry_logs", len(s.files)), slog.Uint64("current_log", s.w.id))
	return s, nil
}

// loadFiles lists the entry logs, removes leftovers (temporary files, and
// logs no usage row refers to), checks that every log a usage row refers
// to exists and that every remaining header is valid, and sets nextFile.
func (s *Storage) loadFiles() error {
	names, err := s.fs.List(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", s.opts.Dir, err)
	}
	present := map[uint64]bool{}
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			if err := s.fs.Remove(s.fs.PathJoin(s.opts.Dir, n)); err != nil {
				return fmt.Errorf("remove %s: %w", n, err)
			}
			continue
		}
		if id, ok := parseLogName(n); ok {
			present[id] = true
		}
	}
	referenced, err := s.referencedFiles()
	if err != nil {
		return err
	}
	var missing []uint64
	for id := range referenced {
		if !present[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: the index refers to entry logs %v, which are missing from %s: files were deleted",
			ErrDataLoss, missing, s.opts.Dir)
	}
	next, err := s.readNextFile()
	if err != nil {
		return err
	}
	removed := 0
	for id := range present {
		next = max(next, id+1)
		if !referenced[id] {
			// Nothing in the index points here (see "Garbage collection").
			if err := s.fs.Remove(s.fs.PathJoin(s.opts.Dir, logName(id))); err != nil {
				return fmt.Errorf("remove unreferenced entry log %d: %w", id, err)
			}
			removed++
			continue
		}
		if err := readLogHeader(s.fs, s.opts.Dir, id, s.storageID); err != nil {
			return err
		}
		s.files[id] = true
	}
	if removed > 0 {
		if err := durable.SyncDir(s.fs, s.opts.Dir); err != nil {
			return err
		}
		s.log.Info("storage removed unreferenced entry logs", slog.Int("files", removed))
	}
	s.nextFile = next
	return nil
}

// referencedFiles returns the entry log ids that have usage rows.
func (s *Storage) referencedFiles() (map[uint64]bool, error) {
	files := map[uint64]bool{}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixUsage}, UpperBound: []byte{prefixUsage + 1}})
	if err != nil {
		return nil, err
	}
	for valid := it.First(); valid; {
		id, _, ok := decodeUsageKey(it.Key())
		if !ok {
			return nil, errors.Join(fmt.Errorf("index: %w", corruptf("usage key %x", it.Key())), it.Close())
		}
		files[id] = true
		_, hi := fileUsageSpan(id)
		valid = it.SeekGE(hi)
	}
	return files, errors.Join(it.Error(), it.Close())
}

func (s *Storage) readNextFile() (uint64, error) {
	v, closer, err := s.db.Get(nextFileKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	n, err := decodeU64(nextFileKey, v)
	if err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	return max(n, 1), nil
}

// allocFileID persists and returns a fresh entry log id, so ids are never
// reused even after the newest files were removed. Holds flushMu.
func (s *Storage) allocFileID() (uint64, error) {
	id := s.nextFile
	if err := s.db.Set(nextFileKey, encodeU64(nextFileKey, id+1), pebble.Sync); err != nil {
		return 0, fmt.Errorf("persist next entry log id: %w", err)
	}
	s.nextFile = id + 1
	return id, nil
}

func (s *Storage) fileCreated(id uint64) {
	s.mu.Lock()
	s.files[id] = true
	s.mu.Unlock()
	s.stats.filesCreated.Add(1)
}

// Cookie returns the ledger dir's cookie: the identity the storage was
// opened with, including its StorageID (which the bookie records in the
// bookie registry and passes back as Options.RequireStorageID).
func (s *Storage) Cookie() Cookie { return s.cookie }

// Stats returns cumulative counters since Open.
func (s *Storage) Stats() Stats {
	s.mu.Lock()
	files := len(s.files)
	s.mu.Unlock()
	st := &s.stats
	return Stats{
		Adds: st.adds.Load(), AddBytes: st.addBytes.Load(), ReplayDropped: st.replayDropped.Load(),
		BufferFullWaits: st.bufferWaits.Load(), BufferFullErrs: st.bufferErrs.Load(),
		Reads: st.reads.Load(), ReadBytes: st.readBytes.Load(), LogReads: s.cache.logReads.Load(),
		Flushes: st.flushes.Load(), FlushedEntries: st.flushedEntries.Load(), FlushedBytes: st.flushBytes.Load(),
		FilesRemoved: st.filesRemoved.Load(), BytesReclaimed: st.bytesReclaimed.Load(), EntriesMoved: st.entriesMoved.Load(),
		LogFiles: files, LogFilesCreated: st.filesCreated.Load(),
	}
}

// usable returns nil if the storage takes operations. Holds mu.
func (s *Storage) usableLocked() error {
	if s.failErr != nil {
		return s.failErr
	}
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *Storage) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usableLocked()
}

// fail makes the storage refuse all later operations (see ErrFailed) and
// returns the sticky error.
func (s *Storage) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failLocked(err)
}

func (s *Storage) failLocked(err error) error {
	if s.failErr == nil {
		s.failErr = fmt.Errorf("%w: %w", ErrFailed, err)
		s.log.Error("storage failed", slog.Any("err", err))
		s.broadcastSpaceLocked()
	}
	return s.failErr
}

// hurryLocked makes the flush in progress, if any, stop pacing its writes.
func (s *Storage) hurryLocked() {
	if !s.hurried {
		s.hurried = true
		close(s.hurry)
	}
}

func (s *Storage) broadcastSpaceLocked() {
	close(s.spaceCh)
	s.spaceCh = make(chan struct{})
}

// flusher is the background goroutine that flushes when the write buffer
// passes half of its bound. Owned by the Storage: Close stops and waits.
func (s *Storage) flusher() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			// A failure is sticky and reported to every later call.
			_ = s.flush()
		}
	}
}

func (s *Storage) kickFlusher() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Close flushes the write buffer (unless the storage failed), stops the
// background flusher, waits for a GC in progress to stop, and closes the
// files and the index. Operations after Close return ErrClosed.
func (s *Storage) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.broadcastSpaceLocked()
	s.hurryLocked()
	s.mu.Unlock()

	close(s.stop)
	s.wg.Wait()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()

	var errs []error
	s.mu.Lock()
	failed := s.failErr != nil
	s.mu.Unlock()
	if !failed {
		errs = append(errs, s.flush())
	}
	// Wait for every operation that passed its closed check and may still
	// use the files or the index: they hold one of these.
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.filesMu.Lock()
	defer s.filesMu.Unlock()
	errs = append(errs, s.w.close())
	s.cache.close()
	errs = append(errs, s.db.Close(), s.lock.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: close: %w", err)
	}
	return nil
}
