package rpcclient_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/internal/telemetry"
)

// A client built with Options runs the Peers' interceptors: with
// telemetry's, a call made in a span is a client span of that trace, and
// the peer receives its context in the traceparent header.
func TestOptionsTraceCalls(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(telemetry.Config{Output: io.Discard, SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	ic, err := tel.ClientInterceptor()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	mux := http.NewServeMux()
	mux.Handle("/grpc.health.v1.Health/Check", connect.NewUnaryHandler("/grpc.health.v1.Health/Check",
		func(_ context.Context, req *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
			got <- req.Header().Get("traceparent")
			return connect.NewResponse(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}), nil
		}))
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &protos}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-done }()

	peers := rpcclient.New(nil).WithInterceptors(ic)
	defer peers.Close()
	c := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](peers.HTTP,
		peers.URL(ln.Addr().String())+"/grpc.health.v1.Health/Check", peers.Options(connect.WithGRPC())...)
	ctx, parent := tel.TracerProvider.Tracer("test").Start(context.Background(), "caller")
	if _, err := c.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{})); err != nil {
		t.Fatal(err)
	}
	parent.End()
	header := <-got
	var client tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			client = s
		}
	}
	if client.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("client span %q parent %v, want the caller's %v", client.Name, client.Parent.SpanID(), parent.SpanContext().SpanID())
	}
	if want := "00-" + client.SpanContext.TraceID().String() + "-" + client.SpanContext.SpanID().String() + "-01"; header != want {
		t.Fatalf("traceparent %q, want the client span's %q", header, want)
	}
	// Without interceptors, Options are the given ones.
	if n := len(rpcclient.New(nil).Options(connect.WithGRPC())); n != 1 {
		t.Fatalf("%d options, want 1", n)
	}
}
