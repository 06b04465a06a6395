package ingest

import (
	"context"
	"errors"
	"testing"

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
