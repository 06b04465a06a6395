package storage

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// Names in the ledger directory.
const (
	logPrefix    = "entrylog-"
	logSuffix    = ".log"
	tmpSuffix    = durable.TmpSuffix
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

// createLogFile makes entry log file h.fileID appear atomically with a
// durable header (written and synced under a temporary name, renamed, the
// directory synced) and returns it open for appending after the header.
// Hence every entry log under its final name has a complete, valid header.
func createLogFile(fs vfs.FS, dir string, h logHeader) (vfs.File, error) {
	f, err := durable.CreateWithHeader(fs, dir, logName(h.fileID), h.encode())
	if err != nil {
		return nil, fmt.Errorf("create entry log %d: %w", h.fileID, err)
	}
	return f, nil
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
