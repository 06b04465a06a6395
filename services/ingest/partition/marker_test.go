package partition

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
)

// A writer taking over a partition whose log holds a transaction marker
// rebuilds it: the marker's bumped epoch fences a late batch of the ended
// transaction, and the producer's next batch starts at sequence 0 of the
// new epoch.
func TestRebuildKeepsAMarkersFence(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	ctx := context.Background()
	first := openWriter(t, Config{}, l, c, catalog.Partition{})
	if _, err := first.Append(ctx, idemBatch(t, 42, 0, 3)); err != nil { // epoch 0, offsets 0-2
		t.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The coordinator's marker at the bumped epoch 1, at offset 3, in a
	// ledger of its own (the writer cannot write markers yet).
	m, err := record.BuildMarker(record.Marker{ProducerID: 42, ProducerEpoch: 1, Commit: true, Timestamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(m, 3)
	ml, err := l.CreateLedger(ctx, catalog.LedgerSpec{FirstOffset: 3})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	if err := ml.AppendAsync(m, func(_ int64, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := ml.Close(ctx, 3); err != nil {
		t.Fatal(err)
	}
	refs := append(c.refs, catalog.LedgerRef{ID: ml.ID(), FirstOffset: 3})

	w := openWriter(t, Config{}, l, &memChain{refs: refs}, catalog.Partition{Ledgers: refs})
	if _, err := w.Append(ctx, idemBatch(t, 42, 3, 1)); !errors.Is(err, dedup.ErrProducerFenced) {
		t.Fatalf("a batch at the ended transaction's epoch after the takeover: %v; want ErrProducerFenced", err)
	}
	b, err := record.NewBuilder(record.BuilderOptions{Producer: &record.Producer{ID: 42, Epoch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(&record.Record{Value: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	next, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a, err := w.Append(ctx, next)
	if err != nil || a.BaseOffset != 4 {
		t.Fatalf("the producer's first batch of epoch 1: %+v, %v; want offset 4", a, err)
	}
}
