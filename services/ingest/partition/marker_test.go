package partition

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
)

// txnBatch is a transactional batch of producer id at epoch: n records
// from sequence seq.
func txnBatch(t testing.TB, id int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b, err := record.NewBuilder(record.BuilderOptions{Producer: &record.Producer{ID: id, Epoch: epoch, BaseSequence: seq}, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.Append(&record.Record{Value: fmt.Appendf(nil, "t%d-e%d-s%d", id, epoch, int(seq)+i)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A writer taking over a partition whose log holds a transaction marker
// rebuilds it: the marker's bumped epoch fences a late batch of the ended
// transaction, and the producer's next batch starts at sequence 0 of the
// new epoch.
func TestRebuildKeepsAMarkersFence(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	ctx := context.Background()
	first := openWriter(t, Config{}, l, c, catalog.Partition{})
	if _, err := first.Append(ctx, txnBatch(t, 42, 0, 0, 3)); err != nil { // epoch 0, offsets 0-2
		t.Fatal(err)
	}
	// The coordinator's marker at the bumped epoch 1, at offset 3.
	if a, err := first.Mark(ctx, 42, 1, true); err != nil || a.BaseOffset != 3 || a.Duplicate {
		t.Fatalf("Mark = %+v, %v; want offset 3", a, err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	w := openWriter(t, Config{}, l, &memChain{refs: c.refs}, catalog.Partition{Ledgers: c.refs})
	if _, err := w.Append(ctx, txnBatch(t, 42, 0, 3, 1)); !errors.Is(err, dedup.ErrProducerFenced) {
		t.Fatalf("a batch at the ended transaction's epoch after the takeover: %v; want ErrProducerFenced", err)
	}
	if a, err := w.Mark(ctx, 42, 1, true); err != nil || !a.Duplicate {
		t.Fatalf("the same marker again after the takeover: %+v, %v; want a duplicate", a, err)
	}
	a, err := w.Append(ctx, txnBatch(t, 42, 1, 0, 1))
	if err != nil || a.BaseOffset != 4 {
		t.Fatalf("the producer's first batch of epoch 1: %+v, %v; want offset 4", a, err)
	}
}

// The last stable offset stays at the first offset of the oldest open
// transaction, through a takeover that must read back further than its
// idempotence window and across ledgers to find it; the marker moves it
// to the end.
func TestStableEndAcrossTakeover(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	ctx := context.Background()
	cfg := Config{RebuildEntries: 2, MaxEntryBytes: 4096, RollBytes: 4096}
	first := openWriter(t, cfg, l, c, catalog.Partition{})
	for range 3 {
		if _, err := first.Append(ctx, batchOf(t, 2, 10)); err != nil { // 0-5
			t.Fatal(err)
		}
	}
	if _, err := first.Append(ctx, txnBatch(t, 7, 3, 0, 2)); err != nil { // 6-7
		t.Fatal(err)
	}
	for range 40 { // 8-87, over several ledgers
		if _, err := first.Append(ctx, batchOf(t, 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if got, end := first.StableEnd(), first.AckedEnd(); got != 6 || end != 88 {
		t.Fatalf("StableEnd %d, AckedEnd %d; want 6, 88", got, end)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.refs) < 3 {
		t.Fatalf("%d ledgers; the test needs the open transaction a few ledgers back", len(c.refs))
	}

	w := openWriter(t, cfg, l, &memChain{refs: c.refs}, catalog.Partition{Ledgers: c.refs})
	if got := w.StableEnd(); got != 6 {
		t.Fatalf("StableEnd after the takeover: %d; want 6", got)
	}
	// The producer's transaction goes on: sequence 2 follows.
	if _, err := w.Append(ctx, txnBatch(t, 7, 3, 2, 1)); err != nil { // 88
		t.Fatal(err)
	}
	if a, err := w.Mark(ctx, 7, 4, false); err != nil || a.BaseOffset != 89 {
		t.Fatalf("Mark = %+v, %v; want offset 89", a, err)
	}
	if got, end := w.StableEnd(), w.AckedEnd(); got != 90 || end != 90 {
		t.Fatalf("StableEnd %d, AckedEnd %d after the marker; want 90, 90", got, end)
	}
}

// A log whose tail says a transaction is open where none began is not what
// a writer wrote: the takeover refuses it rather than guess an LSO.
func TestRebuildRefusesAnInconsistentHeader(t *testing.T) {
	l := newMemLedgers(t)
	ctx := context.Background()
	lg, err := l.CreateLedger(ctx, catalog.LedgerSpec{FirstOffset: 0})
	if err != nil {
		t.Fatal(err)
	}
	b := batchOf(t, 2, 10)
	entry := make([]byte, record.EntryHeaderSize, record.EntryHeaderSize+len(b))
	record.PutEntryHeader(entry, 1) // says a transaction is open from offset 1
	entry = append(entry, b...)
	done := make(chan error, 1)
	if err := lg.AppendAsync(entry, func(_ int64, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Close(ctx, 1); err != nil {
		t.Fatal(err)
	}
	refs := []catalog.LedgerRef{{ID: lg.ID(), FirstOffset: 0}}
	_, err = Open(ctx, Config{}, l, &memChain{refs: refs}, catalog.Partition{Ledgers: refs}, testLease, catalog.DefaultReplication)
	if err == nil || !strings.Contains(err.Error(), "inconsistent") {
		t.Fatalf("Open over an inconsistent header: %v; want an error saying so", err)
	}
}
