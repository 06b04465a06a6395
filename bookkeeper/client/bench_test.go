package client

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/bookkeeper/internal/metrictest"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// BenchmarkAppend measures the whole add path — client, shared AddEntries
// streams, three real bookies on in-memory disks over loopback h2c, their
// journals' group commits — with 256 appends of 1 KiB in flight: ns/op is
// the cost of one append (Qw=3 adds) in throughput, allocs/op what it
// allocates in the client and the bookies together. Variants: plain (no
// providers), metrics (SDK meter providers on the client and the bookies)
// and traced (metrics, and an always-sampling tracer with every append in
// a traced context: a client span and three bookie spans each).
func BenchmarkAppend(b *testing.B) {
	for _, v := range []struct {
		name            string
		metrics, traced bool
	}{{"plain", false, false}, {"metrics", true, false}, {"traced", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			var mp metric.MeterProvider
			if v.metrics {
				mp = metrictest.New(b).Provider
			}
			var tp trace.TracerProvider
			ctx := context.Background()
			if v.traced {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}))
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
				var span trace.Span
				ctx, span = sdk.Tracer("bench").Start(ctx, "produce")
				defer span.End()
			}
			cl := newCluster(b, 0)
			cl.bookieMeters, cl.bookieTracer = mp, tp
			for _, id := range []string{"b1", "b2", "b3"} {
				cl.startBookie(id)
			}
			c := cl.client(b, func(cfg *Config) { cfg.MeterProvider, cfg.TracerProvider = mp, tp })
			benchAppend(b, c, ctx)
		})
	}
}

func benchAppend(b *testing.B, c *Client, ctx context.Context) {
	w, err := c.CreateLedger(ctxT(b), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 1024)
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	done := func(_ int64, err error) {
		if err != nil {
			b.Error(err)
		}
		<-sem
		wg.Done()
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for range b.N {
		sem <- struct{}{}
		wg.Add(1)
		if err := w.AppendAsyncContext(ctx, p, done); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	if _, err := w.Close(ctxT(b), 100+int64(b.N)-1); err != nil {
		b.Fatal(err)
	}
}

// discardSpans ends spans without keeping them (a recorder would grow
// with b.N).
type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }

// BenchmarkAckedMetrics is what an acknowledged append costs in metrics
// alone (two atomics and a histogram value), with an SDK meter provider
// and without one.
func BenchmarkAckedMetrics(b *testing.B) {
	for _, v := range []struct {
		name string
		sdk  bool
	}{{"noop", false}, {"sdk", true}} {
		b.Run(v.name, func(b *testing.B) {
			var cfg Config
			if v.sdk {
				cfg.MeterProvider = metrictest.New(b).Provider
			}
			ms, err := newMeters(cfg, &clientStats{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for range b.N {
				ms.acked(1234567, 1024)
			}
		})
	}
}
