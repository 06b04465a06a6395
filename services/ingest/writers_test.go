package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/services/ingest/partition"
)

// takenOver sets up copy a writing partition 0 and losing it to copy b: a
// pauses past its heartbeat's TTL, b takes the partition over (fencing
// a's ledger through recovery), and a comes back. It returns a's writer,
// which does not know yet that it was fenced.
func takenOver(t *testing.T, f *fixture, a, b *Service) *partition.Writer {
	t.Helper()
	if _, err := f.produce(a, 0); err != nil {
		t.Fatal(err)
	}
	wa := writerOf(a, f.topic.ID, 0)
	f.expire(a)
	if _, err := f.produce(b, 0); err != nil {
		t.Fatalf("b's takeover: %v", err)
	}
	f.beat(a)
	if wa.Err() != nil {
		t.Fatalf("a's writer stopped before it wrote again: %v", wa.Err())
	}
	return wa
}

// closed reports whether Close was called on w.
func closed(w *partition.Writer) bool { return errors.Is(w.Err(), partition.ErrClosed) }

// A writer fenced by another copy's takeover stops at its next append; the
// produce after that routes to the new owner and hands the stopped writer
// to Close, so its maintenance goroutine ends (the fixture checks that no
// goroutine is left), instead of only forgetting it.
func TestFencedWriterIsClosedWhenRouted(t *testing.T) {
	f := newFixture(t, 1)
	a, b := f.copyOf("a", nil), f.copyOf("b", nil)
	wa := takenOver(t, f, a, b)
	if _, err := f.produce(a, 0); connect.CodeOf(err) != connect.CodeUnavailable || !errors.Is(wa.Err(), partition.ErrFenced) {
		t.Fatalf("a's produce after the takeover: %v (writer: %v); want UNAVAILABLE from a fenced writer", err, wa.Err())
	}
	r, err := a.routeTo(context.Background(), f.topic, 0, false)
	if err != nil || r.forward != b.cfg.Address {
		t.Fatalf("a routes partition 0 to %+v, %v; want a forward to b", r, err)
	}
	eventually(t, "a's fenced writer is closed", func() bool { return closed(wa) })
}

// A writer that stopped does not hold a slot against MaxWriters: the
// copy's next takeover forgets (and closes) it instead of answering
// RESOURCE_EXHAUSTED until a produce for the stopped partition came.
func TestStoppedWriterFreesItsSlot(t *testing.T) {
	f := newFixture(t, 2)
	a, b := f.copyOf("a", func(c *Config) { c.MaxWriters = 1 }), f.copyOf("b", nil)
	wa := takenOver(t, f, a, b)
	if _, err := f.produce(a, 0); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("a's produce after the takeover: %v; want UNAVAILABLE", err)
	}
	if _, err := f.produce(a, 1); err != nil {
		t.Fatalf("a's first produce to partition 1 with its only writer stopped: %v", err)
	}
	eventually(t, "a's fenced writer is closed", func() bool { return closed(wa) })
}

// A balancing round finds a writer whose partition another copy took
// over (a higher epoch in the catalog) even if nothing was written to it
// since, and closes it: its slot is free and its goroutine ends.
func TestBalancingClosesWriterFencedByTakeover(t *testing.T) {
	f := newFixture(t, 2)
	a, b := f.copyOf("a", func(c *Config) { c.MaxWriters = 1 }), f.copyOf("b", nil)
	wa := takenOver(t, f, a, b)
	if err := a.balanceRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !closed(wa) {
		t.Fatalf("after a balancing round, a's writer fenced by b's takeover is not closed (err %v)", wa.Err())
	}
	if w := writerOf(a, f.topic.ID, 0); w != nil {
		t.Fatalf("a still has a writer of partition 0 (err %v)", w.Err())
	}
	if _, err := f.produce(a, 1); err != nil {
		t.Fatalf("a's produce to partition 1: %v", err)
	}
}

// A produce that passed routeTo's check of closing before shutdown began,
// and opens the partition after shutdown listed the writers to hand over,
// is refused: before, its writer ran on, neither closed nor handed over,
// holding the lease until the owner record expired.
func TestOpenRacingShutdownIsRefused(t *testing.T) {
	f := newFixture(t, 1)
	routing, resume := make(chan struct{}), make(chan struct{})
	removing, finish := make(chan struct{}), make(chan struct{})
	hc := &hookedCatalog{Catalog: f.cat, getPartition: pause(routing, resume), removeOwner: pause(removing, finish)}
	a := f.copyWith("a", hc, nil)
	routed := make(chan error, 1)
	go func() {
		_, err := a.routeTo(context.Background(), f.topic, 0, false)
		routed <- err
	}()
	<-routing // past the check of closing, reading the partition's owner
	shut := make(chan error, 1)
	go func() { shut <- a.shutdown() }()
	<-removing // shutdown closed the writers it listed (none)
	close(resume)
	err := <-routed
	close(finish)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if !isRetry(err) {
		t.Errorf("a route during shutdown: %v; want a retry error (UNAVAILABLE at the edge)", err)
	}
	if p, err := f.cat.GetPartition(context.Background(), f.topic.Name, 0); err != nil || p.Owner != "" {
		t.Errorf("after shutdown the partition is owned by %q (%v); want free", p.Owner, err)
	}
	if w := writerOf(a, f.topic.ID, 0); w != nil {
		t.Errorf("a writer opened during shutdown is left running (err %v)", w.Err())
		_ = w.Close(context.Background())
	}
}

// A takeover that outlasts shutdown's wait for it (shutdown gives each
// opening writer OpenTimeout) hands its partition over when it ends,
// instead of leaving its writer running.
func TestOpenOutlastingShutdownIsHandedOver(t *testing.T) {
	f := newFixture(t, 1)
	creating, resume := make(chan struct{}), make(chan struct{})
	f.ledgers.onCreate = pause(creating, resume)
	a := f.copyOf("a", func(c *Config) { c.OpenTimeout = 100 * time.Millisecond })
	routed := make(chan error, 1)
	go func() {
		_, err := a.routeTo(context.Background(), f.topic, 0, false)
		routed <- err
	}()
	<-creating // the takeover holds the lease and creates its ledger
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	close(resume)
	if err := <-routed; !isRetry(err) {
		t.Errorf("a route during shutdown: %v; want a retry error (UNAVAILABLE at the edge)", err)
	}
	if p, err := f.cat.GetPartition(context.Background(), f.topic.Name, 0); err != nil || p.Owner != "" {
		t.Errorf("after the takeover ended the partition is owned by %q (%v); want it handed over", p.Owner, err)
	}
	if w := writerOf(a, f.topic.ID, 0); w != nil {
		t.Errorf("a writer opened during shutdown is left running (err %v)", w.Err())
		_ = w.Close(context.Background())
	}
}
