package compactor

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// txnOutcome is what key compaction does with a batch, by its transaction.
type txnOutcome int

const (
	txnNone      txnOutcome = iota // not transactional, or a committed transaction's: compacted as records
	txnAborted                     // an aborted transaction's: its records go
	txnUndecided                   // no marker in the run: kept as stored
	txnMarker                      // a marker (control batch): kept as stored
)

// offRange is a transactional batch's offsets.
type offRange struct{ first, last int64 }

// txnOutcomes are the aborted and undecided transactional batches of a
// run, each sorted by offset.
type txnOutcomes struct {
	aborted, undecided []offRange
}

// resolveTxns reads the run's batch headers in offset order: a
// transactional batch belongs to its producer's open transaction, which
// that producer's next marker ends (commit or abort). Batches still open
// at the run's end are undecided. A marker that does not parse is
// corruption: the compaction stops.
func (c *Compactor) resolveTxns(ctx context.Context, run []catalog.LedgerMetadata) (txnOutcomes, error) {
	var out txnOutcomes
	open := make(map[int64][]offRange)
	n := 0
	for _, m := range run {
		err := c.eachBatch(ctx, m, func(b record.Batch) error {
			a := b.Attributes()
			if !a.Transactional() {
				return nil
			}
			pid := b.ProducerID()
			if a.Control() {
				mk, err := record.ParseMarker(b)
				if err != nil {
					return err
				}
				if !mk.Commit {
					out.aborted = append(out.aborted, open[pid]...)
				}
				n -= len(open[pid])
				delete(open, pid)
				return nil
			}
			if n++; n+len(out.aborted) > c.cfg.MaxCompactKeys {
				return fmt.Errorf("more than MaxCompactKeys (%d) transactional batches to resolve", c.cfg.MaxCompactKeys)
			}
			open[pid] = append(open[pid], offRange{b.BaseOffset(), b.LastOffset()})
			return nil
		})
		if err != nil {
			return txnOutcomes{}, fmt.Errorf("ledger %d: %w", m.ID, err)
		}
	}
	for _, rs := range open {
		out.undecided = append(out.undecided, rs...)
	}
	byFirst := func(a, b offRange) int { return cmp.Compare(a.first, b.first) }
	slices.SortFunc(out.aborted, byFirst)
	slices.SortFunc(out.undecided, byFirst)
	return out, nil
}

// of says what happens to batch b.
func (o txnOutcomes) of(b record.Batch) txnOutcome {
	a := b.Attributes()
	switch {
	case !a.Transactional():
		return txnNone
	case a.Control():
		return txnMarker
	case holds(o.aborted, b.BaseOffset()):
		return txnAborted
	case holds(o.undecided, b.BaseOffset()):
		return txnUndecided
	}
	return txnNone
}

// holds reports whether a range of rs (sorted) starts at offset.
func holds(rs []offRange, offset int64) bool {
	_, ok := slices.BinarySearchFunc(rs, offset, func(r offRange, o int64) int {
		switch {
		case r.first < o:
			return -1
		case r.first > o:
			return 1
		}
		return 0
	})
	return ok
}
