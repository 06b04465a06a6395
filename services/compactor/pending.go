package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Pending markers (objects under pending/) hold the work that waits for a
// grace period and must survive a crash: the bookie copies of an OFFLOADED
// ledger, and everything of a DELETED one. The catalog has no field for
// "bookie copies dropped", and listing every OFFLOADED ledger each pass
// would grow with retention; the markers are bounded by the ledgers inside
// a grace period.

// pendingAll looks at up to MaxPendingPerPass markers and finishes the
// bookie deletes of OFFLOADED ledgers whose grace is over.
// The listing goes on from where the last pass stopped (a cursor), so
// markers whose work keeps failing (a bookie that is gone) cannot starve
// the others.
func (c *Compactor) pendingAll(ctx context.Context, t *tally) {
	objs, ok := c.listPage(ctx, t, &c.pendingCursor, pendingDir, c.cfg.MaxPendingPerPass)
	if !ok {
		return
	}
	var ids []catalog.LedgerID
	for _, obj := range objs {
		if id, ok := c.ledgerOfPending(obj.Key); ok {
			ids = append(ids, id)
		}
	}
	each(ctx, c.cfg.Workers, ids, func(ctx context.Context, id catalog.LedgerID) {
		done, err := c.pending(ctx, id)
		if err != nil {
			c.log.Warn("pending bookie delete failed", slog.Int64("ledger", int64(id)), slog.Any("err", err))
			t.fail(fmt.Errorf("pending work of ledger %d: %w", id, err))
		}
		if done {
			t.add(func(r *Report) { r.BookieDeletes++ })
		}
	})
}

// pending handles one marker of a ledger that is not DELETED (purgeAll
// owns those). done reports a bookie delete.
func (c *Compactor) pending(ctx context.Context, id catalog.LedgerID) (done bool, err error) {
	mk, found, err := c.readMarker(ctx, id)
	if err != nil || !found {
		return false, err
	}
	m, err := c.deps.Catalog.GetLedger(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		// The ledger and its data are gone (purge deletes bookie copies
		// before the metadata); only the marker's object may be left.
		if mk.Location != "" {
			if err := c.deleteObject(ctx, mk.Location); err != nil {
				return false, err
			}
		}
		return false, c.deleteObject(ctx, c.pendingKey(id))
	}
	if err != nil {
		return false, err
	}
	switch m.State {
	case catalog.LedgerOffloaded:
	case catalog.LedgerClosed:
		// Staged: the offload has not updated the catalog yet; it will.
		return false, nil
	default:
		// DELETED: purgeAll owns it. OPEN/IN_RECOVERY cannot have one.
		return false, nil
	}
	if mk.Since == 0 || mk.Location != m.Location {
		// The grace counts from the first time the catalog is seen
		// pointing at the object, never from before.
		mk = marker{Location: m.Location, Bookies: true, Since: c.cfg.Now().UnixMilli()}
		if c.cfg.BookieDeleteGrace > 0 {
			return false, c.writeMarker(ctx, id, mk)
		}
	}
	if c.age(time.UnixMilli(mk.Since)) < c.cfg.BookieDeleteGrace {
		return false, nil
	}
	if err := c.dropBookieCopies(ctx, m); err != nil {
		return false, err
	}
	return true, nil
}

// dropBookieCopies deletes an OFFLOADED ledger from its bookies, then its
// marker. Only for a ledger the catalog has been seen to say OFFLOADED.
func (c *Compactor) dropBookieCopies(ctx context.Context, m catalog.LedgerMetadata) error {
	if m.State != catalog.LedgerOffloaded {
		panic(fmt.Sprintf("compactor: dropping bookie copies of ledger %d in state %v", m.ID, m.State))
	}
	if err := c.deps.Hooks.at(StepBeforeBookieDelete, m.ID); err != nil {
		return err
	}
	if err := c.deps.Ledgers.DeleteLedger(ctx, m, c.lostFilter); err != nil {
		return err
	}
	c.m.bookieDeletes.Add(ctx, 1)
	return c.deleteObject(ctx, c.pendingKey(m.ID))
}

// purgeAll removes up to MaxLedgersPerPass DELETED ledgers: their objects,
// their bookie copies if any remain, then their metadata, each once
// DeleteGrace has passed since the compactor first saw it DELETED. The
// listing goes on from where the last pass stopped (a cursor), so ledgers
// whose purge keeps failing cannot starve the others.
func (c *Compactor) purgeAll(ctx context.Context, t *tally) {
	if err := c.purgeCursor.load(ctx, c); err != nil {
		t.fail(err)
		return
	}
	page, err := c.deps.Catalog.ListLedgersByState(ctx, catalog.LedgerDeleted, string(c.purgeCursor.token), min(catalog.MaxPageSize, c.cfg.MaxLedgersPerPass))
	if err != nil {
		if errors.Is(err, catalog.ErrInvalid) {
			_ = c.purgeCursor.save(ctx, c, nil) // a stale cursor: start over
		}
		t.fail(fmt.Errorf("list DELETED ledgers: %w", err))
		return
	}
	if err := c.purgeCursor.save(ctx, c, []byte(page.NextPageToken)); err != nil {
		t.fail(err)
	}
	each(ctx, c.cfg.Workers, page.Items, func(ctx context.Context, m catalog.LedgerMetadata) {
		done, err := c.purge(ctx, m)
		if err != nil {
			c.log.Warn("purge failed", slog.Int64("ledger", int64(m.ID)), slog.Any("err", err))
			t.fail(fmt.Errorf("purge ledger %d: %w", m.ID, err))
		}
		if done {
			t.add(func(r *Report) { r.Purged++ })
		}
	})
}

// purge removes one DELETED ledger. Order: marker with the grace's start
// (and whether bookie copies remain: a ledger that never reached OFFLOADED
// has them; an OFFLOADED one has them while its marker says so); after the
// grace the objects, then the bookie copies, then the metadata — the
// ensembles are read from it, so it goes last — then the marker.
func (c *Compactor) purge(ctx context.Context, m catalog.LedgerMetadata) (bool, error) {
	mk, found, err := c.readMarker(ctx, m.ID)
	if err != nil {
		return false, err
	}
	if !found || !mk.Deleted {
		mk = marker{Location: m.Location, Deleted: true, Since: c.cfg.Now().UnixMilli(),
			Bookies: m.Location == "" || (found && mk.Bookies)}
		if err := c.writeMarker(ctx, m.ID, mk); err != nil {
			return false, err
		}
	}
	if c.age(time.UnixMilli(mk.Since)) < c.cfg.DeleteGrace {
		return false, nil
	}
	for _, key := range []string{c.segmentKey(m), m.Location} {
		if key != "" {
			if err := c.deleteObject(ctx, key); err != nil {
				return false, err
			}
		}
	}
	if mk.Bookies {
		if err := c.deps.Ledgers.DeleteLedger(ctx, m, c.lostFilter); err != nil {
			return false, err
		}
	}
	if err := c.deps.Hooks.at(StepBeforeMetadataDelete, m.ID); err != nil {
		return false, err
	}
	if err := c.deps.Catalog.DeleteLedgerMetadata(ctx, m.ID, m.Version); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return false, fmt.Errorf("delete metadata: %w", err)
	}
	c.m.purged.Add(ctx, 1)
	return true, c.deleteObject(ctx, c.pendingKey(m.ID))
}
