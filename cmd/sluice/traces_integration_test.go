//go:build integration

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicemq/sluice/internal/telemetry/otlptest"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// One produced record yields one trace across processes: `sluice dev`
// exports its spans to an in-process OTLP/HTTP receiver (the collector
// stand-in) as the OTEL_* environment tells it, and the SDK in this test
// exports its own there too. The trace the application starts holds the
// producer's "send" span (this process), ingest's "append" and fetch's
// "deliver" spans (sluice dev) as its children, the ledger's "ledger.add"
// under "append" (the partition writer appends an entry in the trace of
// its first traced batch) and each bookie's "bookie.journal.commit" under
// that, and the consumer's "process" span (this process),
// child of "send".
func TestIntegrationTraceSpansProducerToConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rcv := otlptest.Start()
	defer rcv.Close()
	bin, dir, addr := devFixture(ctx, t)

	var out bytes.Buffer
	cmd := exec.Command(bin, "dev", "--data-dir", dir, "--addr", addr)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(withoutOTEL(os.Environ()),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100", // ms: the spans arrive while the test waits
	)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	waitServing(ctx, t, newDevAPI(addr), &out)

	// The application: its own tracer provider, exporting to the same
	// receiver.
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(rcv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "test-app"))))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	c, err := sluice.NewClient(addr, sluice.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "traced", 1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	rctx, root := tp.Tracer("test").Start(ctx, "checkout")
	if _, err := p.ProduceSync(rctx, sluice.NewRecord("traced", []byte("k"), []byte("v"))); err != nil {
		t.Fatal(err)
	}
	root.End()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	k, err := c.NewConsumer("g", []string{"traced"})
	if err != nil {
		t.Fatal(err)
	}
	var recs []sluice.ConsumedRecord
	for len(recs) == 0 {
		if recs, err = k.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, span := k.StartProcessSpan(ctx, recs[0])
	span.End()
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	traceID := root.SpanContext().TraceID().String()
	type need struct {
		name, service, parent string // parent: the name of the parent span
		kind                  tracepb.Span_SpanKind
	}
	needs := []need{
		{"checkout", "test-app", "", tracepb.Span_SPAN_KIND_INTERNAL},
		{"send traced", "test-app", "checkout", tracepb.Span_SPAN_KIND_PRODUCER},
		{"append traced", "sluice-dev", "send traced", tracepb.Span_SPAN_KIND_INTERNAL},
		{"deliver traced", "sluice-dev", "send traced", tracepb.Span_SPAN_KIND_INTERNAL},
		{"process traced", "test-app", "send traced", tracepb.Span_SPAN_KIND_CONSUMER},
		{"ledger.add", "sluice-dev", "append traced", tracepb.Span_SPAN_KIND_CLIENT},
		{"bookie.journal.commit", "sluice-dev", "ledger.add", tracepb.Span_SPAN_KIND_SERVER},
	}
	var missing []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans := rcv.Trace(traceID)
		byID := map[string]otlptest.Span{}
		for _, s := range spans {
			byID[s.SpanID] = s
		}
		missing = missing[:0]
		for _, n := range needs {
			found := false
			for _, s := range spans {
				if s.Name != n.name || s.Service != n.service {
					continue
				}
				if parent := byID[s.ParentID]; n.parent != "" && parent.Name != n.parent {
					continue // (a parent not received yet shows as missing until it is)
				}
				if s.Kind != n.kind {
					t.Fatalf("span %q of %s is of kind %v, want %v", n.name, n.service, s.Kind, n.kind)
				}
				found = true
			}
			if !found {
				missing = append(missing, n.service+": "+n.name+" (child of "+n.parent+")")
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var got []string
			for _, s := range spans {
				got = append(got, s.Service+": "+s.Name+" "+s.SpanID+" ← "+s.ParentID)
			}
			t.Fatalf("trace %s lacks\n  %s\nreceived in it:\n  %s\n(%d spans in all)\nsluice dev:\n%s", traceID,
				strings.Join(missing, "\n  "), strings.Join(got, "\n  "), len(rcv.Spans()), out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// withoutOTEL drops the OTEL_* variables of env: the test sets its own.
func withoutOTEL(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return out
}

// waitServing waits until the sluice dev at api answers SERVING.
func waitServing(ctx context.Context, t *testing.T, api devAPI, out *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := api.health.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
		if err == nil && resp.Msg.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice dev not SERVING after 60s (last: %v):\n%s", err, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
