package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/bookkeeper/wire"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// RereplicateResult says what one Rereplicate call did.
type RereplicateResult struct {
	Metadata catalog.LedgerMetadata // the ledger as stored after the call
	Entries  int                    // entries copied to the new bookie
	Bytes    int64                  // their payload bytes
	Moved    bool                   // false: the ledger no longer listed the bookie (nothing to do)
}

// Rereplicate moves a CLOSED ledger's copies from bookie `from` (lost, or
// being drained) to bookie `to`, as BookKeeper's re-replication does:
//
//  1. For every segment that lists `from`, every entry of the segment
//     whose write set holds from's position is read from another member
//     of its write set — the entry, its LAC and its checksum as stored,
//     verified against wire.EntryChecksum — and written to `to` with a
//     recovery add (the ledger's master key), in windows of at most
//     rereplicateWindow entries and about rereplicateWindowBytes; each
//     must be acknowledged by `to`, which means fsynced in its journal.
//  2. Only then one catalog compare-and-set points those positions at
//     `to` (catalog.NextLedger's replica move). A lost race re-reads the
//     ledger and starts over; a ledger that no longer lists `from` is done.
//
// A crash or failure at any point leaves the catalog naming `from` (the
// copies on `to` are unreferenced duplicates the next pass writes again,
// harmlessly), so the next pass repairs it: no gap, no double entry. Open
// ledgers are refused (ErrInvalidArgument): their writer owns the chain;
// they are moved once sealed; an OFFLOADED or DELETED ledger needs nothing
// (Moved false). pace, if set, is called with each window's
// payload bytes before it is sent (throttling; its error stops the call).
func (c *Client) Rereplicate(ctx context.Context, id catalog.LedgerID, from, to string, pace func(ctx context.Context, bytes int) error) (RereplicateResult, error) {
	ctx, leave, err := c.enter(ctx)
	if err != nil {
		return RereplicateResult{}, err
	}
	defer leave()
	if from == "" || to == "" || from == to {
		return RereplicateResult{}, fmt.Errorf("rereplicate ledger %d: %w: from %q to %q", id, ErrInvalidArgument, from, to)
	}
	var res RereplicateResult
	for conflicts := 0; ; conflicts++ {
		m, err := c.getLedger(ctx, id)
		if errors.Is(err, catalog.ErrNotFound) && conflicts > 0 {
			return res, nil // purged while we copied
		}
		if err != nil {
			return res, fmt.Errorf("rereplicate ledger %d: %w", id, err)
		}
		res = RereplicateResult{Metadata: m} // counts are this attempt's
		switch {
		case m.State.Sealed() && m.State != catalog.LedgerClosed:
			// Offloaded or deleted (perhaps while we copied): its bookie
			// copies are no longer needed. Nothing to do.
			return res, nil
		case m.State != catalog.LedgerClosed:
			return res, fmt.Errorf("rereplicate ledger %d: %w: it is %v (only CLOSED ledgers' copies move; an open ledger's writer replaces bookies itself)", id, ErrInvalidArgument, m.State)
		}
		moved, n, bytes, err := c.copyReplicas(ctx, m, from, to, pace)
		res.Entries, res.Bytes = n, bytes
		if err != nil {
			return res, fmt.Errorf("rereplicate ledger %d from %s to %s: %w", id, from, to, err)
		}
		if !moved.changed {
			return res, nil
		}
		stored, err := c.updateLedger(ctx, moved.m)
		if errors.Is(err, catalog.ErrVersionConflict) && conflicts < c.cfg.CASRetries {
			continue // someone else moved or offloaded it: decide again
		}
		if err != nil {
			return res, fmt.Errorf("rereplicate ledger %d from %s to %s: %w", id, from, to, err)
		}
		res.Metadata, res.Moved = stored, true
		c.log.Info("ledger re-replicated", slog.Int64("ledger", int64(id)), slog.String("from", from), slog.String("to", to),
			slog.Int("entries", res.Entries), slog.Int64("bytes", res.Bytes))
		return res, nil
	}
}

// replicaMove is the metadata a Rereplicate stores, and whether it differs.
type replicaMove struct {
	m       catalog.LedgerMetadata
	changed bool
}

// rereplicateWindow bounds the entries a Rereplicate has read and not yet
// seen acknowledged by the new bookie.
const rereplicateWindow = 64

// rereplicateWindowBytes bounds the payload bytes of a window as well: a
// window ends early once it holds this much (at least one entry), so a
// ledger of large entries costs at most this much memory per call.
const rereplicateWindowBytes = 16 << 20

// copyReplicas copies to `to` every entry `from` holds in m's segments,
// and returns m with those positions pointing at `to`.
func (c *Client) copyReplicas(ctx context.Context, m catalog.LedgerMetadata, from, to string, pace func(context.Context, int) error) (replicaMove, int, int64, error) {
	sched, err := ledger.NewSchedule(m.Replication)
	if err != nil {
		return replicaMove{}, 0, 0, err
	}
	out := replicaMove{m: m}
	out.m.Ensembles = make([]catalog.EnsembleSegment, len(m.Ensembles))
	var entries int
	var bytes int64
	for i, seg := range m.Ensembles {
		out.m.Ensembles[i] = catalog.EnsembleSegment{FirstEntry: seg.FirstEntry, Bookies: slices.Clone(seg.Bookies)}
		pos := slices.Index(seg.Bookies, from)
		if pos < 0 {
			continue
		}
		if slices.Contains(seg.Bookies, to) {
			return replicaMove{}, entries, bytes, fmt.Errorf("%w: bookie %s already holds segment %d's other copies", ErrInvalidArgument, to, i)
		}
		last := m.LastEntry
		if i+1 < len(m.Ensembles) {
			last = m.Ensembles[i+1].FirstEntry - 1
		}
		var mine []int64 // the segment's entries whose write set holds pos
		for e := seg.FirstEntry; e <= last; e++ {
			if slices.Contains(sched.WriteSet(e), pos) {
				mine = append(mine, e)
			}
		}
		if sabotageRereplicate {
			mine = nil // the catalog moves, the copies do not
		}
		for len(mine) > 0 {
			w, err := c.readWindow(ctx, m, sched, seg, pos, mine[:min(len(mine), rereplicateWindow)])
			if err != nil {
				return replicaMove{}, entries, bytes, err
			}
			n := len(w) // a prefix: the window may end early at its byte bound
			size := 0
			for _, e := range w {
				size += len(e.GetPayload())
			}
			if pace != nil {
				if err := pace(ctx, size); err != nil {
					return replicaMove{}, entries, bytes, err
				}
			}
			if err := c.writeWindow(ctx, m, to, w); err != nil {
				return replicaMove{}, entries, bytes, err
			}
			entries, bytes = entries+n, bytes+int64(size)
			mine = mine[n:]
		}
		out.m.Ensembles[i].Bookies[pos] = to
		out.changed = true
	}
	return out, entries, bytes, nil
}

// readWindow reads entries (each verified, with the LAC it was stored
// with) from the other members of their write sets in seg. Runs of
// consecutive entries are asked of one survivor with range reads when
// Qw = E (every bookie of the segment then holds every entry); whatever a
// range read does not return
// verified is read entry by entry from each survivor in turn. It returns
// a prefix of entries: it stops once rereplicateWindowBytes are held. (With
// striping the survivors change from entry to entry, so entries are read
// one by one.)
func (c *Client) readWindow(ctx context.Context, m catalog.LedgerMetadata, sched ledger.Schedule, seg catalog.EnsembleSegment, lost int, entries []int64) ([]*bookiev1.Entry, error) {
	got := make(map[int64]*bookiev1.Entry, len(entries))
	held := 0 // payload bytes in got
	verified := func(e int64, ent *bookiev1.Entry) bool {
		if ent.GetEntryId() == e && wire.EntryChecksum(int64(m.ID), e, ent.GetLac(), ent.GetPayload()) == ent.GetCrc32C() {
			return true
		}
		c.stats.checksumFailures.Add(1)
		return false
	}
	// Range reads over runs of consecutive entries, from the first
	// survivor of the run's first entry (rotating by run, so the load is
	// spread).
	for i := 0; i < len(entries) && held < rereplicateWindowBytes; {
		j := i + 1
		for j < len(entries) && entries[j] == entries[j-1]+1 {
			j++
		}
		first, last := entries[i], entries[j-1]
		var survivors []int
		for _, p := range sched.WriteSet(first) {
			if p != lost {
				survivors = append(survivors, p)
			}
		}
		if len(survivors) > 0 && m.Replication.WriteQuorum == m.Replication.Ensemble {
			b := seg.Bookies[survivors[int(first)%len(survivors)]]
			for next, good := first, true; good && next <= last && held < rereplicateWindowBytes; {
				// A bookie answers a prefix (its byte bound): go on from
				// where it stopped, until an entry fails or nothing comes.
				msg, err := c.readCall(ctx, b, &bookiev1.ReadEntriesRequest{LedgerId: int64(m.ID), FirstEntry: next, LastEntry: last})
				if err != nil || len(msg.GetEntries()) == 0 {
					break
				}
				for _, ent := range msg.GetEntries() {
					if next > last {
						break
					}
					if good = verified(next, ent); !good {
						break
					}
					got[next] = ent
					held += len(ent.GetPayload())
					next++
				}
			}
		}
		i = j
	}
	out := make([]*bookiev1.Entry, 0, len(entries))
	size := 0
	for _, e := range entries {
		if len(out) > 0 && size >= rereplicateWindowBytes {
			break // the window's byte bound: the rest in the next window
		}
		if ent := got[e]; ent != nil {
			out = append(out, ent)
			size += len(ent.GetPayload())
			continue
		}
		var errs []error
		var ent *bookiev1.Entry
		for _, p := range sched.WriteSet(e) {
			if p == lost {
				continue
			}
			b := seg.Bookies[p]
			msg, err := c.readCall(ctx, b, &bookiev1.ReadEntriesRequest{LedgerId: int64(m.ID), FirstEntry: e, LastEntry: e})
			if err == nil && len(msg.GetEntries()) == 0 {
				err = errors.New("empty answer")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("bookie %s: %w", b, err))
				continue
			}
			if !verified(e, msg.GetEntries()[0]) {
				errs = append(errs, fmt.Errorf("%w: bookie %s, entry %d/%d", ErrChecksum, b, m.ID, e))
				continue
			}
			ent = msg.GetEntries()[0]
			break
		}
		if ent == nil {
			return nil, fmt.Errorf("no surviving copy of entry %d could be read: %w", e, errors.Join(errs...))
		}
		out = append(out, ent)
		size += len(ent.GetPayload())
	}
	return out, nil
}

// writeWindow recovery-adds the entries to bookie `to` on a stream of its
// own and waits until it acknowledged every one (or one failed).
func (c *Client) writeWindow(ctx context.Context, m catalog.LedgerMetadata, to string, ents []*bookiev1.Entry) error {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	adds := newAddSet(c, m, wctx, &wg, false)
	defer func() {
		cancel()
		adds.closeAll()
		wg.Wait()
	}()
	byID := make(map[int64]*bookiev1.Entry, len(ents))
	send := func(e *bookiev1.Entry) {
		adds.send(ledger.SendAdd{Bookie: to, Entry: e.GetEntryId(), LAC: e.GetLac(), Payload: e.GetPayload(), Recovery: true}, nil)
	}
	for _, e := range ents {
		byID[e.GetEntryId()] = e
		send(e)
	}
	left := len(ents)
	// An add the new bookie did not take for a passing reason (its write
	// buffer full: REJECTED; no answer in time) is sent again after a
	// backoff, up to rereplicateAddAttempts times: a busy target slows a
	// pass down instead of failing it (and the next pass copying it all
	// again).
	attempts := map[int64]int{}
	retryAt := map[int64]time.Time{}
	tick := time.NewTicker(c.cfg.TickInterval)
	defer tick.Stop()
	handle := func(evs []ledger.Event) error {
		for _, ev := range evs {
			switch ev := ev.(type) {
			case ledger.AddAcked:
				left--
			case ledger.AddFailed:
				attempts[ev.Entry]++
				if ev.Reason != ledger.FailUnavailable || attempts[ev.Entry] >= rereplicateAddAttempts {
					return fmt.Errorf("bookie %s did not store entry %d (%d attempts): %v", to, ev.Entry, attempts[ev.Entry], ev.Reason)
				}
				retryAt[ev.Entry] = c.cfg.Now().Add(time.Duration(attempts[ev.Entry]) * rereplicateRetryBackoff)
			}
		}
		return nil
	}
	for left > 0 {
		select {
		case <-adds.in.wake:
			if err := handle(adds.answerAll()); err != nil {
				return err
			}
		case <-tick.C:
			now := c.cfg.Now()
			if err := handle(adds.timeouts(now)); err != nil {
				return err
			}
			for e, at := range retryAt {
				if !now.Before(at) {
					delete(retryAt, e)
					send(byID[e])
				}
			}
		case <-ctx.Done():
			return ctxErr(ctx)
		}
	}
	return nil
}

// rereplicateAddAttempts bounds the sends of one add to the new bookie;
// rereplicateRetryBackoff times the attempt number is the wait before the
// next.
const (
	rereplicateAddAttempts  = 5
	rereplicateRetryBackoff = 200 * time.Millisecond
)
