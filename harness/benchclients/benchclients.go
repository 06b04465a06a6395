// Package benchclients runs Go benchmarks of a call made by N concurrent
// clients and reports what such benchmarks need beyond ns/op: throughput
// (ops/s), nearest-rank p50/p99 latency of the call and of parts of it, and
// per-call counts. The metadata benchmarks of pkg/catalog and
// pkg/bookkeeping use it against their embedded and real backends.
//
// It is test support (harness/README.md): only benchmarks (_test.go
// files) import it.
package benchclients

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Timed is a hook around the timed phase of a run: it is called after the
// warm-up, just before timing starts, and returns the function called with
// b.N once timing ends (e.g. to report requests/op from a request meter).
type Timed func() (end func(n int))

// WarmupCalls is how many untimed calls each client makes before the timed
// phase of every run, so first connections and cold caches stay out of a
// short run's p99.
const WarmupCalls = 2

// Client is one client goroutine: its index, its own random source, the
// latencies of the parts of a call it timed itself (Time), and the events it
// counted (Count).
type Client struct {
	ID   int
	Rand *rand.Rand

	parts  map[string][]time.Duration
	counts map[string]int
}

// Count counts one event of a kind, reported as <kind>/op.
func (bc *Client) Count(kind string) { bc.counts[kind]++ }

// Time runs f and records its latency under part.
func (bc *Client) Time(part string, f func() error) error {
	t0 := time.Now()
	err := f()
	bc.parts[part] = append(bc.parts[part], time.Since(t0))
	return err
}

// Run makes WarmupCalls untimed calls of op per client, then b.N
// timed calls spread over clients goroutines that take calls from a shared
// counter, and reports:
//
//	ops/s             calls completed per second of wall time, all clients together
//	p50-ms p99-ms     latency of one call (nearest rank)
//	<part>-p50-ms …   latency of a part the call timed itself (Client.Time)
//	<kind>/op         events the call counted (Client.Count), per call
//	…                 whatever the Timed hook reports
//
// ns/op is suppressed: with several clients it is 1/throughput, not
// latency. op(bc) is only ever called from bc's goroutine, so state indexed
// by bc.ID needs no lock. Any error stops the benchmark: the calls here
// never fail when the benchmark is right. It returns ops/s, for metrics
// derived from it.
func Run(b *testing.B, clients int, op func(bc *Client) error, hooks ...Timed) float64 {
	b.Helper()
	bcs := make([]*Client, clients)
	for i := range bcs {
		bcs[i] = &Client{ID: i, Rand: rand.New(rand.NewPCG(uint64(i), 42)),
			parts: map[string][]time.Duration{}, counts: map[string]int{}}
	}
	callClients(b, bcs, clients*WarmupCalls, op)
	for _, bc := range bcs {
		clear(bc.parts)
		clear(bc.counts)
	}
	var ends []func(n int)
	for _, h := range hooks {
		ends = append(ends, h())
	}
	b.ResetTimer()
	elapsed, lat := callClients(b, bcs, b.N, op)
	b.StopTimer()
	for _, end := range ends {
		end(b.N)
	}

	ops := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ops, "ops/s")
	reportLatency(b, "", lat)
	parts := map[string][]time.Duration{}
	counts := map[string]int{}
	for _, bc := range bcs {
		for name, ds := range bc.parts {
			parts[name] = append(parts[name], ds...)
		}
		for kind, k := range bc.counts {
			counts[kind] += k
		}
	}
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		reportLatency(b, name+"-", parts[name])
	}
	for _, kind := range slices.Sorted(maps.Keys(counts)) {
		b.ReportMetric(float64(counts[kind])/float64(b.N), kind+"/op")
	}
	return ops
}

// callClients makes n calls of op over the clients and returns the wall
// time and every call's latency. The first error stops all clients and
// fails the benchmark.
func callClients(b *testing.B, bcs []*Client, n int, op func(bc *Client) error) (time.Duration, []time.Duration) {
	b.Helper()
	var (
		next     atomic.Int64
		stop     atomic.Bool
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, bc := range bcs {
		wg.Go(func() {
			lat := make([]time.Duration, 0, n/len(bcs)+1)
			for !stop.Load() && next.Add(1) <= int64(n) {
				t0 := time.Now()
				err := op(bc)
				lat = append(lat, time.Since(t0))
				if err != nil {
					stop.Store(true)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return elapsed, all
}

// reportLatency reports the nearest-rank p50 and p99 of ds in milliseconds.
func reportLatency(b *testing.B, prefix string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		i := max(int(math.Ceil(q.q*float64(len(ds))))-1, 0)
		b.ReportMetric(float64(ds[i])/float64(time.Millisecond), prefix+q.name+"-ms")
	}
}
