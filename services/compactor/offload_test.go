package compactor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Offload end to end: sealed ledgers old enough go to segment objects that
// decode to exactly the batches written; the catalog points at them; the
// bookies keep their copies for the grace period and drop them after it;
// nothing is orphaned and a further pass changes nothing.
func TestOffloadMovesSealedLedgersAndDropsBookieCopiesAfterGrace(t *testing.T) {
	e := newEnv(t)
	e.topic("orders", catalog.DefaultTopicConfig())
	var ms []catalog.LedgerMetadata
	first := int64(0)
	for range 3 {
		m := e.ledger("orders", first, 20, 5)
		ms = append(ms, m)
		first = m.LastOffset + 1
	}
	c := e.compactor(nil)

	// Too young: nothing moves.
	if r := e.pass(c); r.Offloaded != 0 {
		t.Fatalf("young ledgers offloaded: %+v", r)
	}
	e.advance(2 * time.Minute)
	if r := e.pass(c); r.Offloaded != 3 || r.BookieDeletes != 0 {
		t.Fatalf("pass = %+v, want 3 offloaded, no bookie delete yet", r)
	}
	for _, m := range ms {
		got := e.get(m.ID)
		if got.State != catalog.LedgerOffloaded || got.Location != c.segmentKey(m) {
			t.Fatalf("ledger %d: %v at %q", m.ID, got.State, got.Location)
		}
		e.checkSegment(got)
		if n := e.onBookies(m.ID); n != 2 {
			t.Fatalf("ledger %d on %d bookies during the grace, want 2", m.ID, n)
		}
	}
	e.advance(2 * time.Minute)
	// The first pass after the grace started counting sees the markers...
	r := e.pass(c)
	if r.BookieDeletes != 3 {
		t.Fatalf("pass after grace = %+v, want 3 bookie deletes", r)
	}
	for _, m := range ms {
		if n := e.onBookies(m.ID); n != 0 {
			t.Fatalf("ledger %d still on %d bookies", m.ID, n)
		}
		e.checkSegment(e.get(m.ID))
	}
	if p := e.keys(pendingDir); len(p) != 0 {
		t.Fatalf("pending markers left: %v", p)
	}
	if segs := e.keys(segmentsDir); len(segs) != 3 {
		t.Fatalf("objects %v, want exactly 3 segments", segs)
	}
	e.advance(2 * time.Hour) // past the orphan grace: the sweep keeps them all
	if r := e.pass(c); r != (Report{Duration: r.Duration}) {
		t.Fatalf("idle pass did something: %+v", r)
	}
	if segs := e.keys(segmentsDir); len(segs) != 3 {
		t.Fatalf("objects %v after the sweep, want 3", segs)
	}
}

// With no bookie grace the copies go in the same pass as the offload.
func TestOffloadWithoutGraceDeletesAtOnce(t *testing.T) {
	e := newEnv(t)
	e.topic("t", catalog.DefaultTopicConfig())
	m := e.ledger("t", 0, 3, 2)
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge, c.BookieDeleteGrace = -1, -1 })
	if r := e.pass(c); r.Offloaded != 1 {
		t.Fatalf("pass = %+v", r)
	}
	if n := e.onBookies(m.ID); n != 0 {
		t.Fatalf("ledger on %d bookies", n)
	}
	e.checkSegment(e.get(m.ID))
}

// Limits: a pass offloads at most MaxLedgersPerPass ledgers; the rest wait
// for the next pass. Empty and open ledgers are never offloaded.
func TestOffloadIsBoundedPerPass(t *testing.T) {
	e := newEnv(t)
	e.topic("t", catalog.DefaultTopicConfig())
	first := int64(0)
	for range 5 {
		first = e.ledger("t", first, 1, 1).LastOffset + 1
	}
	empty := e.ledger("t", first, 0, 0)
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge, c.MaxLedgersPerPass = -1, 2 })
	var got []int
	for range 4 {
		got = append(got, e.pass(c).Offloaded)
	}
	if !slices.Equal(got, []int{2, 2, 1, 0}) {
		t.Fatalf("offloaded per pass = %v, want [2 2 1 0]", got)
	}
	if s := e.get(empty.ID).State; s != catalog.LedgerClosed {
		t.Fatalf("empty ledger is %v", s)
	}
}

func TestConfigValidateReportsEveryViolation(t *testing.T) {
	err := Config{Workers: 1000, MaxLedgersPerPass: -1, OrphanGrace: time.Millisecond, UploadPartBytes: 1, Prefix: "x"}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, f := range []string{"Workers", "MaxLedgersPerPass", "OrphanGrace", "UploadPartBytes", "Prefix"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if _, err := New(Config{}, Deps{}); err == nil || !strings.Contains(err.Error(), "Catalog") || !strings.Contains(err.Error(), "Objects") {
		t.Fatalf("New without deps: %v", err)
	}
}

// Ledgers that are never offloaded (empty ones) cannot starve the others:
// the CLOSED listing goes on where the last pass stopped, MaxScanPerPass
// records at a time, and starts over at the end.
func TestOffloadScanResumesPastNeverOffloadedLedgers(t *testing.T) {
	e := newEnv(t)
	e.topic("t", catalog.DefaultTopicConfig())
	for range 5 {
		e.ledger("t", 0, 0, 0)
	}
	m := e.ledger("t", 0, 2, 2)
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge, c.MaxScanPerPass = -1, 2 })
	var got []int
	for range 4 {
		got = append(got, e.pass(c).Offloaded)
	}
	if !slices.Equal(got, []int{0, 0, 1, 0}) {
		t.Fatalf("offloaded per pass = %v, want [0 0 1 0]", got)
	}
	e.checkSegment(e.get(m.ID))
	// A restarted compactor (a Lambda invocation) resumes from the stored cursor.
	c2 := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge, c.MaxScanPerPass = -1, 2 })
	if r := e.pass(c2); r.Errors != 0 {
		t.Fatalf("pass = %+v", r)
	}
}
