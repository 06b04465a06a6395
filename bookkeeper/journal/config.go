package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults for zero Config fields.
const (
	DefaultMaxRecordSize   = 8<<20 + 64<<10 // an 8 MiB entry plus room for the bookie's own framing
	DefaultGroupBytes      = 512 << 10
	DefaultMaxFileSize     = 32 << 20
	DefaultMaxQueueBytes   = 64 << 20
	DefaultMaxQueueRecords = 1 << 16
	DefaultRecycleFiles    = 4
	// maxRecycleFiles bounds Config.RecycleFiles.
	maxRecycleFiles = 64
)

// Config configures a Journal. Zero fields take the documented defaults;
// Validate reports every violation at once.
type Config struct {
	// Dir is the journal directory (required). It is created if missing and
	// holds nothing but journal files, the checkpoint and a LOCK file.
	Dir string
	// FS is the filesystem; nil means vfs.Default. Tests pass a crashable
	// or error-injecting one.
	FS vfs.FS
	// Logger receives the few journal events worth logging (open, recovery,
	// failure); nil discards them.
	Logger *slog.Logger
	// Hooks observe group commits; see Hooks.
	Hooks Hooks

	// MaxRecordSize bounds one record's payload. Zero means
	// DefaultMaxRecordSize; at most MaxRecordSizeLimit.
	MaxRecordSize int
	// GroupBytes bounds the bytes (framing included) of one group commit: one
	// write and one fsync. A record larger than that forms a group of its own.
	// Zero means DefaultGroupBytes.
	GroupBytes int
	// MaxGroupWait is how long the writer, once idle, may wait for a partial
	// group to fill before writing it, measured from when the group's first
	// record was queued. Zero (the default) writes whatever is queued as soon
	// as the previous fsync returns. See "Group commit" in the package doc
	// for the trade-off and measurements.
	MaxGroupWait time.Duration
	// MaxFileSize bounds a journal file; the writer rotates before a group
	// that would cross it. Zero means DefaultMaxFileSize. It must hold the
	// file header plus the largest possible group. The default is small
	// (32 MiB): with 256 MiB files, three bookies journaling 10 MB/s each
	// on one disk showed publish p99 spikes of ~120 ms every ~26 s — the
	// time one file took to fill — and with 32 MiB the same run's publish
	// p99 fell from 81 to 42 ms (S2 in process mode, one run each). The
	// likely cost was rotating to, and trimming by removing, large files;
	// since then obsolete files are reused instead (RecycleFiles).
	MaxFileSize int64
	// RecycleFiles is how many journal files made obsolete by checkpoints
	// are kept (renamed recycle-*.log) to become later journal files,
	// instead of being deleted. A recycled file's blocks are already
	// allocated, so appends overwrite within its size: their fdatasyncs
	// write data only, with no filesystem journal commit, and obsolete
	// files are not unlinked (on ext4 with the discard option an unlink
	// stalled the fsyncs around it). It costs up to RecycleFiles x
	// MaxFileSize of disk. Zero means DefaultRecycleFiles; negative turns
	// reuse off (obsolete files are deleted); at most 64.
	RecycleFiles int
	// MaxQueueBytes and MaxQueueRecords bound the records accepted by Append
	// and not yet acknowledged (queued, being written, or being completed).
	// Zero means DefaultMaxQueueBytes / DefaultMaxQueueRecords. MaxQueueBytes
	// counts framing and must hold the largest record.
	MaxQueueBytes   int
	MaxQueueRecords int
}

// withDefaults returns c with zero fields replaced by defaults.
func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxRecordSize == 0 {
		c.MaxRecordSize = DefaultMaxRecordSize
	}
	if c.GroupBytes == 0 {
		c.GroupBytes = DefaultGroupBytes
	}
	if c.MaxFileSize == 0 {
		c.MaxFileSize = DefaultMaxFileSize
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if c.MaxQueueRecords == 0 {
		c.MaxQueueRecords = DefaultMaxQueueRecords
	}
	if c.RecycleFiles == 0 {
		c.RecycleFiles = DefaultRecycleFiles
	}
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Dir == "" {
		bad("Dir is required")
	}
	if c.MaxRecordSize < 0 || c.MaxRecordSize > MaxRecordSizeLimit {
		bad("MaxRecordSize %d outside [1, %d]", c.MaxRecordSize, MaxRecordSizeLimit)
	}
	if c.GroupBytes < RecordHeaderSize || c.GroupBytes > 64<<20 {
		bad("GroupBytes %d outside [%d, %d]", c.GroupBytes, RecordHeaderSize, 64<<20)
	}
	if c.MaxGroupWait < 0 || c.MaxGroupWait > time.Second {
		bad("MaxGroupWait %v outside [0, 1s]", c.MaxGroupWait)
	}
	largestGroup := int64(max(c.GroupBytes, RecordHeaderSize+c.MaxRecordSize)) + terminatorSize
	if c.MaxFileSize < FileHeaderSize+largestGroup || c.MaxFileSize > 1<<40 {
		bad("MaxFileSize %d outside [%d, %d] (file header plus the largest group and its terminator)", c.MaxFileSize, FileHeaderSize+largestGroup, int64(1)<<40)
	}
	if c.MaxQueueBytes < RecordHeaderSize+c.MaxRecordSize {
		bad("MaxQueueBytes %d below the largest record with framing (%d)", c.MaxQueueBytes, RecordHeaderSize+c.MaxRecordSize)
	}
	if c.MaxQueueRecords < 1 {
		bad("MaxQueueRecords %d below 1", c.MaxQueueRecords)
	}
	if c.RecycleFiles > maxRecycleFiles {
		bad("RecycleFiles %d above %d", c.RecycleFiles, maxRecycleFiles)
	}
	if len(errs) > 0 {
		return fmt.Errorf("journal config: %w", errors.Join(errs...))
	}
	return nil
}
