package partlog

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
)

// CheckEnd checks that offset is at most the partition's high watermark, as
// a committed offset must be. It answers from this copy's view when that
// already reaches offset (no I/O); otherwise from fresh bounds (the chain
// re-read, the bookies' LAC asked), re-read like a Read past the end
// (freshRetries) before it answers *OutOfRangeError: a client may hold an
// offset a moment before this copy's view has it, and a valid commit must
// not be refused. Offsets below the log start pass.
func (ls *Logs) CheckEnd(ctx context.Context, topic string, partition int, offset int64) error {
	if hw := ls.HighWatermark(topic, partition); offset <= hw {
		return nil
	}
	var start, end int64
	for _, d := range freshRetries {
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		var err error
		if start, end, err = ls.bounds(ctx, topic, partition, 0); err != nil {
			return err
		}
		if offset <= end {
			return nil
		}
	}
	return &OutOfRangeError{Offset: offset, Start: start, End: end, Topic: topic, Partition: partition}
}

// Bounds returns the log start and a fresh high watermark (the chain
// re-read and the bookies' LAC asked now): for start positions and offset
// resets, which must not miss a recent roll-over.
func (ls *Logs) Bounds(ctx context.Context, topic string, partition int) (start, end int64, err error) {
	return ls.bounds(ctx, topic, partition, 0)
}

// LagBounds are a partition's offsets a lag report measures against.
type LagBounds struct {
	Start  int64 // log start offset
	End    int64 // high watermark
	Stable int64 // last stable offset (≤ End): read_committed readers stop there
}

// BoundsForLag is Bounds with the chain up to ChainTTL old (the LAC is
// still asked now) while its last ledger is open, and the last stable
// offset: for reporting lag (DescribeGroup, DescribeTrigger), where a
// catalog read per partition and call would cost more than the report is
// worth. A chain whose tail cannot grow (no ledger, or a sealed last one)
// is read again.
func (ls *Logs) BoundsForLag(ctx context.Context, topic string, partition int) (LagBounds, error) {
	start, end, err := ls.bounds(ctx, topic, partition, ls.cfg.ChainTTL)
	if err != nil {
		return LagBounds{}, err
	}
	lg := ls.get(topic, partition)
	p, err := lg.chain(ctx, ls.cfg.ChainTTL) // the chain bounds just used
	if err != nil {
		return LagBounds{}, err
	}
	stable, err := lg.stableOf(ctx, p)
	if err != nil {
		return LagBounds{}, err
	}
	// The entry read for the LSO may be newer than the end read a moment
	// before; never report it past the end.
	return LagBounds{Start: start, End: end, Stable: min(stable, end)}, nil
}

// BoundsWithin is Bounds with the chain up to maxAge old (see Prime).
func (ls *Logs) BoundsWithin(ctx context.Context, topic string, partition int, maxAge time.Duration) (start, end int64, err error) {
	return ls.bounds(ctx, topic, partition, maxAge)
}

// Start returns the partition's log start offset (the first offset still
// retained) from its chain, read from the catalog unless the one known is
// less than maxAge old. Unlike Bounds it asks no bookie.
func (ls *Logs) Start(ctx context.Context, topic string, partition int, maxAge time.Duration) (int64, error) {
	p, err := ls.get(topic, partition).chain(ctx, maxAge)
	if err != nil {
		return 0, err
	}
	return p.LogStartOffset, nil
}

func (ls *Logs) bounds(ctx context.Context, topic string, partition int, chainAge time.Duration) (start, end int64, err error) {
	lg := ls.get(topic, partition)
	p, err := lg.chain(ctx, chainAge)
	if err != nil {
		return 0, 0, err
	}
	if chainAge > 0 {
		// A chain allowed to be old is re-read when its tail cannot grow:
		// no ledger yet (the first write may have come since) or a sealed
		// last ledger (a roll-over or hand-over may have added one).
		// Otherwise a partition written since the chain was read would
		// show its old end, and no lag, for up to chainAge.
		stale := len(p.Ledgers) == 0
		if !stale {
			st, err := lg.ledger(ctx, p.Ledgers[len(p.Ledgers)-1].ID)
			if err != nil {
				return 0, 0, err
			}
			_, stale = st.readable()
		}
		if stale {
			if p, err = lg.chain(ctx, 0); err != nil {
				return 0, 0, err
			}
		}
	}
	if len(p.Ledgers) > 0 {
		st, err := lg.ledger(ctx, p.Ledgers[len(p.Ledgers)-1].ID)
		if err != nil {
			return 0, 0, err
		}
		if _, sealed := st.readable(); !sealed {
			if _, err := st.rd.PollLAC(ctx); err != nil && ctx.Err() != nil {
				return 0, 0, err
			}
		}
	}
	end, err = lg.hwOf(ctx, p)
	if err != nil {
		return 0, 0, err
	}
	lg.raise(end)
	return p.LogStartOffset, end, nil
}

// OffsetForTime returns the first offset whose record timestamp is at or
// after ts (ms), or the high watermark when there is none. Like Kafka's
// time index it treats each entry's largest timestamp as a running
// maximum: with timestamps that go backwards it returns an offset at or
// before the first qualifying record, never after it. In an offloaded
// ledger the segment's time index finds the interval (same semantics).
func (ls *Logs) OffsetForTime(ctx context.Context, topic string, partition int, ts int64) (int64, error) {
	lg := ls.get(topic, partition)
	var off int64
	err := lg.withRecovery(ctx, func() (err error) {
		off, err = lg.offsetForTime(ctx, ts)
		return err
	})
	return off, err
}

func (lg *Log) offsetForTime(ctx context.Context, ts int64) (int64, error) {
	ls := lg.ls
	// The end first, from a fresh chain and the tail's LAC asked of its
	// bookies: every entry below it is readable from then on (LACs only
	// grow), so the search below sees it, and the end answered when no
	// entry qualifies is never past a record that does. (Searching the
	// entries as known and then asking for the end could answer an end
	// past records acknowledged meanwhile: a reader from that time would
	// skip them.)
	_, end, err := ls.bounds(ctx, lg.key.topic, lg.key.partition, 0)
	if err != nil {
		return 0, err
	}
	p, err := lg.chain(ctx, pollChainAge) // the one bounds read, or newer
	if err != nil {
		return 0, err
	}
	type span struct {
		st   *ledgerState
		last int64
	}
	spans := make([]span, 0, len(p.Ledgers))
	for _, ref := range p.Ledgers {
		st, err := lg.ledger(ctx, ref.ID)
		if err != nil {
			return 0, &ledgerErr{ref.ID, err}
		}
		last, _ := st.readable()
		if last >= 0 {
			spans = append(spans, span{st, last})
		}
	}
	maxTS := func(s span, e int64) (int64, error) {
		if s.st.object {
			r, err := ls.index(ctx, s.st.metadata())
			if err != nil {
				return 0, &ledgerErr{s.st.id, err}
			}
			return r.Info().MaxTimestamp, nil
		}
		b, err := ls.entryBounds(ctx, s.st, e)
		if err != nil {
			return 0, &ledgerErr{s.st.id, err}
		}
		return b.maxTS, nil
	}
	// First ledger whose last entry reaches ts.
	var ferr error
	i, _ := slices.BinarySearchFunc(spans, ts, func(s span, t int64) int {
		m, err := maxTS(s, s.last)
		if err != nil {
			ferr = err
			return 1
		}
		if m < t {
			return -1
		}
		return 1
	})
	if ferr != nil {
		return 0, ferr
	}
	if i == len(spans) {
		return end, nil
	}
	s := spans[i]
	if s.st.object {
		off, err := lg.objectOffsetForTime(ctx, s.st, ts)
		if err != nil {
			return 0, &ledgerErr{s.st.id, err}
		}
		return off, nil
	}
	lo, hi := int64(0), s.last
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := maxTS(s, mid)
		if err != nil {
			return 0, err
		}
		if m < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	ents, err := ls.entries(ctx, s.st, lo, lo, 1)
	if err != nil {
		return 0, &ledgerErr{s.st.id, err}
	}
	_, batches, err := record.EntryBatches(ents[0].Payload)
	if err != nil {
		return 0, fmt.Errorf("%w: ledger %d entry %d: %w", ErrCorrupt, s.st.id, lo, err)
	}
	if off, ok, err := ls.firstAtOrAfter(batches, ts); err != nil || ok {
		if err != nil {
			err = fmt.Errorf("%w: ledger %d entry %d: %w", ErrCorrupt, s.st.id, lo, err)
		}
		return off, err
	}
	b, err := ls.entryBounds(ctx, s.st, lo)
	if err != nil {
		return 0, &ledgerErr{s.st.id, err}
	}
	return b.last + 1, nil
}

// firstAtOrAfter returns the offset of the first record of payload (record
// batches) with a timestamp at or after ts, and whether there is one.
func (ls *Logs) firstAtOrAfter(payload []byte, ts int64) (int64, bool, error) {
	it := record.NewIterator(ls.cfg.Limits)
	for rest := payload; len(rest) > 0; {
		bt, r, err := record.Split(rest)
		if err != nil {
			return 0, false, err
		}
		rest = r
		if bt.MaxTimestamp() < ts || bt.Attributes().Control() {
			continue
		}
		if err := it.Reset(bt); err != nil {
			return 0, false, err
		}
		for it.Next() {
			if it.Record().Timestamp >= ts {
				return it.Record().Offset, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return 0, false, err
		}
	}
	return 0, false, nil
}
