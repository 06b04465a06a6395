package compactor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Re-replication (issue 28; bookkeeper/DESIGN.md "Re-replication"). Each
// pass, after offload:
//
//  1. The auditor reads the bookie registry and notes, for every bookie
//     a ledger names that is not live, since when this process has seen
//     it missing (c.missing; a bookie back in the registry is forgotten).
//  2. It scans a bounded page of CLOSED ledgers (its own cursor) and
//     counts those with a copy on a missing bookie; one missing longer
//     than RereplicateGrace is lost, and the ledger's copies on it are
//     rebuilt on a live bookie outside the segments that hold them
//     (client.Rereplicate: copy from verified survivors, acknowledged,
//     then one catalog compare-and-set), at most MaxLedgersPerPass
//     ledgers, Workers at once, RereplicateBytesPerSec overall.
//  3. A copy a reader found bad on a live bookie (LedgerMetadata.Damaged,
//     marked by the ledger client: an entry missing or failing its
//     checksum) is moved the same way, at once, reading from the others;
//     the move drops the mark. A live bookie that is draining (`sluice
//     bookie decommission`) has its copies moved the same way, at once
//     (no grace): it still serves reads, so nothing is under-replicated
//     meanwhile. One move per ledger and pass: a lost bookie's copy
//     first, then a damaged one, then a draining one.
//  4. Of the scanned ledgers, each live bookie is asked in one call which
//     it holds nothing of among those it should hold entries of
//     (client.MissingLedgers): a bookie restarted on wiped disks
//     registers as before while its copies are gone. Those copies are
//     moved the same way, at once, reading from the others; one move per
//     ledger and pass, so a copy whose ledger has another move (or that
//     does not fit in the pass) waits in a backlog for the next pass.
//
// OPEN and IN_RECOVERY ledgers are left to their writer (an ensemble
// change replaces a failed bookie for new entries) and to recovery; they
// are moved once sealed. OFFLOADED ledgers need no bookie. A pass that
// fails half-way changed nothing in the catalog; the next one redoes it.

// readRegistry reads the bookie registry for the pass's bookie steps
// (pending deletes, re-replication, purge) and forgets the missing
// bookies that are back. On failure c.live is nil: re-replication skips
// the pass and deletes ask every bookie.
func (c *Compactor) readRegistry(ctx context.Context, t *tally) {
	c.live = nil
	live, err := c.deps.Catalog.ListLiveBookies(ctx)
	if err != nil {
		t.fail(fmt.Errorf("list bookies: %w", err))
		return
	}
	c.live = make(map[string]catalog.Bookie, len(live))
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	for _, b := range live {
		c.live[b.ID] = b
		delete(c.missing, b.ID)
	}
}

// lostBookie reports whether bookie id is missing from the registry read
// by readRegistry, and whether it has been missing for RereplicateGrace
// (lost: its copies are rebuilt elsewhere, and deletes no longer wait for
// it). A missing bookie is noted as seen in the scan's current cycle.
// Safe for the pass's workers.
func (c *Compactor) lostBookie(id string) (missing, lost bool) {
	if c.live == nil {
		return false, false // the registry is unknown this pass
	}
	if _, ok := c.live[id]; ok {
		return false, false
	}
	now := c.cfg.Now()
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	c.missingSeen[id] = true
	since, ok := c.missing[id]
	if !ok {
		if len(c.missing) >= maxMissingBookies {
			return true, false // bounded; noted on a later pass
		}
		c.missing[id], since = now, now
	}
	return true, now.Sub(since) >= c.cfg.RereplicateGrace
}

// lostFilter is lostBookie's lost, for client.DeleteLedger: bookies lost
// for good are not asked to delete (an unreachable bookie would fail the
// delete forever); the copies they may still hold are theirs to drop.
func (c *Compactor) lostFilter(id string) bool {
	_, lost := c.lostBookie(id)
	return lost
}

// rereplicateAll is the pass step.
func (c *Compactor) rereplicateAll(ctx context.Context, t *tally) {
	if c.live == nil {
		return // readRegistry failed and said so
	}
	live := slices.Collect(maps.Values(c.live))
	slices.SortFunc(live, func(a, b catalog.Bookie) int { return strings.Compare(a.ID, b.ID) })
	alive := c.live
	lost := c.lostBookie
	if err := c.rereplicateCursor.load(ctx, c); err != nil {
		t.fail(err)
		return
	}
	type job = rereplicateJob
	var todo []job
	under := 0
	// Copies an earlier pass found lost on a live bookie and could not
	// take on, if their ledger still names that bookie.
	for _, id := range slices.Sorted(maps.Keys(c.auditBacklog)) {
		if len(todo) >= c.cfg.MaxLedgersPerPass {
			break
		}
		from := c.auditBacklog[id]
		delete(c.auditBacklog, id)
		m, err := c.deps.Catalog.GetLedger(ctx, id)
		if err != nil || m.State != catalog.LedgerClosed || !slices.Contains(ledgerBookies(m), from) {
			continue // gone, offloaded or already moved: the scan judges it again
		}
		todo, under = append(todo, job{m, from}), under+1
	}
	audited := map[catalog.LedgerID]catalog.LedgerMetadata{} // scanned, no lost or draining bookie
	token, scanned := string(c.rereplicateCursor.token), 0
	for scanned < c.cfg.MaxScanPerPass && len(todo) < c.cfg.MaxLedgersPerPass {
		// A page of at most the jobs still wanted: it never overfills, so
		// the cursor always moves past it. (Stopping mid-page would leave
		// the cursor before ledgers that cannot be repaired — no spare
		// bookie — and every later pass would stall on them.)
		limit := min(catalog.MaxPageSize, c.cfg.MaxScanPerPass-scanned, c.cfg.MaxLedgersPerPass-len(todo))
		page, err := c.deps.Catalog.ListLedgersByState(ctx, catalog.LedgerClosed, token, limit)
		if err != nil {
			if errors.Is(err, catalog.ErrInvalid) {
				token = ""
			}
			t.fail(fmt.Errorf("re-replication: list CLOSED ledgers: %w", err))
			break
		}
		scanned += len(page.Items)
		for _, m := range page.Items {
			audited[m.ID] = m
			from, counted, drain, damaged := "", false, "", ""
			for _, b := range ledgerBookies(m) {
				if bk, ok := alive[b]; ok && bk.Draining && drain == "" {
					drain = b
				}
				missing, isLost := lost(b)
				if missing && !counted {
					under, counted = under+1, true
				}
				if isLost && from == "" {
					from = b
				}
				if _, ok := m.DamagedOn(b); ok && !missing && damaged == "" {
					damaged = b
				}
			}
			if damaged != "" && !counted {
				under++ // a copy a reader found bad
			}
			if from == "" {
				from = cmp.Or(damaged, drain)
			}
			if from != "" && !slices.ContainsFunc(todo, func(j job) bool { return j.m.ID == m.ID }) {
				todo = append(todo, job{m, from})
			}
		}
		if token = page.NextPageToken; token == "" {
			// A whole cycle of the scan is done: forget the missing
			// bookies no ledger named since the cycle began (moved off,
			// or never back), so c.missing holds only bookies that
			// matter.
			c.lostMu.Lock()
			for id := range c.missing {
				if !c.missingSeen[id] {
					delete(c.missing, id)
				}
			}
			clear(c.missingSeen)
			c.lostMu.Unlock()
			break
		}
	}
	if err := c.rereplicateCursor.save(ctx, c, []byte(token)); err != nil {
		t.fail(err)
	}
	for _, j := range c.auditCopies(ctx, t, audited, alive) {
		busy := slices.ContainsFunc(todo, func(o job) bool { return o.m.ID == j.m.ID })
		if !busy {
			under++ // else counted with its other move
		}
		if busy || len(todo) >= c.cfg.MaxLedgersPerPass {
			// One move per ledger and pass: the next pass takes it.
			if len(c.auditBacklog) < maxAuditBacklog {
				c.auditBacklog[j.m.ID] = j.from
			}
			continue
		}
		todo = append(todo, j)
	}
	t.add(func(r *Report) { r.UnderReplicated += under })
	c.m.underReplicated.Record(ctx, int64(under))
	if len(todo) == 0 {
		return
	}
	var targets sync.Mutex
	assigned := map[string]int{} // ledgers given to each target this pass (spreads them)
	each(ctx, c.cfg.Workers, todo, func(ctx context.Context, j job) {
		targets.Lock()
		to, ok := pickTarget(j.m, j.from, live, assigned)
		if ok {
			assigned[to]++
		}
		targets.Unlock()
		if !ok {
			t.fail(fmt.Errorf("re-replicate ledger %d: no live bookie outside its ensembles to take %s's copies (%d live)", j.m.ID, j.from, len(live)))
			return
		}
		res, err := c.deps.Ledgers.Rereplicate(ctx, j.m.ID, j.from, to, c.pace.wait)
		if err != nil {
			c.log.Warn("re-replication failed; the next pass retries", slog.Int64("ledger", int64(j.m.ID)),
				slog.String("from", j.from), slog.String("to", to), slog.Any("err", err))
			t.fail(fmt.Errorf("re-replicate ledger %d from %s to %s: %w", j.m.ID, j.from, to, err))
			return
		}
		if res.Moved {
			t.add(func(r *Report) { r.Rereplicated++; r.RereplicatedBytes += res.Bytes })
			c.m.rereplicated.Add(ctx, 1)
			c.m.rereplBytes.Add(ctx, res.Bytes)
		}
	})
}

// auditCopies asks every live bookie which of the ledgers naming it (of
// ms) it holds nothing of, among those it should hold an entry of, and
// returns a move for each such copy (at most one per ledger, in ledger id
// order). A bookie that cannot answer is skipped this pass.
func (c *Compactor) auditCopies(ctx context.Context, t *tally, ms map[catalog.LedgerID]catalog.LedgerMetadata, alive map[string]catalog.Bookie) []rereplicateJob {
	expect := map[string][]catalog.LedgerID{}
	for _, m := range ms {
		for _, b := range ledgerBookies(m) {
			if _, ok := alive[b]; ok && holdsEntries(m, b) {
				expect[b] = append(expect[b], m.ID)
			}
		}
	}
	moves := map[catalog.LedgerID]string{}
	for _, b := range slices.Sorted(maps.Keys(expect)) {
		ids := expect[b]
		slices.Sort(ids)
		missing, err := c.deps.Ledgers.MissingLedgers(ctx, b, ids)
		if err != nil {
			t.fail(fmt.Errorf("re-replication audit: %w", err))
			continue
		}
		for _, id := range missing {
			if _, ok := moves[id]; !ok {
				moves[id] = b
				c.log.Warn("bookie lacks a ledger the catalog names it for; moving that copy",
					slog.String("bookie", b), slog.Int64("ledger", int64(id)))
			}
		}
	}
	var jobs []rereplicateJob
	for _, id := range slices.Sorted(maps.Keys(moves)) {
		jobs = append(jobs, rereplicateJob{ms[id], moves[id]})
	}
	return jobs
}

// holdsEntries reports whether bookie b, where m's segments name it,
// should hold at least one of m's entries: an entry whose write set holds
// its position. With Qw < E, or a segment shorter than E, a member may
// hold none.
func holdsEntries(m catalog.LedgerMetadata, b string) bool {
	e, qw := int64(m.Replication.Ensemble), int64(m.Replication.WriteQuorum)
	for i, seg := range m.Ensembles {
		last := m.LastEntry
		if i+1 < len(m.Ensembles) {
			last = m.Ensembles[i+1].FirstEntry - 1
		}
		p := int64(slices.Index(seg.Bookies, b))
		if p < 0 || e <= 0 || last < seg.FirstEntry {
			continue
		}
		// Entry x's write set is positions x mod E .. x mod E + Qw - 1
		// (mod E): p is in it when (p - x) mod E < Qw.
		for x := seg.FirstEntry; x <= last && x < seg.FirstEntry+e; x++ {
			if ((p-x)%e+e)%e < qw {
				return true
			}
		}
	}
	return false
}

// maxAuditBacklog bounds Compactor.auditBacklog; a finding beyond it is
// found again when the scan comes round.
const maxAuditBacklog = 10_000

// rereplicateJob is one ledger whose copies on from are to be moved.
type rereplicateJob struct {
	m    catalog.LedgerMetadata
	from string
}

// maxMissingBookies bounds c.missing; a full scan cycle forgets the
// bookies no CLOSED ledger names any more.
const maxMissingBookies = 4096

// ledgerBookies is every bookie m's segments name, each once, in order.
func ledgerBookies(m catalog.LedgerMetadata) []string {
	var out []string
	for _, seg := range m.Ensembles {
		for _, b := range seg.Bookies {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// pickTarget chooses the live bookie that takes from's copies of m: a
// writable one (not read-only: near disk-full, it takes no new entries)
// in no segment of m that names from (a segment's bookies are distinct),
// preferring the one given the fewest ledgers this pass (assigned), then
// the most free space, ties spread by the ledger id.
func pickTarget(m catalog.LedgerMetadata, from string, live []catalog.Bookie, assigned map[string]int) (string, bool) {
	var taken []string
	for _, seg := range m.Ensembles {
		if slices.Contains(seg.Bookies, from) {
			taken = append(taken, seg.Bookies...)
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(strconv.FormatInt(int64(m.ID), 10)))
	spread := h.Sum32()
	best, bestKey := "", [3]uint64{}
	for _, b := range live {
		if b.ReadOnly || slices.Contains(taken, b.ID) {
			continue
		}
		hb := fnv.New32a()
		_, _ = hb.Write([]byte(b.ID))
		// Larger is better: fewer assigned, more free, then the hash.
		key := [3]uint64{^uint64(assigned[b.ID]), uint64(max(b.FreeBytes, 0)), uint64(hb.Sum32() ^ spread)}
		if best == "" || slices.Compare(key[:], bestKey[:]) > 0 {
			best, bestKey = b.ID, key
		}
	}
	return best, best != ""
}

// pacer spreads re-replication's bytes at a rate on the real clock (it
// bounds real resource use, whatever clock the passes decide by): each
// wait(n) returns once n more bytes fit under bytesPerSec, with at most
// one second of unused rate saved up.
type pacer struct {
	mu          sync.Mutex
	bytesPerSec float64
	now         func() time.Time
	next        time.Time // when the bytes granted so far are paid off
}

func newPacer(bytesPerSec int64, now func() time.Time) *pacer {
	return &pacer{bytesPerSec: float64(bytesPerSec), now: now}
}

// wait blocks until n bytes may go, or ctx ends.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	now := p.now()
	start := p.next
	if start.Before(now.Add(-time.Second)) {
		start = now.Add(-time.Second) // at most one second of unused rate is saved up
	}
	p.next = start.Add(time.Duration(float64(n) / p.bytesPerSec * float64(time.Second)))
	delay := p.next.Sub(now)
	p.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
