package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// ledgerState is a ledger's metadata in memory. Guarded by Storage.mu.
type ledgerState struct {
	masterKey []byte // nil until the first add or fence sets it; never empty once set
	fenced    bool   // once true, never false
	deleted   bool   // once true, never false; all other fields are then moot
	lac       int64  // highest LAC seen (piggybacked or explicit), -1 for none
	// lastEntry is the highest entry id stored (buffered or indexed), -1
	// for none. Not persisted: on load it is the index's last key for the
	// ledger, so it can never disagree with what is readable.
	lastEntry int64
	// buffered counts the ledger's entries in the active buffer.
	buffered int
	// dirty: the persisted metadata row is older than this state (or the
	// ledger has entries in a buffer). gen counts changes, so a flush
	// marks the state clean only if nothing changed since it encoded it.
	dirty bool
	gen   uint64
}

func (st *ledgerState) meta() ledgerMeta {
	m := ledgerMeta{lac: st.lac, masterKey: st.masterKey}
	if st.fenced {
		m.flags |= flagFenced
	}
	if st.deleted {
		m = ledgerMeta{flags: flagDeleted, lac: -1}
	}
	return m
}

// known reports whether the ledger exists here: set up by an add, fence
// or LAC (all of which set the master key) and not deleted.
func (st *ledgerState) known() bool { return st != nil && !st.deleted && st.masterKey != nil }

func (st *ledgerState) changed() {
	st.dirty = true
	st.gen++
}

// checkKey sets the master key if unset, and refuses another one.
func (st *ledgerState) checkKey(ledger int64, key []byte) error {
	if st.masterKey == nil {
		st.masterKey = bytes.Clone(key)
		st.changed()
		return nil
	}
	if !bytes.Equal(st.masterKey, key) {
		return fmt.Errorf("%w: ledger %d", ErrUnauthorized, ledger)
	}
	return nil
}

// ledgerLocked returns ledger's state, loading it from the index if it is
// not cached. Without create, an unknown ledger is nil. Holds mu.
func (s *Storage) ledgerLocked(ledger int64, create bool) (*ledgerState, error) {
	if st, ok := s.ledgers[ledger]; ok {
		return st, nil
	}
	key := metaKey(ledger)
	v, closer, err := s.db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if !create {
			return nil, nil
		}
		st := &ledgerState{lac: -1, lastEntry: -1}
		s.cacheLocked(ledger, st)
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("read ledger %d metadata: %w", ledger, err)
	}
	m, err := decodeMeta(key, v)
	_ = closer.Close()
	if err != nil {
		return nil, fmt.Errorf("ledger %d metadata: %w", ledger, err)
	}
	st := &ledgerState{
		masterKey: m.masterKey, fenced: m.flags&flagFenced != 0, deleted: m.flags&flagDeleted != 0,
		lac: m.lac, lastEntry: -1,
	}
	if !st.deleted {
		if st.lastEntry, err = s.lastIndexedEntry(ledger); err != nil {
			return nil, err
		}
	}
	s.cacheLocked(ledger, st)
	return st, nil
}

// lastIndexedEntry returns the ledger's highest entry id in the index, or -1.
func (s *Storage) lastIndexedEntry(ledger int64) (int64, error) {
	lo, hi := ledgerEntriesSpan(ledger)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	last := int64(-1)
	if it.Last() {
		_, e, ok := decodeEntryKey(it.Key())
		if !ok {
			return 0, errors.Join(fmt.Errorf("index: %w", corruptf("entry key %x", it.Key())), it.Close())
		}
		last = e
	}
	return last, errors.Join(it.Error(), it.Close())
}

// cacheLocked caches st, first evicting states that hold nothing
// unpersisted if the cache is full.
func (s *Storage) cacheLocked(ledger int64, st *ledgerState) {
	if len(s.ledgers) >= s.opts.MaxCachedLedgers {
		s.evictLocked()
	}
	s.ledgers[ledger] = st
}

// evictLocked drops clean ledger states until the cache is 7/8 full.
// States with buffered entries or unpersisted metadata stay (they are
// bounded by the write buffer and the flush interval).
func (s *Storage) evictLocked() {
	target := s.opts.MaxCachedLedgers - s.opts.MaxCachedLedgers/8 - 1
	for id, st := range s.ledgers {
		if len(s.ledgers) <= target {
			return
		}
		if !st.dirty && st.buffered == 0 {
			delete(s.ledgers, id)
		}
	}
}

// AddRequest is one entry to add.
type AddRequest struct {
	Ledger, Entry int64
	// LAC is the writer's last add confirmed, piggybacked; -1 for none.
	LAC     int64
	Payload []byte // copied; the caller may reuse it once AddEntry returns
	// Checksum must be wire.EntryChecksum(Ledger, Entry, LAC, Payload).
	Checksum uint32
	// MasterKey is the writer's key: the ledger's first add (or fence)
	// sets it, later ones must match. 1..MaxMasterKeySize bytes.
	MasterKey []byte
	// Recovery marks a recovering writer's re-replication: accepted on a
	// fenced ledger.
	Recovery bool
	// Replay marks the bookie's journal replay at start: accepted on a
	// fenced ledger (the add was accepted before the fence, or the journal
	// would not hold it), and silently dropped for a deleted ledger.
	Replay bool
}

func (s *Storage) checkAdd(r AddRequest) error {
	if err := s.checkLedgerArgs(r.Ledger, r.MasterKey); err != nil {
		return err
	}
	switch {
	case r.Entry < 0 || r.Entry == math.MaxInt64:
		return fmt.Errorf("%w: entry id %d", ErrInvalidArgument, r.Entry)
	case r.LAC < -1:
		return fmt.Errorf("%w: LAC %d", ErrInvalidArgument, r.LAC)
	case len(r.Payload) > s.opts.MaxEntrySize:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrEntryTooLarge, len(r.Payload), s.opts.MaxEntrySize)
	}
	if got := wire.EntryChecksum(r.Ledger, r.Entry, r.LAC, r.Payload); got != r.Checksum {
		return fmt.Errorf("%w: entry %d/%d carries %08x, computed %08x", ErrBadChecksum, r.Ledger, r.Entry, r.Checksum, got)
	}
	return nil
}

func (s *Storage) checkLedgerArgs(ledger int64, key []byte) error {
	switch {
	case ledger < 0 || ledger == math.MaxInt64:
		return fmt.Errorf("%w: ledger id %d", ErrInvalidArgument, ledger)
	case len(key) == 0 || len(key) > MaxMasterKeySize:
		return fmt.Errorf("%w: master key of %d bytes, want 1..%d", ErrInvalidArgument, len(key), MaxMasterKeySize)
	}
	return nil
}

// AddEntry verifies r's checksum and stores the entry in the write
// buffer, where reads see it at once; the next flush (Checkpoint, or the
// background flush) writes it to the entry log and index. The entry is
// not durable here until then: the bookie must journal it, and
// acknowledge it only once the journal synced it (see "Durability").
//
// The fence check and the insertion are one atomic step, so once Fence
// returns, no add that Fence did not count can slip in.
//
// If the write buffer is full, AddEntry waits for a flush to free it,
// until ctx ends (ErrBufferFull). Adding an entry that exists replaces it
// (recovery and replay re-add entries; their contents are the same).
func (s *Storage) AddEntry(ctx context.Context, r AddRequest) error {
	if err := s.checkAdd(r); err != nil {
		return err
	}
	e := &bufEntry{lac: r.LAC, crc: r.Checksum, payload: bytes.Clone(r.Payload)}
	ref := entryRef{r.Ledger, r.Entry}
	size := frameSize(len(r.Payload))
	waited := false
	for {
		s.mu.Lock()
		if err := s.usableLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		st, err := s.ledgerLocked(r.Ledger, true)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		switch {
		case st.deleted:
			s.mu.Unlock()
			if r.Replay {
				s.stats.replayDropped.Add(1)
				return nil
			}
			return fmt.Errorf("%w: ledger %d", ErrLedgerDeleted, r.Ledger)
		case st.masterKey != nil && !bytes.Equal(st.masterKey, r.MasterKey):
			s.mu.Unlock()
			return fmt.Errorf("%w: ledger %d", ErrUnauthorized, r.Ledger)
		case st.fenced && !r.Recovery && !r.Replay && !sabotageFencing:
			s.mu.Unlock()
			return fmt.Errorf("%w: ledger %d", ErrFenced, r.Ledger)
		}
		if s.active.bytes > 0 && s.active.bytes+size > s.opts.MaxWriteBufferBytes {
			ch := s.spaceCh
			s.hurryLocked() // the flush holding the space must not pace itself
			s.mu.Unlock()
			s.kickFlusher()
			if !waited {
				waited = true
				s.stats.bufferWaits.Add(1)
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				s.stats.bufferErrs.Add(1)
				return fmt.Errorf("%w: %w", ErrBufferFull, context.Cause(ctx))
			}
		}
		_ = st.checkKey(r.Ledger, r.MasterKey) // sets it; a mismatch was refused above
		if s.active.put(ref, e) {
			st.buffered++
		}
		st.lastEntry = max(st.lastEntry, r.Entry)
		st.lac = max(st.lac, r.LAC)
		st.changed()
		kick := s.active.bytes >= s.opts.MaxWriteBufferBytes/2
		s.mu.Unlock()
		s.stats.adds.Add(1)
		s.stats.addBytes.Add(uint64(len(r.Payload)))
		s.lastAdd.Store(time.Now().UnixNano())
		if kick {
			s.kickFlusher()
		}
		return nil
	}
}

// LedgerInfo is what the storage knows of a ledger.
type LedgerInfo struct {
	Fenced bool
	// LAC is the highest last-add-confirmed seen (piggybacked on adds or
	// written explicitly), -1 for none. After a crash it may be lower than
	// before, until the journal replay and the writer raise it again; it
	// never exceeds what a writer announced.
	LAC int64
	// LastEntry is the highest entry id stored, -1 for none.
	LastEntry int64
}

// Ledger returns what the storage knows of ledger; ErrNoSuchLedger if
// nothing (or if it was deleted).
func (s *Storage) Ledger(ledger int64) (LedgerInfo, error) {
	if ledger < 0 {
		return LedgerInfo{}, fmt.Errorf("%w: ledger id %d", ErrInvalidArgument, ledger)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return LedgerInfo{}, err
	}
	st, err := s.ledgerLocked(ledger, false)
	if err != nil {
		return LedgerInfo{}, err
	}
	if !st.known() {
		return LedgerInfo{}, fmt.Errorf("%w: ledger %d", ErrNoSuchLedger, ledger)
	}
	return LedgerInfo{Fenced: st.fenced, LAC: st.lac, LastEntry: st.lastEntry}, nil
}

// Fence marks ledger fenced — normal adds are refused from now on — and
// persists that with a synced index write before returning, so the fence
// survives any crash (it does not depend on the journal; see "Fencing").
// The returned info counts every add that was accepted before it. The
// master key must match (or sets it, for a ledger this bookie has not
// seen). Fencing a fenced ledger just returns its info.
func (s *Storage) Fence(ledger int64, masterKey []byte) (LedgerInfo, error) {
	if err := s.checkLedgerArgs(ledger, masterKey); err != nil {
		return LedgerInfo{}, err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return LedgerInfo{}, err
	}
	st, err := s.ledgerLocked(ledger, true)
	if err == nil && st.deleted {
		err = fmt.Errorf("%w: ledger %d", ErrLedgerDeleted, ledger)
	}
	if err == nil {
		err = st.checkKey(ledger, masterKey)
	}
	if err != nil {
		s.mu.Unlock()
		return LedgerInfo{}, err
	}
	info := LedgerInfo{Fenced: true, LAC: st.lac, LastEntry: st.lastEntry}
	if st.fenced {
		// Persisted: by an earlier Fence, which held metaMu until its
		// commit returned (a failed commit failed the storage).
		s.mu.Unlock()
		return info, nil
	}
	st.fenced = true
	st.changed()
	key := metaKey(ledger)
	row := encodeMeta(key, st.meta())
	s.mu.Unlock()
	if err := s.db.Set(key, row, pebble.Sync); err != nil {
		return LedgerInfo{}, s.fail(fmt.Errorf("persist fence of ledger %d: %w", ledger, err))
	}
	return info, nil
}

// WriteLAC raises the ledger's LAC to lac (an explicit LAC from an idle
// writer); a lower value is ignored. It is persisted by the next flush.
func (s *Storage) WriteLAC(ledger int64, masterKey []byte, lac int64) error {
	if err := s.checkLedgerArgs(ledger, masterKey); err != nil {
		return err
	}
	if lac < -1 {
		return fmt.Errorf("%w: LAC %d", ErrInvalidArgument, lac)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	st, err := s.ledgerLocked(ledger, true)
	if err != nil {
		return err
	}
	if st.deleted {
		return fmt.Errorf("%w: ledger %d", ErrLedgerDeleted, ledger)
	}
	if err := st.checkKey(ledger, masterKey); err != nil {
		return err
	}
	if lac > st.lac {
		st.lac = lac
		st.changed()
	}
	return nil
}

// DeleteLedger removes the ledger's entries from the index and buffers
// and replaces its metadata with a deletion mark, in one synced index
// commit. Later adds, fences and LACs for it fail with ErrLedgerDeleted
// (ledger ids are never reused), replayed adds are dropped, and reads
// return ErrNoSuchLedger. The entry log space comes back through GC.
// Deleting a deleted or unknown ledger is not an error.
func (s *Storage) DeleteLedger(ledger int64) error {
	if ledger < 0 || ledger == math.MaxInt64 {
		return fmt.Errorf("%w: ledger id %d", ErrInvalidArgument, ledger)
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	st, err := s.ledgerLocked(ledger, true)
	if err != nil || st.deleted {
		s.mu.Unlock()
		return err
	}
	// No flush is running (flushMu), so s.flushing is nil.
	s.active.dropLedger(ledger)
	*st = ledgerState{deleted: true, lac: -1, lastEntry: -1}
	s.broadcastSpaceLocked()
	key := metaKey(ledger)
	row := encodeMeta(key, st.meta())
	s.mu.Unlock()

	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := ledgerEntriesSpan(ledger)
	err = errors.Join(b.DeleteRange(lo, hi, nil), b.Set(key, row, nil))
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return s.fail(fmt.Errorf("delete ledger %d: %w", ledger, err))
	}
	return nil
}

// HasLedgers reports whether the storage holds anything of any ledger: an
// entry, buffered or indexed, or a ledger's metadata (a fence or a deletion
// mark included). The bookie asks it at start when its journal directory
// has no cookie: adopting a fresh journal is safe only for a storage that
// never took an add, since a wiped journal may have held acknowledged
// entries the storage never flushed.
func (s *Storage) HasLedgers() (bool, error) {
	s.mu.Lock()
	for _, st := range s.ledgers {
		if st != nil && (st.deleted || st.masterKey != nil) {
			s.mu.Unlock()
			return true, nil
		}
	}
	s.mu.Unlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEntry}, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return false, err
	}
	found := it.First()
	return found, errors.Join(it.Error(), it.Close())
}

// ListLedgers returns, in id order, up to limit ids above after of the
// ledgers the storage holds (known: set up by an add, fence or LAC, and
// not deleted), buffered or indexed. A ledger created or deleted while it
// runs may or may not be listed. For the bookie's garbage collection
// against the catalog.
func (s *Storage) ListLedgers(after int64, limit int) ([]int64, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: list ledgers: limit %d", ErrInvalidArgument, limit)
	}
	s.mu.Lock()
	cached := map[int64]bool{} // id → known, for every cached id above after
	var out []int64
	for id, st := range s.ledgers {
		if id > after && st != nil {
			cached[id] = st.known()
			if st.known() {
				out = append(out, id)
			}
		}
	}
	s.mu.Unlock()
	lo := metaKey(after + 1)
	if after == math.MaxInt64 {
		return nil, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return nil, err
	}
	rows := 0
	for ok := it.First(); ok && rows < limit; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return nil, errors.Join(corruptf("metadata key %x", k), it.Close())
		}
		id := int64(binary.BigEndian.Uint64(k[1:9]))
		if _, ok := cached[id]; ok {
			continue // the cache is newer than the row
		}
		m, err := decodeMeta(k, it.Value())
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		if m.flags&flagDeleted == 0 && m.masterKey != nil {
			out = append(out, id)
			rows++
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
