package journal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// writerState is owned by the writer goroutine (and read by Close after the
// writer stopped).
type writerState struct {
	file    vfs.File // the newest journal file, open for appending
	fileSeq uint64
	seed    uint32 // record checksum seed of the file (fileHeader.seed)
	off     int64  // bytes of records in file; all of them are synced between groups
}

// runWriter is the group-commit loop: take the next group, write it with one
// call, fsync once, hand it to the completer; until Close drained the queue
// or an I/O error failed the journal.
func (j *Journal) runWriter() {
	defer close(j.writerDone)
	defer close(j.completions)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		b := j.nextGroup(timer)
		if b == nil {
			return
		}
		if err := j.commit(b); err != nil {
			j.fail(b, err)
			return
		}
		j.completions <- b
	}
}

// nextGroup blocks until a group should be written and returns it, or nil
// when the journal is closing and nothing is left. A sealed (full) batch
// goes at once; a partial one goes when MaxGroupWait has passed since its
// first record was queued (at once if that is zero, or when closing).
func (j *Journal) nextGroup(timer *time.Timer) *batch {
	for {
		j.mu.Lock()
		if len(j.sealed) > 0 {
			b := j.sealed[0]
			j.sealed[0] = nil
			j.sealed = j.sealed[1:]
			j.mu.Unlock()
			return b
		}
		if b := j.open; b != nil {
			wait := time.Duration(0)
			if j.cfg.MaxGroupWait > 0 && !j.closing {
				wait = time.Until(b.queuedAt.Add(j.cfg.MaxGroupWait))
			}
			if wait <= 0 {
				j.open = nil
				j.mu.Unlock()
				return b
			}
			j.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-j.wake:
				timer.Stop()
			case <-timer.C:
			}
			continue
		}
		closing := j.closing
		j.mu.Unlock()
		if closing {
			return nil
		}
		<-j.wake
	}
}

// commit writes group b at the end of the newest file (rotating first if it
// would not fit) and fsyncs it.
func (j *Journal) commit(b *batch) error {
	w := &j.w
	if w.off+int64(len(b.buf))+terminatorSize > j.cfg.MaxFileSize && w.off > FileHeaderSize {
		if err := j.rotate(b.firstSeq); err != nil {
			return err
		}
	}
	// Everything before the group's start is synced: the previous group
	// was, and so was the header. Every record says so.
	groupStart := uint64(w.off)
	for p := 0; p < len(b.buf); {
		p += sealRecord(b.buf[p:], w.seed, groupStart)
	}
	info := GroupInfo{Records: len(b.dones), Bytes: len(b.buf), FirstSeq: b.firstSeq}
	start := time.Now()
	info.Wait = start.Sub(b.queuedAt)
	// The group and a terminator after it, in one write at the group's
	// offset: the next group overwrites the terminator.
	n := len(b.buf)
	b.buf = append(b.buf, terminator[:]...)
	written, err := w.file.WriteAt(b.buf, w.off)
	if err == nil && written != len(b.buf) {
		err = io.ErrShortWrite
	}
	b.buf = b.buf[:n]
	info.WriteTime = time.Since(start)
	if err == nil {
		w.off += int64(len(b.buf))
		syncStart := time.Now()
		if !sabotageFsync {
			err = w.file.SyncData()
		}
		info.SyncTime = time.Since(syncStart)
	}
	if err != nil {
		err = fmt.Errorf("group of %d records at %s offset %d: %w", len(b.dones), fileName(w.fileSeq), groupStart, err)
		info.Err = err
	} else {
		j.stats.groups.Add(1)
		j.stats.groupBytes.Add(uint64(len(b.buf)))
		j.stats.recordSync(info.SyncTime)
		j.durable.Store(b.firstSeq + uint64(len(b.dones)) - 1)
	}
	if h := j.cfg.Hooks.GroupCommitted; h != nil {
		h(info)
	}
	return err
}

// terminator is what follows every group (see terminatorSize).
var terminator [terminatorSize]byte

// startFile makes journal file h, durable with its header and no records:
// a recycled file when there is one, else a new file.
func (j *Journal) startFile(h fileHeader) (vfs.File, error) {
	j.filesMu.Lock()
	var pooled string
	if len(j.pool) > 0 {
		pooled = j.pool[0]
		j.pool = j.pool[1:]
	}
	j.filesMu.Unlock()
	if pooled != "" {
		f, err := reuseJournalFile(j.fs, j.cfg.Dir, pooled, h)
		if err == nil {
			j.stats.reused.Add(1)
			return f, nil
		}
		// A recycled file is only an optimization: drop it and make a new
		// one (which replaces the file if the rename already happened).
		j.log.Warn("journal: recycled file not reusable, deleting it", slog.String("file", pooled), slog.Any("err", err))
		_ = j.fs.Remove(j.fs.PathJoin(j.cfg.Dir, pooled))
	}
	return createJournalFile(j.fs, j.cfg.Dir, h)
}

// rotate closes the newest file (fully synced) and starts the next one,
// whose first record will be firstSeq.
func (j *Journal) rotate(firstSeq uint64) error {
	w := &j.w
	h := fileHeader{fileSeq: w.fileSeq + 1, firstSeq: firstSeq, version: formatVersion}
	f, err := j.startFile(h)
	if err != nil {
		return err
	}
	old := w.file
	*w = writerState{file: f, fileSeq: h.fileSeq, seed: h.seed(), off: FileHeaderSize}
	j.filesMu.Lock()
	j.files = append(j.files, fileMeta(h))
	j.filesMu.Unlock()
	j.stats.rotations.Add(1)
	if hook := j.cfg.Hooks.FileRotated; hook != nil {
		hook(h.fileSeq)
	}
	if err := old.Close(); err != nil {
		return fmt.Errorf("close rotated journal file: %w", err)
	}
	return nil
}

// fail makes the journal refuse all further appends after an I/O error, and
// fails the group that hit it and every queued one with the same error.
// There is no retry: see ErrFailed.
func (j *Journal) fail(b *batch, cause error) {
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	j.log.Error("journal failed", slog.String("dir", j.cfg.Dir), slog.Any("err", cause))
	j.mu.Lock()
	if j.err == nil || errors.Is(j.err, ErrClosed) {
		j.err = err
	}
	j.failErr = err
	pending := append([]*batch{b}, j.sealed...)
	if j.open != nil {
		pending = append(pending, j.open)
	}
	j.sealed, j.open = nil, nil
	j.broadcastSpaceLocked()
	j.mu.Unlock()
	for _, p := range pending {
		p.err = err
		j.completions <- p
	}
}

// runCompleter runs DoneFuncs group by group, in sequence order, then frees
// the group's queue space.
func (j *Journal) runCompleter() {
	defer close(j.complDone)
	for b := range j.completions {
		if b.err == nil {
			// Counted first, so a caller told "durable" sees itself counted.
			j.stats.appends.Add(uint64(len(b.dones)))
			j.stats.appendBytes.Add(uint64(len(b.buf) - len(b.dones)*RecordHeaderSize))
			for i, done := range b.dones {
				done(b.firstSeq+uint64(i), nil)
			}
		} else {
			for _, done := range b.dones {
				done(0, b.err)
			}
		}
		j.release(b)
	}
}

// release returns a completed group's queue space and recycles its buffers.
func (j *Journal) release(b *batch) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.queuedBytes -= len(b.buf)
	j.queuedRecords -= len(b.dones)
	j.broadcastSpaceLocked()
	if len(j.free) < 4 && cap(b.buf) <= 2*j.cfg.GroupBytes {
		clear(b.dones)
		*b = batch{buf: b.buf[:0], dones: b.dones[:0]}
		j.free = append(j.free, b)
	}
}
