package loadgen

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range and precision: microseconds from 1 µs to 1 hour, 3
// significant digits (a value is reported within 0.1%). A latency above an
// hour is recorded as an hour (and shows as max = 3600000 ms).
const (
	histMinMicros = 1
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histDigits    = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)
}

// recorder collects latencies from concurrent callbacks into two HDR
// histograms: the measured window's (for the result) and the current
// progress period's (reset at every progress line). One recorder per
// producer or consumer keeps lock contention low; they are merged for
// reporting.
type recorder struct {
	mu     sync.Mutex
	window *hdrhistogram.Histogram // latencies of messages intended inside the measured window
	period *hdrhistogram.Histogram // every latency since the last takePeriod
}

func newRecorder() *recorder { return &recorder{window: newHist(), period: newHist()} }

// record adds one latency; inWindow says whether the message belongs to the
// measured window.
func (r *recorder) record(d time.Duration, inWindow bool) {
	us := min(max(d.Microseconds(), 0), histMaxMicros)
	r.mu.Lock()
	// Values are clamped to the histogram's range, so RecordValue cannot fail.
	_ = r.period.RecordValue(us)
	if inWindow {
		_ = r.window.RecordValue(us)
	}
	r.mu.Unlock()
}

// takePeriod merges the period histogram into into and resets it.
func (r *recorder) takePeriod(into *hdrhistogram.Histogram) {
	r.mu.Lock()
	into.Merge(r.period)
	r.period.Reset()
	r.mu.Unlock()
}

// mergeWindow merges the window histogram into into.
func (r *recorder) mergeWindow(into *hdrhistogram.Histogram) {
	r.mu.Lock()
	into.Merge(r.window)
	r.mu.Unlock()
}

// LatencySummary is the OMB-style summary of one latency distribution, in
// milliseconds.
type LatencySummary struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
}

// summarize reports h (microseconds) in milliseconds. Percentiles are the
// histogram's value at that percentile (the highest value equivalent to it
// at 3 significant digits): never below the true value.
func summarize(h *hdrhistogram.Histogram) LatencySummary {
	if h.TotalCount() == 0 {
		return LatencySummary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencySummary{
		Count:  h.TotalCount(),
		MeanMs: h.Mean() / 1000,
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}
