package wire

import "go.opentelemetry.io/otel/trace"

// TraceContextSize is the length of Add.trace_context: trace id (16 bytes),
// span id (8), trace flags (1), in that order — the binary form of a W3C
// traceparent without its version byte. Trace state is not carried.
const TraceContextSize = 16 + 8 + 1

// AppendTraceContext appends sc in Add.trace_context's form to b; it
// appends nothing for an invalid sc.
func AppendTraceContext(b []byte, sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return b
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, tid[:]...)
	b = append(b, sid[:]...)
	return append(b, byte(sc.TraceFlags()))
}

// ParseTraceContext reads an Add.trace_context as a remote span context;
// false when b is empty or malformed (wrong length, zero ids).
func ParseTraceContext(b []byte) (trace.SpanContext, bool) {
	if len(b) != TraceContextSize {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	copy(cfg.TraceID[:], b[:16])
	copy(cfg.SpanID[:], b[16:24])
	cfg.TraceFlags = trace.TraceFlags(b[24])
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}
