package sluice

import (
	"context"
	"strconv"
	"strings"

	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/pkg/record"
)

// Tracing (OpenTelemetry). The SDK depends on the OpenTelemetry API only,
// never on its SDK or an exporter: the application owns the TracerProvider
// and gives it with WithTracerProvider. Nothing here reads a global.
//
// Trace context travels in two places:
//   - RPC headers (otelconnect on every call, with WithTracerProvider): the
//     servers' spans are children of the SDK's client spans.
//   - Record headers: a produced record carries the W3C "traceparent" (and
//     "tracestate" when the trace has one) of the span it was produced in,
//     so a consumer, a trigger's function or any later reader can continue
//     the producer's trace (RecordContext, StartProcessSpan). Only these two
//     headers: they count toward the record's size and the 64-header limit
//     (about 70 bytes with their keys).
//
// Span names and attributes follow OpenTelemetry's messaging conventions,
// with "sluice" as messaging.system; the offset and partition use the Kafka
// attributes since Sluice's records are Kafka's.

// Record header keys of the W3C trace context.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// tracerName is the instrumentation scope of the SDK's spans.
const tracerName = "github.com/sluicemq/sluice/pkg/sluice"

// traceContext is the W3C propagator: record headers always use it.
var traceContext propagation.TraceContext

// Attribute keys (OpenTelemetry messaging conventions).
const (
	attrSystem        = attribute.Key("messaging.system")
	attrOperationName = attribute.Key("messaging.operation.name")
	attrOperationType = attribute.Key("messaging.operation.type")
	attrDestination   = attribute.Key("messaging.destination.name")
	attrPartition     = attribute.Key("messaging.destination.partition.id")
	attrOffset        = attribute.Key("messaging.kafka.offset")
	attrGroup         = attribute.Key("messaging.consumer.group.name")
	attrTombstone     = attribute.Key("messaging.kafka.message.tombstone")
)

// WithTracerProvider traces the Client's work with tp: a client span for
// every RPC (otelconnect, its context sent in the request headers), a
// "send <topic>" span per produced record, from Produce to its outcome,
// whose context the record carries in its headers, and the spans of
// StartProcessSpan. Without it the Client starts no span, and a record
// carries the trace context of the span in Produce's ctx, if there is one.
func WithTracerProvider(tp trace.TracerProvider) ClientOption {
	return func(c *clientConfig) { c.tracerProvider, c.tracerSet = tp, true }
}

// rpcTracing returns the interceptor tracing the Client's RPCs, or nil
// without a tracer provider.
func rpcTracing(tp trace.TracerProvider) (*otelconnect.Interceptor, error) {
	if tp == nil {
		return nil, nil
	}
	// Tracing only: the application measures the SDK with Hooks.
	return otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp), otelconnect.WithPropagator(traceContext),
		otelconnect.WithoutMetrics())
}

// headerCarrier collects what the propagator injects: traceparent and, when
// not empty, tracestate.
type headerCarrier struct {
	parent, state string
}

func (c *headerCarrier) Get(string) string { return "" }
func (c *headerCarrier) Keys() []string    { return nil }
func (c *headerCarrier) Set(key, value string) {
	switch key {
	case HeaderTraceparent:
		c.parent = value
	case HeaderTracestate:
		c.state = value
	}
}

// traceHeaders is the trace context a record gets: zero, one or two
// headers.
type traceHeaders struct {
	h [2]record.Header
	n int
}

func (t *traceHeaders) headers() []record.Header { return t.h[:t.n] }

// size is what the headers count against the buffer, as recordSize counts.
func (t *traceHeaders) size() int64 {
	var n int64
	for _, h := range t.headers() {
		n += int64(len(h.Key) + len(h.Value) + 4)
	}
	return n
}

// hasTraceHeader reports whether the user set a trace context header
// themselves: the SDK never replaces it.
func hasTraceHeader(hs []Header) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Key, HeaderTraceparent) || strings.EqualFold(h.Key, HeaderTracestate) {
			return true
		}
	}
	return false
}

// traceRecord decides a produced record's trace: with a tracer, it starts
// the record's "send" span (ended by the returned callback); the headers
// carry that span's context, or, without a tracer, the context of ctx's
// span. cb is returned as given when nothing is traced, so an untraced
// produce costs one context lookup.
func (p *Producer) traceRecord(ctx context.Context, r *Record, cb func(Result)) (traceHeaders, func(Result)) {
	var th traceHeaders
	tracer := p.client.tracer
	if tracer == nil && !trace.SpanContextFromContext(ctx).IsValid() {
		return th, cb
	}
	userSet := hasTraceHeader(r.Headers)
	if tracer != nil {
		var span trace.Span
		ctx, span = tracer.Start(ctx, "send "+r.Topic, trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attrSystem.String("sluice"), attrOperationName.String("send"), attrOperationType.String("send"),
				attrDestination.String(r.Topic)))
		inner := cb
		cb = func(res Result) {
			span.SetAttributes(attrPartition.String(strconv.Itoa(int(res.Partition))))
			if res.Err != nil {
				span.RecordError(res.Err)
				span.SetStatus(codes.Error, res.Err.Error())
			} else if res.Offset >= 0 {
				span.SetAttributes(attrOffset.Int64(res.Offset))
			}
			span.End()
			inner(res)
		}
	}
	if !userSet {
		th = injectHeaders(ctx)
	}
	return th, cb
}

// injectHeaders returns the headers carrying ctx's span context (none when
// ctx has no valid span).
func injectHeaders(ctx context.Context) traceHeaders {
	var th traceHeaders
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return th
	}
	var c headerCarrier
	traceContext.Inject(ctx, &c)
	if c.parent != "" {
		th.h[th.n] = record.Header{Key: HeaderTraceparent, Value: []byte(c.parent)}
		th.n++
		if c.state != "" {
			th.h[th.n] = record.Header{Key: HeaderTracestate, Value: []byte(c.state)}
			th.n++
		}
	}
	return th
}

// recordCarrier reads a consumed record's trace context headers.
type recordCarrier []Header

func (c recordCarrier) Get(key string) string {
	for _, h := range c {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}
func (c recordCarrier) Set(string, string) {}
func (c recordCarrier) Keys() []string {
	keys := make([]string, len(c))
	for i, h := range c {
		keys[i] = h.Key
	}
	return keys
}

// RecordContext returns ctx with the trace context of rec's headers (its
// producer's span) as the remote parent: a span started from it continues
// the producer's trace. Without a valid traceparent header it returns ctx
// as it is.
func RecordContext(ctx context.Context, rec ConsumedRecord) context.Context {
	return traceContext.Extract(ctx, recordCarrier(rec.Headers))
}

// RecordSpanContext returns the span context rec's headers carry; not
// valid when they carry none.
func RecordSpanContext(rec ConsumedRecord) trace.SpanContext {
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), recordCarrier(rec.Headers)))
}

// StartProcessSpan starts the span of processing rec: "process <topic>",
// of kind consumer, a child of the producer's span when rec carries one
// (RecordContext), and linked to ctx's span when ctx has one of another
// trace (the poll loop's, a request's). The caller ends it. Without
// WithTracerProvider the span is a non-recording one that still carries
// the producer's context, so spans the caller starts from the returned
// context (with its own tracer) continue the producer's trace.
func (c *Client) StartProcessSpan(ctx context.Context, rec ConsumedRecord) (context.Context, trace.Span) {
	return c.startProcessSpan(ctx, rec, "")
}

// StartProcessSpan is Client.StartProcessSpan with the consumer's group as
// messaging.consumer.group.name.
func (k *Consumer) StartProcessSpan(ctx context.Context, rec ConsumedRecord) (context.Context, trace.Span) {
	return k.client.startProcessSpan(ctx, rec, k.group)
}

func (c *Client) startProcessSpan(ctx context.Context, rec ConsumedRecord, group string) (context.Context, trace.Span) {
	pctx := RecordContext(ctx, rec)
	if c.tracer == nil {
		return pctx, trace.SpanFromContext(pctx)
	}
	attrs := []attribute.KeyValue{
		attrSystem.String("sluice"), attrOperationName.String("process"), attrOperationType.String("process"),
		attrDestination.String(rec.Topic), attrPartition.String(strconv.Itoa(int(rec.Partition))), attrOffset.Int64(rec.Offset),
	}
	if group != "" {
		attrs = append(attrs, attrGroup.String(group))
	}
	if rec.Value == nil {
		attrs = append(attrs, attrTombstone.Bool(true))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.TraceID() != trace.SpanContextFromContext(pctx).TraceID() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return c.tracer.Start(pctx, "process "+rec.Topic, opts...)
}
