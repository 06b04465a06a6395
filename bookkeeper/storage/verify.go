package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// VerifyResult sums up a Verify pass.
type VerifyResult struct {
	Entries int   // index entries checked (each frame read and verified)
	Bytes   int64 // their payload bytes
	Ledgers int   // ledgers with metadata
}

// Verify scrubs the storage against a consistent snapshot of the index:
// every ledger row decodes; every index entry decodes, belongs to a live
// ledger, has a usage row for its file, and points at a frame that exists,
// names the same entry and passes its checksum; every file a usage row
// names exists. The first problem is returned (ErrCorrupt or
// ErrDataLoss); nothing is repaired. It reads every flushed entry, so it
// is for operators and tests, not the hot path. It excludes GC while it
// runs; everything else goes on.
func (s *Storage) Verify(ctx context.Context) (VerifyResult, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	var res VerifyResult
	if err := s.usable(); err != nil {
		return res, err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()

	alive := map[int64]bool{}
	err := scan(snap, []byte{prefixMeta}, func(k, v []byte) error {
		if len(k) != 9 {
			return corruptf("metadata key %x", k)
		}
		m, err := decodeMeta(k, v)
		if err != nil {
			return err
		}
		ledger := int64(binary.BigEndian.Uint64(k[1:]))
		alive[ledger] = m.flags&flagDeleted == 0 && m.masterKey != nil
		res.Ledgers++
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	usage := map[usageRef]bool{}
	s.mu.Lock()
	files := make(map[uint64]bool, len(s.files))
	for id := range s.files {
		files[id] = true
	}
	s.mu.Unlock()
	err = scan(snap, []byte{prefixUsage}, func(k, v []byte) error {
		file, ledger, ok := decodeUsageKey(k)
		if !ok {
			return corruptf("usage key %x", k)
		}
		if _, err := decodeU64(k, v); err != nil {
			return err
		}
		if !files[file] {
			return fmt.Errorf("%w: usage row for ledger %d names entry log %d, which does not exist", ErrDataLoss, ledger, file)
		}
		usage[usageRef{file, ledger}] = true
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	err = scan(snap, []byte{prefixEntry}, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ledger, entry, ok := decodeEntryKey(k)
		if !ok {
			return corruptf("entry key %x", k)
		}
		loc, err := decodeLocation(k, v)
		if err != nil {
			return fmt.Errorf("entry %d/%d: %w", ledger, entry, err)
		}
		if !alive[ledger] {
			return corruptf("entry %d/%d indexed but its ledger has no live metadata", ledger, entry)
		}
		if !usage[usageRef{loc.file, ledger}] {
			return corruptf("entry %d/%d in entry log %d, which has no usage row for the ledger", ledger, entry, loc.file)
		}
		s.filesMu.RLock()
		f, err := s.cache.readFrame(ledger, entry, loc)
		s.filesMu.RUnlock()
		if err != nil {
			return err
		}
		res.Entries++
		res.Bytes += int64(len(f.payload))
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	return res, nil
}

// scan calls fn for every key with prefix (one byte) in r.
func scan(r pebble.Reader, prefix []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: []byte{prefix[0] + 1}})
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return errors.Join(err, it.Close())
		}
	}
	return errors.Join(it.Error(), it.Close())
}
