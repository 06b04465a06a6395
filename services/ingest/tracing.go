package ingest

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/telemetry"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
)

// SpanAppend names the span of one produce request whose records carry a
// trace context (their traceparent headers; the Go SDK writes them):
// "append <topic>", from the request's arrival to its answer (durable or
// failed). It is a child of the first traced record's span — so the
// append, and the ledger adds and bookie journal commits made under it
// (bookkeeper/client's ledger.add), appear in that producer's trace — and
// linked to the other records' spans and to the RPC's own span (a
// ProduceStream's lasts as long as the stream, in a trace of its own).
// A request of untraced records gets no span: never a root span per
// request.
const SpanAppend = "append"

// The transaction coordinator's spans (coordinator.go), children of the
// request's span — an EndTxn's, an AddPartitionsToTxn's — when that is
// traced (the Go SDK propagates its RPC spans), never roots: SpanTxnStore
// around the compare-and-set of a decision (a Paxos round in Cassandra,
// batched with other ids' — pkg/bookkeeping/cassandra's txnbatch.go),
// SpanTxnMarkers around writing a decision's markers into its partitions
// (and applying a commit's offsets); the markers' ledger adds are its
// children. Where a slow commit spends its time.
const (
	SpanTxnStore   = "txn.store"
	SpanTxnMarkers = "txn.markers"
)

// startTxnSpan starts the coordinator's span name under ctx's span, if
// there is a traced one; ctx as it is and a nil span otherwise.
func (s *Service) startTxnSpan(ctx context.Context, name, tid string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s.tracer == nil || !trace.SpanContextFromContext(ctx).IsSampled() {
		return ctx, nil
	}
	attrs = append(attrs, attribute.String("sluice.transactional_id", tid))
	return s.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// newTracer returns the tracer of the append spans; nil (no span, no
// header read) without a provider or with the no-op one.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if !telemetry.Traced(tp) {
		return nil
	}
	return tp.Tracer("github.com/sluicemq/sluice/services/ingest")
}

// traceProduce starts m's append span, if it is traced; ctx as it is
// otherwise. The batches' headers are read (and compressed batches
// decompressed) only with a tracer: the cost of tracing, paid only when
// it is on.
func (s *Service) traceProduce(ctx context.Context, m *sluicev1.ProduceRequest) (context.Context, trace.Span) {
	if s.tracer == nil || m == nil {
		return ctx, nil
	}
	var scs []trace.SpanContext
	for _, b := range m.GetBatches() {
		if len(scs) >= telemetry.MaxRecordLinks {
			break
		}
		scs = append(scs, telemetry.BatchSpanContexts(b.GetData())...)
	}
	for _, r := range m.GetRecords() {
		if len(scs) >= telemetry.MaxRecordLinks {
			break
		}
		if sc := recordSpanContext(r); sc.IsValid() {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return ctx, nil
	}
	records := len(m.GetRecords())
	for _, b := range m.GetBatches() {
		if len(b.GetData()) >= record.HeaderSize { // a shorter one fails validation
			records += int(record.Batch(b.GetData()).RecordCount())
		}
	}
	return telemetry.StartRecordsSpan(ctx, s.tracer, SpanAppend+" "+m.GetTopic(), scs[:min(len(scs), telemetry.MaxRecordLinks)],
		trace.WithAttributes(
			attribute.String("messaging.system", "sluice"),
			attribute.String("messaging.destination.name", m.GetTopic()),
			attribute.Int("messaging.batch.message_count", records),
			attribute.Int("sluice.batches", len(m.GetBatches())),
		))
}

// endProduceSpan ends an append or coordinator span with the request's
// outcome (a nil span: not traced).
func endProduceSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// recordSpanContext is the trace context of a plain record's headers (a
// JSON or browser client's).
func recordSpanContext(r *sluicev1.Record) trace.SpanContext {
	hs := r.GetHeaders()
	if len(hs) == 0 {
		return trace.SpanContext{}
	}
	rh := make([]record.Header, len(hs))
	for i, h := range hs {
		rh[i] = record.Header{Key: h.GetKey(), Value: h.GetValue()}
	}
	return telemetry.RecordSpanContext(rh)
}
