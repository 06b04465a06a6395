package ingest

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/sluicemq/sluice/pkg/record"
)

// Metric names, in one place (docs/metrics.md lists them with their
// Prometheus names, the dots becoming underscores).
const (
	metricRecords       = "sluice.ingest.records"
	metricBytes         = "sluice.ingest.bytes"
	metricProduceTime   = "sluice.ingest.produce.duration"
	metricProduceErrors = "sluice.ingest.produce.errors"
	metricThrottled     = "sluice.ingest.throttled"
	metricThrottleTime  = "sluice.ingest.throttle.time"
	metricBuffered      = "sluice.ingest.buffered"
	metricBufferLimit   = "sluice.ingest.buffered.limit"
	metricOwned         = "sluice.ingest.partitions.owned"
	metricAcquisitions  = "sluice.ingest.partition.acquisitions"
	metricTxnEnded      = "sluice.ingest.transactions"
	metricTxnEndTime    = "sluice.ingest.transaction.end.duration"
)

// latencyBounds are the produce and EndTxn histograms' buckets, in
// seconds: 0.5 ms to 10 s, dense where acknowledgements land (1-50 ms).
var latencyBounds = []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1, 2, 5, 10}

// meters are ingest's instruments. Per-topic counters carry the topic's
// name ("topic"): a deployment's topics are the cardinality, as in
// Kafka's per-topic broker metrics.
type meters struct {
	records, bytes  metric.Int64Counter
	produceTime     metric.Float64Histogram
	produceErrors   metric.Int64Counter
	throttled       metric.Int64Counter
	throttleTime    metric.Float64Counter
	acquisitions    metric.Int64Counter
	txnEnded        metric.Int64Counter
	txnEndTime      metric.Float64Histogram
	registration    metric.Registration
	ok, error       metric.MeasurementOption
	commit, aborted metric.MeasurementOption
	// topics caches each topic's attribute option, so counting a request
	// allocates nothing once its topic was seen.
	topics sync.Map // string → metric.MeasurementOption
}

// newMeters builds the instruments on mp (a no-op provider when nil) and
// registers the gauges read from s at each collection.
func newMeters(mp metric.MeterProvider, s *Service) (*meters, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/sluicemq/sluice/services/ingest")
	ms := &meters{
		ok:      metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "ok"))),
		error:   metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "error"))),
		commit:  metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "commit"))),
		aborted: metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "abort"))),
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
	hist := func(name, desc string) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(latencyBounds...))
		return h
	}
	ms.records = counter(metricRecords, "{record}", "records acknowledged to producers, by topic (counted by the copy the producer called)")
	ms.bytes = counter(metricBytes, "By", "record-batch bytes acknowledged to producers, by topic")
	ms.produceErrors = counter(metricProduceErrors, "{request}", "produce requests answered with an error, by code")
	ms.throttled = counter(metricThrottled, "{request}", "produce requests delayed by a byte-rate quota")
	ms.acquisitions = counter(metricAcquisitions, "{partition}", "partitions this copy took the writer lease of, by outcome (error: the takeover failed)")
	ms.txnEnded = counter(metricTxnEnded, "{transaction}", "transactions ended by EndTxn or CommitTxn through this copy, by outcome")
	ms.produceTime = hist(metricProduceTime, "from a produce request's arrival to its answer (durable on the ack quorum; forwarding included; quota delay excluded)")
	ms.txnEndTime = hist(metricTxnEndTime, "EndTxn and CommitTxn: from the arrival to the answer (CommitTxn's batches stored, the decision stored, the markers written)")
	if err != nil {
		return nil, err
	}
	if ms.throttleTime, err = m.Float64Counter(metricThrottleTime, metric.WithUnit("s"),
		metric.WithDescription("time produce answers were delayed by byte-rate quotas")); err != nil {
		return nil, err
	}
	buffered, err := m.Int64ObservableGauge(metricBuffered, metric.WithUnit("By"),
		metric.WithDescription("bytes of produce requests received and not yet answered (the buffer budget in use)"))
	if err != nil {
		return nil, err
	}
	limit, err := m.Int64ObservableGauge(metricBufferLimit, metric.WithUnit("By"),
		metric.WithDescription("the buffer budget (max_buffered_bytes); requests beyond it wait, then are refused RESOURCE_EXHAUSTED"))
	if err != nil {
		return nil, err
	}
	owned, err := m.Int64ObservableGauge(metricOwned, metric.WithUnit("{partition}"),
		metric.WithDescription("partitions this copy writes (holds the writer lease of)"))
	if err != nil {
		return nil, err
	}
	ms.registration, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(buffered, s.buffered.inUse())
		o.ObserveInt64(limit, s.cfg.MaxBufferedBytes)
		o.ObserveInt64(owned, int64(s.ownedPartitions()))
		return nil
	}, buffered, limit, owned)
	if err != nil {
		return nil, err
	}
	// Counters start at zero rather than appearing on the first event, so
	// rates and alerts work from the first scrape.
	ctx := context.Background()
	for _, o := range []metric.AddOption{ms.ok, ms.error} {
		ms.acquisitions.Add(ctx, 0, o)
	}
	ms.throttled.Add(ctx, 0)
	ms.throttleTime.Add(ctx, 0)
	ms.txnEnded.Add(ctx, 0, ms.commit)
	ms.txnEnded.Add(ctx, 0, ms.aborted)
	return ms, nil
}

// topic is the attribute option of a topic's measurements.
func (ms *meters) topic(name string) metric.MeasurementOption {
	if o, ok := ms.topics.Load(name); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := ms.topics.LoadOrStore(name, metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", name))))
	return o.(metric.MeasurementOption)
}

// forgetTopic drops a deleted topic's cached attributes.
func (ms *meters) forgetTopic(name string) { ms.topics.Delete(name) }

// acked counts a produce request acknowledged, at the copy its producer
// called (a forwarded request was counted there).
func (ms *meters) acked(ctx context.Context, pl *plan, since time.Time, forwarded bool) {
	if forwarded {
		return
	}
	ms.produceTime.Record(ctx, time.Since(since).Seconds())
	for ; pl != nil; pl = pl.dlq {
		recs, n := pl.counts()
		o := ms.topic(pl.topic.Name)
		ms.records.Add(ctx, recs, o)
		ms.bytes.Add(ctx, n, o)
	}
}

// failed counts a produce request answered with err, at the copy its
// producer called.
func (ms *meters) failed(ctx context.Context, forwarded bool, err error) {
	if !forwarded {
		ms.produceErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("code", connect.CodeOf(err).String())))
	}
}

// throttledFor counts a quota's delay of an answer.
func (ms *meters) throttledFor(ctx context.Context, d time.Duration) {
	ms.throttled.Add(ctx, 1)
	ms.throttleTime.Add(ctx, d.Seconds())
}

// txnEnd counts an EndTxn or CommitTxn answered (err nil) after since.
func (ms *meters) txnEnd(ctx context.Context, commit bool, since time.Time) {
	o := ms.aborted
	if commit {
		o = ms.commit
	}
	ms.txnEnded.Add(ctx, 1, o)
	ms.txnEndTime.Record(ctx, time.Since(since).Seconds())
}

// acquired counts a partition takeover's outcome.
func (ms *meters) acquired(ctx context.Context, err error) {
	o := ms.ok
	if err != nil {
		o = ms.error
	}
	ms.acquisitions.Add(ctx, 1, o)
}

// counts is the number of records and batch bytes of the plan's batches
// (its dead letters' are their own plan's).
func (pl *plan) counts() (records, bytes int64) {
	for _, pp := range pl.parts {
		for _, b := range pp.batches {
			records += int64(record.Batch(b).RecordCount())
			bytes += int64(len(b))
		}
	}
	return records, bytes
}

// ownedPartitions counts the slots holding a writer (a slot's w and err
// are set before its ready channel closes, and read only after).
func (s *Service) ownedPartitions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sl := range s.writers {
		select {
		case <-sl.ready:
			if sl.err == nil && sl.w != nil {
				n++
			}
		default:
		}
	}
	return n
}
