package telemetry

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicemq/sluice/pkg/record"
)

// Trace context in record headers: a record produced in a traced span
// carries the W3C "traceparent" (and "tracestate") headers (pkg/sluice
// writes them; any client may). The servers read them to put their own
// work on a record — its append, its delivery, a trigger's invocation — in
// the producer's trace or link it there.

// MaxRecordLinks bounds the links a span over many records gets (one per
// traced record, the first ones): a batch of thousands must not make a
// span of thousands of links.
const MaxRecordLinks = 32

// recordHeaders reads a record's headers as a propagation carrier.
type recordHeaders []record.Header

func (c recordHeaders) Get(key string) string {
	for _, h := range c {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}
func (c recordHeaders) Set(string, string) {}
func (c recordHeaders) Keys() []string {
	keys := make([]string, len(c))
	for i, h := range c {
		keys[i] = h.Key
	}
	return keys
}

// RecordSpanContext returns the span context a record's headers carry; not
// valid when they carry none (or a malformed one).
func RecordSpanContext(headers []record.Header) trace.SpanContext {
	if len(headers) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), recordHeaders(headers)))
}

// RecordLinks returns links to the spans the records' headers name, at most
// MaxRecordLinks, each span once.
func RecordLinks(recs []record.Record) []trace.Link {
	var links []trace.Link
	seen := make(map[trace.SpanID]struct{})
	for i := range recs {
		if len(links) == MaxRecordLinks {
			break
		}
		sc := RecordSpanContext(recs[i].Headers)
		if !sc.IsValid() {
			continue
		}
		if _, dup := seen[sc.SpanID()]; dup {
			continue
		}
		seen[sc.SpanID()] = struct{}{}
		links = append(links, trace.Link{SpanContext: sc})
	}
	return links
}

// Traced reports whether tp records spans: false for nil and the no-op
// provider, so a caller skips work (decoding headers) that only a span
// would use.
func Traced(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, isNoop := tp.(noop.TracerProvider)
	return !isNoop
}

// BatchSpanContexts returns the span contexts the records of batch (a
// stored record batch, compressed or not) name in their headers, the first
// at most MaxRecordLinks, each once. A batch that does not decode yields
// what was found before the fault: tracing never fails a request.
func BatchSpanContexts(batch []byte) []trace.SpanContext {
	it := record.NewIterator(record.MaxLimits()) // verifies, decompresses
	if it.Reset(batch) != nil || record.Batch(batch).Attributes().Control() {
		return nil
	}
	var out []trace.SpanContext
	seen := make(map[trace.SpanID]struct{})
	for len(out) < MaxRecordLinks && it.Next() {
		sc := RecordSpanContext(it.Record().Headers)
		if _, dup := seen[sc.SpanID()]; sc.IsValid() && !dup {
			seen[sc.SpanID()] = struct{}{}
			out = append(out, sc)
		}
	}
	return out
}

// RunSpanContexts is BatchSpanContexts over a run of whole batches back to
// back (as fetch reads them from a ledger entry), at most MaxRecordLinks
// in all.
func RunSpanContexts(run []byte) []trace.SpanContext {
	var out []trace.SpanContext
	for rest := run; len(rest) > 0 && len(out) < MaxRecordLinks; {
		bt, r, err := record.Split(rest)
		if err != nil {
			break
		}
		rest = r
		out = append(out, BatchSpanContexts(bt)...)
	}
	return out[:min(len(out), MaxRecordLinks)]
}

// StartRecordsSpan starts a span over the work on some records whose trace
// contexts are scs: a child of the first (so the work appears in that
// producer's trace), linked to the others, and linked to ctx's span if ctx
// has one. Without any, the span is a child of ctx as usual.
func StartRecordsSpan(ctx context.Context, tracer trace.Tracer, name string, scs []trace.SpanContext, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if len(scs) == 0 {
		return tracer.Start(ctx, name, opts...)
	}
	var links []trace.Link
	if own := trace.SpanContextFromContext(ctx); own.IsValid() {
		links = append(links, trace.Link{SpanContext: own})
	}
	for _, sc := range scs[1:] {
		links = append(links, trace.Link{SpanContext: sc})
	}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	return tracer.Start(trace.ContextWithRemoteSpanContext(ctx, scs[0]), name, opts...)
}
