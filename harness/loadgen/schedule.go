package loadgen

import (
	"math"
	"time"
)

// Schedule is a fixed-rate send schedule: message k (from 0) is due at
// start + k/rate. Times are nanoseconds on the run's monotonic clock.
//
// The schedule never looks at the clock: a producer that falls behind (a
// slow Send, a stalled system, a descheduled goroutine) sends the overdue
// messages back to back, each stamped with the time it was *due*, not the
// time it went out. Latency is measured from that due time, so time spent
// waiting to be sent counts. Measuring from the actual send time instead
// would let a stalled system slow the load down and hide its own stall —
// coordinated omission.
type Schedule struct {
	start    int64   // due time of message 0
	interval float64 // nanoseconds between two messages, > 0
	next     int64   // index of the next message
}

// NewSchedule returns a schedule of rate messages per second from start.
// rate must be positive.
func NewSchedule(start int64, rate float64) Schedule {
	if !(rate > 0) || math.IsInf(rate, 0) {
		panic("loadgen: schedule rate must be positive and finite")
	}
	return Schedule{start: start, interval: float64(time.Second) / rate}
}

// Due returns the due time of message k.
func (s *Schedule) Due(k int64) int64 {
	return s.start + int64(math.Round(float64(k)*s.interval))
}

// Peek returns the due time of the next message.
func (s *Schedule) Peek() int64 { return s.Due(s.next) }

// Advance moves to the next message and returns the due time of the one it
// passed.
func (s *Schedule) Advance() int64 {
	d := s.Due(s.next)
	s.next++
	return d
}

// Sent returns how many messages have been taken from the schedule.
func (s *Schedule) Sent() int64 { return s.next }

// CountBefore returns how many messages of the schedule are due before end.
func (s *Schedule) CountBefore(end int64) int64 {
	if end <= s.start {
		return 0
	}
	n := int64(math.Ceil(float64(end-s.start) / s.interval))
	// Rounding in Due may put message n-1 at end or message n before it.
	for n > 0 && s.Due(n-1) >= end {
		n--
	}
	for s.Due(n) < end {
		n++
	}
	return n
}

// Lag returns how far behind the schedule a producer is at now: the age of
// the next message if it is overdue, else 0.
func (s *Schedule) Lag(now int64) time.Duration {
	if d := now - s.Peek(); d > 0 {
		return time.Duration(d)
	}
	return 0
}
