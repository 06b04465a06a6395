package fetch_test

import (
	"context"
	"io"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/internal/telemetry"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch"
)

// One span per invocation, "invoke <trigger>", with the trigger, topic,
// partition, record count and outcome, linked to the spans the records'
// traceparent headers name.
func TestTriggerInvocationSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(telemetry.Config{Output: io.Discard, SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) { return got.processed(inv) })
	e := startCluster(t, cluster.Config{Lambda: f.invoker(), Telemetry: tel,
		Fetch: fetch.Config{TriggerRefresh: 50 * time.Millisecond, BalanceInterval: 100 * time.Millisecond}})
	e.createTopic(t, "orders", 1)

	// Two records from two producers' spans, one without a trace.
	producers := sdktrace.NewTracerProvider()
	var want []trace.SpanContext
	var recs []*sluicev1.Record
	for i := range 2 {
		_, span := producers.Tracer("producer").Start(context.Background(), "send orders")
		span.End()
		sc := span.SpanContext()
		want = append(want, sc)
		recs = append(recs, &sluicev1.Record{Value: []byte("v" + string(rune('0'+i))), Headers: []*sluicev1.Header{
			{Key: "traceparent", Value: []byte("00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01")}}})
	}
	recs = append(recs, &sluicev1.Record{Value: []byte("v2")})
	p := int32(0)
	if _, err := e.prod.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Partition: &p, Records: recs})); err != nil {
		t.Fatal(err)
	}
	e.createTrigger(t, "orders-fn", &sluicev1.TriggerSpec{Topic: "orders", BatchSize: 10,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST})
	waitFor(t, "the records invoked", 20*time.Second, func() bool { return len(got.get(0)) >= 3 })

	var span tracetest.SpanStub
	waitFor(t, "the invocation's span", 10*time.Second, func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "invoke orders-fn" {
				span = s
				return true
			}
		}
		return false
	})
	attrs := map[string]string{}
	for _, kv := range span.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{
		"sluice.trigger.name": "orders-fn", "sluice.trigger.outcome": "success", "messaging.destination.name": "orders",
		"messaging.destination.partition.id": "0", "messaging.batch.message_count": "3", "faas.invoked_name": "fn",
	} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	if span.SpanKind != trace.SpanKindClient {
		t.Errorf("kind %v, want client", span.SpanKind)
	}
	if len(span.Links) != 2 {
		t.Fatalf("%d links, want the 2 traced records' spans", len(span.Links))
	}
	for i, l := range span.Links {
		if l.SpanContext.TraceID() != want[i].TraceID() || l.SpanContext.SpanID() != want[i].SpanID() {
			t.Errorf("link %d: %v, want %v", i, l.SpanContext, want[i])
		}
	}
}
