package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// changeEnsemble carries out EnsembleChangeNeeded against the catalog:
// pick replacements for the failed bookies, store the new last segment
// with compare-and-set (replacing the last segment when it already starts
// at FromEntry, appending one otherwise — the rule catalog.NextLedger
// enforces), and answer BookieReplaced; EnsembleChangeFailed when it may
// pass (no spare bookie, catalog unavailable, too many lost races); or
// Stop{ErrFenced} once the ledger is no longer OPEN (a recovery began).
//
// A lost race re-reads the record. If the record already holds the segment
// this call proposed, an earlier attempt landed (its answer was lost) and
// it counts as stored.
func (l *writerLoop) changeEnsemble(ctx context.Context, m catalog.LedgerMetadata, a ledger.EnsembleChangeNeeded) opResult {
	c := l.w.c
	failed := func(err error) opResult {
		return opResult{kind: opEnsemble, ev: ledger.EnsembleChangeFailed{Err: err}, meta: &m}
	}
	for attempt := 0; ; attempt++ {
		if m.State != catalog.LedgerOpen {
			return opResult{kind: opEnsemble, meta: &m,
				ev: ledger.Stop{Err: fmt.Errorf("ledger %d is %v in the catalog: %w", m.ID, m.State, ledger.ErrFenced)}}
		}
		last := m.Ensembles[len(m.Ensembles)-1]
		exclude := slices.Concat(a.Ensemble, last.Bookies)
		repl, err := c.bookies.pick(ctx, len(a.Failed), exclude)
		var rejoined []string
		if errors.Is(err, ErrNotEnoughBookies) {
			repl, err = c.rejoin(ctx, a.Failed, exclude, err)
			for i, b := range repl {
				if b == a.Failed[i] {
					rejoined = append(rejoined, b)
				}
			}
		}
		if err != nil {
			return failed(err)
		}
		if len(rejoined) > 0 {
			c.log.Info("bookies rejoin the ensemble (no spare bookie)", slog.Int64("ledger", int64(m.ID)),
				slog.Int64("from_entry", a.FromEntry), slog.Any("bookies", rejoined))
		}
		if len(rejoined) == len(a.Failed) { // the catalog is unchanged
			return opResult{kind: opEnsemble, ev: ledger.BookieReplaced{FirstEntry: a.FromEntry, Ensemble: slices.Clone(a.Ensemble), Rejoined: rejoined}, meta: &m}
		}
		ens := slices.Clone(a.Ensemble)
		k := 0
		for i, b := range ens {
			if slices.Contains(a.Failed, b) {
				ens[i] = repl[k]
				k++
			}
		}
		p := m
		p.Ensembles = cloneSegments(m.Ensembles)
		if n := len(p.Ensembles); p.Ensembles[n-1].FirstEntry == a.FromEntry {
			p.Ensembles[n-1].Bookies = ens
		} else {
			p.Ensembles = append(p.Ensembles, catalog.EnsembleSegment{FirstEntry: a.FromEntry, Bookies: ens})
		}
		out, err := c.updateLedger(ctx, p)
		if err == nil {
			c.stats.ensembleChanges.Add(1)
			c.log.Info("ensemble changed", slog.Int64("ledger", int64(m.ID)), slog.Int64("from_entry", a.FromEntry),
				slog.Any("failed", a.Failed), slog.Any("ensemble", ens))
			return opResult{kind: opEnsemble, ev: ledger.BookieReplaced{FirstEntry: a.FromEntry, Ensemble: ens, Rejoined: rejoined}, meta: &out}
		}
		switch {
		case errors.Is(err, catalog.ErrInvalid):
			// The catalog refuses the shape (e.g. MaxEnsembleSegments):
			// this ledger cannot change again.
			return opResult{kind: opEnsemble, ev: ledger.Stop{Err: err}, meta: &m}
		case !errors.Is(err, catalog.ErrVersionConflict) || attempt >= c.cfg.CASRetries:
			return failed(err)
		}
		cur, err := c.getLedger(ctx, m.ID)
		if err != nil {
			return failed(err)
		}
		if cl := cur.Ensembles[len(cur.Ensembles)-1]; cur.State == catalog.LedgerOpen && cl.FirstEntry == a.FromEntry && slices.Equal(cl.Bookies, ens) {
			return opResult{kind: opEnsemble, ev: ledger.BookieReplaced{FirstEntry: a.FromEntry, Ensemble: ens, Rejoined: rejoined}, meta: &cur}
		}
		m = cur
	}
}

// rejoin answers an ensemble change that found no spare bookie (noSpare):
// each failed bookie that answers a status call again keeps its position
// — a restarted bookie holds every entry it acknowledged (its journal is
// fsynced before each ack) and gets the pending ones again — and the
// others get spares. With 3 bookies and E=3 there never is a spare, and
// without this a bookie restart would fail every ledger it serves
// (BookKeeper's behaviour). noSpare when no failed bookie answers.
func (c *Client) rejoin(ctx context.Context, failed, exclude []string, noSpare error) ([]string, error) {
	out := make([]string, len(failed))
	var need []int
	for i, id := range failed {
		if err := c.bookies.alive(ctx, id); err != nil {
			need = append(need, i)
			continue
		}
		out[i] = id
	}
	if len(need) == len(failed) {
		return nil, noSpare
	}
	if len(need) > 0 {
		spare, err := c.bookies.pick(ctx, len(need), exclude)
		if err != nil {
			return nil, err
		}
		for k, i := range need {
			out[i] = spare[k]
		}
	}
	return out, nil
}

// seal stores m CLOSED at lastEntry with lastOffset (FirstOffset-1 when
// empty), OPEN → CLOSED with compare-and-set. A lost race re-reads: the
// record sealed as proposed means an earlier attempt landed; a record no
// longer OPEN means a recovery took over (ledger.ErrFenced).
func (c *Client) seal(ctx context.Context, m catalog.LedgerMetadata, lastEntry, lastOffset int64) (catalog.LedgerMetadata, error) {
	if lastEntry < 0 {
		lastOffset = m.FirstOffset - 1
	}
	for attempt := 0; ; attempt++ {
		if m.State != catalog.LedgerOpen {
			if m.State.Sealed() && m.LastEntry == lastEntry && m.LastOffset == lastOffset {
				return m, nil
			}
			return catalog.LedgerMetadata{}, fmt.Errorf("close ledger %d: it is %v in the catalog: %w", m.ID, m.State, ledger.ErrFenced)
		}
		p := m
		p.State, p.LastEntry, p.LastOffset = catalog.LedgerClosed, lastEntry, lastOffset
		out, err := c.updateLedger(ctx, p)
		if err == nil {
			c.log.Debug("ledger closed", slog.Int64("ledger", int64(m.ID)), slog.Int64("last_entry", lastEntry), slog.Int64("last_offset", lastOffset))
			return out, nil
		}
		if errors.Is(err, catalog.ErrInvalid) || ctx.Err() != nil || attempt >= c.cfg.CASRetries {
			return catalog.LedgerMetadata{}, fmt.Errorf("close ledger %d: %w", m.ID, err)
		}
		if !errors.Is(err, catalog.ErrVersionConflict) {
			if err := sleep(ctx, c.cfg.backoff(attempt)); err != nil {
				return catalog.LedgerMetadata{}, fmt.Errorf("close ledger %d: %w", m.ID, err)
			}
		}
		cur, err := c.getLedger(ctx, m.ID)
		if err != nil {
			return catalog.LedgerMetadata{}, fmt.Errorf("close ledger %d: %w", m.ID, err)
		}
		m = cur
	}
}

func cloneSegments(s []catalog.EnsembleSegment) []catalog.EnsembleSegment {
	out := make([]catalog.EnsembleSegment, len(s))
	for i, seg := range s {
		out[i] = catalog.EnsembleSegment{FirstEntry: seg.FirstEntry, Bookies: slices.Clone(seg.Bookies)}
	}
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
