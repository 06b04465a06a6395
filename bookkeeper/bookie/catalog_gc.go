package bookie

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Garbage collection against the catalog (bookkeeper/DESIGN.md §4.3;
// BookKeeper's ScanAndCompareGarbageCollector). The compactor deletes a
// ledger's copies from the bookies its ensembles name, but copies can be
// left behind where nobody asks for them: a re-replication pass that
// failed after copying (its target holds copies no segment names), a lost
// bookie that came back after its copies were moved, a delete that
// skipped a bookie lost for the grace. The bookie finds them itself: it
// pages through its ledgers and asks the catalog about each. A ledger is
// garbage when the catalog has no record of it (purged), or has it
// OFFLOADED or DELETED, or names this bookie in none of its segments — and
// stays so for Grace (a re-replication copies before the catalog names
// its target; an offloaded ledger's copies serve readers for the
// compactor's bookie-delete grace). Only then is it deleted here.
//
// A guard against the wrong catalog: a pass that finds more than half of
// the ledgers it checked (and more than MinLedgersForGuard) to be garbage
// deletes nothing and reports it — a bookie pointed at another cluster's
// table would otherwise empty itself.

// LedgerCatalog is what catalog GC reads.
type LedgerCatalog interface {
	GetLedger(ctx context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error)
}

// CatalogGCConfig tunes catalog GC.
type CatalogGCConfig struct {
	// Interval between passes (default 10 min).
	Interval time.Duration
	// Grace a ledger must stay garbage before it is deleted (default 1 h).
	Grace time.Duration
	// MaxPerPass bounds the ledgers one pass checks (default 10,000); the
	// next pass goes on from there.
	MaxPerPass int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Defaults of CatalogGCConfig.
const (
	DefaultCatalogGCInterval = 10 * time.Minute
	DefaultCatalogGCGrace    = time.Hour
	DefaultCatalogGCPerPass  = 10_000
	// MinLedgersForGuard: below this many garbage ledgers a pass is not
	// stopped by the wrong-catalog guard.
	MinLedgersForGuard = 10
)

// maxGarbageTracked bounds the ledgers whose garbage-since time is kept.
const maxGarbageTracked = 100_000

// CatalogGCReport says what one pass did.
type CatalogGCReport struct {
	Checked  int // ledgers asked about
	Garbage  int // found garbage (deleted or waiting for the grace)
	Deleted  int // deleted in this pass
	Guarded  bool
	Finished bool // the pass reached the end of the bookie's ledgers
}

// CatalogGC is the bookie's garbage collector against the catalog. Not
// safe for concurrent passes: Run one loop.
type CatalogGC struct {
	b      *Bookie
	cat    LedgerCatalog
	cfg    CatalogGCConfig
	cursor int64               // the last ledger id checked; -1: from the start
	since  map[int64]time.Time // ledger → when first found garbage
}

// NewCatalogGC returns b's collector against cat.
func (b *Bookie) NewCatalogGC(cat LedgerCatalog, cfg CatalogGCConfig) *CatalogGC {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultCatalogGCInterval
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultCatalogGCGrace
	}
	if cfg.MaxPerPass <= 0 {
		cfg.MaxPerPass = DefaultCatalogGCPerPass
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &CatalogGC{b: b, cat: cat, cfg: cfg, cursor: -1, since: map[int64]time.Time{}}
}

// Run passes every Interval until ctx ends; a failed pass is logged and
// the next one tries again.
func (g *CatalogGC) Run(ctx context.Context) error {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r, err := g.Pass(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			g.b.log.Warn("catalog GC pass failed; the next one retries", slog.Any("err", err))
		case r.Guarded:
			g.b.log.Error("catalog GC deleted nothing: most ledgers checked are unknown to the catalog — is this bookie pointed at the right catalog table?",
				slog.Int("checked", r.Checked), slog.Int("garbage", r.Garbage))
		case r.Deleted > 0:
			g.b.log.Info("catalog GC deleted ledgers no longer needed here", slog.Int("deleted", r.Deleted), slog.Int("checked", r.Checked))
		}
	}
}

// Pass checks up to MaxPerPass ledgers from where the last pass stopped
// and deletes those garbage for Grace.
func (g *CatalogGC) Pass(ctx context.Context) (CatalogGCReport, error) {
	var r CatalogGCReport
	from := g.cursor
	ids, err := g.b.st.ListLedgers(from, g.cfg.MaxPerPass)
	if err != nil {
		return r, fmt.Errorf("list ledgers: %w", err)
	}
	if len(ids) < g.cfg.MaxPerPass {
		r.Finished = true
	}
	now := g.cfg.Now()
	var ripe []int64
	garbageNow := map[int64]bool{}
	for _, id := range ids {
		m, err := g.cat.GetLedger(ctx, catalog.LedgerID(id))
		switch {
		case errors.Is(err, catalog.ErrNotFound):
		case err != nil:
			return r, fmt.Errorf("catalog: ledger %d: %w", id, err)
		case !garbage(m, g.b.cfg.ID):
			delete(g.since, id)
			r.Checked++
			continue
		}
		r.Checked++
		r.Garbage++
		garbageNow[id] = true
		since, ok := g.since[id]
		if !ok && len(g.since) < maxGarbageTracked {
			g.since[id], since, ok = now, now, true
		}
		if ok && now.Sub(since) >= g.cfg.Grace {
			ripe = append(ripe, id)
		}
	}
	if len(ids) > 0 {
		g.cursor = ids[len(ids)-1]
	}
	if r.Finished {
		g.cursor = -1
	}
	if r.Garbage > MinLedgersForGuard && 2*r.Garbage > r.Checked {
		r.Guarded = true
		return r, nil
	}
	for _, id := range ripe {
		if err := g.b.DeleteLedger(id); err != nil {
			return r, fmt.Errorf("delete ledger %d: %w", id, err)
		}
		delete(g.since, id)
		r.Deleted++
	}
	// Forget the ledgers of the range this pass covered that are no longer
	// garbage, or no longer here.
	to := int64(-1)
	if len(ids) > 0 {
		to = ids[len(ids)-1]
	}
	for id := range g.since {
		if id > from && (r.Finished || id <= to) && !garbageNow[id] {
			delete(g.since, id)
		}
	}
	return r, nil
}

// garbage reports whether this bookie's copy of m is no longer needed:
// its data lives elsewhere or nowhere (OFFLOADED, DELETED), or no segment
// names this bookie.
func garbage(m catalog.LedgerMetadata, self string) bool {
	if m.State == catalog.LedgerOffloaded || m.State == catalog.LedgerDeleted {
		return true
	}
	for _, seg := range m.Ensembles {
		if slices.Contains(seg.Bookies, self) {
			return false
		}
	}
	return true
}
