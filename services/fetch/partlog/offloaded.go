package partlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
)

// collectObject reads an offloaded ledger from offset into res, within
// lim: the segment's offset index finds the interval (no cursor hints are
// needed: the search is in memory), and the intervals from it on are
// decoded like bookie entries, until lim or the end of the segment. A read
// never crosses into the next ledger.
func (lg *Log) collectObject(ctx context.Context, st *ledgerState, offset int64, lim Limits, res *Result) error {
	ls := lg.ls
	m := st.metadata()
	r, err := ls.index(ctx, m)
	if err != nil {
		return err
	}
	rng, err := r.Find(offset)
	if errors.Is(err, segment.ErrOutOfRange) {
		// The segment ends before the ledger does (key compaction drops
		// records, not offsets): nothing is left in this ledger.
		res.Next = m.LastOffset + 1
		return nil
	}
	if err != nil {
		return fmt.Errorf("find offset %d in ledger %d object %q: %w", offset, m.ID, m.Location, err)
	}
	payloads, err := ls.intervals(ctx, m, r, rng, lim.MaxBytes)
	if err != nil {
		return err
	}
	it := record.NewIterator(ls.cfg.Limits)
	next := offset
	for k, p := range payloads {
		b, err := decodeBounds(p)
		if err != nil {
			return fmt.Errorf("%w: ledger %d object %q interval %d of this read: %w", ErrCorrupt, m.ID, m.Location, k, err)
		}
		if b.last < next {
			continue
		}
		full, err := appendPayload(it, p, &next, lim, res)
		if err != nil {
			return fmt.Errorf("%w: ledger %d object %q interval %d of this read: %w", ErrCorrupt, m.ID, m.Location, k, err)
		}
		if full {
			break
		}
		next = max(next, b.last+1)
	}
	res.Next = next
	return nil
}

// objectOffsetForTime returns the first offset of an offloaded ledger whose
// record timestamp is at or after ts: the segment's time index finds the
// interval, whose records are then scanned.
func (lg *Log) objectOffsetForTime(ctx context.Context, st *ledgerState, ts int64) (int64, error) {
	ls := lg.ls
	m := st.metadata()
	r, err := ls.index(ctx, m)
	if err != nil {
		return 0, err
	}
	rng, err := r.FindTime(ts)
	if errors.Is(err, segment.ErrNoTimestamp) {
		return m.LastOffset + 1, nil // none here: the next ledger starts there
	}
	if err != nil {
		return 0, fmt.Errorf("find timestamp %d in ledger %d object %q: %w", ts, m.ID, m.Location, err)
	}
	payloads, err := ls.intervals(ctx, m, r, rng, 1)
	if err != nil {
		return 0, err
	}
	off, ok, err := ls.firstAtOrAfter(payloads[0], ts)
	if err != nil {
		return 0, fmt.Errorf("%w: ledger %d object %q at %d: %w", ErrCorrupt, m.ID, m.Location, rng.Start, err)
	}
	if ok {
		return off, nil
	}
	b, err := decodeBounds(payloads[0])
	if err != nil {
		return 0, fmt.Errorf("%w: ledger %d object %q at %d: %w", ErrCorrupt, m.ID, m.Location, rng.Start, err)
	}
	return b.last + 1, nil
}
