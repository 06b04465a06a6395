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
// Tracing uses the W3C trace-context propagator; spans go nowhere until an
// exporter is configured (a later issue adds OTLP).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
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
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	return &Telemetry{
		Logger:         logger,
		MeterProvider:  mp,
		TracerProvider: noop.NewTracerProvider(),
		Propagator:     propagation.TraceContext{},
		registry:       reg,
		sdk:            mp,
	}, nil
}

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
// every RPC) wired to this Telemetry's providers.
func (t *Telemetry) Interceptor() (connect.Interceptor, error) {
	return otelconnect.NewInterceptor(
		otelconnect.WithMeterProvider(t.MeterProvider),
		otelconnect.WithTracerProvider(t.TracerProvider),
		otelconnect.WithPropagator(t.Propagator),
	)
}

// Shutdown flushes and stops the meter provider.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return t.sdk.Shutdown(ctx)
}
