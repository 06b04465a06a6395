package loadgen

import (
	"fmt"
	"time"
)

// Parameters of the search for the maximum sustainable rate (producerRate 0).
const (
	// SearchInterval is how long each rate is held before it is judged.
	SearchInterval = 2 * time.Second
	// SearchStartRate is the first rate tried, messages/s.
	SearchStartRate = 10_000
	// SearchMinRate is the lowest rate the search goes down to.
	SearchMinRate = 100
	// searchGrow multiplies the rate after a step that kept up while no step
	// has failed. After a failure the increase starts at searchRefine and
	// doubles (1.05, 1.10, 1.20, 1.40, then searchGrow) with every further
	// step that keeps up, so a transient failure (a JVM still compiling, a
	// neighbour's burst) costs a few steps, not the rest of the warm-up.
	searchGrow   = 1.5
	searchRefine = 1.05
	// searchBackoff multiplies the rate achieved in a step that did not keep
	// up, to leave room to drain what piled up.
	searchBackoff = 0.9
	// searchKeepUp is the fraction of the target rate that must be
	// acknowledged (and received, per subscription) for a step to count as
	// kept up. Strict, because a 2 s step shows a small overload only as a
	// small shortfall (4% over capacity acknowledges 96%), and an overload
	// that passes here grows without bound over the measured window.
	searchKeepUp = 0.98
	// searchMaxLag is how far behind its schedule a producer may be at the
	// end of a step that kept up.
	searchMaxLag = 100 * time.Millisecond
)

// SearchSample is what one step of the search observed while holding Rate
// for Seconds.
type SearchSample struct {
	Rate     float64 // the target rate held, messages/s
	Seconds  float64 // the length of the step
	Sent     int64   // messages handed to producers in the step
	Acked    int64   // acknowledgements in the step
	Received int64   // deliveries in the step, all subscriptions
	Subs     int     // subscriptions per topic (each message is received Subs times)
	// Lag is the worst producer's lag behind schedule at the end of the
	// step; a producer waiting for its transaction's commit counts as
	// behind by what it was when the commit began (run.searchLag).
	Lag time.Duration
	// Held is how many messages may be sent and not yet acknowledged at
	// either end of a step without any falling behind: those of the open
	// transactions (producers × transactionSize), acknowledged together
	// when each commits (and delivered together to read_committed
	// subscriptions). Without it a transactional producer that keeps
	// up would fail a step by the transaction it had open at the end.
	Held int64
}

// SearchStep is one judged step, as reported in results.
type SearchStep struct {
	Rate        float64 `json:"rate"`
	AckRate     float64 `json:"ackRate"`
	ReceiveRate float64 `json:"receiveRate"`
	LagMs       float64 `json:"lagMs"`
	KeptUp      bool    `json:"keptUp"`
	Why         string  `json:"why,omitempty"`
	Next        float64 `json:"next"`
}

// rateSearch finds the highest rate the system keeps up with: producers
// stay on schedule, acknowledgements and deliveries keep pace with sends.
// It is a pure state machine fed one sample per step, so it is tested
// without a clock or a system. A failed first step is held once more (it
// may have measured a cold start); a later step short only by
// acknowledgements or deliveries is held once more and judged with the
// next (held). It grows the rate by half while every
// step keeps up, and after the first step that does not, backs off below what
// was achieved and climbs again from 5% per step, the step doubling with
// each success and resetting with each failure. The answer is the last rate that
// kept up (conditions drift during a run — page cache filling, compaction —
// so the latest is the best estimate), or, if none did, the achieved rate
// backed off.
type rateSearch struct {
	rate     float64 // the rate to hold next
	lastGood float64 // the latest rate that kept up; 0 if none yet
	refining bool    // a step has failed since the start
	growth   float64 // multiplier after the next step that keeps up (refining): searchRefine..searchGrow
	fallback float64 // the answer while no step kept up: the latest achieved rate backed off
	// held is a step that fell short by acknowledgements or deliveries
	// alone — its producers on schedule — held once more at the same rate
	// and judged together with the next: acknowledgements trail sends by
	// the latency, so a step that raises the rate (or during which the
	// latency grows, or acknowledgements bunch behind a slow fsync) counts
	// some of its messages in the next step. Over two steps that shortfall
	// halves; an overload's does not.
	held  *SearchSample
	steps []SearchStep
}

func newRateSearch(start float64) *rateSearch { return &rateSearch{rate: start, growth: searchRefine} }

// judge decides whether a step kept up, and why not.
func judge(s SearchSample) (ok bool, why string, achieved float64) {
	ackRate := float64(s.Acked) / s.Seconds
	achieved = min(ackRate, float64(s.Sent)/s.Seconds)
	switch {
	case s.Lag > searchMaxLag:
		return false, fmt.Sprintf("producers %v behind schedule", s.Lag.Round(time.Millisecond)), achieved
	case float64(s.Acked+s.Held)/s.Seconds < searchKeepUp*s.Rate:
		return false, fmt.Sprintf("acknowledged %.0f/s of %.0f/s", ackRate, s.Rate), achieved
	case s.Subs > 0 && float64(s.Received+s.Held*int64(s.Subs))/s.Seconds < searchKeepUp*s.Rate*float64(s.Subs):
		recv := float64(s.Received) / s.Seconds / float64(s.Subs)
		achieved = min(achieved, recv)
		return false, fmt.Sprintf("consumers received %.0f/s of %.0f/s", recv, s.Rate), achieved
	}
	return true, "", achieved
}

// step takes one sample and returns the rate to hold next.
func (rs *rateSearch) step(s SearchSample) float64 {
	if p := rs.held; p != nil {
		rs.held = nil
		s = SearchSample{Rate: s.Rate, Seconds: p.Seconds + s.Seconds, Sent: p.Sent + s.Sent, Acked: p.Acked + s.Acked,
			Received: p.Received + s.Received, Subs: s.Subs, Lag: s.Lag, Held: s.Held}
	} else if ok, why, _ := judge(s); !ok && s.Lag <= searchMaxLag && len(rs.steps) > 0 {
		rs.held = &s
		rs.steps = append(rs.steps, SearchStep{
			Rate: s.Rate, AckRate: float64(s.Acked) / s.Seconds,
			ReceiveRate: float64(s.Received) / s.Seconds / float64(max(s.Subs, 1)),
			LagMs:       float64(s.Lag) / float64(time.Millisecond), Why: why + "; held once more, judged with the next step", Next: s.Rate,
		})
		return s.Rate
	}
	ok, why, achieved := judge(s)
	switch {
	case ok && !rs.refining:
		rs.lastGood = s.Rate
		rs.rate = s.Rate * searchGrow
	case ok:
		rs.lastGood = s.Rate
		rs.rate = s.Rate * rs.growth
		rs.growth = min(1+2*(rs.growth-1), searchGrow)
	case rs.lastGood == 0 && len(rs.steps) == 0:
		// The first step may have measured only a cold start (a JIT, a
		// group joining, 1,024 fresh ledgers opening their streams: S4's
		// first second acknowledged nothing, and the search spent its
		// warm-up climbing from the floor): hold the rate once more
		// before judging the system by it.
		rs.rate = s.Rate
		rs.fallback = clampRate(achieved * searchBackoff)
	case rs.lastGood == 0:
		// Nothing has kept up yet (perhaps still start-up): go below what
		// was achieved, still in the fast phase.
		rs.rate = achieved * searchBackoff
		rs.fallback = clampRate(rs.rate)
	default:
		// Back off from what was achieved, but not far below the latest
		// rate that kept up: one bad step (a consumer's rebalance, a
		// neighbour's burst) must not throw away the climb. If the system
		// really slowed down, the next steps fail too and the rate keeps
		// falling by searchBackoff each time.
		rs.refining = true
		rs.growth = searchRefine
		rs.rate = max(achieved, rs.lastGood*searchBackoff) * searchBackoff
	}
	rs.rate = clampRate(rs.rate)
	rs.steps = append(rs.steps, SearchStep{
		Rate: s.Rate, AckRate: float64(s.Acked) / s.Seconds,
		ReceiveRate: float64(s.Received) / s.Seconds / float64(max(s.Subs, 1)),
		LagMs:       float64(s.Lag) / float64(time.Millisecond), KeptUp: ok, Why: why, Next: rs.rate,
	})
	return rs.rate
}

// result returns the rate found: the latest that kept up, else the latest
// achieved rate backed off (else, before any step, the start).
func (rs *rateSearch) result() float64 {
	switch {
	case rs.lastGood > 0:
		return rs.lastGood
	case rs.fallback > 0:
		return rs.fallback
	}
	return rs.rate
}

func clampRate(r float64) float64 { return min(max(r, SearchMinRate), MaxProducerRate) }
