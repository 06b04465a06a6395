package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults for zero Options fields.
const (
	DefaultMaxEntrySize        = 8 << 20 // the bookie protocol's entry limit
	DefaultMaxWriteBufferBytes = 64 << 20
	DefaultMaxLogFileSize      = 1 << 30
	DefaultMaxOpenFiles        = 64
	DefaultMaxCachedLedgers    = 1 << 16
	DefaultMaxReadBytes        = 16 << 20 // the bookie protocol's read response limit
	DefaultGCThreshold         = 0.5
	DefaultGCChunkBytes        = 16 << 20
	DefaultMaxFlushSpread      = time.Second
	// DefaultIndexSubdir is where the index lives when Options.IndexDir is
	// empty: a subdirectory of Options.Dir.
	DefaultIndexSubdir = "index"
)

// Options configures Open. Zero fields take the documented defaults;
// Validate reports every violation at once.
type Options struct {
	// Dir is the ledger directory (required): the entry logs and a cookie.
	Dir string
	// IndexDir holds the index (Pebble, in its "pebble" subdirectory) and a
	// cookie. Empty means Dir/index; another disk spreads the I/O the way
	// BookKeeper's separate index dirs do. It must differ from Dir.
	IndexDir string
	// FS is the filesystem; nil means vfs.Default. Tests pass a crashable
	// or error-injecting one.
	FS vfs.FS
	// Logger receives the storage's (and Pebble's) few events worth
	// logging; nil discards them. Pebble's info chatter goes to Debug.
	Logger *slog.Logger
	// Hooks observe flushes and garbage collection; see Hooks.
	Hooks Hooks

	// BookieID and InstanceID (both required) are this bookie's identity
	// and its cluster's. New cookies record them; existing cookies must
	// name them, or Open fails with ErrCookieMismatch.
	BookieID   string
	InstanceID string
	// RequireStorageID, when set, is the storage id this bookie recorded
	// in the cluster's bookie registry at its first start (Storage.Cookie).
	// Open then refuses to format a new storage: dirs wiped whole, cookies
	// included, fail with ErrCookieMissing instead of looking brand new.
	RequireStorageID string

	// MaxEntrySize bounds one entry's payload. Zero means
	// DefaultMaxEntrySize; at most MaxEntrySizeLimit.
	MaxEntrySize int
	// MaxWriteBufferBytes bounds the write buffer that takes adds until the
	// next flush (frames counted with headers). Adds beyond it wait for a
	// flush; the background flush starts at half of it. A flush in progress
	// holds the previous buffer, so buffered entries use at most twice this
	// much memory. Zero means DefaultMaxWriteBufferBytes; at least one
	// largest frame.
	MaxWriteBufferBytes int64
	// MaxLogFileSize bounds an entry log file: the writer rotates before a
	// frame that would cross it. Zero means DefaultMaxLogFileSize; it must
	// hold the file header and the largest frame.
	MaxLogFileSize int64
	// MaxOpenFiles bounds the entry log files held open for reading (LRU).
	// Zero means DefaultMaxOpenFiles.
	MaxOpenFiles int
	// MaxCachedLedgers bounds the ledgers whose metadata is kept in memory;
	// beyond it, ledgers with nothing unflushed are dropped after each flush
	// and reloaded from the index when next used. Zero means
	// DefaultMaxCachedLedgers.
	MaxCachedLedgers int
	// MaxReadBytes bounds the payload bytes one ReadRange returns. Zero
	// means DefaultMaxReadBytes; at least MaxEntrySize.
	MaxReadBytes int
	// GCThreshold is the live ratio below which GC compacts an entry log
	// file: (bytes of live ledgers' frames) / (file bytes after the header).
	// Zero means DefaultGCThreshold; in (0, 1].
	GCThreshold float64
	// GCChunkBytes bounds the frames GC moves per step; each step holds the
	// flush lock and ends with one entry log sync and one index commit.
	// Zero means DefaultGCChunkBytes; at least one largest frame.
	GCChunkBytes int64
	// MaxFlushSpread bounds how long a flush may spread its entry log
	// writes over while adds keep arriving. A flush paces its writes to end
	// in half the time its buffer took to fill, at most this long, instead
	// of writing tens of MiB at once: on a disk the journal shares, such a
	// burst makes every journal fsync meanwhile wait behind it, and with
	// all bookies of an ensemble flushing the same entries at the same
	// moment, the ack quorum's adds wait with them. A flush hurries (full
	// speed) once adds wait for buffer space, and never waits while no add
	// arrives (shutdown, an idle checkpoint). Zero means
	// DefaultMaxFlushSpread; negative turns pacing off.
	MaxFlushSpread time.Duration
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.IndexDir == "" && o.Dir != "" {
		o.IndexDir = o.FS.PathJoin(o.Dir, DefaultIndexSubdir)
	}
	setDefault(&o.MaxEntrySize, DefaultMaxEntrySize)
	setDefault(&o.MaxWriteBufferBytes, DefaultMaxWriteBufferBytes)
	setDefault(&o.MaxLogFileSize, DefaultMaxLogFileSize)
	setDefault(&o.MaxOpenFiles, DefaultMaxOpenFiles)
	setDefault(&o.MaxCachedLedgers, DefaultMaxCachedLedgers)
	setDefault(&o.MaxReadBytes, DefaultMaxReadBytes)
	setDefault(&o.GCThreshold, DefaultGCThreshold)
	setDefault(&o.GCChunkBytes, DefaultGCChunkBytes)
	if o.MaxFlushSpread == 0 {
		o.MaxFlushSpread = DefaultMaxFlushSpread
	}
	return o
}

func setDefault[T int | int64 | float64](p *T, d T) {
	if *p == 0 {
		*p = d
	}
}

// Validate reports every problem with o (after defaults are applied).
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Dir == "" {
		bad("Dir is required")
	}
	if strings.ContainsAny(o.Dir+o.IndexDir, "\n\r") {
		bad("Dir and IndexDir must not contain line breaks (they are recorded in cookies)")
	}
	if o.IndexDir != "" && path.Clean(o.IndexDir) == path.Clean(o.Dir) {
		bad("IndexDir must differ from Dir (%s)", o.Dir)
	}
	if err := checkIdentityField("BookieID", o.BookieID); err != nil {
		errs = append(errs, err)
	}
	if err := checkIdentityField("InstanceID", o.InstanceID); err != nil {
		errs = append(errs, err)
	}
	if o.RequireStorageID != "" {
		if _, err := parseStorageID(o.RequireStorageID); err != nil {
			bad("RequireStorageID: %v", err)
		}
	}
	if o.MaxEntrySize < 1 || o.MaxEntrySize > MaxEntrySizeLimit {
		bad("MaxEntrySize %d outside [1, %d]", o.MaxEntrySize, MaxEntrySizeLimit)
	}
	largest := frameSize(o.MaxEntrySize)
	if o.MaxWriteBufferBytes < largest || o.MaxWriteBufferBytes > 16<<30 {
		bad("MaxWriteBufferBytes %d outside [%d, %d] (at least the largest frame)", o.MaxWriteBufferBytes, largest, int64(16<<30))
	}
	if o.MaxLogFileSize < LogHeaderSize+largest || o.MaxLogFileSize > 1<<40 {
		bad("MaxLogFileSize %d outside [%d, %d] (header plus the largest frame)", o.MaxLogFileSize, LogHeaderSize+largest, int64(1)<<40)
	}
	if o.MaxOpenFiles < 1 || o.MaxOpenFiles > 1<<16 {
		bad("MaxOpenFiles %d outside [1, %d]", o.MaxOpenFiles, 1<<16)
	}
	if o.MaxCachedLedgers < 1 || o.MaxCachedLedgers > 1<<26 {
		bad("MaxCachedLedgers %d outside [1, %d]", o.MaxCachedLedgers, 1<<26)
	}
	if o.MaxReadBytes < o.MaxEntrySize || o.MaxReadBytes > 1<<30 {
		bad("MaxReadBytes %d outside [MaxEntrySize %d, %d]", o.MaxReadBytes, o.MaxEntrySize, 1<<30)
	}
	if !(o.GCThreshold > 0 && o.GCThreshold <= 1) {
		bad("GCThreshold %v outside (0, 1]", o.GCThreshold)
	}
	if o.GCChunkBytes < largest || o.GCChunkBytes > 1<<30 {
		bad("GCChunkBytes %d outside [%d, %d] (at least the largest frame)", o.GCChunkBytes, largest, 1<<30)
	}
	if o.MaxFlushSpread > time.Minute {
		bad("MaxFlushSpread %v above 1m", o.MaxFlushSpread)
	}
	if len(errs) > 0 {
		return fmt.Errorf("storage options: %w", errors.Join(errs...))
	}
	return nil
}

// maxIdentityLen bounds BookieID and InstanceID.
const maxIdentityLen = 256

// checkIdentityField requires a printable, single-line value that fits a
// cookie line.
func checkIdentityField(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is required", name)
	case len(v) > maxIdentityLen:
		return fmt.Errorf("%s longer than %d bytes", name, maxIdentityLen)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x21 || r == 0x7f || r == '=' }):
		return fmt.Errorf("%s %q has spaces, control characters or '='", name, v)
	}
	return nil
}

// Hooks observe the storage without tying it to a metrics library. Every
// hook is optional and runs on the goroutine doing the work (the flusher,
// a Checkpoint caller, a GC caller), so it must be fast and must not call
// back into the Storage.
type Hooks struct {
	// Flushed is called after each flush of the write buffer, successful
	// or not.
	Flushed func(FlushInfo)
	// Compacted is called after GC finished with an entry log file (moved
	// its live entries and removed it), or failed on it.
	Compacted func(CompactInfo)
}

// FlushInfo describes one flush.
type FlushInfo struct {
	Entries  int           // entries written to the entry log
	Bytes    int64         // frame bytes written
	Ledgers  int           // ledger metadata rows written
	Duration time.Duration // swap to index commit
	Paced    time.Duration // of Duration, spent waiting for the pacing schedule (MaxFlushSpread)
	Spread   time.Duration // the span its writes were scheduled over; 0 when not paced
	Hurried  bool          // adds waited for buffer space (or the storage closed) and cut the schedule short
	Err      error
}

// CompactInfo describes GC's work on one entry log file.
type CompactInfo struct {
	File         uint64  // entry log file id
	FileBytes    int64   // its size
	LiveRatio    float64 // estimated before compaction
	EntriesMoved int     // live entries copied to the current log
	BytesMoved   int64   // their frame bytes
	Err          error
}

// Stats are cumulative counters since Open.
type Stats struct {
	Adds            uint64 // entries added
	AddBytes        uint64 // payload bytes added
	ReplayDropped   uint64 // replay adds dropped because the ledger was deleted
	BufferFullWaits uint64 // adds that waited for buffer space
	BufferFullErrs  uint64 // adds that gave up with ErrBufferFull
	Reads           uint64 // entries returned by reads
	ReadBytes       uint64 // payload bytes returned by reads
	LogReads        uint64 // reads of entry log files: one per entry, or per run of adjacent entries in a range read
	Flushes         uint64 // successful flushes
	FlushedEntries  uint64 // entries written by flushes
	FlushedBytes    uint64 // frame bytes written by flushes
	FilesRemoved    uint64 // entry log files removed by GC
	BytesReclaimed  uint64 // their sizes
	EntriesMoved    uint64 // live entries GC copied
	LogFiles        int    // entry log files now
	LogFilesCreated uint64 // entry log files started since Open (a rotation each, the first one included)
}

type stats struct {
	adds, addBytes, replayDropped, bufferWaits, bufferErrs   atomic.Uint64
	reads, readBytes, flushes, flushedEntries, flushBytes    atomic.Uint64
	filesRemoved, bytesReclaimed, entriesMoved, filesCreated atomic.Uint64
}
