package admin

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// counting counts the catalog's ledger reads.
type counting struct {
	Catalog
	gets, batches atomic.Int64
}

func (c *counting) GetLedger(ctx context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	c.gets.Add(1)
	return c.Catalog.GetLedger(ctx, id)
}

func (c *counting) GetLedgers(ctx context.Context, ids []catalog.LedgerID) ([]catalog.LedgerMetadata, error) {
	c.batches.Add(1)
	return c.Catalog.GetLedgers(ctx, ids)
}

// DescribeTopic's end offsets come from the writer when it knows them, else
// from the catalog: a sealed tail ledger's end, an open tail's first offset,
// the log start without ledgers. The tails are read with one call.
func TestDescribeEndOffsets(t *testing.T) {
	ctx := context.Background()
	cat, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.CreateTopic(ctx, "orders", 4, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.HeartbeatOwner(ctx, "ingest-a", "127.0.0.1:1", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Partition 0: no ledger. 1: an open tail from offset 100. 2: a sealed
	// tail from 200 to 249. 3: a sealed tail, but the writer knows better.
	var topicID catalog.TopicID
	for part, first := range map[int]int64{1: 100, 2: 200, 3: 300} {
		p, err := cat.AcquireWriter(ctx, "orders", part, "ingest-a")
		if err != nil {
			t.Fatal(err)
		}
		topicID = p.TopicID
		l := p.Lease()
		m, err := cat.CreateLedger(ctx, catalog.LedgerSpec{
			Topic: l.Topic, TopicID: l.TopicID, Partition: part, Replication: catalog.DefaultReplication,
			Ensemble: []string{"b1:1", "b2:1", "b3:1"}, FirstOffset: first, WriterOwner: l.Owner, WriterEpoch: l.Epoch,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cat.AppendLedger(ctx, l, catalog.LedgerRef{ID: m.ID, FirstOffset: first}); err != nil {
			t.Fatal(err)
		}
		if part >= 2 {
			m.State, m.LastEntry, m.LastOffset = catalog.LedgerClosed, 0, first+49
			if _, err := cat.UpdateLedger(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := &counting{Catalog: cat}
	s, err := New(Deps{Catalog: c, Ledgers: noRecovery{t}, EndOffset: func(id catalog.TopicID, part int) (int64, bool) {
		return 777, id == topicID && part == 3
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "orders"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 100, 250, 777}
	for i, p := range resp.Msg.GetTopic().GetPartitions() {
		if p.GetEndOffset() != want[i] {
			t.Errorf("partition %d: end offset %d, want %d", i, p.GetEndOffset(), want[i])
		}
		if i > 0 && p.GetOwnerId() != "ingest-a" {
			t.Errorf("partition %d: owner %q, want ingest-a", i, p.GetOwnerId())
		}
	}
	if g, b := c.gets.Load(), c.batches.Load(); g != 0 || b != 1 {
		t.Errorf("catalog ledger reads: %d GetLedger and %d GetLedgers calls, want 0 and 1", g, b)
	}
}

// noRecovery is Deps.Ledgers for tests that delete no topic.
type noRecovery struct{ t *testing.T }

func (n noRecovery) Recover(_ context.Context, id catalog.LedgerID, _ func(int64, []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	n.t.Errorf("unexpected recovery of ledger %d", id)
	return catalog.LedgerMetadata{}, errors.New("no recovery in this test")
}
