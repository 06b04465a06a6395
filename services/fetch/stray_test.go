package fetch_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// A ledger that is not the tail of its chain but was never sealed (its
// writer opened the next one without closing it, or died in a recovery)
// is recovered by the read that reaches it: every acknowledged record in
// it is served, none skipped, and the read goes on into the next ledger.
// Before, Fetch answered no records and no error there, for ever.
func TestFetchRecoversUnsealedLedgerBeforeTheTail(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "stray", 1)
	const n = 120
	e.produce(t, "stray", 0, 0, n, 10)
	ctx := context.Background()
	p, err := e.c.Catalog.GetPartition(ctx, "stray", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ledgers) != 1 {
		t.Fatalf("want one ledger, got %v", p.Ledgers)
	}
	stray := p.Ledgers[0].ID
	// A second ledger after the open one, under the owner's lease.
	w, err := e.c.Ledgers.CreateLedger(ctx, catalog.LedgerSpec{
		Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, Replication: catalog.DefaultReplication,
		FirstOffset: n, WriterOwner: p.Owner, WriterEpoch: p.Epoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = w.Close(context.Background(), n-1) })
	if _, err := e.c.Catalog.AppendLedger(ctx, p.Lease(), catalog.LedgerRef{ID: w.ID(), FirstOffset: n}); err != nil {
		t.Fatal(err)
	}
	if m, err := e.c.Catalog.GetLedger(ctx, stray); err != nil || m.State.Sealed() {
		t.Fatalf("ledger %d should still be open: %v %v", stray, m.State, err)
	}
	next := int64(0)
	deadline := time.Now().Add(20 * time.Second)
	for next < n && time.Now().Before(deadline) {
		resp, err := e.cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "stray", Partition: 0, Offset: next, MaxRecords: 50, MaxWaitMs: 200}))
		if err != nil {
			t.Fatalf("fetch at %d: %v", next, err)
		}
		for _, r := range resp.Msg.Records {
			if r.Offset != next {
				t.Fatalf("want offset %d, got %d", next, r.Offset)
			}
			next++
		}
	}
	if next != n {
		t.Fatalf("read up to offset %d of %d: the unsealed ledger was not read through", next, n)
	}
	m, err := e.c.Catalog.GetLedger(ctx, stray)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != catalog.LedgerClosed || m.LastOffset != n-1 {
		t.Fatalf("ledger %d after the read: %v, last offset %d; want CLOSED at %d", stray, m.State, m.LastOffset, n-1)
	}
}
