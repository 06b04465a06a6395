package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/bookkeeper/internal/durable"
)

// GCResult sums up one GC pass.
type GCResult struct {
	FilesChecked   int   // entry log files considered (all but the current one)
	FilesCompacted int   // files whose live entries were moved
	FilesRemoved   int   // files removed (compacted ones, and ones with nothing live)
	EntriesMoved   int   // live entries copied to the current entry log
	BytesMoved     int64 // their frame bytes
	BytesReclaimed int64 // sizes of the removed files
}

// GC reclaims entry log space: every entry log file except the current
// one whose live ratio is below Options.GCThreshold has its live entries
// copied to the current log (in steps of Options.GCChunkBytes: append,
// sync, then repoint the index in one synced commit), and is then
// removed. Every step is crash-safe; see "Garbage collection" in the
// package doc. One GC runs at a time; adds, reads, flushes and
// checkpoints go on meanwhile (each step briefly holds the flush lock).
//
// GC stops at the first problem and returns it: ctx ending, the storage
// closing, or a live entry failing its checksum (ErrCorrupt — GC never
// copies or skips a corrupt entry; the operator decides).
func (s *Storage) GC(ctx context.Context) (GCResult, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	var res GCResult
	if err := s.usable(); err != nil {
		return res, err
	}
	for _, id := range s.gcCandidates() {
		if err := s.gcContinue(ctx); err != nil {
			return res, err
		}
		res.FilesChecked++
		p, err := s.planFile(id)
		if err != nil {
			return res, err
		}
		if p.liveRatio >= s.opts.GCThreshold {
			continue
		}
		info := CompactInfo{File: id, FileBytes: p.size, LiveRatio: p.liveRatio}
		err = s.compactFile(ctx, p, &info)
		if err == nil {
			err = s.removeFile(id)
		}
		info.Err = err
		if h := s.opts.Hooks.Compacted; h != nil {
			h(info)
		}
		if err != nil {
			return res, fmt.Errorf("gc entry log %d: %w", id, err)
		}
		if info.EntriesMoved > 0 {
			res.FilesCompacted++
		}
		res.FilesRemoved++
		res.EntriesMoved += info.EntriesMoved
		res.BytesMoved += info.BytesMoved
		res.BytesReclaimed += p.size
		s.stats.filesRemoved.Add(1)
		s.stats.bytesReclaimed.Add(uint64(p.size))
		s.stats.entriesMoved.Add(uint64(info.EntriesMoved))
		s.log.Debug("storage compacted entry log", slog.Uint64("file", id), slog.Float64("live_ratio", p.liveRatio),
			slog.Int("entries_moved", info.EntriesMoved))
	}
	return res, nil
}

// gcContinue is nil while GC may go on.
func (s *Storage) gcContinue(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.usable()
}

// gcCandidates returns the entry log ids older than the current one,
// oldest first. Ids only grow and only a flush or a GC step (both under
// flushMu) rotates, so once flushMu is held every older file is sealed:
// fully written, synced, and its 'u' rows committed. Newer files are not
// candidates even if they exist by the time GC reaches them: a flush may
// have rotated meanwhile, and the file it is writing must never be
// planned from its half-committed 'u' rows and removed.
func (s *Storage) gcCandidates() []uint64 {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	cur := s.w.id
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []uint64
	for id := range s.files {
		if id < cur {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// filePlan is what GC knows of a file before compacting it.
type filePlan struct {
	id        uint64
	size      int64
	live      []int64 // live ledgers with frames in the file (usage rows)
	liveRatio float64
}

// planFile estimates a file's live ratio from its usage rows: the bytes
// of frames of ledgers that still exist, over the file's bytes. Frames
// written twice or never indexed (a crash before the index commit) count
// as live or dead respectively, so the estimate errs towards keeping.
func (s *Storage) planFile(id uint64) (filePlan, error) {
	p := filePlan{id: id}
	fi, err := s.fs.Stat(s.fs.PathJoin(s.opts.Dir, logName(id)))
	if err != nil {
		return p, fmt.Errorf("stat entry log %d: %w", id, err)
	}
	p.size = fi.Size()
	lo, hi := fileUsageSpan(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return p, err
	}
	var liveBytes uint64
	for valid := it.First(); valid; valid = it.Next() {
		_, ledger, ok := decodeUsageKey(it.Key())
		n, err := decodeU64(it.Key(), it.Value())
		if !ok || err != nil {
			return p, errors.Join(fmt.Errorf("index usage row %x: %w", it.Key(), errors.Join(err, corruptf("usage row"))), it.Close())
		}
		alive, err := s.ledgerAlive(ledger)
		if err != nil {
			return p, errors.Join(err, it.Close())
		}
		if alive {
			p.live = append(p.live, ledger)
			liveBytes += n
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return p, err
	}
	if body := p.size - LogHeaderSize; body > 0 {
		p.liveRatio = float64(liveBytes) / float64(body)
	}
	return p, nil
}

// ledgerAlive reports whether ledger exists and is not deleted, without
// caching what it loads.
func (s *Storage) ledgerAlive(ledger int64) (bool, error) {
	s.mu.Lock()
	st, ok := s.ledgers[ledger]
	alive := st.known()
	s.mu.Unlock()
	if ok {
		return alive, nil
	}
	key := metaKey(ledger)
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	m, err := decodeMeta(key, v)
	if err != nil {
		return false, fmt.Errorf("ledger %d metadata: %w", ledger, err)
	}
	return m.flags&flagDeleted == 0 && m.masterKey != nil, nil
}

// candidate is an index entry found pointing into the file being compacted.
type candidate struct {
	entry int64
	loc   location
}

// compactFile moves every index entry of p's live ledgers that points
// into p's file to the current entry log.
func (s *Storage) compactFile(ctx context.Context, p filePlan, info *CompactInfo) error {
	for _, ledger := range p.live {
		for next := int64(0); next >= 0; {
			if err := s.gcContinue(ctx); err != nil {
				return err
			}
			var cands []candidate
			var err error
			cands, next, err = s.scanLedger(ledger, p.id, next)
			if err != nil {
				return err
			}
			if len(cands) == 0 {
				continue
			}
			if err := s.moveEntries(p, ledger, cands, info); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanLedger collects the ledger's index entries pointing into file,
// starting at entry from, until GCChunkBytes of frames. next is where to
// resume, -1 at the end of the ledger.
func (s *Storage) scanLedger(ledger int64, file uint64, from int64) (cands []candidate, next int64, err error) {
	_, hi := ledgerEntriesSpan(ledger)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: entryKey(ledger, from), UpperBound: hi})
	if err != nil {
		return nil, 0, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	var bytes int64
	for valid := it.First(); valid; valid = it.Next() {
		_, e, ok := decodeEntryKey(it.Key())
		if !ok {
			return nil, 0, fmt.Errorf("index: %w", corruptf("entry key %x", it.Key()))
		}
		loc, err := decodeLocation(it.Key(), it.Value())
		if err != nil {
			return nil, 0, fmt.Errorf("index entry %d/%d: %w", ledger, e, err)
		}
		if loc.file != file {
			continue
		}
		cands = append(cands, candidate{e, loc})
		if bytes += frameSize(int(loc.length)); bytes >= s.opts.GCChunkBytes {
			return cands, e + 1, it.Error()
		}
	}
	return cands, -1, it.Error()
}

// moveEntries is one GC step, under the flush lock: read and verify the
// candidates that the index still points at, append them to the current
// log, sync it, and repoint the index in one synced commit.
func (s *Storage) moveEntries(p filePlan, ledger int64, cands []candidate, info *CompactInfo) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if s.w.id <= p.id {
		// gcCandidates only plans files older than the current one.
		return fmt.Errorf("storage: GC planned entry log %d, which is not older than the current one (%d)", p.id, s.w.id)
	}
	// Read everything first: a corrupt entry stops GC before it wrote
	// anything.
	var frames []frame
	for _, c := range cands {
		cur, found, err := s.lookup(entryKey(ledger, c.entry))
		if err != nil {
			return err
		}
		if !found || cur != c.loc {
			continue // deleted, or rewritten by a flush since the scan
		}
		f, err := s.cache.readFrame(ledger, c.entry, c.loc)
		if err != nil {
			return err
		}
		frames = append(frames, f)
	}
	if len(frames) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, f := range frames {
		loc, err := s.w.append(f.ledger, f.entry, f.lac, f.crc, f.payload)
		if err != nil {
			return s.fail(err)
		}
		key := entryKey(f.ledger, f.entry)
		if err := b.Set(key, encodeLocation(key, loc), nil); err != nil {
			return err
		}
		info.EntriesMoved++
		info.BytesMoved += frameSize(len(f.payload))
	}
	if err := s.w.sync(); err != nil {
		return s.fail(err)
	}
	if err := setUsage(b, s.w.takePending()); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return s.fail(fmt.Errorf("commit index: %w", err))
	}
	return nil
}

// removeFile drops a file no index entry points into any more: first its
// usage rows (synced), then the file (and the directory entry, synced).
// A crash in between leaves a file without usage rows, which Open
// removes. A failed removal leaves the file for the next GC or Open.
func (s *Storage) removeFile(id uint64) error {
	if err := s.usable(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := fileUsageSpan(id)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return s.fail(fmt.Errorf("commit index: %w", err))
	}
	s.filesMu.Lock()
	s.cache.drop(id)
	err := s.fs.Remove(s.fs.PathJoin(s.opts.Dir, logName(id)))
	s.filesMu.Unlock()
	if err != nil && !durable.IsNotExist(err) {
		return fmt.Errorf("remove entry log %d: %w", id, err)
	}
	s.mu.Lock()
	delete(s.files, id)
	s.mu.Unlock()
	if err := durable.SyncDir(s.fs, s.opts.Dir); err != nil {
		return fmt.Errorf("remove entry log %d: %w", id, err)
	}
	return nil
}
