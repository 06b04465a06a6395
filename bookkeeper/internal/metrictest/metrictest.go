// Package metrictest reads what an OpenTelemetry meter provider recorded,
// for the bookkeeper packages' metric tests: a real SDK provider with a
// manual reader, collected on demand, and lookups by instrument name and
// attributes. Test support only (imported by _test.go files).
package metrictest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader is a meter provider and its manual reader.
type Reader struct {
	Provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

// New returns a Reader whose provider is shut down when t ends.
func New(t testing.TB) *Reader {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &Reader{Provider: mp, reader: r}
}

// Snapshot is one collection.
type Snapshot struct {
	t       testing.TB
	metrics map[string]metricdata.Aggregation
}

// Collect collects every instrument now.
func (r *Reader) Collect(t testing.TB) Snapshot {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	s := Snapshot{t: t, metrics: map[string]metricdata.Aggregation{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			s.metrics[m.Name] = m.Data
		}
	}
	return s
}

// Has reports whether the instrument name reported anything.
func (s Snapshot) Has(name string) bool {
	_, ok := s.metrics[name]
	return ok
}

// Names lists the instruments that reported.
func (s Snapshot) Names() []string {
	out := make([]string, 0, len(s.metrics))
	for n := range s.metrics {
		out = append(out, n)
	}
	return out
}

// Int is the value of an int64 counter or gauge's point with exactly the
// attributes kv (key, value, key, value...; values are strings), or 0 when
// there is no such point.
func (s Snapshot) Int(name string, kv ...string) int64 {
	s.t.Helper()
	want := set(kv)
	switch d := s.metrics[name].(type) {
	case nil:
		return 0
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
	default:
		s.t.Fatalf("metric %s is a %T, not an int64 counter or gauge", name, d)
	}
	return 0
}

// IntSum is the sum of an int64 counter's points over every attribute set.
func (s Snapshot) IntSum(name string) int64 {
	s.t.Helper()
	d, ok := s.metrics[name].(metricdata.Sum[int64])
	if !ok {
		if s.metrics[name] != nil {
			s.t.Fatalf("metric %s is a %T, not an int64 counter", name, s.metrics[name])
		}
		return 0
	}
	var n int64
	for _, p := range d.DataPoints {
		n += p.Value
	}
	return n
}

// Hist is a histogram point's count and sum (float64 or int64 histogram),
// for the point with exactly the attributes kv; zeros when there is none.
func (s Snapshot) Hist(name string, kv ...string) (count uint64, sum float64) {
	s.t.Helper()
	want := set(kv)
	switch d := s.metrics[name].(type) {
	case nil:
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Count, p.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Count, float64(p.Sum)
			}
		}
	default:
		s.t.Fatalf("metric %s is a %T, not a histogram", name, d)
	}
	return 0, 0
}

func set(kv []string) attribute.Set {
	if len(kv)%2 != 0 {
		panic("metrictest: odd number of key/value strings")
	}
	attrs := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(attrs...)
}
