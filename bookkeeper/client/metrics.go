package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/bookkeeper/wire"
	"github.com/sluicemq/sluice/pkg/catalog"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// Metric names, in one place; the package doc ("Metrics and traces") says
// what each means. The Prometheus exporter turns dots into underscores
// and adds the unit and _total: sluice.ledger.add.duration is
// sluice_ledger_add_duration_seconds.
const (
	metricAddDuration      = "sluice.ledger.add.duration"
	metricAddEntries       = "sluice.ledger.add.entries"
	metricAddBytes         = "sluice.ledger.add.bytes"
	metricAddFailed        = "sluice.ledger.add.failed"
	metricBookieErrors     = "sluice.ledger.bookie.errors"
	metricEnsembleChanges  = "sluice.ledger.ensemble_changes"
	metricRecoveries       = "sluice.ledger.recoveries"
	metricRecoveryDuration = "sluice.ledger.recovery.duration"
	metricReadFallbacks    = "sluice.ledger.read.fallbacks"
	metricDamagedCopies    = "sluice.ledger.damaged_copies"
	metricLedgersCreated   = "sluice.ledger.ledgers.created"
	metricLedgersClosed    = "sluice.ledger.ledgers.closed"
	metricStreamsOpened    = "sluice.ledger.add_streams.opened"
)

// Span names: one per traced append and per traced recovery.
const (
	SpanAdd     = "ledger.add"
	SpanRecover = "ledger.recover"
)

// Span attribute keys (the bookie's journal-commit span uses the same).
const (
	attrLedger     = attribute.Key("sluice.ledger.id")
	attrEntry      = attribute.Key("sluice.entry.id")
	attrEntryBytes = attribute.Key("sluice.entry.bytes")
	attrBookie     = attribute.Key("sluice.bookie.id")
	attrOutcome    = attribute.Key("sluice.outcome")
)

// addBuckets (seconds): an add to quorum takes the slower of Qa journal
// commits plus two network hops — a millisecond or so — up to the
// AddTimeout (5 s) when a bookie stalls and the ensemble changes.
var addBuckets = []float64{0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}

// recoveryBuckets (seconds) for one Recover call.
var recoveryBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Values of the low-cardinality attributes.
const (
	// reason (bookie errors of op=add, ensemble changes): why a bookie
	// failed an add.
	reasonTimeout      = "timeout"      // unanswered for AddTimeout
	reasonUnavailable  = "unavailable"  // the stream broke (bookie down, connection lost)
	reasonRejected     = "rejected"     // REJECTED: read-only, draining, or its queue full
	reasonError        = "error"        // ERROR, BAD_CHECKSUM, an unknown status; a failed read or fence
	reasonFenced       = "fenced"       // FENCED: the ledger is being recovered
	reasonUnauthorized = "unauthorized" // wrong master key
	reasonChecksum     = "checksum"     // a read failed verification (or the bookie found it corrupt)
	reasonSpeculative  = "speculative"  // read fallbacks: SpeculativeReadTimeout passed
	reasonNoEntry      = "no_entry"     // read fallbacks: the bookie has no such entry

	opAdd   = "add"
	opRead  = "read"
	opFence = "fence"

	resultReplaced = "replaced" // ensemble change: a spare took the place
	resultRejoined = "rejoined" // ensemble change: no spare; the bookie answered again and kept its place
	resultFailed   = "failed"   // ensemble change attempt failed (no bookie could take the place, catalog error); retried

	damageMarked  = "marked"  // damaged copy marked in the ledger's catalog record
	damageDropped = "dropped" // report dropped: the reporter's queue was full

	outcomeRecovered     = "recovered"      // this client sealed the ledger
	outcomeAlreadyClosed = "already_closed" // it was sealed already, or another recovery won
	outcomeFailed        = "failed"
)

// addFailReason is the reason an add status other than OK gives.
func addFailReason(st bookiev1.AddStatus) string {
	switch st {
	case bookiev1.AddStatus_ADD_STATUS_FENCED:
		return reasonFenced
	case bookiev1.AddStatus_ADD_STATUS_UNAUTHORIZED:
		return reasonUnauthorized
	case bookiev1.AddStatus_ADD_STATUS_REJECTED:
		return reasonRejected
	default:
		return reasonError
	}
}

// meters is the client's instrumentation. What every add touches is an
// atomic (read by observable counters when the provider collects) and one
// histogram value without attributes; the rest counts failures, ensemble
// changes, recoveries and fallbacks, with attribute sets built once per
// distinct value (bookie ids are bounded by the cluster's size) and kept.
type meters struct {
	addTime, recoveryTime metric.Float64Histogram
	bookieErrors          metric.Int64Counter
	ensembleChanges       metric.Int64Counter
	recoveries            metric.Int64Counter
	fallbacks             metric.Int64Counter
	damaged               metric.Int64Counter

	addEntries, addBytes, addFailed atomic.Int64
	collecting                      metric.Registration

	// opts caches attribute sets by their values.
	opts sync.Map // attrKey → metric.MeasurementOption

	tracer trace.Tracer // nil: no spans (no provider, or a no-op one)
}

// attrKey names a cached attribute set: the instrument and up to three
// values.
type attrKey struct{ metric, a, b, c string }

func newMeters(cfg Config, stats *clientStats) (*meters, error) {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter("github.com/sluicemq/sluice/bookkeeper/client")
	ms := &meters{}
	if tp := cfg.TracerProvider; tp != nil {
		if _, noop := tp.(tracenoop.TracerProvider); !noop {
			ms.tracer = tp.Tracer("github.com/sluicemq/sluice/bookkeeper/client")
		}
	}
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	hist := func(name, desc string, bounds []float64) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		return h
	}
	var insts []metric.Observable
	ocounter := func(name, unit, desc string) metric.Int64ObservableCounter {
		if err != nil {
			return nil
		}
		var c metric.Int64ObservableCounter
		c, err = m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		insts = append(insts, c)
		return c
	}
	ms.addTime = hist(metricAddDuration, "appends from the writer taking them to their acknowledgement (Qa bookies fsynced it and every earlier entry)", addBuckets)
	ms.recoveryTime = hist(metricRecoveryDuration, "Recover calls, by outcome (recovered, already_closed, failed)", recoveryBuckets)
	ms.bookieErrors = counter(metricBookieErrors, "{error}", "requests a bookie failed, by bookie, op (add, read, fence) and reason (timeout, unavailable, rejected, fenced, unauthorized, error, checksum)")
	ms.ensembleChanges = counter(metricEnsembleChanges, "{bookie}", "bookies replaced in a writer's ensemble, by the reason the bookie failed (timeout, unavailable, rejected, error) and result (replaced, rejoined; failed attempts, retried, as failed)")
	ms.recoveries = counter(metricRecoveries, "{recovery}", "Recover calls, by outcome (recovered, already_closed, failed)")
	ms.fallbacks = counter(metricReadFallbacks, "{read}", "entry reads sent to another copy, by reason (speculative, error, checksum, no_entry)")
	ms.damaged = counter(metricDamagedCopies, "{copy}", "damaged copies of closed ledgers found by reads, by reason (missing, checksum) and result (marked in the catalog; dropped on a full queue)")
	addEntries := ocounter(metricAddEntries, "{entry}", "appends acknowledged")
	addBytes := ocounter(metricAddBytes, "By", "payload bytes of the appends acknowledged")
	addFailed := ocounter(metricAddFailed, "{entry}", "appends that failed (their callback got an error)")
	created := ocounter(metricLedgersCreated, "{ledger}", "ledgers created")
	closed := ocounter(metricLedgersClosed, "{ledger}", "ledgers sealed by their writer")
	streams := ocounter(metricStreamsOpened, "{stream}", "AddEntries streams opened (shared per bookie, and a recovery's own; many mean streams keep breaking)")
	if err != nil {
		return nil, err
	}
	if cfg.MeterProvider != nil {
		ms.collecting, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(addEntries, ms.addEntries.Load())
			o.ObserveInt64(addBytes, ms.addBytes.Load())
			o.ObserveInt64(addFailed, ms.addFailed.Load())
			o.ObserveInt64(created, stats.ledgersCreated.Load())
			o.ObserveInt64(closed, stats.ledgersClosed.Load())
			o.ObserveInt64(streams, stats.streamsOpened.Load())
			return nil
		}, insts...)
	}
	return ms, err
}

// opt returns the cached attribute set of instrument inst for kv (key, value,
// ...; at most three pairs), building it on first use.
func (ms *meters) opt(inst string, kv ...string) metric.MeasurementOption {
	key := attrKey{metric: inst}
	vals := [3]*string{&key.a, &key.b, &key.c}
	for i := 1; i < len(kv); i += 2 {
		*vals[i/2] = kv[i]
	}
	if o, ok := ms.opts.Load(key); ok {
		return o.(metric.MeasurementOption)
	}
	kvs := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		kvs = append(kvs, attribute.String(kv[i], kv[i+1]))
	}
	o, _ := ms.opts.LoadOrStore(key, metric.WithAttributeSet(attribute.NewSet(kvs...)))
	return o.(metric.MeasurementOption)
}

// bookieError counts n failed requests of op to bookie for reason.
func (ms *meters) bookieError(bookie, op, reason string, n int) {
	if n > 0 {
		ms.bookieErrors.Add(context.Background(), int64(n), ms.opt(metricBookieErrors, "bookie", bookie, "op", op, "reason", reason))
	}
}

// ensembleChange counts one bookie's replacement attempt.
func (ms *meters) ensembleChange(reason, result string) {
	ms.ensembleChanges.Add(context.Background(), 1, ms.opt(metricEnsembleChanges, "reason", reason, "result", result))
}

// fallback counts an entry read sent to another copy.
func (ms *meters) fallback(reason string) {
	ms.fallbacks.Add(context.Background(), 1, ms.opt(metricReadFallbacks, "reason", reason))
}

// damage counts a damaged copy marked or dropped.
func (ms *meters) damage(why catalog.DamageReason, result string) {
	ms.damaged.Add(context.Background(), 1, ms.opt(metricDamagedCopies, "reason", string(why), "result", result))
}

// recovered records one Recover call.
func (ms *meters) recovered(start time.Time, outcome string) {
	o := ms.opt(metricRecoveries, "outcome", outcome)
	ms.recoveries.Add(context.Background(), 1, o)
	ms.recoveryTime.Record(context.Background(), time.Since(start).Seconds(), o)
}

// acked records an append acknowledged after d.
func (ms *meters) acked(d time.Duration, bytes int) {
	ms.addEntries.Add(1)
	ms.addBytes.Add(int64(bytes))
	ms.addTime.Record(context.Background(), d.Seconds())
}

// startAdd starts an append's span when the caller's context is traced
// (never a root span: a trace per entry of an untraced producer would
// swamp any backend) and the client has a tracer. It returns nil
// otherwise, and then nothing else is done for the append.
func (ms *meters) startAdd(ctx context.Context, id catalog.LedgerID, bytes int) trace.Span {
	if ms.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	_, span := ms.tracer.Start(ctx, SpanAdd, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrLedger.Int64(int64(id)), attrEntryBytes.Int(bytes)))
	if !span.IsRecording() {
		span.End()
		return nil
	}
	return span
}

// startRecover starts a Recover's span when ctx is traced (as startAdd);
// ctx unchanged and nil otherwise.
func (ms *meters) startRecover(ctx context.Context, id catalog.LedgerID) (context.Context, trace.Span) {
	if ms.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	return ms.tracer.Start(ctx, SpanRecover, trace.WithAttributes(attrLedger.Int64(int64(id))))
}

// traceContext is what an append's adds carry (Add.trace_context): its
// span's context when sampled, so bookies continue the trace; nil
// otherwise.
func traceContext(span trace.Span) []byte {
	if span == nil || !span.SpanContext().IsSampled() {
		return nil
	}
	return wire.AppendTraceContext(make([]byte, 0, wire.TraceContextSize), span.SpanContext())
}

// endSpan ends a span (nil: nothing), with err as its status.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// noteAnswer adds a bookie's answer to an append's span (recording spans
// only: the caller checked span != nil).
func noteAnswer(span trace.Span, ev ledger.Event) {
	switch e := ev.(type) {
	case ledger.AddAcked:
		span.AddEvent("bookie acknowledged", trace.WithAttributes(attrBookie.String(e.Bookie)))
	case ledger.AddFailed:
		span.AddEvent("bookie failed", trace.WithAttributes(attrBookie.String(e.Bookie), attrOutcome.String(e.Reason.String())))
	}
}
