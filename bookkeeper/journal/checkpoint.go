package journal

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// Checkpoint records that every record up to and including seq is durable
// elsewhere (the bookie flushed its entry log and index), so Open will not
// replay them and journal files holding nothing after seq are deleted.
//
// seq must not exceed Durable (ErrCheckpointAhead). A seq at or below the
// current checkpoint is a no-op: checkpoints only move forward. The
// checkpoint is persisted (write temporary file, fsync, rename, fsync dir)
// before any file is deleted (in steps: removeFile). The newest file is
// never deleted. A file
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
	var errs []error
	for _, fm := range obsolete {
		if err := removeFile(j.fs, j.fs.PathJoin(j.cfg.Dir, fileName(fm.fileSeq))); err != nil {
			errs = append(errs, err)
		}
	}
	j.log.Debug("journal checkpoint", slog.Uint64("seq", seq), slog.Int("removed_files", len(obsolete)-len(errs)))
	if len(errs) > 0 {
		return fmt.Errorf("journal: checkpoint %d persisted, removing old files: %w", seq, errors.Join(errs...))
	}
	return nil
}
