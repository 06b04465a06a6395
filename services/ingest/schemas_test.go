package ingest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hamba/avro/v2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sluicemq/sluice/internal/apierr"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/services/ingest"
)

const orderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`

// schemaEnv is an in-process `sluice dev` with the Connect clients a
// validation test needs, and subject "orders-value" registered.
type schemaEnv struct {
	t        *testing.T
	ctx      context.Context
	url      string // the cluster's
	produce  sluicev1connect.ProducerServiceClient
	admin    sluicev1connect.AdminServiceClient
	consumer sluicev1connect.ConsumerServiceClient
	schemas  sluicev1connect.SchemaServiceClient
	id       int64 // orders-value's version 1
	avro     avro.Schema
}

func newSchemaEnv(t *testing.T) *schemaEnv {
	t.Helper()
	c := startCluster(t, nil)
	hc := h2cClient()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e := &schemaEnv{t: t, ctx: ctx, url: c.url,
		produce:  sluicev1connect.NewProducerServiceClient(hc, c.url),
		admin:    sluicev1connect.NewAdminServiceClient(hc, c.url),
		consumer: sluicev1connect.NewConsumerServiceClient(hc, c.url),
		schemas:  sluicev1connect.NewSchemaServiceClient(hc, c.url),
		avro:     avro.MustParse(orderSchema),
	}
	e.id = e.register("orders-value", orderSchema)
	return e
}

func (e *schemaEnv) register(subject, text string) int64 {
	e.t.Helper()
	r, err := e.schemas.RegisterSchema(e.ctx, connect.NewRequest(&sluicev1.RegisterSchemaRequest{Subject: subject, Schema: &sluicev1.SchemaInput{Schema: text}}))
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Msg.GetVersion().GetSchema().GetId()
}

func (e *schemaEnv) createTopic(name string, config map[string]string) {
	e.t.Helper()
	if _, err := e.admin.CreateTopic(e.ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: 1, Config: config})); err != nil {
		e.t.Fatal(err)
	}
}

// order is a valid value: framed, Avro of orderSchema.
func (e *schemaEnv) order(id int64, item string) []byte {
	e.t.Helper()
	b, err := avro.Marshal(e.avro, map[string]any{"id": id, "item": item})
	if err != nil {
		e.t.Fatal(err)
	}
	return schema.AppendWire(nil, e.id, b)
}

// read returns partition 0 of topic from offset 0.
func (e *schemaEnv) read(topic string) []*sluicev1.ConsumedRecord {
	e.t.Helper()
	r, err := e.consumer.Fetch(e.ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Partition: 0}))
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Msg.GetRecords()
}

func header(r *sluicev1.ConsumedRecord, key string) string {
	for _, h := range r.GetHeaders() {
		if h.GetKey() == key {
			return string(h.GetValue())
		}
	}
	return ""
}

// wantRefused fails unless err is INVALID_ARGUMENT naming field, with
// reason SCHEMA_VALIDATION and the schema id in its metadata.
func wantRefused(t *testing.T, err error, field string, id int64, says string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("err = %v; want INVALID_ARGUMENT", err)
	}
	if !strings.HasPrefix(ce.Message(), field+": ") || !strings.Contains(ce.Message(), says) {
		t.Fatalf("message %q; want it to name %s and say %q", ce.Message(), field, says)
	}
	if apierr.Reason(err) != ingest.ReasonSchemaValidation {
		t.Fatalf("reason %q; want %s", apierr.Reason(err), ingest.ReasonSchemaValidation)
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetMetadata()["schema_id"] != strconv.FormatInt(id, 10) {
				t.Fatalf("ErrorInfo metadata %v; want schema_id %d", info.GetMetadata(), id)
			}
		}
	}
}

// schema.validation=reject: a request with one invalid value is refused
// whole, naming the record, the schema id and why; nothing of it is
// stored. Valid values, tombstones and a version registered just now pass.
func TestProduceRejectsValuesInvalidForTheSchema(t *testing.T) {
	e := newSchemaEnv(t)
	e.createTopic("orders", map[string]string{"schema.subject": "orders-value"})
	other := e.register("other-value", `"string"`)

	send := func(values ...[]byte) error {
		req := &sluicev1.ProduceRequest{Topic: "orders"}
		for _, v := range values {
			req.Records = append(req.Records, &sluicev1.Record{Value: v})
		}
		_, err := e.produce.Produce(e.ctx, connect.NewRequest(req))
		return err
	}
	if err := send(e.order(1, "apple"), nil, e.order(2, "pear")); err != nil {
		t.Fatalf("valid values and a tombstone: %v", err)
	}
	truncated := e.order(3, "plum")
	truncated = truncated[:len(truncated)-2]
	cases := []struct {
		name  string
		value []byte
		id    int64
		says  string
	}{
		{"payload cut short", truncated, e.id, "schema id " + strconv.FormatInt(e.id, 10)},
		{"trailing bytes", append(e.order(3, "plum"), 0), e.id, "schema id"},
		{"no framing", []byte(`{"id":3,"item":"plum"}`), 0, "magic byte"},
		{"another subject's id", schema.AppendWire(nil, other, []byte{2, 'x'}), other, "not one of the subject's live versions"},
		{"an id nobody has", schema.AppendWire(nil, 9999, []byte{2}), 9999, "not one of the subject's live versions"},
	}
	for _, c := range cases {
		err := send(e.order(3, "plum"), c.value)
		wantRefused(t, err, "records[1].value", c.id, c.says)
	}
	if got := len(e.read("orders")); got != 3 {
		t.Fatalf("orders holds %d records; want the 3 of the accepted request only", got)
	}

	// A version registered now is accepted at once.
	v2 := e.register("orders-value", `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"},{"name":"qty","type":"int","default":1}]}`)
	if err := send(schema.AppendWire(nil, v2, []byte{2, 2, 'x', 4})); err != nil {
		t.Fatalf("a value of version 2, registered just now: %v", err)
	}
}

// schema.validation=dlq: invalid records go to schema.dlq.topic with
// headers saying why, valid ones to the topic; the answer marks which.
func TestProduceDeadLettersInvalidRecords(t *testing.T) {
	e := newSchemaEnv(t)
	cfg := map[string]string{"schema.subject": "orders-value", "schema.validation": "dlq", "schema.dlq.topic": "orders.invalid"}
	e.createTopic("orders", cfg)
	records := []*sluicev1.Record{
		{Key: []byte("k1"), Value: e.order(1, "apple")},
		{Key: []byte("k2"), Value: []byte("not avro"), Headers: []*sluicev1.Header{{Key: "trace", Value: []byte("t-2")}}},
		{Key: []byte("k3"), Value: e.order(3, "plum")},
	}
	// The dead-letter topic must exist: nothing is written until it does.
	_, err := e.produce.Produce(e.ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Records: records}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), `"orders.invalid" does not exist`) {
		t.Fatalf("no dead-letter topic: %v; want FAILED_PRECONDITION naming it", err)
	}
	if got := len(e.read("orders")); got != 0 {
		t.Fatalf("orders holds %d records after a refused request", got)
	}
	e.createTopic("orders.invalid", nil)
	resp, err := e.produce.Produce(e.ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Records: records}))
	if err != nil {
		t.Fatal(err)
	}
	res := resp.Msg.GetResults()
	if len(res) != 3 || res[0].GetDeadLetter() != nil || res[2].GetDeadLetter() != nil || res[0].GetOffset() != 0 || res[2].GetOffset() != 1 {
		t.Fatalf("results %v; want records 0 and 2 at offsets 0 and 1 of orders", res)
	}
	dl := res[1].GetDeadLetter()
	if dl.GetTopic() != "orders.invalid" || res[1].GetOffset() != 0 || !strings.Contains(dl.GetReason(), "magic byte") {
		t.Fatalf("result 1 = %v; want dead-lettered to orders.invalid offset 0 with the reason", res[1])
	}
	got := e.read("orders.invalid")
	if len(got) != 1 {
		t.Fatalf("orders.invalid holds %d records; want 1", len(got))
	}
	r := got[0]
	if string(r.GetKey()) != "k2" || string(r.GetValue()) != "not avro" || header(r, "trace") != "t-2" ||
		header(r, ingest.HeaderDLQTopic) != "orders" || header(r, ingest.HeaderDLQSubject) != "orders-value" ||
		!strings.Contains(header(r, ingest.HeaderDLQReason), "magic byte") {
		t.Fatalf("dead letter %v; want the record as sent with the sluice.dlq.* headers", r)
	}
	if n := len(e.read("orders")); n != 2 {
		t.Fatalf("orders holds %d records; want 2", n)
	}

	// A dead-letter topic that requires a schema itself is refused.
	e.createTopic("strict", map[string]string{"schema.subject": "orders-value", "schema.validation": "dlq", "schema.dlq.topic": "orders"})
	_, err = e.produce.Produce(e.ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "strict", Records: records[1:2]}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "schema.subject of its own") {
		t.Fatalf("dead-letter topic with a subject: %v; want FAILED_PRECONDITION", err)
	}
}

// Pre-built batches are validated record by record, in one pass with the
// format checks: refused naming the batch and record; under dlq a batch
// of a plain producer goes whole to the dead-letter topic, and one of an
// idempotent producer is refused (its sequence covers all its records).
func TestProduceValidatesBatches(t *testing.T) {
	e := newSchemaEnv(t)
	e.createTopic("orders", map[string]string{"schema.subject": "orders-value"})
	e.createTopic("loose", map[string]string{"schema.subject": "orders-value", "schema.validation": "dlq", "schema.dlq.topic": "loose.dlq"})
	e.createTopic("loose.dlq", nil)

	batch := func(idempotent bool, values ...[]byte) []byte {
		t.Helper()
		b, err := record.NewBuilder(record.BuilderOptions{Codec: record.CodecZstd})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := b.Append(&record.Record{Value: v, Timestamp: 1}); err != nil {
				t.Fatal(err)
			}
		}
		data, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if idempotent {
			if err := record.SetProducer(data, 7, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		return data
	}
	send := func(topic string, batches ...[]byte) (*sluicev1.ProduceResponse, error) {
		req := &sluicev1.ProduceRequest{Topic: topic}
		for _, b := range batches {
			req.Batches = append(req.Batches, &sluicev1.EncodedBatch{Data: b})
		}
		r, err := e.produce.Produce(e.ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	good := batch(false, e.order(1, "a"), e.order(2, "b"))
	bad := batch(false, e.order(3, "c"), e.order(4, "d"), []byte{0, 0, 0, 0, byte(e.id), 0xff})
	if _, err := send("orders", good); err != nil {
		t.Fatal(err)
	}
	_, err := send("orders", good, bad)
	wantRefused(t, err, "batches[1].data.records[2].value", e.id, "schema id")
	if n := len(e.read("orders")); n != 2 {
		t.Fatalf("orders holds %d records; want the first request's 2", n)
	}

	resp, err := send("loose", good, bad)
	if err != nil {
		t.Fatal(err)
	}
	res := resp.GetResults()
	if res[0].GetDeadLetter() != nil || res[1].GetDeadLetter().GetTopic() != "loose.dlq" || res[1].GetOffset() != 0 {
		t.Fatalf("results %v; want batch 1 dead-lettered whole at loose.dlq offset 0", res)
	}
	dead := e.read("loose.dlq")
	if len(dead) != 3 {
		t.Fatalf("loose.dlq holds %d records; want the bad batch's 3", len(dead))
	}
	if !strings.Contains(header(dead[0], ingest.HeaderDLQReason), "its batch holds record 2") || header(dead[2], ingest.HeaderDLQSchemaID) != strconv.FormatInt(e.id, 10) || header(dead[2], ingest.HeaderDLQPartition) != "0" {
		t.Fatalf("dead letters' headers: %v / %v", dead[0].GetHeaders(), dead[2].GetHeaders())
	}
	_, err = send("loose", batch(true, e.order(5, "e"), []byte("x")))
	wantRefused(t, err, "batches[0].data.records[1].value", 0, "idempotent")
}
