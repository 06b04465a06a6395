package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Recover closes a ledger whose writer is gone, or must be fenced out
// (DESIGN.md §2.2), and returns its sealed metadata:
//
//  1. read the metadata; a sealed ledger is returned as it is;
//  2. an OPEN ledger is stored IN_RECOVERY (compare-and-set); an
//     IN_RECOVERY one (another recovery began, maybe died) is recovered
//     again;
//  3. ledger.Recovery runs: fence the last segment's bookies, read forward
//     with fencing reads, write the found entries back with recovery adds,
//     decide the last entry;
//  4. the ledger is stored CLOSED (IN_RECOVERY → CLOSED, compare-and-set)
//     with that last entry and the last offset lastOffset computes from
//     the last entry's payload (FirstOffset-1 when the ledger is empty;
//     lastOffset is then not called).
//
// Concurrent recoveries of one ledger are safe: each may decide a
// different end (only for entries that were never acknowledged), the
// catalog's compare-and-set keeps exactly one, and the losers re-read and
// return the winner's metadata. A run that fails with
// ledger.ErrRecoveryFailed (too few bookies answered to decide safely) is
// retried with fresh metadata, up to RecoveryAttempts runs; lost races up
// to CASRetries times. The old writer, if still running, fails its next
// add with ledger.ErrFenced.
func (c *Client) Recover(ctx context.Context, id catalog.LedgerID, lastOffset func(lastEntry int64, payload []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	if lastOffset == nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("recover ledger %d: %w: nil lastOffset", id, ErrInvalidArgument)
	}
	start := time.Now()
	ctx, span := c.meters.startRecover(ctx, id)
	m, sealedHere, err := c.recoverLedger(ctx, id, lastOffset)
	outcome := outcomeAlreadyClosed
	switch {
	case err != nil:
		outcome = outcomeFailed
	case sealedHere:
		outcome = outcomeRecovered
	}
	c.meters.recovered(start, outcome)
	if span != nil {
		span.SetAttributes(attrOutcome.String(outcome))
		endSpan(span, err)
	}
	return m, err
}

// recoverLedger is Recover; sealedHere reports that this call stored the
// ledger CLOSED (not a recovery that found it sealed or lost the race).
func (c *Client) recoverLedger(ctx context.Context, id catalog.LedgerID, lastOffset func(lastEntry int64, payload []byte) (int64, error)) (_ catalog.LedgerMetadata, sealedHere bool, _ error) {
	ctx, leave, err := c.enter(ctx)
	if err != nil {
		return catalog.LedgerMetadata{}, false, err
	}
	defer leave()
	failures, conflicts := 0, 0
	lost := func(err error) error {
		conflicts++
		if conflicts > c.cfg.CASRetries {
			return fmt.Errorf("recover ledger %d: lost %d races: %w", id, conflicts, err)
		}
		return nil
	}
	for {
		m, err := c.getLedger(ctx, id)
		if err != nil {
			return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: %w", id, err)
		}
		if m.State.Sealed() {
			return m, false, nil
		}
		if m.State == catalog.LedgerOpen {
			p := m
			p.State = catalog.LedgerInRecovery
			m, err = c.updateLedger(ctx, p)
			if errors.Is(err, catalog.ErrVersionConflict) {
				if err := lost(err); err != nil {
					return catalog.LedgerMetadata{}, false, err
				}
				continue
			}
			if err != nil {
				return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: %w", id, err)
			}
		}
		end, payload, err := c.recoverEnd(ctx, m)
		if errors.Is(err, ledger.ErrRecoveryFailed) && ctx.Err() == nil {
			failures++
			if failures >= c.cfg.RecoveryAttempts {
				return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: %d attempts: %w", id, failures, err)
			}
			d := c.cfg.backoff(failures - 1)
			c.log.Warn("ledger recovery failed; retrying", slog.Int64("ledger", int64(id)), slog.Duration("backoff", d), slog.Any("err", err))
			if err := sleep(ctx, d); err != nil {
				return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: %w", id, ctxErr(ctx))
			}
			continue
		}
		if err != nil {
			return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: %w", id, err)
		}
		p := m
		p.State, p.LastEntry, p.LastOffset = catalog.LedgerClosed, end, m.FirstOffset-1
		if end >= 0 {
			if payload == nil {
				// The end is at or below the highest LAC a bookie reported, so
				// recovery read nothing itself: read the entry (acknowledged,
				// so on Qa bookies of its segment).
				if payload, err = c.readOne(ctx, m, end); err != nil {
					return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: read last entry %d: %w", id, end, err)
				}
			}
			if p.LastOffset, err = lastOffset(end, payload); err != nil {
				return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: last offset of entry %d: %w", id, end, err)
			}
		}
		out, err := c.updateLedger(ctx, p)
		if errors.Is(err, catalog.ErrVersionConflict) {
			// Another recovery closed it (or re-marked it): the loop
			// re-reads and returns the winner's record.
			if err := lost(err); err != nil {
				return catalog.LedgerMetadata{}, false, err
			}
			continue
		}
		if err != nil {
			return catalog.LedgerMetadata{}, false, fmt.Errorf("recover ledger %d: %w", id, err)
		}
		c.stats.ledgersRecovered.Add(1)
		c.log.Info("ledger recovered", slog.Int64("ledger", int64(id)), slog.Int64("last_entry", end), slog.Int64("last_offset", out.LastOffset))
		return out, true, nil
	}
}

// recoverEnd runs one ledger.Recovery over m (IN_RECOVERY) and returns the
// decided last entry and, when recovery read it, its payload.
//
// It owns the machine on the calling goroutine; fences and recovery reads
// run one goroutine per request, recovery adds go over this run's own
// AddEntries streams; all of them answer through channels, and all have
// exited when it returns.
func (c *Client) recoverEnd(ctx context.Context, m catalog.LedgerMetadata) (int64, []byte, error) {
	rec, err := ledger.NewRecovery(c.cfg.ledgerConfig(m.Replication), m.Ensembles)
	if err != nil {
		return 0, nil, err
	}
	key := MasterKey(m)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	adds := newAddSet(c, m, rctx, &wg, false)
	defer func() {
		cancel()
		adds.closeAll()
		wg.Wait()
	}()
	// Every request sends exactly one event; at most E fences and
	// RecoveryReadWindow×Qw reads are outstanding.
	events := make(chan ledger.Event, m.Replication.Ensemble+c.cfg.RecoveryReadWindow*m.Replication.WriteQuorum)
	send := func(ev ledger.Event) {
		select {
		case events <- ev:
		case <-rctx.Done():
		}
	}
	tick := time.NewTicker(c.cfg.TickInterval)
	defer tick.Stop()

	acts := rec.Start()
	for {
		for _, a := range acts {
			switch a := a.(type) {
			case ledger.SendFence:
				wg.Add(1)
				go func() {
					defer wg.Done()
					send(c.fence(rctx, m.ID, a.Bookie, key))
				}()
			case ledger.SendRecoveryRead:
				wg.Add(1)
				go func() {
					defer wg.Done()
					send(c.readEntry(rctx, m.ID, a.Bookie, a.Entry, a.Fence, key).ev)
				}()
			case ledger.SendAdd:
				adds.send(a, nil)
			case ledger.CloseLedger:
				c.log.Debug("recovery decided the end", slog.Int64("ledger", int64(m.ID)), slog.Int64("last_entry", a.LastEntry))
				// Every write-back reached Qa; give the rest of the write
				// set a moment to answer too, so a healthy bookie is not
				// left without its copy by the cancellation below.
				drainWriteBacks(ctx, adds, writeBackWait)
				return a.LastEntry, a.LastPayload, nil
			case ledger.RecoveryFailed:
				return 0, nil, a.Err
			default:
				panic(fmt.Sprintf("ledger client: unexpected recovery action %v", a))
			}
		}
		acts = nil
		step := func(ev ledger.Event) {
			more, err := rec.Step(ev)
			if err != nil {
				panic(fmt.Sprintf("ledger client: recovery of ledger %d refused %v: %v", m.ID, ev, err))
			}
			acts = append(acts, more...)
		}
		select {
		case ev := <-events:
			step(ev)
		case <-adds.in.wake:
			for _, ev := range adds.answerAll() {
				step(ev)
			}
		case <-tick.C:
			for _, ev := range adds.timeouts(c.cfg.Now()) {
				step(ev)
			}
		case <-ctx.Done():
			return 0, nil, ctxErr(ctx)
		}
	}
}

// writeBackWait bounds how long a finished recovery, or a writer that
// sealed its ledger, waits for the adds beyond the ack quorum (a slow
// bookie's copy is then left to re-replication, as in BookKeeper).
const writeBackWait = time.Second

// drainWriteBacks takes the answers of the adds still outstanding until
// none is left, wait passes or ctx ends.
func drainWriteBacks(ctx context.Context, adds *addSet, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for adds.busy() {
		select {
		case <-adds.in.wake:
			adds.answerAll()
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// readOne reads one acknowledged entry of a ledger being recovered, with a
// reader that treats the ledger as closed at that entry.
func (c *Client) readOne(ctx context.Context, m catalog.LedgerMetadata, entry int64) ([]byte, error) {
	m.State, m.LastEntry = catalog.LedgerClosed, entry
	r, err := c.newReader(m)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ents, err := r.readRange(ctx, entry, entry)
	if err != nil {
		return nil, err
	}
	return ents[0].Payload, nil
}
