package client

import (
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Damage reports (bookkeeper/DESIGN.md §4.1, "Damaged copies"). A reader
// that finds a copy of a CLOSED ledger bad — a bookie of the entry's write
// set answers that it does not have it, or returns it failing its
// checksum — marks that copy in the ledger's catalog record
// (LedgerMetadata.Damaged). The compactor's re-replication moves every
// marked copy to another bookie; the move drops the mark.
//
// Reporting stays off the read path: the read goes on from another replica
// at once, and the report goes on a bounded queue that one goroutine per
// client works off. A full queue drops the report (the next bad read of
// that copy reports it again); a copy reported in the last damageRecentFor
// is not reported again, so a reader going through a bad copy costs one
// catalog write, not one per entry.
//
// A report is confirmed before it is stored: DamageConfirmDelay after the
// bad read, the goroutine re-reads the ledger's metadata and asks the
// bookie for the entry again, and marks the copy only if the bookie still
// lacks it or it still fails verification. A sealed ledger's last entries
// may reach the third member of a write set after the close (recovery
// re-adds them and waits for Qa acknowledgements only): a reader right
// after the close meets that copy short for a moment, which is not damage.
// An entry still missing after the delay is: with Qa < Qw, a member that
// never got an entry before the ledger was sealed never will.
//
// Only CLOSED ledgers are marked: on an OPEN ledger a bookie of the write
// set may not have an entry yet (it acknowledged fewer than Qw), and what
// it lacks once the ledger is sealed is found by the next read.

// Bounds of the damage reporter.
const (
	damageQueue      = 64
	damageRecentMax  = 4096
	damageRecentFor  = time.Minute
	damageCASRetries = 3
)

type damageReport struct {
	ledger catalog.LedgerID
	d      catalog.DamagedCopy
}

type damageKey struct {
	ledger catalog.LedgerID
	bookie string
}

// damageReporter is the queue and the memory of recent reports. recent is
// only touched by the reporting goroutine.
type damageReporter struct {
	queue  chan damageReport
	recent map[damageKey]time.Time
}

func newDamageReporter() *damageReporter {
	return &damageReporter{queue: make(chan damageReport, damageQueue), recent: map[damageKey]time.Time{}}
}

// noteDamage queues a report that bookie's copy of the reader's ledger is
// bad at entry, if the ledger is CLOSED as the reader knows it (the
// reporting goroutine checks again against the catalog).
func (c *Client) noteDamage(meta catalog.LedgerMetadata, bookie string, entry int64, why catalog.DamageReason) {
	if c.cfg.DisableDamageReports || meta.State != catalog.LedgerClosed {
		return
	}
	r := damageReport{ledger: meta.ID, d: catalog.DamagedCopy{Bookie: bookie, Entry: entry, Reason: why, At: c.cfg.Now()}}
	select {
	case c.damage.queue <- r:
	default:
		c.stats.damageReportsDropped.Add(1)
		c.meters.damage(why, damageDropped)
	}
}

// reportDamage is the reporting goroutine; it ends when the client closes.
func (c *Client) reportDamage() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case r := <-c.damage.queue:
			k := damageKey{r.ledger, r.d.Bookie}
			if at, ok := c.damage.recent[k]; ok && r.d.At.Sub(at) < damageRecentFor {
				continue
			}
			// Reports come in the order they were made: waiting for this
			// one's confirmation time delays the next ones by no more.
			if wait := c.cfg.DamageConfirmDelay - c.cfg.Now().Sub(r.d.At); wait > 0 {
				select {
				case <-c.ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			if len(c.damage.recent) >= damageRecentMax {
				clear(c.damage.recent)
			}
			c.damage.recent[k] = r.d.At
			if err := c.markDamaged(r); err != nil {
				c.log.Warn("could not mark a damaged copy in the catalog; the next bad read reports it again",
					slog.Int64("ledger", int64(r.ledger)), slog.String("bookie", r.d.Bookie), slog.Any("err", err))
				delete(c.damage.recent, k)
			}
		}
	}
}

// markDamaged adds r's mark to the ledger's record unless the copy is
// marked already or the report is stale: the ledger is not CLOSED any more
// (offloaded: no bookie copy is read), or the bookie no longer holds the
// entry by the current metadata (its copy was moved since the reader read
// the metadata).
func (c *Client) markDamaged(r damageReport) error {
	for range damageCASRetries {
		m, err := c.getLedger(c.ctx, r.ledger)
		if errors.Is(err, catalog.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.State != catalog.LedgerClosed || r.d.Entry > m.LastEntry || !inWriteSet(m, r.d.Bookie, r.d.Entry) {
			return nil
		}
		if _, ok := m.DamagedOn(r.d.Bookie); ok {
			return nil
		}
		if !c.stillBad(r) {
			return nil
		}
		m.Damaged = append(slices.Clone(m.Damaged), r.d)
		_, err = c.updateLedger(c.ctx, m)
		if errors.Is(err, catalog.ErrVersionConflict) {
			continue
		}
		if err == nil {
			c.stats.damageReports.Add(1)
			c.meters.damage(r.d.Reason, damageMarked)
			c.log.Warn("marked a damaged copy for re-replication", slog.Int64("ledger", int64(r.ledger)),
				slog.String("bookie", r.d.Bookie), slog.Int64("entry", r.d.Entry), slog.String("reason", string(r.d.Reason)))
		}
		return err
	}
	return nil // the record keeps changing: the next bad read reports again
}

// inWriteSet reports whether bookie is in entry's write set in m.
func inWriteSet(m catalog.LedgerMetadata, bookie string, entry int64) bool {
	sched, err := ledger.NewSchedule(m.Replication)
	if err != nil || entry < 0 {
		return false
	}
	var seg catalog.EnsembleSegment
	for _, s := range m.Ensembles {
		if s.FirstEntry <= entry {
			seg = s
		}
	}
	for _, p := range sched.WriteSet(entry) {
		if p < len(seg.Bookies) && seg.Bookies[p] == bookie {
			return true
		}
	}
	return false
}

// stillBad asks the bookie for the reported entry again: true if it still
// answers that it lacks it, or returns it failing verification; false if
// it returns it verified, or does not answer (a bookie that is down is the
// registry's to judge, not a damaged copy).
func (c *Client) stillBad(r damageReport) bool {
	a := c.readEntry(c.ctx, r.ledger, r.d.Bookie, r.d.Entry, false, nil)
	switch a.ev.(type) {
	case ledger.ReadNoEntry:
		return true
	case ledger.ReadFailed:
		return a.checkErr != nil
	}
	return false
}
