package ingest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/pkg/schema/registry"
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

// FuzzPrepareWithSchema: validation at produce. Any request to a topic
// with a schema.subject is refused with InvalidArgument (or NotFound), or
// planned so that every value written to the topic is valid for the
// subject (or a tombstone) and, under dlq, every other record of the
// request is planned for the dead-letter topic, one result each. Under
// reject nothing is dead-lettered. It never panics.
func FuzzPrepareWithSchema(f *testing.F) {
	ctx := context.Background()
	cat, err := embedded.Open(f.TempDir(), embedded.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = cat.Close() })
	reg, err := registry.New(registry.Config{Store: cat})
	if err != nil {
		f.Fatal(err)
	}
	v, err := reg.Register(ctx, "o-value", registry.Input{Schema: `{"type":"record","name":"O","fields":[
		{"name":"id","type":"long"},{"name":"tags","type":{"type":"array","items":"string"}},{"name":"note","type":["null","string"]}]}`})
	if err != nil {
		f.Fatal(err)
	}
	for name, cfg := range map[string]map[string]string{
		"strict": {"schema.subject": "o-value"},
		"loose":  {"schema.subject": "o-value", "schema.validation": "dlq", "schema.dlq.topic": "dead"},
		"dead":   nil,
	} {
		tc, err := catalog.ParseTopicConfig(cfg)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := cat.CreateTopic(ctx, name, 2, tc); err != nil {
			f.Fatal(err)
		}
	}
	s, err := New(Config{OwnerID: "fuzz", Address: "127.0.0.1:1"}, Deps{Catalog: cat, Ledgers: noLedgers{}, Schemas: cat,
		Forward: func(string) sluicev1connect.ProducerServiceClient { return nil }})
	if err != nil {
		f.Fatal(err)
	}
	check := registry.NewValidator(reg, registry.ValidatorConfig{})
	valid := schema.AppendWire(nil, v.ID, []byte{4, 2, 2, 'a', 0, 2, 2, 'n'}) // {id: 2, tags: ["a"], note: "n"}
	req := func(r *sluicev1.ProduceRequest) []byte { b, _ := proto.Marshal(r); return b }
	f.Add(req(&sluicev1.ProduceRequest{Records: []*sluicev1.Record{{Value: valid}, {}, {Value: valid[:len(valid)-1]}}}), true)
	f.Add(req(&sluicev1.ProduceRequest{Records: []*sluicev1.Record{{Value: []byte("x")}}}), false)
	bld, _ := record.NewBuilder(record.BuilderOptions{})
	_ = bld.Append(&record.Record{Value: valid})
	_ = bld.Append(&record.Record{Value: append(valid, 0)})
	batch, _ := bld.Build()
	f.Add(req(&sluicev1.ProduceRequest{Batches: []*sluicev1.EncodedBatch{{Partition: 1, Data: batch}}}), true)
	f.Fuzz(func(t *testing.T, b []byte, dlq bool) {
		var r sluicev1.ProduceRequest
		if proto.Unmarshal(b, &r) != nil {
			return
		}
		r.Topic = "strict"
		if dlq {
			r.Topic = "loose"
		}
		pl, err := s.prepare(ctx, &r)
		if err != nil {
			switch connect.CodeOf(err) {
			case connect.CodeInvalidArgument, connect.CodeNotFound:
				return
			}
			t.Fatalf("prepare: %v (code %v)", err, connect.CodeOf(err))
		}
		if want := len(r.GetRecords()) + len(r.GetBatches()); len(pl.results) != want {
			t.Fatalf("%d results for %d records and batches", len(pl.results), want)
		}
		dead := 0
		for _, res := range pl.results {
			if res.dead != nil {
				dead++
				if pl.dlq == nil || res.deadAt >= len(pl.dlq.results) {
					t.Fatalf("a dead-lettered result at %d of a dead-letter plan of %v", res.deadAt, pl.dlq)
				}
			}
		}
		if !dlq && (dead > 0 || pl.dlq != nil) {
			t.Fatalf("reject mode dead-lettered %d results", dead)
		}
		rc := check.Request()
		for _, pp := range pl.parts {
			for _, data := range pp.batches {
				err := record.ValidateEach(data, s.cfg.Limits, func(j int, rec *record.Record) error {
					if len(rec.Value) == 0 {
						return nil
					}
					if _, err := rc.Check(ctx, "o-value", rec.Value); err != nil {
						return fmt.Errorf("record %d: %w", j, err)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("a planned batch holds a value the subject refuses: %v", err)
				}
			}
		}
	})
}
