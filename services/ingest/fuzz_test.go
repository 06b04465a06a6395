package ingest

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

// noLedgers is never reached: request validation happens before any write.
type noLedgers struct{}

func (noLedgers) CreateLedger(context.Context, catalog.LedgerSpec) (partition.Ledger, error) {
	return nil, errors.New("not used")
}
func (noLedgers) Recover(context.Context, catalog.LedgerID, func(int64, []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	return catalog.LedgerMetadata{}, errors.New("not used")
}
func (noLedgers) ReadEntries(context.Context, catalog.LedgerID, int64, int64) ([][]byte, error) {
	return nil, errors.New("not used")
}

// FuzzPrepare: any produce request is either refused with InvalidArgument
// (naming a field) or NotFound, or turned into valid batches, one result
// per record or batch, on partitions of the topic. It never panics.
func FuzzPrepare(f *testing.F) {
	cat, err := embedded.Open(f.TempDir(), embedded.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = cat.Close() })
	if _, err := cat.CreateTopic(context.Background(), "t", 3, catalog.DefaultTopicConfig()); err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{OwnerID: "fuzz", Address: "127.0.0.1:1"}, Deps{Catalog: cat, Ledgers: noLedgers{}, Forward: func(string) sluicev1connect.ProducerServiceClient { return nil }})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := proto.Marshal(&sluicev1.ProduceRequest{Topic: "t", Records: []*sluicev1.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []*sluicev1.Header{{Key: "h", Value: []byte("x")}}}}})
	f.Add(good)
	bld, _ := record.NewBuilder(record.BuilderOptions{})
	_ = bld.Append(&record.Record{Value: []byte("v")})
	batch, _ := bld.Build()
	withBatch, _ := proto.Marshal(&sluicev1.ProduceRequest{Topic: "t", Batches: []*sluicev1.EncodedBatch{{Partition: 2, Data: batch}}})
	f.Add(withBatch)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var req sluicev1.ProduceRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		pl, err := s.prepare(context.Background(), &req)
		if err != nil {
			switch connect.CodeOf(err) {
			case connect.CodeInvalidArgument, connect.CodeNotFound:
				return
			}
			t.Fatalf("prepare: %v (code %v)", err, connect.CodeOf(err))
		}
		want := len(req.GetRecords()) + len(req.GetBatches())
		if len(pl.results) != want {
			t.Fatalf("%d results for %d records and batches", len(pl.results), want)
		}
		for p, pp := range pl.parts {
			if p < 0 || p >= 3 {
				t.Fatalf("partition %d of a 3-partition topic", p)
			}
			for _, data := range pp.batches {
				if err := record.Validate(data, s.cfg.Limits); err != nil {
					t.Fatalf("prepared batch does not validate: %v", err)
				}
			}
		}
	})
}
