package partition

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// AckedEnd counts only what is stored for good: what Open recovered, and
// acknowledged entries. It stays put while batches are in flight and when
// a failed ledger's recovery drops them (NextOffset moves back then), and
// rises with the next acknowledgement.
func TestAckedEnd(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	w := openWriter(t, Config{}, l, c, catalog.Partition{LogStartOffset: 100})
	if e := w.AckedEnd(); e != 100 {
		t.Fatalf("a new partition starting at 100: AckedEnd %d", e)
	}
	if _, err := w.Append(context.Background(), batchOf(t, 5, 10)); err != nil {
		t.Fatal(err)
	}
	if e := w.AckedEnd(); e != 105 {
		t.Fatalf("5 records acknowledged: AckedEnd %d, want 105", e)
	}
	l.mu.Lock()
	l.hold = true
	l.mu.Unlock()
	errc := make(chan error, 1)
	go func() { _, err := w.Append(context.Background(), batchOf(t, 5, 10)); errc <- err }()
	waitFor(t, func() bool { return w.NextOffset() == 110 })
	if e := w.AckedEnd(); e != 105 {
		t.Fatalf("5 records in flight: AckedEnd %d, want 105", e)
	}
	l.mu.Lock()
	l.hold = false
	l.mu.Unlock()
	l.fail(1, errors.New("bookies gone"))
	if err := <-errc; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the append in flight: %v", err)
	}
	if e := w.AckedEnd(); e != 105 {
		t.Fatalf("ledger failed: AckedEnd %d, want 105", e)
	}
	waitFor(t, func() bool { return w.NextOffset() == 105 })
	if e := w.AckedEnd(); e != 105 {
		t.Fatalf("ledger recovered: AckedEnd %d, want 105", e)
	}
	waitFor(t, func() bool {
		_, err := w.Append(context.Background(), batchOf(t, 1, 10))
		return err == nil
	})
	if e := w.AckedEnd(); e != 106 {
		t.Fatalf("a record acknowledged in the next ledger: AckedEnd %d, want 106", e)
	}

	// A writer taking the partition over starts at the recovered end.
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2 := &memChain{refs: append([]catalog.LedgerRef(nil), c.refs...)}
	w2 := openWriter(t, Config{}, l, c2, catalog.Partition{LogStartOffset: 100, Ledgers: c2.refs})
	if e := w2.AckedEnd(); e != 106 {
		t.Fatalf("after a takeover: AckedEnd %d, want 106", e)
	}
}
