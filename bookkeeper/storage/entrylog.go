package storage

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// writeChunk is how many frame bytes logWriter gathers before one Write.
const writeChunk = 1 << 20

// syncChunk: a flush starts writeback of the entry log every this many
// bytes written (vfs.File.SyncTo: sync_file_range WRITE|WAIT_BEFORE on
// Linux, waiting only for the previous chunk's writeback), not only at its
// end. These promise nothing (the index points at frames only after the
// final fdatasync); they keep dirty data from piling up, so the final sync
// is short and the journal's fsyncs on a shared disk do not queue behind
// one flush of tens of MiB (the tail latency of acknowledged adds). Unlike
// an fdatasync per chunk, they issue no device cache flush of their own.
const syncChunk = 1 << 20

// usageRef names one usage row: the bytes of a ledger's frames in a file.
type usageRef struct {
	file   uint64
	ledger int64
}

// logWriter appends frames to the current entry log file and rotates it.
// It is used only by whoever holds Storage.flushMu (a flush or a GC step),
// so it has no lock of its own.
type logWriter struct {
	fs        vfs.FS
	dir       string
	storageID [storageIDSize]byte
	maxSize   int64
	// newFile persists a fresh file id (the index's next-file counter)
	// and returns it; fileCreated registers a created file with the
	// Storage. Both run inside rotate.
	newFile     func() (uint64, error)
	fileCreated func(id uint64)

	f        vfs.File
	id       uint64 // current file id
	size     int64  // bytes of the current file, buffered ones included
	buf      []byte // frames not yet written to f
	unsynced int    // bytes written to f since its last sync

	// curUsage is the current file's bytes per ledger; pending holds the
	// absolute values of usage rows changed since the last index commit.
	curUsage map[int64]uint64
	pending  map[usageRef]uint64
}

// rotate finishes the current file (writes and fully syncs it) and starts
// a new one with a durable header.
func (w *logWriter) rotate() error {
	if w.f != nil {
		if err := w.writeBuffered(); err != nil {
			return err
		}
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("sync entry log %d: %w", w.id, err)
		}
		if err := w.f.Close(); err != nil {
			return fmt.Errorf("close entry log %d: %w", w.id, err)
		}
		w.f = nil
	}
	id, err := w.newFile()
	if err != nil {
		return err
	}
	f, err := createLogFile(w.fs, w.dir, logHeader{fileID: id, storageID: w.storageID})
	if err != nil {
		return err
	}
	w.f, w.id, w.size = f, id, LogHeaderSize
	w.curUsage = map[int64]uint64{}
	w.fileCreated(id)
	return nil
}

// append adds an entry's frame to the current file (rotating first if it
// would cross maxSize) and returns where it will be once synced.
func (w *logWriter) append(ledger, entry, lac int64, crc uint32, payload []byte) (location, error) {
	n := frameSize(len(payload))
	if w.size+n > w.maxSize && w.size > LogHeaderSize {
		if err := w.rotate(); err != nil {
			return location{}, err
		}
	}
	loc := location{file: w.id, offset: w.size, length: uint32(len(payload))}
	w.buf = appendFrame(w.buf, ledger, entry, lac, crc, payload)
	w.size += n
	w.curUsage[ledger] += uint64(n)
	w.pending[usageRef{w.id, ledger}] = w.curUsage[ledger]
	if len(w.buf) >= writeChunk {
		if err := w.writeBuffered(); err != nil {
			return location{}, err
		}
	}
	return loc, nil
}

func (w *logWriter) writeBuffered() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := durable.WriteFull(w.f, w.buf)
	w.unsynced += len(w.buf)
	w.buf = w.buf[:0]
	if cap(w.buf) > 4*writeChunk {
		w.buf = nil // one huge entry passed; do not keep its buffer
	}
	if err != nil {
		return fmt.Errorf("write entry log %d: %w", w.id, err)
	}
	if w.unsynced >= syncChunk {
		w.unsynced = 0
		if _, err := w.f.SyncTo(w.size); err != nil {
			return fmt.Errorf("start writeback of entry log %d: %w", w.id, err)
		}
	}
	return nil
}

// sync makes every appended frame durable: written, then fdatasync (data
// and the file size, which is all a later read needs).
func (w *logWriter) sync() error {
	if err := w.writeBuffered(); err != nil {
		return err
	}
	w.unsynced = 0
	if err := w.f.SyncData(); err != nil {
		return fmt.Errorf("sync entry log %d: %w", w.id, err)
	}
	return nil
}

// takePending returns the usage rows to write with the next index commit.
func (w *logWriter) takePending() map[usageRef]uint64 {
	p := w.pending
	w.pending = map[usageRef]uint64{}
	return p
}

// close closes the current file. Frames still buffered are dropped: every
// flush and GC step ends with sync, so leftovers come from one that failed,
// and nothing in the index points at them.
func (w *logWriter) close() error {
	if w.f == nil {
		return nil
	}
	w.buf = nil
	err := w.f.Close()
	w.f = nil
	return err
}

// fileCache holds entry log files open for reading, at most max of them
// (least recently used closed first, once no reader holds them).
type fileCache struct {
	fs  vfs.FS
	dir string
	max int

	mu    sync.Mutex
	files map[uint64]*cachedFile
	lru   list.List // of *cachedFile, most recently used first

	logReads atomic.Uint64 // reads of entry log files (Stats.LogReads)
}

type cachedFile struct {
	id      uint64
	f       vfs.File
	refs    int
	elem    *list.Element // nil once dropped from the cache
	dropped bool
}

func newFileCache(fs vfs.FS, dir string, max int) *fileCache {
	return &fileCache{fs: fs, dir: dir, max: max, files: map[uint64]*cachedFile{}}
}

// acquire returns file id open for reading; release it when done.
func (c *fileCache) acquire(id uint64) (*cachedFile, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cf, ok := c.files[id]; ok {
		cf.refs++
		c.lru.MoveToFront(cf.elem)
		return cf, nil
	}
	f, err := c.fs.Open(c.fs.PathJoin(c.dir, logName(id)))
	if err != nil {
		return nil, err
	}
	cf := &cachedFile{id: id, f: f, refs: 1}
	cf.elem = c.lru.PushFront(cf)
	c.files[id] = cf
	for c.lru.Len() > c.max {
		c.dropLocked(c.lru.Back().Value.(*cachedFile))
	}
	return cf, nil
}

func (c *fileCache) release(cf *cachedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cf.refs--
	if cf.refs == 0 && cf.dropped {
		_ = cf.f.Close() // read-only handle: nothing to lose
	}
}

// drop removes file id from the cache; it is closed once unreferenced.
func (c *fileCache) drop(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cf, ok := c.files[id]; ok {
		c.dropLocked(cf)
	}
}

func (c *fileCache) dropLocked(cf *cachedFile) {
	c.lru.Remove(cf.elem)
	delete(c.files, cf.id)
	cf.elem, cf.dropped = nil, true
	if cf.refs == 0 {
		_ = cf.f.Close()
	}
}

func (c *fileCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cf := range c.files {
		c.dropLocked(cf)
	}
}

// readFrame reads and verifies the frame at loc, which the index gave for
// (ledger, entry). A frame that does not decode, fails its checksum, or
// names another entry is ErrCorrupt.
func (c *fileCache) readFrame(ledger, entry int64, loc location) (frame, error) {
	fs, err := c.readFrames(ledger, []located{{entry: entry, loc: loc}})
	if err != nil {
		return frame{}, err
	}
	return fs[0], nil
}

// readFrames reads the frames of run, which lie back to back in one entry
// log (location.precedes), with one read, and verifies each as readFrame
// says. The payloads share one buffer.
func (c *fileCache) readFrames(ledger int64, run []located) ([]frame, error) {
	first, end := run[0].loc, run[len(run)-1].loc
	cf, err := c.acquire(first.file)
	if err != nil {
		if durable.IsNotExist(err) {
			return nil, fmt.Errorf("%w: entry %d/%d is in entry log %d, which is missing: %w", ErrDataLoss, ledger, run[0].entry, first.file, err)
		}
		return nil, fmt.Errorf("open entry log %d: %w", first.file, err)
	}
	defer c.release(cf)
	b := make([]byte, end.offset+frameSize(int(end.length))-first.offset)
	c.logReads.Add(1)
	n, err := cf.f.ReadAt(b, first.offset)
	if n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("entry %d/%d: %w", ledger, run[0].entry,
				corruptf("index points at entry log %d offset %d length %d, past the end of the file", first.file, first.offset, len(b)))
		}
		return nil, fmt.Errorf("read entry log %d: %w", first.file, err)
	}
	out := make([]frame, len(run))
	for i, r := range run {
		at := r.loc.offset - first.offset
		size := frameSize(int(r.loc.length))
		f, err := decodeFrame(b[at : at+size : at+size])
		if err != nil {
			return nil, fmt.Errorf("entry %d/%d in entry log %d at %d: %w", ledger, r.entry, r.loc.file, r.loc.offset, err)
		}
		if f.ledger != ledger || f.entry != r.entry {
			return nil, fmt.Errorf("entry %d/%d: %w", ledger, r.entry,
				corruptf("entry log %d at %d holds entry %d/%d", r.loc.file, r.loc.offset, f.ledger, f.entry))
		}
		out[i] = f
	}
	return out, nil
}
