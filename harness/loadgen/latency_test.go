package loadgen

import (
	"math"
	"testing"
	"time"
)

func TestSummarizeReportsPercentiles(t *testing.T) {
	r := newRecorder()
	// 1..1000 ms, one each, inside the window; 10 s latencies outside it.
	for i := 1; i <= 1000; i++ {
		r.record(time.Duration(i)*time.Millisecond, true)
		r.record(10*time.Second, false)
	}
	h := newHist()
	r.mergeWindow(h)
	s := summarize(h)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*0.001+0.001 {
			t.Errorf("%s = %v, want %v (±0.1%%)", name, got, want)
		}
	}
	if s.Count != 1000 {
		t.Fatalf("count %d, want 1000 (window only)", s.Count)
	}
	near("p50", s.P50Ms, 500)
	near("p99", s.P99Ms, 990)
	near("p99.9", s.P999Ms, 999)
	near("max", s.MaxMs, 1000)
	near("mean", s.MeanMs, 500.5)

	// The period histogram has everything and empties when taken.
	p := newHist()
	r.takePeriod(p)
	if p.TotalCount() != 2000 {
		t.Fatalf("period count %d, want 2000", p.TotalCount())
	}
	p.Reset()
	r.takePeriod(p)
	if p.TotalCount() != 0 {
		t.Fatal("period not reset")
	}
}

func TestRecorderClampsOutOfRange(t *testing.T) {
	r := newRecorder()
	r.record(-time.Millisecond, true) // clocks differ by a hair: 0, not an error
	r.record(3*time.Hour, true)       // beyond the range: recorded as the range's top
	h := newHist()
	r.mergeWindow(h)
	s := summarize(h)
	if s.Count != 2 || s.MaxMs < 3_600_000*0.999 || s.MaxMs > 3_600_000*1.001 {
		t.Fatalf("summary %+v", s)
	}
	if (summarize(newHist()) != LatencySummary{}) {
		t.Fatal("empty histogram should summarize to zeros")
	}
}
