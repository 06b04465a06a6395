package journal

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// Names in the journal directory.
const (
	filePrefix = "journal-"
	fileSuffix = ".log"
	// recyclePrefix names an obsolete journal file kept to be reused
	// (Config.RecycleFiles): recycle-<its old file sequence>.log.
	recyclePrefix  = "recycle-"
	checkpointName = "CHECKPOINT"
	lockName       = "LOCK"
	// cookieName is the bookie's identity cookie for this directory
	// (written by bookkeeper/bookie; the journal only leaves it alone).
	cookieName = "COOKIE"
	tmpSuffix  = durable.TmpSuffix
)

// fileName is the name of journal file seq: 16 hex digits sort by sequence.
func fileName(seq uint64) string {
	return fmt.Sprintf("%s%016x%s", filePrefix, seq, fileSuffix)
}

// parseFileName returns the file sequence number of a journal file name.
func parseFileName(name string) (uint64, bool) { return parseSeqName(name, filePrefix) }

// parseSeqName parses prefix, 16 hex digits and fileSuffix.
func parseSeqName(name, prefix string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	hex, ok = strings.CutSuffix(hex, fileSuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

// recycleName is the name of obsolete journal file seq once it is kept
// for reuse.
func recycleName(seq uint64) string {
	return fmt.Sprintf("%s%016x%s", recyclePrefix, seq, fileSuffix)
}

// isRecycleName reports whether name is a file kept for reuse (exactly
// the form recycleName makes: nothing else in the directory is touched).
func isRecycleName(name string) bool {
	_, ok := parseSeqName(name, recyclePrefix)
	return ok
}

// fileMeta is what the journal remembers about a live journal file.
type fileMeta struct {
	fileSeq  uint64
	firstSeq uint64
	version  uint16
}

// createJournalFile makes journal file h.fileSeq appear atomically with a
// durable header: it is written and synced under a temporary name, renamed,
// and the directory synced. The file is returned open for appending, its
// write position after the header. Hence every journal file that exists
// under its final name has a complete, synced header.
//
// The writer writes at explicit offsets (a group's terminator is
// overwritten by the next group), so the file is reopened read-write.
func createJournalFile(fs vfs.FS, dir string, h fileHeader) (vfs.File, error) {
	var hdr [FileHeaderSize]byte
	h.encode(hdr[:])
	f, err := durable.CreateWithHeader(fs, dir, fileName(h.fileSeq), hdr[:])
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		f, err = fs.OpenReadWrite(fs.PathJoin(dir, fileName(h.fileSeq)), vfs.WriteCategoryUnspecified)
	}
	if err != nil {
		return nil, fmt.Errorf("create journal file %d: %w", h.fileSeq, err)
	}
	return f, nil
}

// reuseJournalFile turns the recycled file dir/pooled into journal file
// h.fileSeq: it writes the new header and a terminator over the start of
// the old contents, syncs them, and only then renames the file and syncs
// the directory. A crash before the rename leaves a recycled file (whose
// contents nobody reads); after it, a journal file with a durable header
// and no records. Its stale bytes beyond the terminator are records
// checksummed from another file sequence's seed (fileHeader.seed), so they
// never decode as records of this file.
//
// Appends to a recycled file overwrite allocated blocks within its size,
// so their fdatasyncs need no filesystem metadata commit, and no obsolete
// file is ever unlinked.
func reuseJournalFile(fs vfs.FS, dir, pooled string, h fileHeader) (vfs.File, error) {
	f, err := fs.OpenReadWrite(fs.PathJoin(dir, pooled), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("reuse %s as journal file %d: %w", pooled, h.fileSeq, err)
	}
	var b [FileHeaderSize + terminatorSize]byte
	h.encode(b[:])
	if _, err = f.WriteAt(b[:], 0); err == nil {
		err = f.SyncData()
	}
	if err == nil {
		err = fs.Rename(fs.PathJoin(dir, pooled), fs.PathJoin(dir, fileName(h.fileSeq)))
	}
	if err == nil {
		err = durable.SyncDir(fs, dir)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reuse %s as journal file %d: %w", pooled, h.fileSeq, err), f.Close())
	}
	return f, nil
}

// readCheckpoint returns the persisted checkpoint, 0 if there is none.
func readCheckpoint(fs vfs.FS, dir string) (uint64, error) {
	f, err := fs.Open(fs.PathJoin(dir, checkpointName))
	if err != nil {
		if durable.IsNotExist(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("open checkpoint: %w", err)
	}
	defer f.Close()
	// One byte more than the format's size, to notice a longer file.
	b := make([]byte, checkpointSize+1)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read checkpoint: %w", err)
	}
	seq, err := decodeCheckpoint(b[:n])
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return seq, nil
}

// Freeing an obsolete file's space in steps (removeFile): on ext4, one
// unlink of a 32 MiB journal file took 30-80 ms on this project's CI
// machine, and the journal's own fdatasyncs stalled behind it (35-52 ms,
// in a Go execution trace of a bookie under 10k records/s): the freed
// blocks go into the filesystem's journal transaction the fsyncs wait on.
// Truncating 4 MiB at a time with a short pause between steps lets the
// fsyncs in between (in a probe beside a 64 KiB write+fdatasync loop: max
// 4-5 ms against 17-20 ms for plain unlinks).
const (
	removeStep  = 4 << 20
	removePause = 5 * time.Millisecond
)

// removeFile deletes an obsolete journal file, first shrinking it in
// removeStep steps when the file system's files can be truncated; it
// keeps the header until the unlink, so a crash in between leaves a file
// Open still recognizes (and deletes as obsolete).
func removeFile(fs vfs.FS, path string) error {
	if fi, err := fs.Stat(path); err == nil && fi.Size() > FileHeaderSize+removeStep {
		if f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified); err == nil {
			if t, ok := f.(interface{ Truncate(size int64) error }); ok {
				for size := fi.Size() - removeStep; size > FileHeaderSize; size -= removeStep {
					if t.Truncate(size) != nil {
						break
					}
					time.Sleep(removePause)
				}
			}
			_ = f.Close()
		}
	}
	return fs.Remove(path)
}
