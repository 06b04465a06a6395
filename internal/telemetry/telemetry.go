// Package telemetry builds the logger, meter provider and RPC interceptor that
// every Sluice service is given. Nothing here is global: a service receives a
// *Telemetry from its main (or a test) and passes its parts down.
//
// The logger lets the same warning (level and message) through ten times a
// minute and then drops it, saying how many it dropped the next time it
// passes (repeat.go): a lasting fault must not bury everything else.
//
// Metrics are OpenTelemetry instruments exported in Prometheus format from a
// registry owned by the Telemetry value (not the Prometheus default registry),
// so two services in one process (as in `sluice dev` or tests) never clash.
// Tracing uses the W3C trace-context propagator. Spans are exported only when
// the process asks for it with the standard OTEL_* environment variables
// (traces.go; a main sets Config.TracesFromEnv): otherwise the tracer
// provider is the no-op one and tracing costs nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config selects how a process logs. The zero value logs text at INFO to stderr.
type Config struct {
	// Service names the process in logs ("dev", "ingest", "bookie", ...).
	Service string
	// Level is the minimum log level. Zero is INFO.
	Level slog.Level
	// Format is "text" (default) or "json".
	Format string
	// Output receives log lines. Nil means os.Stderr.
	Output io.Writer
	// TracesFromEnv exports spans as the OTEL_* environment variables say
	// (TracesRequested, traces.go) when they ask for it. Mains set it;
	// tests leave it off, whatever the developer's shell exports.
	TracesFromEnv bool
	// SpanExporter, if set, receives each span as it ends, whatever the
	// environment says (tests: an in-memory exporter). The resource names
	// the service as with the environment.
	SpanExporter sdktrace.SpanExporter
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	switch c.Format {
	case "", "text", "json":
	default:
		errs = append(errs, fmt.Errorf("telemetry: log format %q: want text or json", c.Format))
	}
	return errors.Join(errs...)
}

// Telemetry is the set of observability handles a service uses.
type Telemetry struct {
	Logger         *slog.Logger
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator

	registry *prometheus.Registry
	sdk      *sdkmetric.MeterProvider
	// stopTraces flushes and stops the tracer provider; nil when spans go
	// nowhere (the no-op provider).
	stopTraces func(context.Context) error
}

// New builds a Telemetry from cfg.
func New(cfg Config) (*Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	out := cfg.Output
	if out == nil {
		out = os.Stderr
	}
	opts := &slog.HandlerOptions{Level: cfg.Level}
	var h slog.Handler = slog.NewTextHandler(out, opts)
	if cfg.Format == "json" {
		h = slog.NewJSONHandler(out, opts)
	}
	logger := slog.New(newRepeatLimiter(h, nil))
	if cfg.Service != "" {
		logger = logger.With("service", cfg.Service)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	tp, stopTraces, err := newTracerProvider(cfg)
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	return &Telemetry{
		Logger:         logger,
		MeterProvider:  mp,
		TracerProvider: tp,
		Propagator:     propagation.TraceContext{},
		registry:       reg,
		sdk:            mp,
		stopTraces:     stopTraces,
	}, nil
}

// Tracing reports whether spans are exported (an exporter is configured):
// code that would do extra work only for a span (decoding record headers)
// asks this first.
func (t *Telemetry) Tracing() bool { return t.stopTraces != nil }

// Discard returns a Telemetry that logs nothing; for tests that do not look at logs.
func Discard() *Telemetry {
	t, err := New(Config{Output: io.Discard})
	if err != nil {
		panic(err) // the zero config is valid; failing here is a programmer error
	}
	return t
}

// MetricsHandler serves this Telemetry's metrics in Prometheus text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{Registry: t.registry})
}

// Interceptor returns the otelconnect interceptor (metrics and tracing for
// every RPC) wired to this Telemetry's providers, for servers.
//
// A server span continues the caller's trace (WithTrustRemote): the callers
// are Sluice's own processes and its clients, and one trace from a producer
// through ingest, the bookies and fetch to a consumer is the point of
// tracing a queue. (otelconnect's default starts a new trace linked to the
// caller's, for servers facing callers whose sampling they must not follow.)
func (t *Telemetry) Interceptor() (connect.Interceptor, error) {
	return otelconnect.NewInterceptor(
		otelconnect.WithMeterProvider(t.MeterProvider),
		otelconnect.WithTracerProvider(t.TracerProvider),
		otelconnect.WithPropagator(t.Propagator),
		otelconnect.WithTrustRemote(),
	)
}

// ClientInterceptor returns the otelconnect interceptor for calls to other
// processes (rpcclient.Peers): a client span per RPC, and the trace context
// sent in the request headers. Tracing only: the RPC metrics are the
// servers'.
func (t *Telemetry) ClientInterceptor() (connect.Interceptor, error) {
	return otelconnect.NewInterceptor(
		otelconnect.WithTracerProvider(t.TracerProvider),
		otelconnect.WithPropagator(t.Propagator),
		otelconnect.WithoutMetrics(),
	)
}

// ShutdownTimeout bounds Shutdown in the mains: the spans still queued are
// sent to the collector within it or dropped.
const ShutdownTimeout = 5 * time.Second

// Shutdown flushes and stops the tracer provider (sending the spans still
// queued; ctx bounds it) and the meter provider. Call it once, last.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.stopTraces != nil {
		if err := t.stopTraces(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry: flush spans: %w", err))
		}
	}
	errs = append(errs, t.sdk.Shutdown(ctx))
	return errors.Join(errs...)
}
