package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The environment variables that ask for trace export. Any one of them set
// (and not empty) builds an exporter; none set keeps the no-op tracer, so a
// process nobody asked to trace pays nothing: no span is recorded, no
// goroutine runs, no connection is opened.
//
// The rest of the standard variables are read by the OpenTelemetry SDK
// itself once an exporter is built: OTEL_EXPORTER_OTLP_PROTOCOL (and
// _TRACES_PROTOCOL: http/protobuf by default, or grpc), _HEADERS,
// _TIMEOUT, OTEL_TRACES_SAMPLER and _ARG (parentbased_always_on by
// default), OTEL_BSP_SCHEDULE_DELAY and the other batch span processor
// limits, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
var traceEnv = []string{
	"OTEL_TRACES_EXPORTER",               // otlp, console or none
	"OTEL_EXPORTER_OTLP_ENDPOINT",        // http://collector:4318 (the /v1/traces path is added)
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", // the full URL, for traces only
}

// TracesRequested reports whether getenv (os.Getenv in a main) asks for
// trace export: one of OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and OTEL_SDK_DISABLED is not
// "true". OTEL_TRACES_EXPORTER=none asks for nothing.
func TracesRequested(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	for _, k := range traceEnv {
		if strings.TrimSpace(getenv(k)) != "" {
			return true
		}
	}
	return false
}

// newTracerProvider returns the tracer provider cfg asks for and its
// shutdown (which flushes the spans still queued), or the no-op provider
// and a nil shutdown.
func newTracerProvider(cfg Config) (trace.TracerProvider, func(context.Context) error, error) {
	exp := cfg.SpanExporter
	if exp == nil {
		if !cfg.TracesFromEnv || !TracesRequested(os.Getenv) {
			return noop.NewTracerProvider(), nil, nil
		}
		var err error
		// autoexport picks the exporter from OTEL_TRACES_EXPORTER (OTLP when
		// it is unset, which TracesRequested allowed only with an
		// endpoint) and the OTLP protocol from OTEL_EXPORTER_OTLP_PROTOCOL.
		// Building one does no I/O: the first export connects.
		if exp, err = autoexport.NewSpanExporter(context.Background()); err != nil {
			return nil, nil, fmt.Errorf("telemetry: span exporter from the OTEL_* environment: %w", err)
		}
		if autoexport.IsNoneSpanExporter(exp) {
			return noop.NewTracerProvider(), nil, nil
		}
	}
	res, err := serviceResource(cfg.Service)
	if err != nil {
		return nil, nil, err
	}
	// The batch processor bounds what it holds (OTEL_BSP_MAX_QUEUE_SIZE,
	// 2,048 spans by default) and drops beyond it: a slow or absent
	// collector never slows a request down. The sampler is the SDK's
	// default, parent-based always-on, unless OTEL_TRACES_SAMPLER says
	// otherwise: a trace a producer started is recorded by every process
	// it crosses, or by none.
	var processor sdktrace.SpanProcessor
	if cfg.SpanExporter != nil {
		processor = sdktrace.NewSimpleSpanProcessor(exp) // tests: each span as it ends
	} else {
		processor = sdktrace.NewBatchSpanProcessor(exp)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(processor), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// serviceResource names the process "sluice-<service>" (sluice-ingest,
// sluice-dev, ...); OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override
// and add to it.
func serviceResource(service string) (*resource.Resource, error) {
	name := "sluice"
	if service != "" {
		name = "sluice-" + service
	}
	res, err := resource.New(context.Background(),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", name)),
		resource.WithFromEnv(), // after: the environment wins
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: trace resource: %w", err)
	}
	return res, nil
}
