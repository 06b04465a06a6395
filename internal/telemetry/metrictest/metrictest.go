// Package metrictest reads what a component recorded on an OpenTelemetry
// meter provider, for tests: a provider over a manual reader, and lookups
// of one instrument's value for one attribute set.
package metrictest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader collects a provider's metrics on demand.
type Reader struct {
	t      testing.TB
	reader *sdkmetric.ManualReader
	// Provider is what the component under test records on.
	Provider *sdkmetric.MeterProvider
}

// New returns a Reader and its provider, shut down when the test ends.
func New(t testing.TB) *Reader {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &Reader{t: t, reader: r, Provider: mp}
}

// Point is one series of an instrument: its value (a sum's or gauge's),
// or its count and sum (a histogram's).
type Point struct {
	Value      float64
	Count      uint64
	Sum        float64
	Attributes attribute.Set
}

// Points collects the series of the instrument named name (nil if it
// recorded nothing).
func (r *Reader) Points(name string) []Point {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.t.Fatalf("collect metrics: %v", err)
	}
	var out []Point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Value: float64(p.Value), Attributes: p.Attributes})
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Value: p.Value, Attributes: p.Attributes})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Value: float64(p.Value), Attributes: p.Attributes})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Value: p.Value, Attributes: p.Attributes})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Count: p.Count, Sum: p.Sum, Attributes: p.Attributes})
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Count: p.Count, Sum: float64(p.Sum), Attributes: p.Attributes})
				}
			default:
				r.t.Fatalf("metric %s: data of type %T not handled", name, m.Data)
			}
		}
	}
	return out
}

// Find returns the series of name whose attributes include every one of
// attrs, summed (values, counts and sums); ok false when there is none.
func (r *Reader) Find(name string, attrs ...attribute.KeyValue) (Point, bool) {
	r.t.Helper()
	var sum Point
	found := false
	for _, p := range r.Points(name) {
		match := true
		for _, a := range attrs {
			if v, ok := p.Attributes.Value(a.Key); !ok || v != a.Value {
				match = false
				break
			}
		}
		if match {
			found = true
			sum.Value += p.Value
			sum.Count += p.Count
			sum.Sum += p.Sum
		}
	}
	return sum, found
}

// Value is Find's value, failing the test when there is no such series.
func (r *Reader) Value(name string, attrs ...attribute.KeyValue) float64 {
	r.t.Helper()
	p, ok := r.Find(name, attrs...)
	if !ok {
		r.t.Fatalf("metric %s%v: no series", name, attrs)
	}
	return p.Value
}

// Count is Find's histogram count, failing the test when there is no such
// series.
func (r *Reader) Count(name string, attrs ...attribute.KeyValue) uint64 {
	r.t.Helper()
	p, ok := r.Find(name, attrs...)
	if !ok {
		r.t.Fatalf("metric %s%v: no series", name, attrs)
	}
	return p.Count
}
