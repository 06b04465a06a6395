package compactor

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Time retention: ledgers sealed more than retention.ms ago are trimmed
// from the front (never the tail), the log start offset moves to the first
// kept ledger, and after DeleteGrace their objects, bookie copies and
// metadata are gone.
func TestRetentionByTimeTrimsTheFrontAndPurges(t *testing.T) {
	e := newEnv(t)
	cfg := catalog.DefaultTopicConfig()
	cfg.RetentionMs = 90_000
	tp := e.topic("logs", cfg)
	var ms []catalog.LedgerMetadata
	first := int64(0)
	for range 4 {
		m := e.ledger("logs", first, 4, 5)
		ms = append(ms, m)
		first = m.LastOffset + 1
	}
	c := e.compactor(nil)
	e.advance(time.Minute) // offload age reached, retention not yet
	if r := e.pass(c); r.Offloaded != 4 || r.Trimmed != 0 {
		t.Fatalf("pass = %+v, want 4 offloaded, none trimmed", r)
	}
	e.advance(time.Minute)
	if r := e.pass(c); r.Trimmed != 3 {
		t.Fatalf("pass = %+v, want 3 trimmed", r)
	}
	p, err := e.cat.GetPartition(e.ctx(), "logs", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ledgers) != 1 || p.Ledgers[0].ID != ms[3].ID || p.LogStartOffset != ms[3].FirstOffset {
		t.Fatalf("partition after trim: %+v", p)
	}
	for _, m := range ms[:3] {
		if s := e.get(m.ID).State; s != catalog.LedgerDeleted {
			t.Fatalf("trimmed ledger %d is %v", m.ID, s)
		}
	}
	e.pass(c) // starts the delete grace
	e.advance(2 * time.Minute)
	r := e.pass(c)
	if r.Purged != 3 {
		t.Fatalf("pass = %+v, want 3 purged", r)
	}
	for _, m := range ms[:3] {
		if _, err := e.cat.GetLedger(e.ctx(), m.ID); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("ledger %d metadata: %v", m.ID, err)
		}
		if n := e.onBookies(m.ID); n != 0 {
			t.Fatalf("purged ledger %d on %d bookies", m.ID, n)
		}
	}
	if segs := e.keys(segmentsDir); len(segs) != 1 || segs[0] != c.segmentKey(ms[3]) {
		t.Fatalf("objects %v, want only the tail's", segs)
	}
	if p := e.keys(pendingDir); len(p) != 0 {
		t.Fatalf("pending markers left: %v", p)
	}
	_ = tp
}

// Size retention: keep dropping the oldest ledger while what remains is at
// least retention.bytes, counting the segments' sizes. A trimmed ledger
// still on the bookies (not offloaded) loses its bookie copies too.
func TestRetentionBySizeKeepsAtLeastTheLimit(t *testing.T) {
	e := newEnv(t)
	cfg := catalog.DefaultTopicConfig()
	e.topic("big", cfg)
	var ms []catalog.LedgerMetadata
	first := int64(0)
	for range 4 {
		m := e.ledger("big", first, 4, 5)
		ms = append(ms, m)
		first = m.LastOffset + 1
	}
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge, c.DeleteGrace = -1, -1 })
	e.pass(c)
	attrs, err := e.bucket.Attributes(e.ctx(), c.segmentKey(ms[0]))
	if err != nil {
		t.Fatal(err)
	}
	// 4 similar segments; keep at least 2.5 of them: drop exactly one.
	cfg.RetentionBytes = attrs.Size * 5 / 2
	tp, err := e.cat.GetTopic(e.ctx(), "big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cat.UpdateTopicConfig(e.ctx(), "big", cfg, tp.Version); err != nil {
		t.Fatal(err)
	}
	r := e.pass(c)
	if r.Trimmed != 1 || r.Purged != 1 {
		t.Fatalf("pass = %+v, want 1 trimmed and purged (no grace)", r)
	}
	p, _ := e.cat.GetPartition(e.ctx(), "big", 0)
	if p.LogStartOffset != ms[1].FirstOffset || len(p.Ledgers) != 3 {
		t.Fatalf("partition = %+v", p)
	}
	if r := e.pass(c); r.Trimmed != 0 {
		t.Fatalf("second pass trimmed again: %+v", r)
	}
}

// A crash between the trim and the DELETED mark leaves sealed ledgers below
// the chain's head; the next pass marks and purges them. A crash before the
// metadata delete is finished by the next pass too.
func TestRetentionRepairsATrimWithoutDeletedMark(t *testing.T) {
	e := newEnv(t)
	e.topic("t", catalog.DefaultTopicConfig())
	a := e.ledger("t", 0, 2, 2)
	b := e.ledger("t", a.LastOffset+1, 2, 2)
	p, err := e.cat.GetPartition(e.ctx(), "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The "dead" compactor's trim.
	if _, err := e.cat.TrimLedgers(e.ctx(), p.TopicID, 0, a.ID, p.Version); err != nil {
		t.Fatal(err)
	}
	killed := false
	c := e.compactor(func(c *Config, d *Deps) {
		c.DeleteGrace = -1
		d.Hooks.Step = func(s Step, id catalog.LedgerID) error {
			if s == StepBeforeMetadataDelete && !killed {
				killed = true
				return errKilled
			}
			return nil
		}
	})
	if _, err := c.Pass(e.ctx()); !errors.Is(err, errKilled) {
		t.Fatalf("pass: %v, want the kill", err)
	}
	if s := e.get(a.ID).State; s != catalog.LedgerDeleted {
		t.Fatalf("leftover ledger is %v", s)
	}
	if r := e.pass(c); r.Purged != 1 {
		t.Fatalf("rerun = %+v, want the purge finished", r)
	}
	if _, err := e.cat.GetLedger(e.ctx(), a.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("ledger %d: %v", a.ID, err)
	}
	if n := e.onBookies(a.ID); n != 0 {
		t.Fatalf("on %d bookies", n)
	}
	if s := e.get(b.ID).State; s != catalog.LedgerClosed {
		t.Fatalf("tail ledger is %v", s)
	}
}
