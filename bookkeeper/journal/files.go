package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Names in the journal directory.
const (
	filePrefix     = "journal-"
	fileSuffix     = ".log"
	checkpointName = "CHECKPOINT"
	lockName       = "LOCK"
	tmpSuffix      = ".tmp"
)

// fileName is the name of journal file seq: 16 hex digits sort by sequence.
func fileName(seq uint64) string {
	return fmt.Sprintf("%s%016x%s", filePrefix, seq, fileSuffix)
}

// parseFileName returns the file sequence number of a journal file name.
func parseFileName(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, filePrefix)
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

// fileMeta is what the journal remembers about a live journal file.
type fileMeta struct {
	fileSeq  uint64
	firstSeq uint64
}

// syncDir makes the directory's entries (creations, renames, removals) durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open dir: %w", err)
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// createJournalFile makes journal file h.fileSeq appear atomically with a
// durable header: it is written and synced under a temporary name, renamed,
// and the directory synced. The file is returned open for appending, its
// write position after the header. Hence every journal file that exists
// under its final name has a complete, synced header.
func createJournalFile(fs vfs.FS, dir string, h fileHeader) (vfs.File, error) {
	name := fs.PathJoin(dir, fileName(h.fileSeq))
	tmp := name + tmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("create journal file: %w", err)
	}
	var hdr [FileHeaderSize]byte
	h.encode(hdr[:])
	err = writeFull(f, hdr[:])
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fs.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(fs, dir)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create journal file %d: %w", h.fileSeq, err), f.Close())
	}
	return f, nil
}

// writeFileAtomic replaces dir/name with data: write a temporary file, sync
// it, rename it over name, sync the directory.
func writeFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	path := fs.PathJoin(dir, name)
	tmp := path + tmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = writeFull(f, data)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(fs, dir)
}

func writeFull(f vfs.File, b []byte) error {
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// readCheckpoint returns the persisted checkpoint, 0 if there is none.
func readCheckpoint(fs vfs.FS, dir string) (uint64, error) {
	f, err := fs.Open(fs.PathJoin(dir, checkpointName))
	if err != nil {
		if isNotExist(err) {
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

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// mkdirDurable creates dir and any missing parents, and syncs the parent of
// each directory it created so the new entries survive a crash (a new
// directory is only durable once its parent's entry is).
func mkdirDurable(fs vfs.FS, dir string) error {
	var created []string
	for d := dir; ; {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !isNotExist(err) {
			return err
		}
		created = append(created, d)
		parent := fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncDir(fs, fs.PathDir(created[i])); err != nil {
			return err
		}
	}
	return nil
}
