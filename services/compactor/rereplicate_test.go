package compactor

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// wipeBookie restarts bookie id on empty storage: same id, registered
// again (at a new address), every copy it held gone.
func (e *env) wipeBookie(id string) {
	e.t.Helper()
	e.mu.Lock()
	stop := e.stops[id]
	e.mu.Unlock()
	stop()
	e.startBookie(id)
}

// readsBack fails the test unless every entry of ms reads back as written
// (when says after what).
func (e *env) readsBack(ms []catalog.LedgerMetadata, when string) {
	e.t.Helper()
	for _, m := range ms {
		got, err := e.ledgers.ReadEntries(e.ctx(), m.ID, 0, m.LastEntry)
		if err != nil {
			e.t.Fatalf("ledger %d %s: %v", m.ID, when, err)
		}
		for i, p := range got {
			if string(p) != string(e.written[m.ID][i]) {
				e.t.Fatalf("ledger %d entry %d differs %s", m.ID, i, when)
			}
		}
	}
}

// loseBookie stops bookie id for good and lets its registry record expire
// (as the record of a dead bookie does after its TTL).
func (e *env) loseBookie(id string) {
	e.t.Helper()
	e.mu.Lock()
	stop := e.stops[id]
	e.mu.Unlock()
	stop()
	if _, err := e.cat.HeartbeatBookie(e.ctx(), catalog.Bookie{ID: id, Address: "127.0.0.1:1"}, catalog.MinHeartbeatTTL); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(2 * catalog.MinHeartbeatTTL)
}

// A bookie gone from the registry is not given up at once: only after
// RereplicateGrace are the copies it held of CLOSED ledgers rebuilt on
// the spare bookie, and then every ledger reads back whole with a second
// original bookie lost as well. Passes after that find nothing to do.
func TestPassRereplicatesLostBookie(t *testing.T) {
	e := newEnv(t)
	e.startBookie("b4")
	e.topic("orders", catalog.DefaultTopicConfig())
	var ms []catalog.LedgerMetadata
	for i := range 4 {
		ms = append(ms, e.ledger("orders", int64(i*40), 8, 5))
	}
	c := e.compactor(func(cfg *Config, _ *Deps) {
		cfg.OffloadAge = time.Hour // keep them on the bookies
		cfg.RereplicateGrace = time.Minute
	})
	// The lost bookie: one every ledger uses (its first segment's first).
	lost := ms[0].Ensembles[0].Bookies[0]
	e.loseBookie(lost)
	r, err := c.Pass(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	holding := 0
	for _, m := range ms {
		if slices.Contains(ledgerBookies(m), lost) {
			holding++
		}
	}
	if r.UnderReplicated != holding || r.Rereplicated != 0 {
		t.Fatalf("within the grace: %+v; want %d under-replicated, none moved yet", r, holding)
	}
	e.advance(2 * time.Minute)
	r, err = c.Pass(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if r.Rereplicated != holding || r.RereplicatedBytes == 0 {
		t.Fatalf("after the grace: %+v; want %d ledgers moved", r, holding)
	}
	for _, m := range ms {
		got := e.get(m.ID)
		if slices.Contains(ledgerBookies(got), lost) || got.State != catalog.LedgerClosed || got.LastEntry != m.LastEntry {
			t.Fatalf("ledger %d after re-replication: %+v", m.ID, got)
		}
	}
	r, err = c.Pass(e.ctx())
	if err != nil || r.UnderReplicated != 0 || r.Rereplicated != 0 {
		t.Fatalf("a pass after the repair: %+v, %v; want nothing to do", r, err)
	}
	// A second original bookie lost: every entry still reads (Qw=2: each
	// had one copy on the lost bookie, now on b4, and one elsewhere).
	second := ""
	for _, b := range ms[0].Ensembles[0].Bookies {
		if b != lost {
			second = b
			break
		}
	}
	e.loseBookie(second)
	e.readsBack(ms, fmt.Sprintf("after losing %s and %s", lost, second))
}

// A draining bookie (decommissioning) has its copies moved at the first
// pass, without waiting for any grace and while it still serves reads;
// then it can be stopped and every ledger still reads back whole.
func TestPassMovesDrainingBookieAtOnce(t *testing.T) {
	e := newEnv(t)
	e.startBookie("b4")
	e.topic("orders", catalog.DefaultTopicConfig())
	var ms []catalog.LedgerMetadata
	for i := range 4 {
		ms = append(ms, e.ledger("orders", int64(i*40), 8, 5))
	}
	c := e.compactor(func(cfg *Config, _ *Deps) {
		cfg.OffloadAge = time.Hour
		cfg.RereplicateGrace = time.Hour // draining must not wait for it
	})
	drained := ms[0].Ensembles[0].Bookies[0]
	st, err := e.ledgers.SetBookieDraining(e.ctx(), drained, true)
	if err != nil || !st.Draining || !st.ReadOnly {
		t.Fatalf("SetBookieDraining = %+v, %v", st, err)
	}
	// Its next heartbeat carries the state, as bookie.Heartbeat sends it.
	live, err := e.cat.ListLiveBookies(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range live {
		if b.ID == drained {
			b.ReadOnly, b.Draining = true, true
			if _, err := e.cat.HeartbeatBookie(e.ctx(), b, 10*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	holding := 0
	for _, m := range ms {
		if slices.Contains(ledgerBookies(m), drained) {
			holding++
		}
	}
	r, err := c.Pass(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if r.UnderReplicated != 0 || r.Rereplicated != holding || holding == 0 {
		t.Fatalf("pass with %s draining: %+v; want %d moved, none under-replicated", drained, r, holding)
	}
	for _, m := range ms {
		if got := e.get(m.ID); slices.Contains(ledgerBookies(got), drained) {
			t.Fatalf("ledger %d still names %s: %+v", m.ID, drained, got)
		}
	}
	e.loseBookie(drained)
	e.readsBack(ms, fmt.Sprintf("after stopping the drained %s", drained))
}

// With no live bookie outside a ledger's ensemble (three bookies, one
// lost), nothing can take the copies: the pass reports the failure and
// changes nothing.
func TestPassRereplicationWithoutSpare(t *testing.T) {
	e := newEnv(t)
	e.topic("orders", catalog.DefaultTopicConfig())
	m := e.ledger("orders", 0, 4, 5)
	c := e.compactor(func(cfg *Config, _ *Deps) { cfg.OffloadAge, cfg.RereplicateGrace = time.Hour, -1 })
	e.loseBookie(m.Ensembles[0].Bookies[1])
	r, err := c.Pass(e.ctx())
	if err == nil || r.UnderReplicated != 1 || r.Rereplicated != 0 || r.Errors == 0 {
		t.Fatalf("no spare: %+v, %v; want 1 under-replicated, an error", r, err)
	}
	if got := e.get(m.ID); got.Version != m.Version {
		t.Fatalf("catalog changed: %+v", got)
	}
}

// A ledger that cannot be repaired (no spare outside its ensemble) does
// not stall the scan: with one ledger per pass, the next pass moves on to
// the next ledger and repairs it.
func TestPassRereplicationScanMovesPastUnrepairable(t *testing.T) {
	e := newEnv(t)
	e.startBookie("b4")
	e.topic("orders", catalog.DefaultTopicConfig())
	batches := func(first int64) [][]byte {
		return [][]byte{batch(t, first, 5, "orders"), batch(t, first+5, 5, "orders")}
	}
	stuck := e.ledgerOf("orders", 0, 9, batches(0), "b1", "b2", "b3")      // b1 lost, b4 (the only spare) lost too
	fixable := e.ledgerOf("orders", 10, 19, batches(10), "b1", "b2", "b4") // b1 lost: b3 takes it
	c := e.compactor(func(cfg *Config, _ *Deps) {
		cfg.OffloadAge, cfg.RereplicateGrace, cfg.MaxLedgersPerPass = time.Hour, -1, 1
	})
	e.loseBookie("b1")
	e.loseBookie("b4")
	for pass := 1; pass <= 3; pass++ {
		_, _ = c.Pass(e.ctx()) // the stuck ledger fails every time it comes up
	}
	if got := e.get(fixable.ID); slices.Contains(ledgerBookies(got), "b1") {
		t.Fatalf("the repairable ledger still names b1 after 3 passes: %v (the scan stalled on ledger %d)", got.Ensembles, stuck.ID)
	}
	if got := e.get(stuck.ID); got.Version != stuck.Version {
		t.Fatalf("the unrepairable ledger changed: %+v", got)
	}
}

// The target is a writable live bookie outside the segments holding the
// lost copies, the one with the most free space.
func TestPickTarget(t *testing.T) {
	m := catalog.LedgerMetadata{ID: 9, Ensembles: []catalog.EnsembleSegment{
		{FirstEntry: 0, Bookies: []string{"a", "b", "c"}}, {FirstEntry: 5, Bookies: []string{"d", "b", "c"}},
	}}
	live := []catalog.Bookie{{ID: "b"}, {ID: "c"}, {ID: "d", FreeBytes: 9 << 30}, {ID: "e", FreeBytes: 1 << 30},
		{ID: "f", FreeBytes: 5 << 30}, {ID: "g", FreeBytes: 50 << 30, ReadOnly: true}}
	// a is only in segment 0: d (segment 1 only) may take it, and has the most room.
	if got, ok := pickTarget(m, "a", live, nil); !ok || got != "d" {
		t.Errorf("from a: %q %v, want d", got, ok)
	}
	// b is in both segments: a, c and d are out; g is read-only; f has more room than e.
	if got, ok := pickTarget(m, "b", live, nil); !ok || got != "f" {
		t.Errorf("from b: %q %v, want f", got, ok)
	}
	// Once f took a ledger this pass, the next one goes to e.
	if got, ok := pickTarget(m, "b", live, map[string]int{"f": 1}); !ok || got != "e" {
		t.Errorf("from b with f given one already: %q %v, want e", got, ok)
	}
	if got, ok := pickTarget(m, "b", live[:3], nil); ok {
		t.Errorf("no spare: got %q", got)
	}
}

// The pacer holds re-replication to its rate: at 2 MiB/s with one second
// saved up, the first 2 MiB go at once and 4 MiB more take two seconds.
func TestPacerBoundsTheRate(t *testing.T) {
	p := newPacer(2<<20, time.Now)
	start := time.Now()
	for range 2 {
		if err := p.wait(context.Background(), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("the saved-up second's worth waited %v", d)
	}
	for range 4 {
		if err := p.wait(context.Background(), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 1800*time.Millisecond || d > 4*time.Second {
		t.Fatalf("6 MiB at 2 MiB/s (2 MiB saved up) took %v, want about 2 s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx, 4<<20); err == nil {
		t.Fatal("a wait past a cancelled context returned nil")
	}
}

// The bookie copies of an offloaded ledger are dropped from every bookie
// its ensembles name; one of them lost for good would fail that forever.
// Within RereplicateGrace the delete waits for it (it may come back);
// after the grace it is no longer asked and the delete completes.
func TestPassBookieDeleteSkipsLostBookieAfterGrace(t *testing.T) {
	e := newEnv(t)
	e.topic("orders", catalog.DefaultTopicConfig())
	m := e.ledger("orders", 0, 6, 3)
	c := e.compactor(func(cfg *Config, _ *Deps) {
		cfg.OffloadAge, cfg.BookieDeleteGrace = -1, time.Minute
		cfg.RereplicateGrace = 5 * time.Minute
	})
	if r := e.pass(c); r.Offloaded != 1 {
		t.Fatalf("pass = %+v, want the ledger offloaded", r)
	}
	lost := m.Ensembles[0].Bookies[0]
	e.loseBookie(lost)
	e.advance(2 * time.Minute) // past the bookie-delete grace, within the lost grace
	r, err := c.Pass(e.ctx())
	if err == nil || r.BookieDeletes != 0 {
		t.Fatalf("delete with %s missing, within its grace: %+v, %v; want a failure", lost, r, err)
	}
	if p := e.keys(pendingDir); len(p) != 1 {
		t.Fatalf("pending markers %v; want the ledger's, kept for a retry", p)
	}
	e.advance(5 * time.Minute)
	r, err = c.Pass(e.ctx())
	if err != nil || r.BookieDeletes != 1 {
		t.Fatalf("delete with %s lost for good: %+v, %v; want it done without that bookie", lost, r, err)
	}
	if n := e.onBookies(m.ID); n != 0 {
		t.Fatalf("ledger %d still on %d live bookies", m.ID, n)
	}
	if p := e.keys(pendingDir); len(p) != 0 {
		t.Fatalf("pending markers left: %v", p)
	}
}

// A bookie restarted on wiped disks registers as before while every copy
// the catalog names it for is gone. The audit finds them (the bookie says
// it holds nothing of those ledgers) and the pass moves them, at once, to
// the spare bookie; every ledger then reads back whole even with a second
// original bookie lost, and the next pass finds nothing to do.
func TestPassRefillsCopiesAWipedBookieLost(t *testing.T) {
	e := newEnv(t)
	e.startBookie("b4")
	e.topic("orders", catalog.DefaultTopicConfig())
	var ms []catalog.LedgerMetadata
	for i := range 4 {
		ms = append(ms, e.ledger("orders", int64(i*40), 8, 5))
	}
	c := e.compactor(func(cfg *Config, _ *Deps) {
		cfg.OffloadAge = time.Hour
		cfg.RereplicateGrace = time.Hour // a wiped bookie is live: no grace applies
	})
	r, err := c.Pass(e.ctx())
	if err != nil || r.UnderReplicated != 0 || r.Rereplicated != 0 {
		t.Fatalf("before the wipe: %+v, %v; want nothing to do", r, err)
	}
	wiped := ms[0].Ensembles[0].Bookies[0]
	e.wipeBookie(wiped)
	holding := 0
	for _, m := range ms {
		if holdsEntries(m, wiped) {
			holding++
		}
	}
	if holding == 0 {
		t.Fatal("no ledger should hold entries on the wiped bookie: the test proves nothing")
	}
	// The client still holds the bookie's old address: a pass or two may
	// fail to ask it (forgetting the address, and re-reading the registry
	// at most once a second) before one finds the copies, as a restarted
	// bookie at a new address costs the compactor's passes in production.
	for i := 0; ; i++ {
		r, err = c.Pass(e.ctx())
		if err == nil || i == 4 {
			break
		}
		t.Logf("pass %d after the wipe: %v", i+1, err)
		time.Sleep(client.DefaultRegistryRefreshInterval)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.UnderReplicated != holding || r.Rereplicated != holding {
		t.Fatalf("after the wipe: %+v; want %d ledgers found and moved", r, holding)
	}
	for _, m := range ms {
		if got := e.get(m.ID); slices.Contains(ledgerBookies(got), wiped) {
			t.Fatalf("ledger %d still names the wiped bookie: %+v", m.ID, got)
		}
	}
	if r, err = c.Pass(e.ctx()); err != nil || r.UnderReplicated != 0 || r.Rereplicated != 0 {
		t.Fatalf("a pass after the repair: %+v, %v; want nothing to do", r, err)
	}
	second := ""
	for _, b := range ms[0].Ensembles[0].Bookies {
		if b != wiped {
			second = b
			break
		}
	}
	e.loseBookie(second)
	e.readsBack(ms, fmt.Sprintf("after the wipe of %s and the loss of %s", wiped, second))
}

// holdsEntries knows which members of a segment hold entries: with Qw < E
// a member of a short segment may hold none.
func TestHoldsEntries(t *testing.T) {
	m := catalog.LedgerMetadata{
		Replication: catalog.Replication{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
		Ensembles: []catalog.EnsembleSegment{
			{FirstEntry: 0, Bookies: []string{"a", "b", "c"}}, // entry 0 only: a, b
			{FirstEntry: 1, Bookies: []string{"a", "b", "d"}}, // entries 1, 2: b, d then d, a
		},
		LastEntry: 2,
	}
	for b, want := range map[string]bool{"a": true, "b": true, "c": false, "d": true, "x": false} {
		if got := holdsEntries(m, b); got != want {
			t.Errorf("holdsEntries(%s) = %v, want %v", b, got, want)
		}
	}
	m.LastEntry = -1
	m.Ensembles = m.Ensembles[:1]
	if holdsEntries(m, "a") {
		t.Error("an empty ledger: no bookie should hold entries")
	}
}

// A ledger (E3, Qw3) with two copies to move — one on a bookie lost for
// good, one on a bookie restarted on wiped disks — gets one move a pass (two at once
// would race on the catalog's compare-and-set): the lost bookie's first,
// the wiped one's from the audit's backlog in a later pass. In the end no
// ledger names either bookie and every entry reads back.
func TestAuditBacklogTakesASecondMoveOfALedger(t *testing.T) {
	e := newEnv(t)
	e.repl = catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2} // two copies lost, one left
	e.startBookie("b4")
	e.startBookie("b5")
	e.topic("orders", catalog.DefaultTopicConfig())
	var ms []catalog.LedgerMetadata
	for i := range 4 {
		ms = append(ms, e.ledger("orders", int64(i*40), 8, 5))
	}
	c := e.compactor(func(cfg *Config, _ *Deps) {
		cfg.OffloadAge = time.Hour
		cfg.RereplicateGrace = time.Minute
	})
	lost, wiped := ms[0].Ensembles[0].Bookies[0], ms[0].Ensembles[0].Bookies[1]
	e.loseBookie(lost)
	if _, err := c.Pass(e.ctx()); err != nil { // notes the lost bookie; the grace starts
		t.Fatalf("first pass: %v", err)
	}
	e.wipeBookie(wiped)
	// Let the client learn the restarted bookie's new address, so the
	// audit reaches it in the same pass as the lost bookie's moves.
	waitForHermetic(t, 10*time.Second, func() bool {
		_, err := e.ledgers.MissingLedgers(e.ctx(), wiped, []catalog.LedgerID{ms[0].ID})
		return err == nil
	})
	e.advance(2 * time.Minute)
	sawBacklog := false
	// Done when no ledger names the lost bookie and the wiped one holds
	// every ledger that names it with entries there (it may be the
	// target of another ledger's move).
	done := func() bool {
		for _, m := range ms {
			got := e.get(m.ID)
			if slices.Contains(ledgerBookies(got), lost) {
				return false
			}
			if slices.Contains(ledgerBookies(got), wiped) && holdsEntries(got, wiped) {
				missing, err := e.ledgers.MissingLedgers(e.ctx(), wiped, []catalog.LedgerID{m.ID})
				if err != nil || len(missing) > 0 {
					return false
				}
			}
		}
		return true
	}
	for pass := 0; !done(); pass++ {
		if pass == 8 {
			t.Fatalf("after %d passes a ledger still names %s or %s with entries there", pass, lost, wiped)
		}
		r, err := c.Pass(e.ctx())
		t.Logf("pass %d: %d moved, %d under-replicated, backlog %d, %v", pass+1, r.Rereplicated, r.UnderReplicated, len(c.auditBacklog), err)
		if err != nil {
			t.Fatalf("pass %d: %v", pass+1, err)
		}
		sawBacklog = sawBacklog || len(c.auditBacklog) > 0
	}
	if !sawBacklog {
		t.Fatal("no pass left a second move for the next: the test proves nothing")
	}
	e.readsBack(ms, "after the moves")
}

// waitForHermetic polls cond every 50 ms until it holds or d passes.
func waitForHermetic(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
	}
}

// A copy a reader found bad on a live bookie (a damage mark in the
// catalog) is moved by the next pass, whatever the grace, and the move
// drops the mark: marked directly, then end to end — a bookie loses one
// ledger's copy (a partial wipe the registry cannot show), a reader meets
// it and marks it, and the pass moves it.
func TestPassMovesCopiesReadersFoundDamaged(t *testing.T) {
	e := newEnv(t)
	e.startBookie("b4")
	e.topic("orders", catalog.DefaultTopicConfig())
	ms := []catalog.LedgerMetadata{e.ledger("orders", 0, 8, 5), e.ledger("orders", 40, 8, 5)}
	c := e.compactor(func(cfg *Config, _ *Deps) {
		cfg.OffloadAge = time.Hour
		cfg.RereplicateGrace = time.Hour
	})
	if r, err := c.Pass(e.ctx()); err != nil || r.UnderReplicated != 0 || r.Rereplicated != 0 {
		t.Fatalf("before any damage: %+v, %v; want nothing to do", r, err)
	}

	m := e.get(ms[0].ID)
	bad := m.Ensembles[0].Bookies[1]
	m.Damaged = []catalog.DamagedCopy{{Bookie: bad, Entry: 3, Reason: catalog.DamageChecksum, At: e.clock()}}
	if _, err := e.cat.UpdateLedger(e.ctx(), m); err != nil {
		t.Fatal(err)
	}
	r, err := c.Pass(e.ctx())
	if err != nil || r.UnderReplicated != 1 || r.Rereplicated != 1 {
		t.Fatalf("after the mark: %+v, %v; want 1 ledger found and moved", r, err)
	}
	if got := e.get(m.ID); slices.Contains(ledgerBookies(got), bad) || len(got.Damaged) != 0 {
		t.Fatalf("ledger %d after the move: %+v; want %s replaced and no mark", m.ID, got, bad)
	}
	e.readsBack(ms, "after the move")

	// End to end: the first bookie of ledger 2 loses its copy; a read
	// marks it (missing), the pass moves it.
	m = e.get(ms[1].ID)
	lost := m.Ensembles[0].Bookies[0]
	if err := e.byID[lost].DeleteLedger(int64(m.ID)); err != nil {
		t.Fatal(err)
	}
	e.readsBack(ms[1:], "with a lost copy")
	waitForHermetic(t, 10*time.Second, func() bool { _, ok := e.get(m.ID).DamagedOn(lost); return ok })
	if r, err = c.Pass(e.ctx()); err != nil || r.Rereplicated != 1 {
		t.Fatalf("after the read: %+v, %v; want the copy moved", r, err)
	}
	if got := e.get(m.ID); slices.Contains(ledgerBookies(got), lost) || len(got.Damaged) != 0 {
		t.Fatalf("ledger %d after the move: %+v; want %s replaced and no mark", m.ID, got, lost)
	}
	e.readsBack(ms, "after both moves")
	if r, err = c.Pass(e.ctx()); err != nil || r.UnderReplicated != 0 || r.Rereplicated != 0 {
		t.Fatalf("a pass after the repairs: %+v, %v; want nothing to do", r, err)
	}
}
