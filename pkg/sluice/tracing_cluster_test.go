package sluice_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/internal/telemetry"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/services/ingest"
)

// tracedCluster starts an in-process cluster that exports its spans to
// server, and a client whose spans (from tp) app records.
func tracedCluster(t *testing.T) (server *tracetest.InMemoryExporter, app *tracetest.SpanRecorder, tp *sdktrace.TracerProvider, c *sluice.Client) {
	t.Helper()
	server = tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(telemetry.Config{Output: io.Discard, SpanExporter: server, Service: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	tc := startCluster(t, func(c *cluster.Config) { c.Telemetry = tel })
	app = tracetest.NewSpanRecorder()
	tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(app))
	if c, err = sluice.NewClient(tc.addr, sluice.WithTracerProvider(tp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return server, app, tp, c
}

// One record's trace through the in-process cluster: the producer's "send"
// span, the server's "append" and "deliver" spans as its children, and the
// consumer's "process" span, all in the trace the application started.
// (cmd/sluice's TestIntegrationTraceSpansProducerToConsumer does the same
// across processes, through an OTLP receiver.)
func TestTraceFollowsARecord(t *testing.T) {
	server, app, tp, c := tracedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "traced", 1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(ctx) }()
	rctx, root := tp.Tracer("app").Start(ctx, "checkout")
	if _, err := p.ProduceSync(rctx, sluice.NewRecord("traced", []byte("k"), []byte("v"))); err != nil {
		t.Fatal(err)
	}
	root.End()

	k, err := c.NewConsumer("g", []string{"traced"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close(ctx) }()
	var recs []sluice.ConsumedRecord
	for len(recs) == 0 {
		if recs, err = k.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, span := k.StartProcessSpan(ctx, recs[0])
	span.End()

	traceID := root.SpanContext().TraceID()
	var send trace.SpanContext
	for _, s := range app.Ended() {
		if s.Name() == "send traced" {
			send = s.SpanContext()
		}
	}
	if send.TraceID() != traceID {
		t.Fatalf("send span %v, want one in trace %v", send, traceID)
	}
	// The server's spans end as they are answered: wait for them.
	want := map[string]bool{"append traced": false, "deliver traced": false}
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range server.GetSpans() {
			if _, ok := want[s.Name]; ok && s.SpanContext.TraceID() == traceID {
				if s.Parent.SpanID() != send.SpanID() {
					t.Fatalf("%q's parent is %v, want the send span %v", s.Name, s.Parent.SpanID(), send.SpanID())
				}
				want[s.Name] = true
			}
		}
		if want["append traced"] && want["deliver traced"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server spans in the record's trace: %v", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var process sdktrace.ReadOnlySpan
	for _, s := range app.Ended() {
		if s.Name() == "process traced" {
			process = s
		}
	}
	if process == nil || process.SpanContext().TraceID() != traceID || process.Parent().SpanID() != send.SpanID() {
		t.Fatalf("process span %v, want a child of the send span in trace %v", process, traceID)
	}
}

// A plain record (the JSON and browser clients' Produce) with a
// traceparent header gets its append span in that trace too.
func TestTraceOfAPlainRecord(t *testing.T) {
	server := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(telemetry.Config{Output: io.Discard, SpanExporter: server})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	tc := startCluster(t, func(c *cluster.Config) { c.Telemetry = tel })
	c, err := sluice.NewClient(tc.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "plain", 1, nil); err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	prod := sluicev1connect.NewProducerServiceClient(&http.Client{Transport: &http.Transport{Protocols: &protos}}, "http://"+tc.addr)
	const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	if _, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "plain", Records: []*sluicev1.Record{
		{Value: []byte("v"), Headers: []*sluicev1.Header{{Key: "traceparent", Value: []byte("00-" + traceID + "-" + spanID + "-01")}}},
	}})); err != nil {
		t.Fatal(err)
	}
	for _, s := range server.GetSpans() {
		if s.Name == "append plain" {
			if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != spanID {
				t.Fatalf("append span in trace %v under %v, want %s under %s", s.SpanContext.TraceID(), s.Parent.SpanID(), traceID, spanID)
			}
			return
		}
	}
	t.Fatal("no append span (it ends before Produce answers)")
}

// A traced commit shows the coordinator's work in the application's
// trace: the decision's compare-and-set (txn.store) and the markers
// (txn.markers), under the server's EndTxn span.
func TestTraceShowsTheCoordinatorsWork(t *testing.T) {
	server, _, tp, c := tracedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "txn-traced", 2, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewTransactionalProducer(ctx, "traced-writer")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(ctx) }()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	for part := range int32(2) {
		if err := p.Send(ctx, &sluice.Record{Topic: "txn-traced", Partition: part, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	rctx, root := tp.Tracer("app").Start(ctx, "commit")
	if err := p.Commit(rctx); err != nil {
		t.Fatal(err)
	}
	root.End()
	traceID := root.SpanContext().TraceID()

	deadline := time.Now().Add(10 * time.Second)
	for {
		var endTxn trace.SpanID
		for _, s := range server.GetSpans() {
			if s.SpanContext.TraceID() == traceID && s.Name == "sluice.v1.ProducerService/EndTxn" {
				endTxn = s.SpanContext.SpanID()
			}
		}
		got := map[string]bool{}
		for _, s := range server.GetSpans() {
			if s.SpanContext.TraceID() != traceID || s.Parent.SpanID() != endTxn || !endTxn.IsValid() {
				continue
			}
			switch s.Name {
			case ingest.SpanTxnStore:
				got[s.Name] = true
			case ingest.SpanTxnMarkers:
				for _, a := range s.Attributes {
					if a.Key == "sluice.txn.partitions" && a.Value.AsInt64() == 2 {
						got[s.Name] = true
					}
				}
			}
		}
		if got[ingest.SpanTxnStore] && got[ingest.SpanTxnMarkers] {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range server.GetSpans() {
				if s.SpanContext.TraceID() == traceID {
					names = append(names, s.Name)
				}
			}
			t.Fatalf("spans under the EndTxn span of the commit's trace: %v (all in the trace: %v); want %s and %s (2 partitions)",
				got, names, ingest.SpanTxnStore, ingest.SpanTxnMarkers)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
