package ingest_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest"
)

// InitProducer hands out distinct ids to plain idempotent producers and,
// for a transactional id, the same id with the epoch bumped each time; a
// batch of the older epoch is then refused at a partition the newer one
// wrote (PRODUCER_FENCED). A bad transactional id is INVALID_ARGUMENT.
func TestInitProducerAllocatesAndFences(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	prod := sluicev1connect.NewProducerServiceClient(http.DefaultClient, tc.url)
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	initP := func(tid string) *sluicev1.InitProducerResponse {
		t.Helper()
		resp, err := prod.InitProducer(ctx, connect.NewRequest(&sluicev1.InitProducerRequest{TransactionalId: tid}))
		if err != nil {
			t.Fatalf("InitProducer(%q): %v", tid, err)
		}
		return resp.Msg
	}
	a, b := initP(""), initP("")
	if a.ProducerId < 1 || b.ProducerId < 1 || a.ProducerId == b.ProducerId || a.ProducerEpoch != 0 || b.ProducerEpoch != 0 {
		t.Fatalf("two plain producers got %v and %v; want distinct ids ≥ 1 at epoch 0", a, b)
	}
	first, second := initP("copier-1"), initP("copier-1")
	if first.ProducerId != second.ProducerId || first.ProducerEpoch != 0 || second.ProducerEpoch != 1 {
		t.Fatalf("a transactional id's sessions got %v then %v; want one id, epochs 0 then 1", first, second)
	}

	produce := func(p *sluicev1.InitProducerResponse, seq int32) error {
		bld, err := record.NewBuilder(record.BuilderOptions{Producer: &record.Producer{ID: p.ProducerId, Epoch: int16(p.ProducerEpoch), BaseSequence: seq}})
		if err != nil {
			t.Fatal(err)
		}
		if err := bld.Append(&record.Record{Timestamp: 1, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		data, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		_, err = prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Batches: []*sluicev1.EncodedBatch{{Partition: 0, Data: data}}}))
		return err
	}
	if err := produce(second, 0); err != nil {
		t.Fatalf("the newer session's batch: %v", err)
	}
	err := produce(first, 0)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || apierr.Reason(err) != ingest.ReasonProducerFenced {
		t.Fatalf("the older session's batch after the newer one wrote: %v; want FAILED_PRECONDITION %s", err, ingest.ReasonProducerFenced)
	}

	_, err = prod.InitProducer(ctx, connect.NewRequest(&sluicev1.InitProducerRequest{TransactionalId: "bad\x00id"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("InitProducer with a control character: %v; want INVALID_ARGUMENT", err)
	}
}
