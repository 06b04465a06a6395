package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// RecoveryInfo describes what Open found.
type RecoveryInfo struct {
	Checkpoint   uint64 // persisted checkpoint: records up to it were not replayed
	LastSeq      uint64 // last record in the journal (0 if none ever); appends continue after it
	Replayed     int    // records passed to the replay function
	Files        int    // journal files read
	RemovedFiles int    // files wholly before the checkpoint, deleted
	TornBytes    int64  // bytes cut from the newest file's torn tail
}

// recovered is the state recoverDir hands to Open.
type recovered struct {
	files []fileMeta // live files, oldest first
	pool  []string   // recycled files to reuse, at most Config.RecycleFiles
	info  RecoveryInfo
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// recoverDir validates the journal in dir, deletes what the checkpoint made
// obsolete, replays every record after the checkpoint, truncates a torn tail
// of the newest file, and makes the newest file durable. The rules are in the
// package doc under "Recovery".
//
// It keeps up to keep recycled files for reuse and deletes the rest. A
// journal with no files and no checkpoint starts its sequence numbers
// afresh, so it deletes every recycled file: their stale records might
// carry sequence numbers the new journal will use.
func recoverDir(fs vfs.FS, dir string, log *slog.Logger, replay ReplayFunc, keep int) (recovered, error) {
	var rec recovered
	names, err := fs.List(dir)
	if err != nil {
		return rec, fmt.Errorf("list journal dir: %w", err)
	}
	var seqs []uint64
	var pool []string
	for _, name := range names {
		switch seq, ok := parseFileName(name); {
		case ok:
			seqs = append(seqs, seq)
		case isRecycleName(name):
			pool = append(pool, name)
		case strings.HasSuffix(name, tmpSuffix):
			// An interrupted atomic write: its final name never took over.
			if err := fs.Remove(fs.PathJoin(dir, name)); err != nil {
				return rec, fmt.Errorf("remove leftover %s: %w", name, err)
			}
		case name == checkpointName || name == lockName || name == cookieName:
		default:
			log.Warn("journal dir holds an unknown file", slog.String("dir", dir), slog.String("name", name))
		}
	}
	slices.Sort(seqs)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			return rec, corruptf("journal files %s and %s are not consecutive", fileName(seqs[i-1]), fileName(seqs[i]))
		}
	}
	ckpt, err := readCheckpoint(fs, dir)
	if err != nil {
		return rec, err
	}
	rec.info.Checkpoint = ckpt

	files := make([]fileMeta, 0, len(seqs))
	for _, seq := range seqs {
		h, err := readFileHeader(fs, dir, seq)
		if err != nil {
			return rec, err
		}
		if n := len(files); n > 0 && h.firstSeq < files[n-1].firstSeq {
			return rec, corruptf("%s starts at record %d, before its predecessor (%d)", fileName(seq), h.firstSeq, files[n-1].firstSeq)
		}
		files = append(files, fileMeta{fileSeq: seq, firstSeq: h.firstSeq, version: h.version})
	}
	slices.Sort(pool)
	if len(files) == 0 && ckpt == 0 {
		keep = 0
	}
	for len(pool) > max(keep, 0) {
		if err := fs.Remove(fs.PathJoin(dir, pool[0])); err != nil {
			return rec, fmt.Errorf("remove recycled journal file: %w", err)
		}
		pool = pool[1:]
	}
	if len(pool) > 0 {
		// A recycled name Checkpoint made may not be durable yet (a crash
		// between its rename and directory sync, with the OS still up):
		// reuse rewrites the header, which must never land under the old
		// journal name.
		if err := durable.SyncDir(fs, dir); err != nil {
			return rec, fmt.Errorf("sync journal dir: %w", err)
		}
	}
	rec.pool = pool

	// Files whose successor starts at or before ckpt+1 hold nothing after
	// the checkpoint. A crash may have stopped Checkpoint before it deleted
	// them all.
	for len(files) > 1 && files[1].firstSeq <= ckpt+1 {
		if err := fs.Remove(fs.PathJoin(dir, fileName(files[0].fileSeq))); err != nil {
			return rec, fmt.Errorf("remove obsolete journal file: %w", err)
		}
		files = files[1:]
		rec.info.RemovedFiles++
	}
	if len(files) == 0 {
		if ckpt > 0 {
			return rec, corruptf("checkpoint at record %d but no journal files", ckpt)
		}
		rec.files = files
		return rec, nil
	}
	if files[0].firstSeq > ckpt+1 {
		return rec, corruptf("records %d to %d are missing: checkpoint at %d, oldest file %s starts at %d",
			ckpt+1, files[0].firstSeq-1, ckpt, fileName(files[0].fileSeq), files[0].firstSeq)
	}

	deliver := func(seq uint64, payload []byte) error {
		if seq <= ckpt || replay == nil {
			return nil
		}
		rec.info.Replayed++
		if err := replay(seq, payload); err != nil {
			return fmt.Errorf("journal replay of record %d: %w", seq, err)
		}
		return nil
	}
	lastSeq := files[0].firstSeq - 1
	for i, fm := range files {
		if fm.firstSeq != lastSeq+1 {
			return rec, corruptf("%s starts at record %d, but its predecessor ends at %d", fileName(fm.fileSeq), fm.firstSeq, lastSeq)
		}
		last, err := replayFile(fs, dir, fm, i == len(files)-1, deliver, &rec.info)
		if err != nil {
			return rec, err
		}
		lastSeq = last
		rec.info.Files++
	}
	if lastSeq < ckpt {
		return rec, corruptf("checkpoint at record %d beyond the journal's last record %d", ckpt, lastSeq)
	}
	rec.info.LastSeq = lastSeq
	rec.files = files
	return rec, nil
}

func readFileHeader(fs vfs.FS, dir string, seq uint64) (fileHeader, error) {
	name := fileName(seq)
	f, err := fs.Open(fs.PathJoin(dir, name))
	if err != nil {
		return fileHeader{}, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	var b [FileHeaderSize]byte
	if n, err := f.ReadAt(b[:], 0); n < len(b) {
		return fileHeader{}, corruptf("%s: header cut short at %d bytes (%v)", name, n, err)
	}
	h, err := decodeFileHeader(b[:])
	if err != nil {
		return fileHeader{}, corruptf("%s: %v", name, err)
	}
	if h.fileSeq != seq {
		return fileHeader{}, corruptf("%s: header says file %d", name, h.fileSeq)
	}
	return h, nil
}

// replayFile scans one file and returns its last record's sequence number.
// A file's records end where it ends or at a terminator (version 2). Other
// damage in any file but the newest is corruption. In the newest it is a
// torn tail, cut off here, unless later data proves it had been synced; a
// terminator in the newest file is checked the same way (zeros may be
// damage too), but nothing is cut: the bytes after it are stale.
func replayFile(fs vfs.FS, dir string, fm fileMeta, newest bool, deliver func(uint64, []byte) error, info *RecoveryInfo) (uint64, error) {
	name := fileName(fm.fileSeq)
	f, err := fs.Open(fs.PathJoin(dir, name))
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	r := newFileReader(f, st.Size())
	res, err := scanFile(r, fileHeader(fm), deliver)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if res.bad == nil || (res.terminated() && !newest) {
		if newest {
			// It may hold bytes a crashed process wrote but never synced: make
			// them durable before a newer file exists, so that every file but
			// the newest is always wholly on disk.
			if err := f.SyncData(); err != nil {
				return 0, fmt.Errorf("sync %s: %w", name, err)
			}
		}
		return res.lastSeq, nil
	}
	if !newest {
		return 0, corruptf("%s offset %d (after record %d): %v", name, res.validEnd, res.lastSeq, res.bad)
	}
	synced, err := provesSyncedBefore(r, fileHeader(fm), res.validEnd, res.lastSeq+1)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if synced {
		return 0, corruptf("%s offset %d (after record %d): %v, and a later record shows it had been synced",
			name, res.validEnd, res.lastSeq, res.bad)
	}
	if res.terminated() {
		// See res.bad == nil above: the newest file's writes made durable.
		if err := f.SyncData(); err != nil {
			return 0, fmt.Errorf("sync %s: %w", name, err)
		}
		return res.lastSeq, nil
	}
	if err := truncateFile(fs, dir, name, r, res.validEnd); err != nil {
		return 0, fmt.Errorf("truncate torn tail of %s: %w", name, err)
	}
	info.TornBytes = r.size - res.validEnd
	return res.lastSeq, nil
}

// truncateFile cuts dir/name to its first size bytes: vfs has no truncate,
// so the prefix is copied to a temporary file, synced and renamed over the
// original (then the directory is synced). A crash in between leaves either
// the original or the truncated file, both of which recover the same way.
func truncateFile(fs vfs.FS, dir, name string, r *fileReader, size int64) error {
	path := fs.PathJoin(dir, name)
	tmp := path + tmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	for off := int64(0); off < size && err == nil; {
		var b []byte
		if b, err = r.at(off, int(min(readWindow, size-off))); err == nil {
			err = durable.WriteFull(f, b)
			off += int64(len(b))
			r.invalidate() // a vfs.File may modify what it writes
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	return durable.SyncDir(fs, dir)
}
