package sluice_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// storeServer is a ProducerService that stores every record (topic "t",
// one partition) and remembers the traceparent request header of the
// calls it got.
type storeServer struct {
	sluicev1connect.UnimplementedProducerServiceHandler
	sluicev1connect.UnimplementedAdminServiceHandler
	// discard: count the records, keep none (benchmarks).
	discard bool
	mu      sync.Mutex
	next    int64             // guarded by mu
	records []record.Record   // guarded by mu
	rpcTP   map[string]string // procedure → traceparent header; guarded by mu
	decErr  error             // guarded by mu
}

func newStoreServer() *storeServer {
	return &storeServer{rpcTP: map[string]string{}}
}

func (s *storeServer) sawCall(procedure string, h interface{ Get(string) string }) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rpcTP[procedure] = h.Get("traceparent")
}

func (s *storeServer) DescribeTopic(_ context.Context, req *connect.Request[sluicev1.DescribeTopicRequest]) (*connect.Response[sluicev1.DescribeTopicResponse], error) {
	s.sawCall(req.Spec().Procedure, req.Header())
	if req.Msg.GetName() != "t" {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such topic"))
	}
	return connect.NewResponse(&sluicev1.DescribeTopicResponse{Topic: &sluicev1.TopicInfo{Name: "t", Partitions: []*sluicev1.PartitionInfo{{}}}}), nil
}

func (s *storeServer) InitProducer(_ context.Context, req *connect.Request[sluicev1.InitProducerRequest]) (*connect.Response[sluicev1.InitProducerResponse], error) {
	s.sawCall(req.Spec().Procedure, req.Header())
	return connect.NewResponse(&sluicev1.InitProducerResponse{ProducerId: 7}), nil
}

func (s *storeServer) ProduceStream(_ context.Context, st *connect.BidiStream[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse]) error {
	s.sawCall(st.Spec().Procedure, st.RequestHeader())
	for {
		req, err := st.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out := &sluicev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(), Response: &sluicev1.ProduceResponse{}}
		s.mu.Lock()
		for _, b := range req.GetRequest().GetBatches() {
			bt := record.Batch(b.GetData())
			out.Response.Results = append(out.Response.Results, &sluicev1.ProduceResult{Offset: s.next})
			s.next += int64(bt.RecordCount())
			if s.discard {
				continue
			}
			recs, err := record.Decode(bt, record.MaxLimits())
			if err != nil {
				s.decErr = err
			}
			s.records = append(s.records, recs...)
		}
		s.mu.Unlock()
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

func (s *storeServer) stored(t *testing.T) []record.Record {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.decErr != nil {
		t.Fatal(s.decErr)
	}
	return append([]record.Record(nil), s.records...)
}

// produceOne produces r through a new client of addr with opts and waits
// for it.
func produceOne(t *testing.T, ctx context.Context, addr string, r *sluice.Record, opts ...sluice.ClientOption) sluice.Result {
	t.Helper()
	c, err := sluice.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewProducer(sluice.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan sluice.Result, 1)
	p.Produce(ctx, r, func(res sluice.Result) { done <- res })
	select {
	case res := <-done:
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res
	case <-wctx.Done():
		t.Fatal("produce did not complete")
	}
	panic("unreachable")
}

func header(hs []record.Header, key string) (string, int) {
	v, n := "", 0
	for _, h := range hs {
		if h.Key == key {
			v, n = string(h.Value), n+1
		}
	}
	return v, n
}

func newRecorder() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// Without a tracer provider, a record produced in a span carries that
// span's context after its own headers; one produced without a span
// carries none.
func TestProduceInjectsTheContextsSpan(t *testing.T) {
	srv := newStoreServer()
	addr := serveFake(t, srv)
	tp, _ := newRecorder()
	ctx, span := tp.Tracer("app").Start(context.Background(), "handle request")
	span.End()

	produceOne(t, ctx, addr, &sluice.Record{Topic: "t", Value: []byte("a"), Headers: []sluice.Header{{Key: "k", Value: []byte("v")}}})
	produceOne(t, context.Background(), addr, &sluice.Record{Topic: "t", Value: []byte("b")})

	recs := srv.stored(t)
	if len(recs) != 2 {
		t.Fatalf("stored %d records", len(recs))
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := recs[0].Headers; len(got) != 2 || got[0].Key != "k" || got[1].Key != "traceparent" || string(got[1].Value) != want {
		t.Fatalf("headers %q, want k then traceparent %s", got, want)
	}
	if len(recs[1].Headers) != 0 {
		t.Fatalf("a record produced outside any span got headers %q", recs[1].Headers)
	}
	// Nothing traced the RPCs: no tracer provider.
	if tp := srv.rpcTP[sluicev1connect.ProducerServiceProduceStreamProcedure]; tp != "" {
		t.Fatalf("ProduceStream carried traceparent %q without WithTracerProvider", tp)
	}
}

// A traceparent the user set is kept as it is, and no second one added.
func TestProduceKeepsTheUsersTraceparent(t *testing.T) {
	srv := newStoreServer()
	addr := serveFake(t, srv)
	tp, _ := newRecorder()
	ctx, span := tp.Tracer("app").Start(context.Background(), "op")
	defer span.End()
	mine := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, opts := range [][]sluice.ClientOption{nil, {sluice.WithTracerProvider(tp)}} {
		produceOne(t, ctx, addr, &sluice.Record{Topic: "t", Value: []byte("a"), Headers: []sluice.Header{{Key: "traceparent", Value: []byte(mine)}}}, opts...)
	}
	for _, r := range srv.stored(t) {
		if v, n := header(r.Headers, "traceparent"); n != 1 || v != mine || len(r.Headers) != 1 {
			t.Fatalf("headers %q, want only the user's traceparent", r.Headers)
		}
	}
}

// With a tracer provider: a "send t" producer span, a child of ctx's span,
// ended with the record's offset; the record carries it; the RPCs are
// traced (client spans, traceparent request headers).
func TestProduceSendSpan(t *testing.T) {
	srv := newStoreServer()
	addr := serveFake(t, srv)
	tp, rec := newRecorder()
	ctx, parent := tp.Tracer("app").Start(context.Background(), "handle request")
	res := produceOne(t, ctx, addr, &sluice.Record{Topic: "t", Value: []byte("a")}, sluice.WithTracerProvider(tp))
	parent.End()

	var send sdktrace.ReadOnlySpan
	rpcs := 0
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == "send t":
			send = s
		case s.SpanKind() == trace.SpanKindClient:
			rpcs++
		}
	}
	if send == nil {
		t.Fatalf("no \"send t\" span among %d", len(rec.Ended()))
	}
	if send.Parent().SpanID() != parent.SpanContext().SpanID() || send.SpanKind() != trace.SpanKindProducer {
		t.Fatalf("send span: parent %v kind %v; want child of %v, producer", send.Parent().SpanID(), send.SpanKind(), parent.SpanContext().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range send.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{
		"messaging.system": "sluice", "messaging.operation.name": "send", "messaging.destination.name": "t",
		"messaging.destination.partition.id": "0", "messaging.kafka.offset": "0",
	} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	if res.Offset != 0 {
		t.Fatalf("offset %d", res.Offset)
	}
	r := srv.stored(t)[0]
	want := "00-" + send.SpanContext().TraceID().String() + "-" + send.SpanContext().SpanID().String() + "-01"
	if v, _ := header(r.Headers, "traceparent"); v != want {
		t.Fatalf("record traceparent %q, want the send span's %s", v, want)
	}
	if rpcs == 0 {
		t.Fatal("no RPC client span")
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.rpcTP[sluicev1connect.AdminServiceDescribeTopicProcedure] == "" {
		t.Fatalf("DescribeTopic carried no traceparent header (%v)", srv.rpcTP)
	}
}

// The consumer's side: RecordContext and StartProcessSpan continue the
// producer's trace from the record's headers, and link the caller's span.
func TestProcessSpanContinuesTheProducersTrace(t *testing.T) {
	tp, rec := newRecorder()
	_, producer := tp.Tracer("app").Start(context.Background(), "send t")
	producer.End()
	sc := producer.SpanContext()
	cr := sluice.ConsumedRecord{Topic: "t", Partition: 3, Offset: 42, Value: []byte("v"), Headers: []sluice.Header{
		{Key: "other", Value: []byte("x")},
		{Key: "traceparent", Value: []byte("00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01")},
	}}
	if got := sluice.RecordSpanContext(cr); got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Fatalf("RecordSpanContext = %v, want remote %v", got, sc)
	}
	if got := trace.SpanContextFromContext(sluice.RecordContext(context.Background(), cr)); got.SpanID() != sc.SpanID() {
		t.Fatalf("RecordContext carries %v", got)
	}
	if got := sluice.RecordSpanContext(sluice.ConsumedRecord{}); got.IsValid() {
		t.Fatalf("a record without headers has span context %v", got)
	}

	c, err := sluice.NewClient("127.0.0.1:1", sluice.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pollCtx, poll := tp.Tracer("app").Start(context.Background(), "poll loop")
	defer poll.End()
	_, span := c.StartProcessSpan(pollCtx, cr)
	span.End()
	var got sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "process t" {
			got = s
		}
	}
	if got == nil {
		t.Fatal("no \"process t\" span")
	}
	if got.SpanContext().TraceID() != sc.TraceID() || got.Parent().SpanID() != sc.SpanID() || got.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("process span in trace %v parent %v kind %v; want a consumer child of %v", got.SpanContext().TraceID(), got.Parent().SpanID(), got.SpanKind(), sc)
	}
	if ls := got.Links(); len(ls) != 1 || ls[0].SpanContext.SpanID() != poll.SpanContext().SpanID() {
		t.Fatalf("links %v, want the poll loop's span", ls)
	}

	// Without a tracer provider: no span, but the context continues the
	// producer's trace for the caller's own spans.
	plain, err := sluice.NewClient("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, s := plain.StartProcessSpan(context.Background(), cr)
	s.End()
	if s.IsRecording() || trace.SpanContextFromContext(ctx).TraceID() != sc.TraceID() {
		t.Fatal("without a tracer provider: want a non-recording span in the producer's trace")
	}
}

func TestWithTracerProviderNil(t *testing.T) {
	if _, err := sluice.NewClient("127.0.0.1:1", sluice.WithTracerProvider(nil)); !errors.Is(err, sluice.ErrInvalidOption) {
		t.Fatalf("err = %v, want ErrInvalidOption", err)
	}
}

// BenchmarkProduceFake measures the producer's own cost per record
// against a server that stores nothing and answers at once: "untraced"
// is the path of every application that does not trace (one context
// lookup more than before tracing existed), "context span" a record
// produced in a span without WithTracerProvider (headers injected),
// "tracer" with WithTracerProvider (a send span per record, sampled).
func BenchmarkProduceFake(b *testing.B) {
	srv := newStoreServer()
	srv.discard = true
	addr := serveFake(b, srv)
	tp := sdktrace.NewTracerProvider() // no processor: spans sampled, never exported
	sctx, span := tp.Tracer("bench").Start(context.Background(), "op")
	defer span.End()
	for _, bc := range []struct {
		name string
		ctx  context.Context
		opts []sluice.ClientOption
	}{
		{"untraced", context.Background(), nil},
		{"context span", sctx, nil},
		{"tracer", sctx, []sluice.ClientOption{sluice.WithTracerProvider(tp)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := sluice.NewClient(addr, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			p, err := c.NewProducer()
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Close(context.Background()) }()
			value := make([]byte, 100)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				p.Produce(bc.ctx, &sluice.Record{Topic: "t", Value: value}, nil)
			}
			if err := p.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}
