package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Scoped returns a meter provider that records on mp with attrs as the
// instrumentation scope's attributes of every meter it gives, so several
// copies of one component in a process (sluice dev's bookies) keep their
// own series: the Prometheus exporter labels each series with its scope's
// attributes (otel_scope_<key>="value").
func Scoped(mp metric.MeterProvider, attrs ...attribute.KeyValue) metric.MeterProvider {
	if mp == nil {
		return nil
	}
	return scoped{MeterProvider: mp, attrs: attrs}
}

type scoped struct {
	metric.MeterProvider
	attrs []attribute.KeyValue
}

func (s scoped) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return s.MeterProvider.Meter(name, append(opts[:len(opts):len(opts)], metric.WithInstrumentationAttributes(s.attrs...))...)
}
