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
	peerv1 "github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1/peerv1connect"
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

// DescribeTopic's end offsets come from this copy when it writes the
// partition, else from the owner (one GetOffsets call per owner), else from
// the catalog: a sealed tail ledger's end, the log start without ledgers,
// or an open tail's first offset — marked as a lower bound. The tails are
// read with one call.
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
	local := func(id catalog.TopicID, part int) (int64, bool) { return 777, id == topicID && part == 3 }
	type want struct {
		end, stable int64
		lowerBound  bool
	}
	describe := func(name string, owners func(string) peerv1connect.PartitionServiceClient, wants []want) {
		t.Helper()
		c := &counting{Catalog: cat}
		s, err := New(Deps{Catalog: c, Ledgers: noRecovery{t}, EndOffset: local, Owners: owners})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "orders"}))
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range resp.Msg.GetTopic().GetPartitions() {
			got := want{p.GetEndOffset(), p.GetLastStableOffset(), p.GetEndOffsetLowerBound()}
			if got != wants[i] {
				t.Errorf("%s: partition %d: end %d, stable %d, lower bound %v; want %+v", name, i, got.end, got.stable, got.lowerBound, wants[i])
			}
			if i > 0 && p.GetOwnerId() != "ingest-a" {
				t.Errorf("%s: partition %d: owner %q, want ingest-a", name, i, p.GetOwnerId())
			}
		}
		if g, b := c.gets.Load(), c.batches.Load(); g != 0 || b > 1 {
			t.Errorf("%s: catalog ledger reads: %d GetLedger and %d GetLedgers calls, want 0 and at most 1", name, g, b)
		}
	}
	// No owner to ask: the open tail of partition 1 is a lower bound, and
	// says so; the others are exact.
	describe("catalog only", nil, []want{{0, -1, false}, {100, -1, true}, {250, -1, false}, {777, -1, false}})
	// The owner writes partition 1 (and not 2, whose sealed tail stands).
	owner := &fakeOwner{t: t, topicID: topicID, written: map[int32][2]int64{1: {140, 120}}}
	describe("owner asked", func(a string) peerv1connect.PartitionServiceClient {
		if a != "127.0.0.1:1" {
			t.Errorf("asked %s, not the owner's address", a)
		}
		return owner
	}, []want{{0, -1, false}, {140, 120, false}, {250, -1, false}, {777, -1, false}})
	if got := owner.asked.Load(); got != 1 {
		t.Errorf("owner asked %d times, want once (one call per owner)", got)
	}
	// The owner fails: back to the marked lower bound.
	owner.fail = true
	describe("owner failing", func(string) peerv1connect.PartitionServiceClient { return owner },
		[]want{{0, -1, false}, {100, -1, true}, {250, -1, false}, {777, -1, false}})
}

// fakeOwner is an ingest copy's PartitionService for GetOffsets: written
// maps a partition it writes to its end and last stable offset.
type fakeOwner struct {
	peerv1connect.UnimplementedPartitionServiceHandler
	t       *testing.T
	topicID catalog.TopicID
	written map[int32][2]int64
	fail    bool
	asked   atomic.Int64
}

func (f *fakeOwner) WriteMarker(context.Context, *connect.Request[peerv1.WriteMarkerRequest]) (*connect.Response[peerv1.WriteMarkerResponse], error) {
	return nil, errors.New("not in this test")
}

func (f *fakeOwner) GetOffsets(_ context.Context, req *connect.Request[peerv1.GetOffsetsRequest]) (*connect.Response[peerv1.GetOffsetsResponse], error) {
	f.asked.Add(1)
	if f.fail {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("owner down"))
	}
	if req.Msg.GetTopic() != "orders" || req.Msg.GetTopicId() != string(f.topicID) {
		f.t.Errorf("GetOffsets for %s/%s", req.Msg.GetTopic(), req.Msg.GetTopicId())
	}
	resp := &peerv1.GetOffsetsResponse{}
	for _, p := range req.Msg.GetPartitions() {
		po := &peerv1.PartitionOffsets{Partition: p, EndOffset: -1, LastStableOffset: -1}
		if o, ok := f.written[p]; ok {
			po.Written, po.EndOffset, po.LastStableOffset = true, o[0], o[1]
		}
		resp.Partitions = append(resp.Partitions, po)
	}
	return connect.NewResponse(resp), nil
}

// noRecovery is Deps.Ledgers for tests that delete no topic.
type noRecovery struct{ t *testing.T }

func (n noRecovery) Recover(_ context.Context, id catalog.LedgerID, _ func(int64, []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	n.t.Errorf("unexpected recovery of ledger %d", id)
	return catalog.LedgerMetadata{}, errors.New("no recovery in this test")
}
