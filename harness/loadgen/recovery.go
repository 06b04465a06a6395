package loadgen

import (
	"sync/atomic"
	"time"
)

// recoveryBucket is the resolution of a recovery phase's bookkeeping: its
// messages are counted per recoveryBucket of intended send time.
const recoveryBucket = 100 * time.Millisecond

// recoveredSpan is how long every message must be answered within the
// latency bound for the system to count as recovered.
const recoveredSpan = time.Second

// Recovery is what a recovery phase (Workload.RecoveryRate) measured.
type Recovery struct {
	// Rate and DurationSeconds: the phase's fixed rate and length.
	Rate            float64 `json:"rate"`
	DurationSeconds float64 `json:"durationSeconds"`
	// LatencyBoundMs is Workload.RecoveryLatency.
	LatencyBoundMs float64 `json:"latencyBoundMs"`
	// Recovered: some whole second of the phase had every message
	// acknowledged within the bound (none failed, none left unanswered).
	// Seconds is when the first such second began, from the switch; the
	// phase's length when not recovered.
	Recovered bool    `json:"recovered"`
	Seconds   float64 `json:"seconds"`
	// Sent, Acked and Failed count the phase's messages.
	Sent   int64 `json:"sent"`
	Acked  int64 `json:"acked"`
	Failed int64 `json:"failed"`
}

// recoveryTracker counts a recovery phase's messages per bucket of their
// intended send time. Its slices are sized once (the phase's length is
// bounded by MaxRecoveryDuration) and updated by driver callbacks.
type recoveryTracker struct {
	start    int64 // run clock: the switch to the recovery rate
	bound    int64 // latency bound, ns
	sent     []atomic.Int64
	acked    []atomic.Int64 // within the bound
	answered []atomic.Int64 // acknowledged at all, or failed
	failed   []atomic.Int64
}

func newRecoveryTracker(start int64, d, bound time.Duration) *recoveryTracker {
	n := int((d + recoveryBucket - 1) / recoveryBucket)
	return &recoveryTracker{start: start, bound: int64(bound),
		sent: make([]atomic.Int64, n), acked: make([]atomic.Int64, n),
		answered: make([]atomic.Int64, n), failed: make([]atomic.Int64, n)}
}

// bucket is due's bucket, or -1 when due is outside the phase.
func (t *recoveryTracker) bucket(due int64) int {
	if due < t.start {
		return -1
	}
	i := int((due - t.start) / int64(recoveryBucket))
	if i >= len(t.sent) {
		return -1
	}
	return i
}

func (t *recoveryTracker) onSend(due int64) {
	if i := t.bucket(due); i >= 0 {
		t.sent[i].Add(1)
	}
}

func (t *recoveryTracker) onAck(due int64, latency time.Duration) {
	if i := t.bucket(due); i >= 0 {
		t.answered[i].Add(1)
		if int64(latency) <= t.bound {
			t.acked[i].Add(1)
		}
	}
}

func (t *recoveryTracker) onFail(due int64) {
	if i := t.bucket(due); i >= 0 {
		t.answered[i].Add(1)
		t.failed[i].Add(1)
	}
}

// result finds the first recoveredSpan of buckets in which every message
// sent was acknowledged within the bound, with at least one message.
func (t *recoveryTracker) result(rate float64) *Recovery {
	n := len(t.sent)
	span := int(recoveredSpan / recoveryBucket)
	r := &Recovery{Rate: rate, DurationSeconds: (time.Duration(n) * recoveryBucket).Seconds(),
		LatencyBoundMs: float64(t.bound) / float64(time.Millisecond), Seconds: (time.Duration(n) * recoveryBucket).Seconds()}
	good := make([]bool, n)
	for i := range n {
		s := t.sent[i].Load()
		r.Sent += s
		r.Acked += t.answered[i].Load() - t.failed[i].Load()
		r.Failed += t.failed[i].Load()
		good[i] = t.failed[i].Load() == 0 && t.acked[i].Load() == s
	}
	for i := 0; i+span <= n; i++ {
		ok, msgs := true, int64(0)
		for j := i; j < i+span && ok; j++ {
			ok = good[j]
			msgs += t.sent[j].Load()
		}
		if ok && msgs > 0 {
			r.Recovered, r.Seconds = true, (time.Duration(i) * recoveryBucket).Seconds()
			break
		}
	}
	return r
}
