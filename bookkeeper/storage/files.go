package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Names in the ledger directory.
const (
	logPrefix    = "entrylog-"
	logSuffix    = ".log"
	tmpSuffix    = ".tmp"
	lockName     = "LOCK"
	pebbleSubdir = "pebble"
)

// logName is the name of entry log file id: 16 hex digits sort by id.
func logName(id uint64) string { return fmt.Sprintf("%s%016x%s", logPrefix, id, logSuffix) }

func parseLogName(name string) (uint64, bool) {
	h, ok := strings.CutPrefix(name, logPrefix)
	if !ok {
		return 0, false
	}
	h, ok = strings.CutSuffix(h, logSuffix)
	if !ok || len(h) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(h, 16, 64)
	return id, err == nil && id > 0
}

// syncDir makes the directory's entries (creations, renames, removals) durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	return errors.Join(d.Sync(), d.Close())
}

// writeFileAtomic replaces dir/name with data: write a temporary file, sync
// it, rename it over name, sync the directory.
func writeFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	p := fs.PathJoin(dir, name)
	tmp := p + tmpSuffix
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
	if err := fs.Rename(tmp, p); err != nil {
		return err
	}
	return syncDir(fs, dir)
}

// createLogFile makes entry log file h.fileID appear atomically with a
// durable header (written and synced under a temporary name, renamed, the
// directory synced) and returns it open for appending after the header.
// Hence every entry log under its final name has a complete, valid header.
func createLogFile(fs vfs.FS, dir string, h logHeader) (vfs.File, error) {
	name := fs.PathJoin(dir, logName(h.fileID))
	tmp := name + tmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("create entry log %d: %w", h.fileID, err)
	}
	err = writeFull(f, h.encode())
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
		return nil, errors.Join(fmt.Errorf("create entry log %d: %w", h.fileID, err), f.Close())
	}
	return f, nil
}

func writeFull(f vfs.File, b []byte) error {
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// mkdirDurable creates dir and any missing parents, and syncs the parent of
// each directory it created so the new entries survive a crash.
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

// readLogHeader reads and checks the header of entry log file id.
func readLogHeader(fs vfs.FS, dir string, id uint64, storageID [storageIDSize]byte) error {
	name := fs.PathJoin(dir, logName(id))
	f, err := fs.Open(name)
	if err != nil {
		return fmt.Errorf("open entry log %s: %w", name, err)
	}
	defer f.Close()
	b := make([]byte, LogHeaderSize)
	if _, err := f.ReadAt(b, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("entry log %s: %w", name, corruptf("shorter than its header"))
		}
		return fmt.Errorf("read entry log %s: %w", name, err)
	}
	h, err := decodeLogHeader(b)
	if err != nil {
		return fmt.Errorf("entry log %s: %w", name, err)
	}
	if h.fileID != id {
		return fmt.Errorf("entry log %s: %w", name, corruptf("header names file %d", h.fileID))
	}
	if h.storageID != storageID {
		return fmt.Errorf("%w: entry log %s belongs to storage %s, this is %s: a file was copied in from another storage",
			ErrCookieMismatch, name, formatStorageID(h.storageID), formatStorageID(storageID))
	}
	return nil
}
