package loadgen

import (
	"math"
	"strings"
	"testing"
	"time"
)

// step feeds the search one 2 s step against a system that acknowledges at
// most capacity messages/s.
func stepAgainst(rs *rateSearch, rate, capacity float64) float64 {
	achieved := min(rate, capacity)
	var lag time.Duration
	if rate > capacity {
		lag = time.Second
	}
	return rs.step(SearchSample{Rate: rate, Seconds: 2, Sent: int64(achieved * 2), Acked: int64(achieved * 2),
		Received: int64(achieved * 2), Subs: 1, Lag: lag})
}

func TestRateSearchConvergesBelowCapacity(t *testing.T) {
	for _, capacity := range []float64{800, 25_000, 180_000} {
		rs := newRateSearch(SearchStartRate)
		rate := float64(SearchStartRate)
		for range 40 {
			rate = stepAgainst(rs, rate, capacity)
		}
		got := rs.result()
		if got > capacity || got < 0.85*capacity {
			t.Errorf("capacity %.0f: found %.0f, want within 85-100%%; steps %+v", capacity, got, rs.steps)
		}
	}
}

func TestRateSearchGrowsThenRefines(t *testing.T) {
	rs := newRateSearch(10_000)
	if got := stepAgainst(rs, 10_000, 1e9); got != 15_000 {
		t.Fatalf("after a good step: %v, want ×1.5", got)
	}
	// Overload: back off to 90% of what was achieved, then grow by 5% only.
	if got := stepAgainst(rs, 15_000, 12_000); got != 10_800 {
		t.Fatalf("after an overloaded step: %v, want 10800", got)
	}
	if got := stepAgainst(rs, 10_800, 12_000); got != 10_800*1.05 {
		t.Fatalf("refining: %v, want +5%%", got)
	}
	if rs.result() != 10_800 {
		t.Fatalf("result %v, want the last good rate", rs.result())
	}
	// Each further success doubles the step; a failure resets it.
	if got := stepAgainst(rs, 11_000, 1e9); math.Abs(got-11_000*1.10) > 1e-6 {
		t.Fatalf("second success: %v, want +10%%", got)
	}
	if got := stepAgainst(rs, 12_000, 1e9); math.Abs(got-12_000*1.20) > 1e-6 {
		t.Fatalf("third success: %v, want +20%%", got)
	}
	stepAgainst(rs, 14_400, 13_000)
	if got := stepAgainst(rs, 11_700, 1e9); math.Abs(got-11_700*1.05) > 1e-6 {
		t.Fatalf("after a failure: %v, want +5%% again", got)
	}
}

// A failure at the start (a cold JVM) must not slow the search for the rest
// of the warm-up: from 10% of the capacity it still gets within reach in 15
// steps (30 s).
func TestRateSearchRecoversFromAnEarlyFailure(t *testing.T) {
	const capacity = 200_000
	rs := newRateSearch(SearchStartRate)
	rate := stepAgainst(rs, SearchStartRate, 7_000) // cold start: only 7000/s acknowledged
	rate = stepAgainst(rs, rate, capacity)          // now a good step, then refining from here
	for range 13 {
		rate = stepAgainst(rs, rate, capacity)
	}
	if got := rs.result(); got < 0.7*capacity || got > capacity {
		t.Fatalf("found %.0f after 15 steps, want within 70-100%% of %d; steps %+v", got, capacity, rs.steps)
	}
}

// A step short of acknowledgements while its producers are on schedule —
// they trail the sends by the latency, which a rate increase or a slow
// fsync shows as a shortfall caught up in the next step — is held once
// more and judged with the next; an overload fails both.
func TestRateSearchHoldsAnAcknowledgementShortfall(t *testing.T) {
	sample := func(rate float64, acked float64, lag time.Duration) SearchSample {
		return SearchSample{Rate: rate, Seconds: 2, Sent: int64(rate * 2), Acked: int64(acked * 2), Lag: lag}
	}
	rs := newRateSearch(10_000)
	rs.step(sample(10_000, 10_000, 0))
	if got := rs.step(sample(15_000, 13_900, 0)); got != 15_000 {
		t.Fatalf("after a step 7%% short with producers on schedule: next %v, want the same rate held", got)
	}
	if got := rs.step(sample(15_000, 15_900, 0)); got != 15_000*1.5 || rs.result() != 15_000 {
		t.Fatalf("after the shortfall was caught up: next %v, result %v; want 22500, 15000", got, rs.result())
	}
	if st := rs.steps[1]; st.KeptUp || !strings.Contains(st.Why, "held once more") {
		t.Fatalf("the held step is reported as %+v", st)
	}
	// An overload falls short in both steps.
	rs.step(sample(22_500, 21_000, 0))
	if got := rs.step(sample(22_500, 21_000, 0)); got >= 22_500 || rs.result() != 15_000 {
		t.Fatalf("after two steps 7%% short: next %v, result %v; want a back-off, 15000", got, rs.result())
	}
	// Producers behind schedule fail the step at once.
	rs = newRateSearch(10_000)
	rs.step(sample(10_000, 10_000, 0))
	if got := rs.step(sample(15_000, 15_000, time.Second)); got >= 15_000 {
		t.Fatalf("a step whose producers fell behind: next %v, want a back-off", got)
	}
}

func TestJudgeSaysWhy(t *testing.T) {
	base := SearchSample{Rate: 1000, Seconds: 1, Sent: 1000, Acked: 1000, Received: 1000, Subs: 1}
	for _, tc := range []struct {
		name string
		edit func(*SearchSample)
		why  string
	}{
		{"kept up", func(*SearchSample) {}, ""},
		{"lag", func(s *SearchSample) { s.Lag = time.Second }, "behind schedule"},
		{"acks", func(s *SearchSample) { s.Acked = 900 }, "acknowledged 900/s of 1000/s"},
		{"acks held by open transactions", func(s *SearchSample) { s.Acked, s.Held = 900, 100 }, ""},
		{"acks short beyond the open transactions", func(s *SearchSample) { s.Acked, s.Held = 800, 100 }, "acknowledged 800/s of 1000/s"},
		{"consumers", func(s *SearchSample) { s.Received = 500 }, "consumers received 500/s"},
		{"no consumers", func(s *SearchSample) { s.Received, s.Subs = 0, 0 }, ""},
	} {
		s := base
		tc.edit(&s)
		ok, why, _ := judge(s)
		if ok != (tc.why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("%s: ok=%v why=%q, want %q", tc.name, ok, why, tc.why)
		}
	}
}

func TestRateSearchWithoutAnyGoodStep(t *testing.T) {
	rs := newRateSearch(10_000)
	if next := stepAgainst(rs, 10_000, 50); next != 10_000 {
		t.Fatalf("after a failed first step: %v, want the same rate once more", next)
	}
	if got := rs.result(); got != SearchMinRate {
		t.Fatalf("result after one step %v, want the floor %d", got, SearchMinRate)
	}
	if next := stepAgainst(rs, 10_000, 50); next != SearchMinRate {
		t.Fatalf("after a second failed step: %v, want the floor %d", next, SearchMinRate)
	}
	if got := rs.result(); got != SearchMinRate {
		t.Fatalf("result %v, want the floor %d", got, SearchMinRate)
	}
}

// A first step that acknowledged nothing (1,024 fresh ledgers opening their
// streams) is held once more; when the system then keeps up, the search
// goes on climbing from the start rate, not from its floor.
func TestRateSearchHoldsAColdFirstStep(t *testing.T) {
	rs := newRateSearch(SearchStartRate)
	rs.step(SearchSample{Rate: SearchStartRate, Seconds: 2, Subs: 1}) // nothing acknowledged
	if got := stepAgainst(rs, SearchStartRate, 100_000); got != SearchStartRate*searchGrow {
		t.Fatalf("after the held step kept up: %v, want %v", got, SearchStartRate*searchGrow)
	}
	if rs.result() != SearchStartRate {
		t.Fatalf("result %v, want %d", rs.result(), SearchStartRate)
	}
}

// One step whose consumers stalled (a rebalance) after the search had
// climbed must not send it back to the floor: it backs off from the latest
// rate that kept up, and climbs again.
func TestRateSearchSurvivesOneStalledStep(t *testing.T) {
	rs := newRateSearch(1000)
	rate := 1000.0
	for range 4 { // 1000, 1500, 2250, 3375: all kept up
		rate = stepAgainst(rs, rate, 100_000)
	}
	good := rs.lastGood
	next := rs.step(SearchSample{Rate: rate, Seconds: 2, Sent: int64(rate * 2), Acked: int64(rate * 2),
		Received: 200, Subs: 1}) // consumers received 100/s for one step
	if next < 0.8*good {
		t.Fatalf("after one stalled step at %.0f the search goes to %.0f; want at least 80%% of the last good %.0f", rate, next, good)
	}
}
