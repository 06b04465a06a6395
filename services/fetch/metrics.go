package fetch

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// Metric names of the read path, in one place (docs/metrics.md lists them
// with their Prometheus names; the trigger runtime's are in
// trigger_metrics.go).
const (
	metricRecords      = "sluice.fetch.records"
	metricBytes        = "sluice.fetch.bytes"
	metricDeliveryAge  = "sluice.fetch.delivery.age"
	metricThrottled    = "sluice.fetch.throttled"
	metricThrottleTime = "sluice.fetch.throttle.time"
	metricSessions     = "sluice.fetch.sessions"
	metricLeases       = "sluice.fetch.group.lease.acquisitions"
	metricGroupLag     = "sluice.fetch.group.lag"
)

// DefaultLagInterval is how often a copy measures the lag of the groups
// its sessions belong to (Config.LagInterval).
const DefaultLagInterval = 15 * time.Second

// ageBounds are the delivery age histogram's buckets, in seconds: 1 ms
// (a reader at the tail) to an hour (a reader far behind).
var ageBounds = []float64{0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60, 300, 3600}

// meters are the read path's instruments. Per-topic counters carry the
// topic's name ("topic"), per-group ones the group's ("group"): as many
// series as the deployment has topics and groups.
type meters struct {
	records, bytes metric.Int64Counter
	age            metric.Float64Histogram
	throttled      metric.Int64Counter
	throttleTime   metric.Float64Counter
	leases         metric.Int64Counter
	registration   metric.Registration
	fetch, session metric.MeasurementOption // the "via" of a delivery's age

	topics sync.Map // topic name → metric.MeasurementOption

	lagMu sync.Mutex
	lag   map[groupTopic]int64 // the last measurement (measureLag)
}

type groupTopic struct{ group, topic string }

func newMeters(mp metric.MeterProvider, s *Service) (*meters, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/sluicemq/sluice/services/fetch")
	ms := &meters{
		fetch:   metric.WithAttributeSet(attribute.NewSet(attribute.String("via", "fetch"))),
		session: metric.WithAttributeSet(attribute.NewSet(attribute.String("via", "subscribe"))),
		lag:     map[groupTopic]int64{},
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
	ms.records = counter(metricRecords, "{record}", "records delivered to consumers (Fetch and Subscribe), by topic")
	ms.bytes = counter(metricBytes, "By", "bytes delivered to consumers (records' sizes, or stored batches'), by topic")
	ms.throttled = counter(metricThrottled, "{delivery}", "Fetch answers and session deliveries delayed by a byte-rate quota")
	ms.leases = counter(metricLeases, "{lease}", "partition leases acquired by the group members of this copy's sessions, by group (each one a partition moving to a member)")
	if err != nil {
		return nil, err
	}
	if ms.age, err = m.Float64Histogram(metricDeliveryAge, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(ageBounds...),
		metric.WithDescription("age of the oldest record of each delivery by its timestamp: the end-to-end latency for readers at the tail, how far behind for others; by via (fetch, subscribe)")); err != nil {
		return nil, err
	}
	if ms.throttleTime, err = m.Float64Counter(metricThrottleTime, metric.WithUnit("s"),
		metric.WithDescription("time deliveries were delayed by byte-rate quotas")); err != nil {
		return nil, err
	}
	sessions, err := m.Int64ObservableGauge(metricSessions, metric.WithUnit("{session}"),
		metric.WithDescription("open Subscribe sessions (group members) on this copy"))
	if err != nil {
		return nil, err
	}
	lag, err := m.Int64ObservableGauge(metricGroupLag, metric.WithUnit("{record}"),
		metric.WithDescription("records between the committed offset and the high watermark, summed over the partitions leased to this copy's members, by group and topic (sum over copies for the group's lag)"))
	if err != nil {
		return nil, err
	}
	ms.registration, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(sessions, int64(s.openSessions()))
		ms.lagMu.Lock()
		defer ms.lagMu.Unlock()
		for k, v := range ms.lag {
			o.ObserveInt64(lag, v, metric.WithAttributes(attribute.String("group", k.group), attribute.String("topic", k.topic)))
		}
		return nil
	}, sessions, lag)
	if err != nil {
		return nil, err
	}
	ms.throttled.Add(context.Background(), 0)
	ms.throttleTime.Add(context.Background(), 0)
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

// delivered counts a read's records handed to a consumer, via Fetch
// (session false) or a session.
func (ms *meters) delivered(ctx context.Context, topic string, res partlog.Result, session bool, now time.Time) {
	if res.Count == 0 {
		return
	}
	o := ms.topic(topic)
	ms.records.Add(ctx, int64(res.Count), o)
	ms.bytes.Add(ctx, int64(res.Bytes), o)
	if ts, ok := oldestTimestamp(res); ok {
		via := ms.fetch
		if session {
			via = ms.session
		}
		ms.age.Record(ctx, max(now.Sub(time.UnixMilli(ts)).Seconds(), 0), via)
	}
}

// oldestTimestamp is the timestamp (ms) of a read's first record, or of
// its first stored batch's first record (which may precede the offset
// read from: batch granularity).
func oldestTimestamp(res partlog.Result) (int64, bool) {
	switch {
	case len(res.Records) > 0:
		return res.Records[0].Timestamp, true
	case len(res.Batches) > 0 && len(res.Batches[0]) >= record.HeaderSize:
		return record.Batch(res.Batches[0]).BaseTimestamp(), true
	}
	return 0, false
}

// throttledFor counts a quota's delay of a delivery.
func (ms *meters) throttledFor(ctx context.Context, d time.Duration) {
	ms.throttled.Add(ctx, 1)
	ms.throttleTime.Add(ctx, d.Seconds())
}

// leaseAcquired counts a partition lease a member of group took.
func (ms *meters) leaseAcquired(ctx context.Context, group string) {
	ms.leases.Add(ctx, 1, metric.WithAttributes(attribute.String("group", group)))
}

// openSessions counts the sessions this copy serves.
func (s *Service) openSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// runLag measures the groups' lag every Config.LagInterval until ctx
// ends.
func (s *Service) runLag(ctx context.Context) {
	t := time.NewTicker(s.cfg.LagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.measureLag(ctx)
		}
	}
}

// measureLag computes, for each group and topic this copy's sessions
// consume, the lag of the partitions leased to those sessions' members:
// one ListLeases per group and topic, the bounds as DescribeGroup reads
// them. A group and topic whose leases could not be listed keep their
// last value; those no session consumes any more are dropped.
func (s *Service) measureLag(ctx context.Context) {
	members := map[groupTopic]map[string]bool{}
	s.mu.Lock()
	for _, ss := range s.sessions {
		for _, t := range ss.topics {
			k := groupTopic{ss.group, t}
			if members[k] == nil {
				members[k] = map[string]bool{}
			}
			members[k][ss.memberID] = true
		}
	}
	s.mu.Unlock()
	next := make(map[groupTopic]int64, len(members))
	s.m.lagMu.Lock()
	for k := range members {
		if v, ok := s.m.lag[k]; ok {
			next[k] = v
		}
	}
	s.m.lagMu.Unlock()
	for k, ids := range members {
		leases, err := s.d.Bookkeeping.ListLeases(ctx, k.group, k.topic)
		if err != nil {
			continue
		}
		var mu sync.Mutex
		var sum int64
		var mine []int
		for i, l := range leases {
			if ids[l.Owner] {
				mine = append(mine, i)
			}
		}
		s.lagBounds(ctx, len(mine), func(i int) (string, int32, int64) {
			l := leases[mine[i]]
			return k.topic, l.Partition, l.Offset
		}, func(i int, b partlog.LagBounds) {
			from := leases[mine[i]].Offset
			if from < 0 {
				from = b.Start
			}
			mu.Lock()
			sum += max(b.End-from, 0)
			mu.Unlock()
		})
		next[k] = sum
	}
	s.m.lagMu.Lock()
	s.m.lag = next
	s.m.lagMu.Unlock()
}
