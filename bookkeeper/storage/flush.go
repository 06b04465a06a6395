package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// Checkpoint makes everything added before the call durable in the entry
// log and index: when it returns nil, every entry whose AddEntry returned
// before Checkpoint was called, and the master keys and LACs those adds
// and WriteLAC calls set, survive any crash. (Fences and deletions are
// durable when their own call returns.) The bookie may then checkpoint
// its journal up to any record that was added here before Checkpoint was
// called; see "Durability" in the package doc for the exact recipe.
//
// Checkpoint waits for a background flush in progress, then flushes the
// rest. Concurrent adds go on (into a fresh buffer) while it writes. An
// error fails the storage (ErrFailed): the entries stay in the journal,
// and Open after a restart rebuilds from what is on disk.
func (s *Storage) Checkpoint() error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.flush()
}

// flush swaps the write buffer out, writes its entries (sorted) to the
// entry log, syncs it, and commits their index entries, the usage rows
// and every dirty ledger's metadata in one synced index batch. Only then
// does the swapped buffer go away, so a read finds each entry in a buffer
// or in the index, never in neither.
func (s *Storage) flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	start := time.Now()
	s.mu.Lock()
	if s.failErr != nil {
		s.mu.Unlock()
		return s.failErr
	}
	buf := s.active
	if len(buf.entries) == 0 && !s.anyDirtyLocked() {
		s.mu.Unlock()
		return nil
	}
	s.active, s.flushing = newWriteBuffer(), buf
	for r := range buf.entries {
		s.ledgers[r.ledger].buffered = 0
	}
	s.broadcastSpaceLocked()
	if s.hurried && !s.closed {
		s.hurry, s.hurried = make(chan struct{}), false
	}
	pace := s.newPacer(buf, start, s.hurry)
	s.mu.Unlock()

	info, err := s.writeBuffer(buf, pace)
	info.Duration = time.Since(start)
	info.Paced, info.Spread, info.Hurried = pace.report()
	if err != nil {
		info.Err = s.fail(err)
	}
	if h := s.opts.Hooks.Flushed; h != nil {
		h(info)
	}
	if err != nil {
		return info.Err
	}
	s.stats.flushes.Add(1)
	s.stats.flushedEntries.Add(uint64(info.Entries))
	s.stats.flushBytes.Add(uint64(info.Bytes))
	return nil
}

func (s *Storage) anyDirtyLocked() bool {
	for _, st := range s.ledgers {
		if st.dirty {
			return true
		}
	}
	return false
}

// writeBuffer is flush's I/O. Holds flushMu; buf is s.flushing.
func (s *Storage) writeBuffer(buf *writeBuffer, pace *flushPacer) (FlushInfo, error) {
	var info FlushInfo
	b := s.db.NewBatch()
	defer b.Close()
	for _, r := range buf.sorted() {
		e := buf.entries[r]
		// Check data before writing: AddEntry verified this checksum, so
		// a mismatch here is memory corruption or a bug.
		if got := wire.EntryChecksum(r.ledger, r.entry, e.lac, e.payload); got != e.crc {
			return info, fmt.Errorf("%w: buffered entry %d/%d changed in memory (checksum %08x, computed %08x)",
				ErrCorrupt, r.ledger, r.entry, e.crc, got)
		}
		loc, err := s.w.append(r.ledger, r.entry, e.lac, e.crc, e.payload)
		if err != nil {
			return info, err
		}
		key := entryKey(r.ledger, r.entry)
		if err := b.Set(key, encodeLocation(key, loc), nil); err != nil {
			return info, err
		}
		info.Entries++
		info.Bytes += frameSize(len(e.payload))
		pace.wait(info.Bytes)
	}
	if info.Entries > 0 {
		// The frames must be durable before the index points at them.
		if err := s.w.sync(); err != nil {
			return info, err
		}
	}
	if err := setUsage(b, s.w.takePending()); err != nil {
		return info, err
	}

	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	type encoded struct {
		st  *ledgerState
		gen uint64
	}
	var rows []encoded
	s.mu.Lock()
	for id, st := range s.ledgers {
		if !st.dirty {
			continue
		}
		rows = append(rows, encoded{st, st.gen})
		key := metaKey(id)
		if err := b.Set(key, encodeMeta(key, st.meta()), nil); err != nil {
			s.mu.Unlock()
			return info, err
		}
	}
	s.mu.Unlock()
	info.Ledgers = len(rows)
	if err := b.Commit(pebble.Sync); err != nil {
		return info, fmt.Errorf("commit index: %w", err)
	}

	s.mu.Lock()
	s.flushing = nil
	for _, r := range rows {
		if r.st.gen == r.gen && r.st.buffered == 0 {
			r.st.dirty = false
		}
	}
	if len(s.ledgers) > s.opts.MaxCachedLedgers {
		s.evictLocked()
	}
	s.mu.Unlock()
	return info, nil
}

// setUsage adds usage rows (absolute values) to b.
func setUsage(b *pebble.Batch, usage map[usageRef]uint64) error {
	var errs []error
	for ref, n := range usage {
		key := usageKey(ref.file, ref.ledger)
		errs = append(errs, b.Set(key, encodeU64(key, n), nil))
	}
	return errors.Join(errs...)
}
