package ledger_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// The two BookKeeper bugs Jack Vanlightly's TLA+ specification found,
// replayed message by message on the simulated world, with the same checks
// as TestSimulation. Each runs with the fix (no violation) and without it
// (the checks must catch the bug).

// script drives a world by hand: deliver, drop and sync exactly as a
// sequence diagram says.
type script struct {
	t *testing.T
	w *world
}

func (s script) deliver(from, to, kind string, entry int64) {
	s.t.Helper()
	i := s.w.find(from, to, kind, entry)
	if i < 0 {
		s.t.Fatalf("no message %s->%s %s e%d in flight; network: %v", from, to, kind, entry, s.w.net)
	}
	s.w.deliverAt(i)
}

func (s script) drop(from, to, kind string, entry int64) {
	s.t.Helper()
	i := s.w.find(from, to, kind, entry)
	if i < 0 {
		s.t.Fatalf("no message %s->%s %s e%d to drop; network: %v", from, to, kind, entry, s.w.net)
	}
	s.w.dropAt(i)
}

// deliverAll delivers every message in flight (and the ones they cause)
// with bookies syncing as they go.
func (s script) deliverAll() {
	for range 10_000 {
		if len(s.w.net) == 0 {
			for _, id := range s.w.order {
				if b := s.w.bookies[id]; b.up {
					b.sync()
				}
			}
			if len(s.w.net) == 0 {
				return
			}
		}
		s.w.deliverAt(0)
	}
	s.t.Fatal("the network does not quiesce")
}

func (s script) sync(b string) { s.w.bookies[b].sync() }

// TestRegressionPR2616 replays BookKeeper issue #2614 (fixed by PR #2616):
// E=Qw=3, Qa=2. w1's add of e0 to b1 is lost; w2 starts recovery and
// fences b1; b2 stores e0 and acks it to w1; w2 fences b2 — the fence
// covers the ensemble — but its fence to b3 is lost. Recovery reads e0:
// b1 and b3 answer "no such entry" (b2's answer is late), so the ledger
// closes empty. Then w1's add of e0 reaches b3. With unfenced recovery
// reads b3 takes it and w1 acknowledges e0 — an acknowledged entry beyond
// the closed end, i.e. lost. With fencing reads b3 was fenced by the read
// and refuses it.
func TestRegressionPR2616(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		name := map[bool]string{true: "fenced-reads", false: "unfenced-reads"}[fenced]
		t.Run(name, func(t *testing.T) {
			rep := catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}
			cfg := ledger.Config{Replication: rep, RecoveryReadWindow: 1}
			if !fenced {
				ledger.UnsafeNoReadFence(&cfg)
			}
			w := newWorld(1, rep, 3, cfg)
			s := script{t, w}
			w.writer = newWriterClient(w)
			w1 := w.writer.name
			w.writer.append() // e0 to b1, b2, b3
			s.drop(w1, "b1", "add", 0)

			r := startRecovery(w)
			s.deliver(r.name, "catalog", "mark-in-recovery", -1)
			s.deliver("catalog", r.name, "mark-in-recovery-resp", -1) // fences go out
			s.deliver(r.name, "b1", "fence", -1)
			s.deliver("b1", r.name, "fence-resp", -1)

			s.deliver(w1, "b2", "add", 0)
			s.sync("b2")
			s.deliver("b2", w1, "add-resp", 0) // w1 has one ack of two

			s.deliver(r.name, "b2", "fence", -1)
			s.deliver("b2", r.name, "fence-resp", -1) // covered: recovery reads e0
			s.drop(r.name, "b3", "fence", -1)

			s.deliver(r.name, "b1", "recovery-read", 0)
			s.deliver(r.name, "b3", "recovery-read", 0)
			s.deliver("b1", r.name, "recovery-read-resp", 0)
			s.deliver("b3", r.name, "recovery-read-resp", 0) // e0 judged absent: close empty
			s.deliver(r.name, "catalog", "close", -1)
			if w.cat.closedEnd == nil || *w.cat.closedEnd != -1 {
				t.Fatalf("recovery should close the ledger empty; catalog %+v", w.cat.meta)
			}

			s.deliver(w1, "b3", "add", 0) // the old writer's add arrives late
			s.deliverAll()
			w.finalChecks()

			lost := slices.ContainsFunc(w.violations, func(v string) bool { return strings.Contains(v, "acknowledged") })
			switch {
			case fenced && len(w.violations) > 0:
				t.Fatalf("with fencing recovery reads:\n%s", w.report())
			case fenced && (w.maxAcked != -1 || !errors.Is(w.writer.lw.Err(), ledger.ErrFenced)):
				t.Fatalf("with fencing recovery reads the old writer must be fenced without acknowledging e0; acknowledged up to %d, writer error %v", w.maxAcked, w.writer.lw.Err())
			case !fenced && !lost:
				t.Fatalf("without fencing recovery reads the checks should find the lost entry:\n%s", w.report())
			case !fenced:
				t.Logf("caught, as expected: %v", w.violations)
			}
		})
	}
}

// TestRegressionPR2654 replays BookKeeper issue #2615 (fixed by PR #2654):
// E=Qw=Qa=2. The writer acknowledges e0..e4 across segments 0:{b1,b2} and
// 3:{b3,b2}; adding e5 fails on both, so it moves to 5:{b4,b5} and then
// dies before b4 or b5 saw anything. Recovery gets LAC -1 from b4 and b5.
// Recovery must read only the last segment, from its first entry: it asks
// b4 and b5 for e5 and closes at e4. Before the fix it read from LAC+1 = e0
// — entries of earlier segments — and (asking only the current segment, as
// this client does) would close the ledger empty, losing e0..e4; in
// BookKeeper it rewrote them into the current segment and failed with an
// invalid ensemble.
func TestRegressionPR2654(t *testing.T) {
	for _, fixed := range []bool{true, false} {
		name := map[bool]string{true: "last-segment", false: "from-lac"}[fixed]
		t.Run(name, func(t *testing.T) {
			rep := catalog.Replication{Ensemble: 2, WriteQuorum: 2, AckQuorum: 2}
			cfg := ledger.Config{Replication: rep}
			if !fixed {
				ledger.UnsafeReadBelowSegment(&cfg)
			}
			w := newWorld(1, rep, 6, cfg)
			s := script{t, w}
			w.writer = newWriterClient(w)
			wr := w.writer
			for range 3 {
				wr.append()
			}
			s.deliverAll() // e0..e2 on b1, b2
			wr.append()    // e3: b1 dies
			s.drop(wr.name, "b1", "add", 3)
			w.bookies["b1"].crash()
			wr.timeoutAll()
			s.deliverAll() // segment 3:{bX,b2}, e3 acknowledged
			wr.append()
			s.deliverAll() // e4
			wr.append()    // e5: both bookies of the segment die
			for _, b := range wr.meta.Ensembles[1].Bookies {
				s.drop(wr.name, b, "add", 5)
				w.bookies[b].crash()
			}
			wr.timeoutAll()
			for len(w.net) > 0 && len(wr.meta.Ensembles) < 3 {
				w.deliverAt(0)
			}
			wr.crash() // dies before e5 reaches the new segment
			if w.maxAcked != 4 || len(w.cat.meta.Ensembles) != 3 || w.cat.meta.Ensembles[2].FirstEntry != 5 {
				t.Fatalf("setup: acknowledged up to %d, ensembles %v", w.maxAcked, w.cat.meta.Ensembles)
			}
			last := w.cat.meta.Ensembles[2]
			w.net = nil // the dead writer's adds are gone

			r := startRecovery(w)
			s.deliverAll()
			w.finalChecks()
			for _, id := range w.order {
				if !slices.Contains(last.Bookies, id) && slices.ContainsFunc(r.requestsTo, func(to string) bool { return to == id }) {
					t.Errorf("recovery sent a request to %s, outside the last segment %v", id, last.Bookies)
				}
			}
			lost := slices.ContainsFunc(w.violations, func(v string) bool { return strings.Contains(v, "acknowledged") })
			switch {
			case fixed && (len(w.violations) > 0 || *w.cat.closedEnd != 4):
				t.Fatalf("with the fix the ledger must close at e4:\n%s", w.report())
			case fixed && !slices.EqualFunc(w.cat.meta.Ensembles, wr.meta.Ensembles, segEqual):
				t.Fatalf("recovery changed the ensembles: %v", w.cat.meta.Ensembles)
			case !fixed && !lost:
				t.Fatalf("without the fix the checks should find the truncation:\n%s", w.report())
			case !fixed:
				t.Logf("caught, as expected: %v", w.violations)
			}
		})
	}
}

func segEqual(a, b catalog.EnsembleSegment) bool {
	return a.FirstEntry == b.FirstEntry && slices.Equal(a.Bookies, b.Bookies)
}
