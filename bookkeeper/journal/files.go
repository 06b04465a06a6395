package journal

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// Names in the journal directory.
const (
	filePrefix     = "journal-"
	fileSuffix     = ".log"
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

// createJournalFile makes journal file h.fileSeq appear atomically with a
// durable header: it is written and synced under a temporary name, renamed,
// and the directory synced. The file is returned open for appending, its
// write position after the header. Hence every journal file that exists
// under its final name has a complete, synced header.
func createJournalFile(fs vfs.FS, dir string, h fileHeader) (vfs.File, error) {
	var hdr [FileHeaderSize]byte
	h.encode(hdr[:])
	f, err := durable.CreateWithHeader(fs, dir, fileName(h.fileSeq), hdr[:])
	if err != nil {
		return nil, fmt.Errorf("create journal file %d: %w", h.fileSeq, err)
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
