package fetch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// Trigger metric names, in one place. Every one carries the attribute
// "trigger" (the trigger's name); invocations also "outcome" (success,
// partial, function_error, throttled, transient, rejected).
const (
	metricTriggerInvocations = "sluice.trigger.invocations"
	metricTriggerRecords     = "sluice.trigger.records"
	metricTriggerDuration    = "sluice.trigger.invocation.duration"
	metricTriggerBatchSize   = "sluice.trigger.batch.size"
	metricTriggerDLQ         = "sluice.trigger.dlq.records"
	metricTriggerIterAge     = "sluice.trigger.iterator.age"
)

// triggerMeters are the trigger runtime's instruments.
type triggerMeters struct {
	invocations, records, dlqRecords metric.Int64Counter
	duration, iterAge                metric.Float64Histogram
	batch                            metric.Int64Histogram
}

func newTriggerMeters(mp metric.MeterProvider) (*triggerMeters, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/sluicemq/sluice/services/fetch/triggers")
	var ms triggerMeters
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	hist := func(name, unit, desc string, bounds ...float64) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		return h
	}
	ms.invocations = counter(metricTriggerInvocations, "{invocation}", "function invocations by outcome")
	ms.records = counter(metricTriggerRecords, "{record}", "records in invocations that succeeded (partial failures included)")
	ms.dlqRecords = counter(metricTriggerDLQ, "{record}", "records sent to the trigger's on_failure_topic")
	secs := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}
	ms.duration = hist(metricTriggerDuration, "s", "duration of one Invoke call", secs...)
	ms.iterAge = hist(metricTriggerIterAge, "s", "iterator age: how old the oldest record of an invoked batch was when invoked", secs...)
	if err != nil {
		return nil, err
	}
	ms.batch, err = m.Int64Histogram(metricTriggerBatchSize, metric.WithUnit("{record}"), metric.WithDescription("records per invocation"),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000))
	return &ms, err
}

// invoked records one invocation of n records whose first has timestamp
// firstTs (ms).
func (m *triggerMeters) invoked(ctx context.Context, name string, res trigger.Result, n int, took time.Duration, firstTs int64) {
	outcome := triggerOutcome(res)
	t := metric.WithAttributes(attribute.String("trigger", name))
	m.invocations.Add(ctx, 1, metric.WithAttributes(attribute.String("trigger", name), attribute.String("outcome", outcome)))
	m.duration.Record(ctx, took.Seconds(), t)
	m.batch.Record(ctx, int64(n), t)
	m.iterAge.Record(ctx, max(time.Since(time.UnixMilli(firstTs)).Seconds(), 0), t)
	if res.Outcome == trigger.Success {
		m.records.Add(ctx, int64(n-len(res.Failed)), t)
	}
}

// dlq records n records sent to the DLQ.
func (m *triggerMeters) dlq(ctx context.Context, name string, n int) {
	m.dlqRecords.Add(ctx, int64(n), metric.WithAttributes(attribute.String("trigger", name)))
}

// triggerOutcome names an invocation's outcome for the metric and the span:
// success, partial, function_error, throttled, transient, rejected.
func triggerOutcome(res trigger.Result) string {
	switch res.Outcome {
	case trigger.Success:
		if len(res.Failed) > 0 {
			return "partial"
		}
	case trigger.FunctionError:
		return "function_error"
	case trigger.Throttled:
		return "throttled"
	case trigger.Transient:
		return "transient"
	case trigger.Rejected:
		return "rejected"
	}
	return "success"
}
