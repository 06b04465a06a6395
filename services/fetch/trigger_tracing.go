package fetch

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// SpanTriggerInvoke names the span of one trigger invocation:
// "invoke <trigger>", of kind client (the function is called), linked to
// the spans the invoked records' traceparent headers name (the producers'
// spans, up to telemetry.MaxRecordLinks): a batch holds records of many
// traces, so the invocation is a trace of its own that points at them,
// as OpenTelemetry's messaging conventions do for batch processing.
const SpanTriggerInvoke = "invoke"

// Attributes of the invocation span, beside OpenTelemetry's messaging and
// FaaS ones.
const (
	attrTrigger = attribute.Key("sluice.trigger.name")
	attrOutcome = attribute.Key("sluice.trigger.outcome") // as the invocations metric's "outcome"
)

// triggerTracer starts the invocation spans; its zero value (no tracer
// provider, or a no-op one) starts none and reads no header.
type triggerTracer struct{ t trace.Tracer }

func newTriggerTracer(tp trace.TracerProvider) triggerTracer {
	if !telemetry.Traced(tp) {
		return triggerTracer{}
	}
	return triggerTracer{t: tp.Tracer("github.com/sluicemq/sluice/services/fetch/triggers")}
}

// start starts the span of invoking function with b for the trigger name.
func (tt triggerTracer) start(ctx context.Context, name, function string, b trigger.Batch) (context.Context, trace.Span) {
	if tt.t == nil {
		return ctx, nil
	}
	return tt.t.Start(ctx, SpanTriggerInvoke+" "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(telemetry.RecordLinks(b.Records)...),
		trace.WithAttributes(
			attrTrigger.String(name),
			attribute.String("messaging.system", "sluice"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", b.Topic),
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(b.Partition))),
			attribute.Int("messaging.batch.message_count", len(b.Records)),
			attribute.Int64("messaging.kafka.offset", b.FirstOffset()),
			attribute.String("faas.invoked_name", function),
			attribute.String("faas.invoked_provider", "aws"),
		))
}

// end ends an invocation's span with its outcome (a nil span: not traced).
func (tt triggerTracer) end(span trace.Span, res trigger.Result) {
	if span == nil {
		return
	}
	outcome := triggerOutcome(res)
	span.SetAttributes(attrOutcome.String(outcome))
	if len(res.Failed) > 0 {
		span.SetAttributes(attribute.Int("sluice.trigger.failed_records", len(res.Failed)))
	}
	if outcome != "success" && outcome != "partial" {
		msg := outcome
		if res.Err != nil {
			msg = res.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}
