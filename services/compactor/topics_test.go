package compactor

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Topic deletion: every ledger of the deleted topic goes — an open one is
// sealed first, fencing its writer — then their data and metadata, and
// once nothing is left and the deletion is old enough, the topic's
// records. A topic created again under the name is untouched.
func TestDeletedTopicIsCleanedUp(t *testing.T) {
	e := newEnv(t)
	e.topic("gone", catalog.DefaultTopicConfig())
	a := e.ledger("gone", 0, 3, 2)
	b := e.ledger("gone", a.LastOffset+1, 3, 2)
	e.mu.Lock()
	l := e.lease["gone"]
	e.mu.Unlock()
	w, err := e.ledgers.CreateLedger(e.ctx(), catalog.LedgerSpec{
		Topic: "gone", TopicID: l.TopicID, Partition: 0, Replication: catalog.Replication{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
		FirstOffset: b.LastOffset + 1, WriterOwner: l.Owner, WriterEpoch: l.Epoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cat.AppendLedger(e.ctx(), l, catalog.LedgerRef{ID: w.ID(), FirstOffset: b.LastOffset + 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(e.ctx(), batch(t, b.LastOffset+1, 2, "gone")); err != nil {
		t.Fatal(err)
	}
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge, c.BookieDeleteGrace = -1, -1 })
	e.pass(c) // a and b offloaded
	if _, err := e.cat.DeleteTopic(e.ctx(), "gone"); err != nil {
		t.Fatal(err)
	}
	again := e.topic("gone", catalog.DefaultTopicConfig()) // a new incarnation
	keep := e.ledger("gone", 0, 1, 1)

	if r := e.pass(c); r.Trimmed != 3 {
		t.Fatalf("pass = %+v, want the 3 ledgers of the deleted topic DELETED", r)
	}
	if _, err := w.Append(e.ctx(), batch(t, b.LastOffset+3, 1, "gone")); err == nil {
		t.Fatal("the deleted topic's writer still appends after its ledger was sealed")
	}
	w.Abort()
	e.advance(2 * time.Minute)
	if r := e.pass(c); r.Purged != 3 || r.TopicsPurged != 0 {
		t.Fatalf("pass = %+v, want 3 purged, topic kept until the grace", r)
	}
	for _, id := range []catalog.LedgerID{a.ID, b.ID, w.ID()} {
		if _, err := e.cat.GetLedger(e.ctx(), id); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("ledger %d: %v", id, err)
		}
		if n := e.onBookies(id); n != 0 {
			t.Fatalf("ledger %d on %d bookies", id, n)
		}
	}
	e.advance(2 * time.Hour)
	if r := e.pass(c); r.TopicsPurged != 1 {
		t.Fatalf("pass = %+v, want the topic purged", r)
	}
	if page, err := e.cat.ListDeletedTopics(e.ctx(), "", 0); err != nil || len(page.Items) != 0 {
		t.Fatalf("deleted topics %v, %v", page.Items, err)
	}
	if got := e.get(keep.ID); got.TopicID != again.ID || got.State != catalog.LedgerOffloaded {
		t.Fatalf("the new incarnation's ledger: %+v", got)
	}
	if segs := e.keys(segmentsDir); len(segs) != 1 || segs[0] != c.segmentKey(keep) {
		t.Fatalf("objects %v, want only the new topic's", segs)
	}
}
