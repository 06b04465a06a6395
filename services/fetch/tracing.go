package fetch

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// SpanDeliver names the span of handing records to a consumer — a group
// session's delivery or a Fetch answer — when they carry a trace context
// (their traceparent headers; the Go SDK writes them): "deliver <topic>",
// a child of the first traced record's span (the producer's), so the
// delivery appears in that producer's trace, linked to the other
// records' spans and to the RPC's own span (a Subscribe's lasts as long as
// the session). Records without a trace context get no span. The records'
// headers are read (compressed batches decompressed) only when this copy
// traces: the cost of tracing, paid only when it is on.
const SpanDeliver = "deliver"

// deliveryTracer starts the delivery spans; its zero value starts none.
type deliveryTracer struct{ t trace.Tracer }

func newDeliveryTracer(tp trace.TracerProvider) deliveryTracer {
	if !telemetry.Traced(tp) {
		return deliveryTracer{}
	}
	return deliveryTracer{t: tp.Tracer("github.com/sluicemq/sluice/services/fetch")}
}

// start starts the span of delivering res of topic/partition (group is ""
// for a Fetch); nil when not traced.
func (dt deliveryTracer) start(ctx context.Context, topic string, partition int32, group string, res partlog.Result) trace.Span {
	if dt.t == nil || res.Count == 0 {
		return nil
	}
	scs := make([]trace.SpanContext, 0, 1)
	for i := range res.Records {
		if len(scs) == telemetry.MaxRecordLinks {
			break
		}
		if sc := telemetry.RecordSpanContext(res.Records[i].Headers); sc.IsValid() {
			scs = append(scs, sc)
		}
	}
	for _, run := range res.Batches {
		if len(scs) >= telemetry.MaxRecordLinks {
			break
		}
		scs = append(scs, telemetry.RunSpanContexts(run)...)
	}
	if len(scs) == 0 {
		return nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "sluice"),
		attribute.String("messaging.destination.name", topic),
		attribute.String("messaging.destination.partition.id", strconv.Itoa(int(partition))),
		attribute.Int("messaging.batch.message_count", res.Count),
	}
	if group != "" {
		attrs = append(attrs, attribute.String("messaging.consumer.group.name", group))
	}
	_, span := telemetry.StartRecordsSpan(ctx, dt.t, SpanDeliver+" "+topic, scs[:min(len(scs), telemetry.MaxRecordLinks)], trace.WithAttributes(attrs...))
	return span
}

// end ends a delivery span (nil: not traced).
func (deliveryTracer) end(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
