package telemetry_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/internal/telemetry/otlptest"
)

// clearOTEL empties every variable these tests read, whatever the
// developer's shell exports (t.Setenv restores them after the test).
func clearOTEL(t *testing.T) {
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	} {
		t.Setenv(k, "")
	}
}

func TestTracesRequested(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, false}, // says nothing about where to send
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://localhost:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, false},
	} {
		if got := telemetry.TracesRequested(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("TracesRequested(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// Nothing set: the no-op provider, whose spans record nothing.
func TestNoTraceEnvironmentIsNoop(t *testing.T) {
	clearOTEL(t)
	tel, err := telemetry.New(telemetry.Config{Service: "ingest", Output: io.Discard, TracesFromEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	if tel.Tracing() {
		t.Fatal("Tracing() with no OTEL_* variable set")
	}
	_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "op")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatalf("a span of the no-op provider records (%v) or has a valid context (%v)", span.IsRecording(), span.SpanContext())
	}
}

// An endpoint set in the environment, but the Config does not ask for
// traces from the environment (tests, Discard): still no-op.
func TestTracesFromEnvIsOptIn(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tel, err := telemetry.New(telemetry.Config{Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Tracing() {
		t.Fatal("Tracing() without TracesFromEnv")
	}
}

func TestTracesNoneIsNoop(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tel, err := telemetry.New(telemetry.Config{Output: io.Discard, TracesFromEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Tracing() {
		t.Fatal("Tracing() with OTEL_TRACES_EXPORTER=none")
	}
}

func TestUnknownTraceExporterFails(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin-of-the-future")
	if _, err := telemetry.New(telemetry.Config{Output: io.Discard, TracesFromEnv: true}); err == nil {
		t.Fatal("New accepted an unknown OTEL_TRACES_EXPORTER")
	}
}

// The endpoint set: spans reach an OTLP/HTTP receiver, named after the
// service (or OTEL_SERVICE_NAME), and Shutdown sends what is still queued
// (the schedule delay is far longer than the test).
func TestEndpointExportsSpansOnShutdown(t *testing.T) {
	for _, tc := range []struct {
		name, serviceEnv, want string
		endpointVar            string
	}{
		{"endpoint", "", "sluice-ingest", "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"traces endpoint", "", "sluice-ingest", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"service name", "my-ingest", "my-ingest", "OTEL_EXPORTER_OTLP_ENDPOINT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearOTEL(t)
			rcv := otlptest.Start()
			defer rcv.Close()
			url := rcv.URL
			if tc.endpointVar == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" {
				url += "/v1/traces" // the full URL: nothing is appended
			}
			t.Setenv(tc.endpointVar, url)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
			t.Setenv("OTEL_SERVICE_NAME", tc.serviceEnv)
			tel, err := telemetry.New(telemetry.Config{Service: "ingest", Output: io.Discard, TracesFromEnv: true})
			if err != nil {
				t.Fatal(err)
			}
			if !tel.Tracing() {
				t.Fatal("Tracing() is false with an endpoint set")
			}
			_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "op")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tel.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			spans := rcv.Spans()
			if len(spans) != 1 || spans[0].Name != "op" || spans[0].Service != tc.want {
				t.Fatalf("received %+v, want one span \"op\" of service %q", spans, tc.want)
			}
			if spans[0].TraceID != span.SpanContext().TraceID().String() {
				t.Fatalf("trace id %s, want %s", spans[0].TraceID, span.SpanContext().TraceID())
			}
		})
	}
}

// The sampler comes from OTEL_TRACES_SAMPLER: always_off records nothing.
func TestSamplerFromEnvironment(t *testing.T) {
	clearOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tel, err := telemetry.New(telemetry.Config{Output: io.Discard, TracesFromEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = tel.Shutdown(ctx)
	}()
	_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "op")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsSampled() {
		t.Fatal("always_off sampled a span")
	}
}
