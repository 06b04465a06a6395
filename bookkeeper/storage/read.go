package storage

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// Entry is a stored entry as read.
type Entry struct {
	Ledger, Entry int64
	LAC           int64 // piggybacked on the add
	Payload       []byte
	// Checksum is EntryChecksum of the fields above, as stored and
	// verified on this read; the bookie sends it to the reader, which
	// verifies it again.
	Checksum uint32
}

// ReadEntry returns an entry, from the write buffers or the entry log. Its
// checksum is verified first: a mismatch is ErrCorrupt and no data.
// ErrNoSuchLedger and ErrNoSuchEntry mean the storage never had it (or the
// ledger was deleted): Open proved with the cookies that no data was lost.
// Reads are not limited by the LAC; the bookie applies it.
func (s *Storage) ReadEntry(ledger, entry int64) (Entry, error) {
	if ledger < 0 || entry < 0 {
		return Entry{}, fmt.Errorf("%w: entry %d/%d", ErrInvalidArgument, ledger, entry)
	}
	// filesMu before mu (lock order); held shared until the frame is
	// read, so neither GC nor Close can remove what the index points at.
	s.filesMu.RLock()
	defer s.filesMu.RUnlock()
	e, buffered, err := s.readBuffered(ledger, entry)
	if err != nil || buffered {
		return e, err
	}
	key := entryKey(ledger, entry)
	loc, found, err := s.lookup(key)
	if err != nil {
		return Entry{}, fmt.Errorf("entry %d/%d: %w", ledger, entry, err)
	}
	if !found {
		return Entry{}, fmt.Errorf("%w: %d/%d", ErrNoSuchEntry, ledger, entry)
	}
	f, err := s.cache.readFrame(ledger, entry, loc)
	if err != nil {
		return Entry{}, err
	}
	s.stats.reads.Add(1)
	s.stats.readBytes.Add(uint64(len(f.payload)))
	return Entry{Ledger: ledger, Entry: entry, LAC: f.lac, Payload: f.payload, Checksum: f.crc}, nil
}

// readBuffered returns the entry if a write buffer holds it; buffered
// false means the index decides. It also answers for unknown ledgers.
func (s *Storage) readBuffered(ledger, entry int64) (Entry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return Entry{}, false, err
	}
	st, err := s.ledgerLocked(ledger, false)
	if err != nil {
		return Entry{}, false, err
	}
	if !st.known() {
		return Entry{}, false, fmt.Errorf("%w: ledger %d", ErrNoSuchLedger, ledger)
	}
	ref := entryRef{ledger, entry}
	b := s.active.get(ref)
	if b == nil {
		b = s.flushing.get(ref)
	}
	if b == nil {
		return Entry{}, false, nil
	}
	// Check after reading, even from memory.
	if got := wire.EntryChecksum(ledger, entry, b.lac, b.payload); got != b.crc {
		err := fmt.Errorf("%w: buffered entry %d/%d changed in memory (checksum %08x, computed %08x)", ErrCorrupt, ledger, entry, b.crc, got)
		return Entry{}, false, s.failLocked(err)
	}
	s.stats.reads.Add(1)
	s.stats.readBytes.Add(uint64(len(b.payload)))
	return Entry{Ledger: ledger, Entry: entry, LAC: b.lac, Payload: bytes.Clone(b.payload), Checksum: b.crc}, true, nil
}

// lookup returns the index's location for key.
func (s *Storage) lookup(key []byte) (location, bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return location{}, false, nil
	}
	if err != nil {
		return location{}, false, fmt.Errorf("index: %w", err)
	}
	defer closer.Close()
	loc, err := decodeLocation(key, v)
	if err != nil {
		return location{}, false, fmt.Errorf("index: %w", err)
	}
	return loc, true, nil
}

// ReadRange returns entries first..last of ledger, in order. It stops
// early at the first entry the storage does not have (ErrNoSuchEntry if
// that is first), and before an entry that would take the payload bytes
// beyond maxBytes (the first entry is always returned). maxBytes <= 0 or
// above Options.MaxReadBytes means Options.MaxReadBytes. Any other error,
// ErrCorrupt included, fails the whole read: no partial data comes with
// an error.
func (s *Storage) ReadRange(ledger, first, last int64, maxBytes int) ([]Entry, error) {
	if first < 0 || last < first {
		return nil, fmt.Errorf("%w: range %d..%d", ErrInvalidArgument, first, last)
	}
	if maxBytes <= 0 || maxBytes > s.opts.MaxReadBytes {
		maxBytes = s.opts.MaxReadBytes
	}
	// As ReadEntry: filesMu shared until every frame is read.
	s.filesMu.RLock()
	defer s.filesMu.RUnlock()
	var out []Entry
	var run []located // flushed entries next to each other in one entry log, not read yet
	total := 0
	readRun := func() error {
		if len(run) == 0 {
			return nil
		}
		fs, err := s.cache.readFrames(ledger, run)
		if err != nil {
			return err
		}
		for i, f := range fs {
			s.stats.reads.Add(1)
			s.stats.readBytes.Add(uint64(len(f.payload)))
			out = append(out, Entry{Ledger: ledger, Entry: run[i].entry, LAC: f.lac, Payload: f.payload, Checksum: f.crc})
		}
		run = run[:0]
		return nil
	}
	for e := first; e <= last && e >= 0; e++ {
		ent, buffered, err := s.readBuffered(ledger, e)
		if err != nil {
			return nil, err
		}
		var loc location
		size := len(ent.Payload)
		if !buffered {
			var found bool
			loc, found, err = s.lookup(entryKey(ledger, e))
			if err != nil {
				return nil, fmt.Errorf("entry %d/%d: %w", ledger, e, err)
			}
			if !found {
				if len(out)+len(run) > 0 {
					break
				}
				return nil, fmt.Errorf("%w: %d/%d", ErrNoSuchEntry, ledger, e)
			}
			size = int(loc.length)
		}
		if len(out)+len(run) > 0 && total+size > maxBytes {
			break
		}
		total += size
		if buffered {
			if err := readRun(); err != nil {
				return nil, err
			}
			out = append(out, ent)
			continue
		}
		if n := len(run); n > 0 && !run[n-1].loc.precedes(loc) {
			if err := readRun(); err != nil {
				return nil, err
			}
		}
		run = append(run, located{entry: e, loc: loc})
	}
	if err := readRun(); err != nil {
		return nil, err
	}
	return out, nil
}

// located is an entry of a range read and where the index says it is.
type located struct {
	entry int64
	loc   location
}
