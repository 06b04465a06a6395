package loadgen

import (
	"testing"
	"time"
)

func TestScheduleDueTimesAreOnTheGrid(t *testing.T) {
	s := NewSchedule(1000, 4000) // 250 µs apart
	for k := range int64(10) {
		if got, want := s.Advance(), 1000+k*250_000; got != want {
			t.Fatalf("message %d due at %d, want %d", k, got, want)
		}
	}
	if s.Sent() != 10 || s.Peek() != 1000+10*250_000 {
		t.Fatalf("sent %d, next due %d", s.Sent(), s.Peek())
	}
	// A rate that does not divide a second: no drift over a million messages.
	s = NewSchedule(0, 3)
	if got, want := s.Due(3_000_000), int64(1_000_000)*int64(time.Second); got != want {
		t.Fatalf("message 3e6 at 3/s due at %d, want %d", got, want)
	}
}

func TestScheduleCountBefore(t *testing.T) {
	s := NewSchedule(100, 1000) // 1 ms apart from 100 ns
	for _, tc := range []struct {
		end  int64
		want int64
	}{
		{0, 0}, {100, 0}, {101, 1}, {100 + int64(time.Millisecond), 1}, {101 + int64(time.Millisecond), 2},
		{100 + int64(time.Second), 1000},
	} {
		if got := s.CountBefore(tc.end); got != tc.want {
			t.Errorf("CountBefore(%d) = %d, want %d", tc.end, got, tc.want)
		}
	}
}

// fakeClock is the simplest clock: a number the test moves.
type fakeClock struct{ now int64 }

// A sender that stalls does not slow the schedule down: messages that came
// due during the stall go out back to back when it ends, each stamped with
// its intended time, so the stall shows in the latency of every one of them
// — not only in the one message that was in flight (coordinated omission).
func TestScheduleCountsQueueingDuringAStall(t *testing.T) {
	const (
		rate    = 1000 // 1 ms apart
		service = 100 * time.Microsecond
		stall   = 50 * time.Millisecond
	)
	clk := &fakeClock{}
	s := NewSchedule(0, rate)
	var lat []time.Duration
	for s.Sent() < 200 {
		due := s.Peek()
		if clk.now < due {
			clk.now = due // sleep until due
		}
		s.Advance()
		d := service
		if s.Sent() == 10 {
			d = stall // the 10th send hangs for 50 ms
		}
		clk.now += int64(d)
		lat = append(lat, time.Duration(clk.now-due))
	}
	// Message 9 waited the stall; messages 10..58 came due during it and
	// waited for it too, less the time since they came due.
	if lat[9] != stall {
		t.Fatalf("stalled message latency %v, want %v", lat[9], stall)
	}
	slow := 0
	for _, l := range lat {
		if l > 2*service {
			slow++
		}
	}
	if slow < 45 {
		t.Fatalf("%d messages saw the stall, want about 50 (one per millisecond of it): coordinated omission", slow)
	}
	// After the backlog drains the schedule is back on time.
	if lat[len(lat)-1] != service {
		t.Fatalf("last latency %v, want %v", lat[len(lat)-1], service)
	}
	if s.Lag(s.Peek()+int64(time.Millisecond)) != time.Millisecond || s.Lag(s.Peek()-1) != 0 {
		t.Fatal("Lag")
	}
}
