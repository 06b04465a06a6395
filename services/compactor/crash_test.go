package compactor

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/objstore"
)

var errKilled = errors.New("killed by the test")

// Crash at every step: a compactor dies at step s while offloading one of
// two ledgers (the other one proceeds). Right after the crash nothing is
// lost: a ledger the catalog does not call OFFLOADED is whole on its
// bookies, and one it does has a verified object. A restarted compactor
// then finishes the work: both ledgers OFFLOADED with segments byte-equal
// to what was written (no gap, no duplicate), bookie copies dropped only
// after the grace, no pending marker, no extra object, and the orphan
// sweep finds nothing to delete.
func TestCrashAtEveryStepIsRepairedByTheNextPass(t *testing.T) {
	for _, step := range []Step{StepBeforeUpload, StepMidUpload, StepAfterUpload, StepBeforeCAS, StepAfterCAS, StepBeforeBookieDelete} {
		t.Run(step.String(), func(t *testing.T) {
			e := newEnv(t)
			e.topic("t", catalog.DefaultTopicConfig())
			a := e.ledger("t", 0, 10, 3)
			b := e.ledger("t", a.LastOffset+1, 10, 3)
			killed := false
			dying := e.compactor(func(c *Config, d *Deps) {
				c.OffloadAge = -1
				d.Hooks.Step = func(s Step, id catalog.LedgerID) error {
					if s == step && id == a.ID && !killed {
						killed = true
						return errKilled
					}
					return nil
				}
			})
			e.advance(0)
			_, err := dying.Pass(e.ctx())
			if step == StepBeforeBookieDelete {
				// Reached only after the grace.
				if err != nil {
					t.Fatal(err)
				}
				e.advance(2 * time.Minute)
				_, err = dying.Pass(e.ctx())
			}
			if !errors.Is(err, errKilled) || !killed {
				t.Fatalf("pass error %v, want the kill", err)
			}
			e.checkSafe(dying, a, b)
			if step == StepMidUpload || step == StepBeforeUpload {
				if _, err := e.bucket.Attributes(e.ctx(), dying.segmentKey(a)); !objstore.IsNotFound(err) {
					t.Fatalf("object after a %v crash: %v", step, err)
				}
			}

			// Restart: a new compactor, same stores.
			c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge = -1 })
			e.pass(c)
			e.checkSafe(c, a, b)
			e.advance(2 * time.Minute)
			e.pass(c)
			e.pass(c)
			for _, m := range []catalog.LedgerMetadata{a, b} {
				got := e.get(m.ID)
				if got.State != catalog.LedgerOffloaded {
					t.Fatalf("ledger %d is %v after the rerun", m.ID, got.State)
				}
				e.checkSegment(got)
				if n := e.onBookies(m.ID); n != 0 {
					t.Fatalf("ledger %d still on %d bookies", m.ID, n)
				}
			}
			if p := e.keys(pendingDir); len(p) != 0 {
				t.Fatalf("pending markers left: %v", p)
			}
			e.advance(2 * time.Hour)
			if r := e.pass(c); r.Orphans != 0 {
				t.Fatalf("sweep deleted %d objects", r.Orphans)
			}
			if segs := e.keys(segmentsDir); len(segs) != 2 {
				t.Fatalf("objects %v, want the 2 segments", segs)
			}
		})
	}
}

// checkSafe: every ledger is readable somewhere. Not OFFLOADED → all its
// entries on the bookies; OFFLOADED → its object verifies, and the bookies
// still hold it unless the grace started more than BookieDeleteGrace ago.
func (e *env) checkSafe(c *Compactor, ms ...catalog.LedgerMetadata) {
	e.t.Helper()
	for _, m := range ms {
		got := e.get(m.ID)
		switch got.State {
		case catalog.LedgerClosed:
			ents, err := e.ledgers.ReadEntries(e.ctx(), m.ID, 0, m.LastEntry)
			if err != nil || len(ents) != int(m.LastEntry+1) {
				e.t.Fatalf("CLOSED ledger %d: read %d entries, %v", m.ID, len(ents), err)
			}
		case catalog.LedgerOffloaded:
			if _, err := c.verifyObject(e.ctx(), got.Location, got); err != nil {
				e.t.Fatalf("OFFLOADED ledger %d: %v", m.ID, err)
			}
		default:
			e.t.Fatalf("ledger %d is %v", m.ID, got.State)
		}
	}
}

// An object nobody points at (a ledger that is gone) is deleted by the
// sweep, but only after the orphan grace; objects it cannot name are
// never touched.
func TestOrphanSweepDeletesUnreferencedObjectsAfterGrace(t *testing.T) {
	e := newEnv(t)
	c := e.compactor(func(c *Config, _ *Deps) { c.MaxSweepPerPass = 1 })
	ctx := e.ctx()
	gone := c.cfg.Prefix + segmentsDir + "tid/0/00000000000000000999.seg"
	foreign := c.cfg.Prefix + segmentsDir + "tid/0/README"
	for _, k := range []string{gone, foreign} {
		if err := e.bucket.WriteAll(ctx, k, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if r := e.pass(c); r.Orphans != 0 {
			t.Fatalf("deleted within the grace: %+v", r)
		}
	}
	e.advance(2 * time.Hour)
	orphans := 0
	for range 3 { // one object per pass; the cursor wraps around
		orphans += e.pass(c).Orphans
	}
	if orphans != 1 {
		t.Fatalf("deleted %d orphans, want 1", orphans)
	}
	if keys := e.keys(segmentsDir); len(keys) != 1 || keys[0] != foreign {
		t.Fatalf("objects left %v, want only %s", keys, foreign)
	}
}
