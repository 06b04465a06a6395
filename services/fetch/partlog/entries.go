package partlog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// ledgerState is a ledger as the log reads it.
type ledgerState struct {
	id catalog.LedgerID
	rd *client.Reader // reads (and its LAC: what is readable); metadata only when object
	// object: the ledger is read from its segment object (meta.Location),
	// not the bookies. Fixed for the life of the state: switching a
	// ledger to its object replaces the state (Log.recover).
	object bool

	// mu guards meta, wr and bounds. A leaf, taken under
	// Log.strayMu (sealStray's refresh) and under no other lock; never
	// held across a call into the ledger client.
	mu     sync.Mutex
	meta   catalog.LedgerMetadata
	wr     *client.Reader // the tail watcher's long-polls
	bounds map[int64]bounds
}

// bounds is what a reader keeps of an entry: its first and last offsets,
// its largest timestamp, and its last stable offset (the entry header's,
// else last+1: no transaction open at its end).
type bounds struct{ first, last, maxTS, lso int64 }

// readable is the last entry that may be read now and whether the ledger is
// sealed.
func (st *ledgerState) readable() (int64, bool) {
	st.mu.Lock()
	m := st.meta
	st.mu.Unlock()
	if m.State.Sealed() {
		return m.LastEntry, true
	}
	return st.rd.LAC(), false
}

func (st *ledgerState) metadata() catalog.LedgerMetadata {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.meta
}

// refresh re-reads the metadata (a close, an ensemble change).
func (st *ledgerState) refresh(ctx context.Context) (catalog.LedgerMetadata, error) {
	m, err := st.rd.Refresh(ctx)
	if err != nil {
		return m, err
	}
	return st.adopt(ctx, m), nil
}

// adopt takes metadata the reader learned (a refresh, or PollLAC's after a
// bookie said "fenced") if newer than what st holds, and returns st's.
func (st *ledgerState) adopt(ctx context.Context, m catalog.LedgerMetadata) catalog.LedgerMetadata {
	st.mu.Lock()
	if m.Version > st.meta.Version {
		st.meta = m
	}
	wr := st.wr
	m = st.meta
	st.mu.Unlock()
	if wr != nil && m.State.Sealed() {
		_, _ = wr.Refresh(ctx)
	}
	return m
}

// ledger returns the read state of a ledger of the chain, opening it.
func (lg *Log) ledger(ctx context.Context, id catalog.LedgerID) (*ledgerState, error) {
	lg.mu.Lock()
	st, ok := lg.ledgers[id]
	lg.mu.Unlock()
	if ok {
		return st, nil
	}
	rd, err := lg.ls.lc.OpenReader(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("open ledger %d of %s/%d: %w", id, lg.key.topic, lg.key.partition, err)
	}
	m := rd.Metadata()
	st = &ledgerState{id: id, rd: rd, meta: m, bounds: make(map[int64]bounds),
		object: m.State == catalog.LedgerOffloaded && lg.ls.objects != nil}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if cur, ok := lg.ledgers[id]; ok {
		return cur, nil
	}
	lg.ledgers[id] = st
	return st, nil
}

// entries returns entries first..last (all readable) in order from the
// cache or the bookies, stopping once maxBytes are reached (at least one).
func (ls *Logs) entries(ctx context.Context, st *ledgerState, first, last int64, maxBytes int) ([]client.Entry, error) {
	var out []client.Entry
	size := 0
	for e := first; e <= last && (len(out) == 0 || size < maxBytes); {
		if p, ok := ls.cache.get(entryKey{ledger: st.id, entry: e}); ok {
			out = append(out, client.Entry{ID: e, Payload: p})
			size += len(p)
			e++
			continue
		}
		ents, err := ls.readGated(ctx, st, e, last)
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		for _, en := range ents {
			ls.cache.put(entryKey{ledger: st.id, entry: en.ID}, en.Payload)
			out = append(out, en)
			size += len(en.Payload)
		}
		e = ents[len(ents)-1].ID + 1
	}
	return out, nil
}

// ungated marks the context of the log's own background work (Logs.ctx:
// tail watchers, chain re-reads): its reads skip ReadGate, the budget of
// client reads. A context value rather than a parameter because the gate
// sits in three leaves (readGated, index, readRun) that client reads and
// background work reach through the same chain → ledger → entry paths; a
// flag would run through every signature between.
type ungated struct{}

// readGated reads entries from the bookies, within ReadGate unless ctx is
// the tail watcher's.
func (ls *Logs) readGated(ctx context.Context, st *ledgerState, first, last int64) ([]client.Entry, error) {
	release, err := ls.gate(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return st.rd.Read(ctx, first, last)
}

// gate takes a slot of the read budget (Config.ReadGate) unless ctx is the
// tail watcher's; release it after the read.
func (ls *Logs) gate(ctx context.Context) (release func(), err error) {
	if ls.cfg.ReadGate == nil || ctx.Value(ungated{}) != nil {
		return func() {}, nil
	}
	return ls.cfg.ReadGate(ctx)
}

// entryBounds returns the first and last offsets of an entry (and its
// largest timestamp), reading it when not known.
func (ls *Logs) entryBounds(ctx context.Context, st *ledgerState, e int64) (bounds, error) {
	st.mu.Lock()
	b, ok := st.bounds[e]
	st.mu.Unlock()
	if ok {
		return b, nil
	}
	ents, err := ls.entries(ctx, st, e, e, 1)
	if err != nil {
		return bounds{}, err
	}
	return ls.learn(st, ents[0])
}

// learn decodes and remembers an entry's bounds.
func (ls *Logs) learn(st *ledgerState, en client.Entry) (bounds, error) {
	b, err := decodeBounds(en.Payload)
	if err != nil {
		return bounds{}, fmt.Errorf("%w: ledger %d entry %d: %w", ErrCorrupt, st.id, en.ID, err)
	}
	st.mu.Lock()
	if len(st.bounds) >= DefaultMaxEntryBounds {
		clear(st.bounds)
	}
	st.bounds[en.ID] = b
	st.mu.Unlock()
	return b, nil
}

func decodeBounds(payload []byte) (bounds, error) {
	b := bounds{first: -1, maxTS: -1}
	h, batches, err := record.EntryBatches(payload)
	if err != nil {
		return bounds{}, err
	}
	for rest := batches; len(rest) > 0; {
		bt, r, err := record.Split(rest)
		if err != nil {
			return bounds{}, err
		}
		if b.first < 0 {
			b.first = bt.BaseOffset()
		}
		b.last = bt.LastOffset()
		b.maxTS = max(b.maxTS, bt.MaxTimestamp())
		rest = r
	}
	if b.first < 0 {
		return bounds{}, errors.New("entry holds no record batch")
	}
	b.lso = b.last + 1
	if h.Present {
		if h.LSO > b.last+1 {
			return bounds{}, fmt.Errorf("entry header's last stable offset %d is beyond the entry's end %d", h.LSO, b.last+1)
		}
		b.lso = h.LSO
	}
	return b, nil
}

// findEntry returns the first entry of st (0..last) whose last offset is at
// or above offset: binary search narrowed by the bounds already known.
func (ls *Logs) findEntry(ctx context.Context, st *ledgerState, offset, last int64) (int64, error) {
	lo, hi := int64(0), last
	st.mu.Lock()
	for e, b := range st.bounds {
		if e > last {
			continue
		}
		switch {
		case b.last < offset:
			lo = max(lo, e+1)
		case b.first > offset:
			hi = min(hi, e)
		default:
			st.mu.Unlock()
			return e, nil
		}
	}
	st.mu.Unlock()
	for lo < hi {
		mid := lo + (hi-lo)/2
		b, err := ls.entryBounds(ctx, st, mid)
		if err != nil {
			return 0, err
		}
		if b.last < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// tailEnd is the high watermark a ledger gives: one past its last readable
// record.
func (ls *Logs) tailEnd(ctx context.Context, st *ledgerState) (int64, error) {
	last, sealed := st.readable()
	m := st.metadata()
	if sealed {
		return m.LastOffset + 1, nil
	}
	if last < 0 {
		return m.FirstOffset, nil
	}
	b, err := ls.entryBounds(ctx, st, last)
	if err != nil {
		return 0, err
	}
	return b.last + 1, nil
}
