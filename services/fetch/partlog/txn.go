package partlog

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// Reading committed records (issue 24; docs/DESIGN.md, "Transactions").
//
// A read_committed read stops at the last stable offset (LSO) — the first
// offset of the oldest transaction still open, which the writer puts in
// the header of every entry it sends while one is open (pkg/record, "entry
// header"); the LSO of the partition is the last readable entry's — and
// skips the batches of aborted transactions. A transactional batch's
// outcome is its producer's next marker after it: below the LSO every
// transaction has its marker at or below the high watermark, so the
// marker is found by reading on. The Log keeps the markers it has read
// over one contiguous span of offsets (txnIndex); a batch outside the span,
// or whose marker lies beyond it, stops the read before it (txnFilter), the
// span is extended (or restarted at the batch) by reading on (resolve),
// and the read is tried again.

// maxIndexMarkers bounds the markers a Log keeps; past it the span starts
// over at the next scan.
const maxIndexMarkers = 100_000

// maxResolveRounds bounds the scans one read runs to resolve outcomes;
// beyond them it answers with what it has (the next read goes on).
const maxResolveRounds = 8

// resolveBytes is how much one scan step reads.
const resolveBytes = 4 << 20

// txnIndex is the markers read over [from, to), by producer id in offset
// order. Its mu is a leaf.
type txnIndex struct {
	mu       sync.Mutex
	from, to int64
	markers  map[int64][]txnMarker
	n        int
}

type txnMarker struct {
	offset int64
	commit bool
}

// outcome is the fate of producer pid's transactional batch at base:
// aborted or committed (known), or not known from the span.
func (x *txnIndex) outcome(pid, base int64) (aborted, known bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if base < x.from || base >= x.to {
		return false, false
	}
	ms := x.markers[pid]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].offset > base })
	if i == len(ms) {
		return false, false
	}
	return !ms[i].commit, true
}

// scanStart is where a scan for the outcome of a batch at base goes on:
// the span's end when base is in it, else base, where the span restarts.
func (x *txnIndex) scanStart(base int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.markers != nil && base >= x.from && base <= x.to && x.n < maxIndexMarkers {
		return x.to
	}
	x.from, x.to, x.markers, x.n = base, base, make(map[int64][]txnMarker), 0
	return base
}

// extend adds the markers of the batches read from start to end, if start
// is still the span's end (a concurrent restart wins otherwise).
func (x *txnIndex) extend(start, end int64, batches [][]byte) error {
	type found struct {
		pid int64
		m   txnMarker
	}
	var ms []found
	for _, run := range batches {
		for rest := run; len(rest) > 0; {
			bt, r, err := record.Split(rest)
			if err != nil {
				return err
			}
			rest = r
			if !bt.Attributes().Control() || bt.BaseOffset() < start {
				continue
			}
			mk, err := record.ParseMarker(bt)
			if err != nil {
				return err
			}
			ms = append(ms, found{mk.ProducerID, txnMarker{bt.BaseOffset(), mk.Commit}})
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.markers == nil || start != x.to || end <= start {
		return nil
	}
	for _, f := range ms {
		x.markers[f.pid] = append(x.markers[f.pid], f.m)
	}
	x.n += len(ms)
	x.to = end
	return nil
}

// txnFilter is a read_committed read's view of transactions: stable is the
// LSO (no batch at or after it is taken), idx tells outcomes, and the read
// records the first batch whose outcome it could not tell.
type txnFilter struct {
	stable     int64
	idx        *txnIndex
	unresolved bool
	pid, base  int64
}

// take decides a batch for a read_committed read: stop before it (beyond
// the LSO, or its outcome unknown), skip it (aborted, or a marker), or
// take it.
func (f *txnFilter) take(bt record.Batch) (stop, skip bool) {
	if bt.BaseOffset() >= f.stable && !sabotageLSO {
		return true, false
	}
	a := bt.Attributes()
	if a.Control() || !a.Transactional() {
		return false, a.Control()
	}
	aborted, known := f.idx.outcome(bt.ProducerID(), bt.BaseOffset())
	if !known {
		if sabotageLSO {
			return false, false // chaos sabotage build only: an open transaction taken as committed
		}
		f.unresolved, f.pid, f.base = true, bt.ProducerID(), bt.BaseOffset()
		return true, false
	}
	return false, aborted && !sabotageMarkers // chaos sabotage build only: aborted batches shown
}

// resolve reads on until the outcome of producer pid's batch at base is
// known, or the high watermark is reached.
func (lg *Log) resolve(ctx context.Context, pid, base int64) error {
	for {
		if _, known := lg.txns.outcome(pid, base); known {
			return nil
		}
		start := lg.txns.scanStart(base)
		res, _, err := lg.read(ctx, start, Limits{MaxRecords: 1 << 30, MaxBytes: resolveBytes, Batches: true, control: true}, readCached)
		if err != nil {
			return err
		}
		if res.Next <= start {
			return nil // the end: the marker is not readable yet
		}
		if err := lg.txns.extend(start, res.Next, res.Batches); err != nil {
			return fmt.Errorf("%w: %s/%d from offset %d: %w", ErrCorrupt, lg.key.topic, lg.key.partition, start, err)
		}
	}
}

// readCommitted reads as read does, for a read_committed read: resolving
// the outcomes the read stops at and reading again.
func (lg *Log) readCommitted(ctx context.Context, offset int64, lim Limits, mode readMode) (Result, bool, error) {
	for round := 0; ; round++ {
		f := &txnFilter{idx: &lg.txns}
		l := lim
		l.txn = f
		res, beyond, err := lg.read(ctx, offset, l, mode)
		if err != nil || !f.unresolved || round == maxResolveRounds || res.Count > 0 {
			return res, beyond, err
		}
		if err := lg.resolve(ctx, f.pid, f.base); err != nil {
			return Result{}, false, err
		}
	}
}

// stableOf is the partition's last stable offset as known now: the last
// readable entry's (its header's, else its end).
func (lg *Log) stableOf(ctx context.Context, p catalog.Partition) (int64, error) {
	end := int64(math.MaxInt64)
	for i := len(p.Ledgers) - 1; i >= 0; i-- {
		st, err := lg.ledger(ctx, p.Ledgers[i].ID)
		if err != nil {
			return 0, &ledgerErr{p.Ledgers[i].ID, err}
		}
		if st.object {
			// A segment keeps no entry headers: its end is the LSO, as
			// the compactor offloads no last ledger with a transaction
			// open at its end (compactor.offloadable).
			return min(end, st.metadata().LastOffset+1), nil
		}
		last, _ := st.readable()
		if last < 0 {
			continue
		}
		b, err := lg.ls.entryBounds(ctx, st, last)
		if err != nil {
			return 0, &ledgerErr{p.Ledgers[i].ID, err}
		}
		return min(end, b.lso), nil
	}
	return min(end, p.LogStartOffset), nil
}
