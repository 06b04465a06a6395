package journal

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// Checkpoint records that every record up to and including seq is durable
// elsewhere (the bookie flushed its entry log and index), so Open will not
// replay them and journal files holding nothing after seq are recycled
// (up to Config.RecycleFiles of them are renamed recycle-*.log, and the
// directory synced, to become later journal files) or deleted (in steps:
// removeFile).
//
// seq must not exceed Durable (ErrCheckpointAhead). A seq at or below the
// current checkpoint is a no-op: checkpoints only move forward. The
// checkpoint is persisted (write temporary file, fsync, rename, fsync dir)
// before any file is recycled or deleted. The newest file never is. A file
// whose deletion fails stays until the next Open, which deletes it; the
// error is returned but the checkpoint stands.
//
// Checkpoint may run concurrently with appends; concurrent Checkpoint calls
// are serialized.
func (j *Journal) Checkpoint(seq uint64) error {
	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	if j.ckptClosed {
		return ErrClosed
	}
	if seq <= j.ckpt.Load() {
		return nil
	}
	if d := j.durable.Load(); seq > d {
		return fmt.Errorf("%w: checkpoint %d, durable %d", ErrCheckpointAhead, seq, d)
	}
	if err := durable.WriteFileAtomic(j.fs, j.cfg.Dir, checkpointName, encodeCheckpoint(seq)); err != nil {
		return fmt.Errorf("journal: persist checkpoint %d: %w", seq, err)
	}
	j.ckpt.Store(seq)

	j.filesMu.Lock()
	var obsolete []fileMeta
	for len(j.files) > 1 && j.files[1].firstSeq <= seq+1 {
		obsolete = append(obsolete, j.files[0])
		j.files = j.files[1:]
	}
	j.filesMu.Unlock()
	// Obsolete files become recycled files while the pool has room (see
	// Config.RecycleFiles), else they are deleted. The renames are made
	// durable before a recycled file can be reused: reuse rewrites the
	// header, and a crash must never find that header under the old name.
	// (Open syncs the directory before reusing recycled files it found.)
	var errs, removed, recycled = []error(nil), 0, []string(nil)
	room := j.poolRoom()
	for _, fm := range obsolete {
		path := j.fs.PathJoin(j.cfg.Dir, fileName(fm.fileSeq))
		if len(recycled) < room {
			name := recycleName(fm.fileSeq)
			err := j.fs.Rename(path, j.fs.PathJoin(j.cfg.Dir, name))
			if err == nil {
				recycled = append(recycled, name)
				continue
			}
			j.log.Warn("journal: could not recycle an obsolete file, deleting it", slog.String("file", fileName(fm.fileSeq)), slog.Any("err", err))
		}
		if err := removeFile(j.fs, path); err != nil {
			errs = append(errs, err)
		} else {
			removed++
		}
	}
	if len(recycled) > 0 {
		if err := durable.SyncDir(j.fs, j.cfg.Dir); err != nil {
			// Not reused: Open finds them (or the old names) and decides.
			errs = append(errs, fmt.Errorf("sync journal dir after recycling files: %w", err))
		} else {
			j.filesMu.Lock()
			j.pool = append(j.pool, recycled...)
			j.filesMu.Unlock()
		}
	}
	j.log.Debug("journal checkpoint", slog.Uint64("seq", seq), slog.Int("removed_files", removed), slog.Int("recycled_files", len(recycled)))
	if len(errs) > 0 {
		return fmt.Errorf("journal: checkpoint %d persisted, removing old files: %w", seq, errors.Join(errs...))
	}
	return nil
}

// poolRoom is how many more files the recycled pool may take.
func (j *Journal) poolRoom() int {
	j.filesMu.Lock()
	defer j.filesMu.Unlock()
	return max(j.cfg.RecycleFiles-len(j.pool), 0)
}
