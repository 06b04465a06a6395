package loadgen

// The producing side of a run: pacing to the schedule, sending, and
// recording what each acknowledgement and delivery says.

import (
	"context"
	"math"
	"time"
)

func (r *run) sleepUntil(ctx context.Context, t int64) error {
	d := time.Duration(t - r.now())
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// planSwitchMargin separates the last search plan from the measured window:
// longer than any producer takes to pick up a new plan (maxIdleSleep).
const planSwitchMargin = 100 * time.Millisecond

// maxIdleSleep bounds every sleep of a producer, so it notices a new plan
// or a stop quickly even at low rates.
const maxIdleSleep = 20 * time.Millisecond

// produceLoop sends p's messages on the current plan's schedule until the
// final plan ends, the hard stop passes, or the run stops.
func (r *run) produceLoop(ctx context.Context, p *producerState) {
	n := float64(len(r.producers))
	var (
		s   Schedule
		pl  *plan
		gen = -1
	)
	for !r.stopping.Load() {
		if np := r.plan.Load(); np.gen != gen {
			if pl != nil && pl.window {
				p.notSent = r.windowNotSent(&s, pl)
			}
			pl, gen = np, np.gen
			// Producers are spread evenly over one interval, so that n
			// producers at rate R/n look like one at R.
			offset := int64(float64(p.idx) / n * float64(time.Second) / pl.rate)
			s = NewSchedule(pl.start+offset, pl.rate)
		}
		due := s.Peek()
		if due >= pl.end {
			p.nextDue.Store(math.MaxInt64)
			if pl.final {
				return
			}
			time.Sleep(maxIdleSleep / 4) // wait for the next plan
			continue
		}
		p.nextDue.Store(due)
		now := r.now()
		if now < due {
			time.Sleep(min(time.Duration(due-now), maxIdleSleep))
			continue
		}
		if pl.final && now >= pl.hardStop {
			break
		}
		s.Advance()
		r.send(ctx, p, due)
	}
	p.nextDue.Store(math.MaxInt64)
	if pl != nil && pl.final && pl.window {
		p.notSent = r.windowNotSent(&s, pl)
	}
}

// windowNotSent counts the window's messages of schedule s (the window
// plan pl's) that were not sent.
func (r *run) windowNotSent(s *Schedule, pl *plan) int64 {
	first := max(s.Sent(), s.CountBefore(r.winStart.Load()))
	return max(s.CountBefore(pl.end)-first, 0)
}

// send sends one message due at due.
func (r *run) send(ctx context.Context, p *producerState, due int64) {
	bp, _ := p.pool.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, len(p.template))
		copy(b, p.template)
		bp = &b
	}
	buf := *bp
	putHeader(buf, uint32(p.idx), due)
	in := r.inWindow(due)
	r.sent.Add(1)
	if in {
		r.wSent.Add(1)
	}
	rt := r.recovery.Load()
	if rt != nil {
		rt.onSend(due)
	}
	p.prod.Send(ctx, p.keys(), buf, func(err error) {
		now := r.now()
		switch {
		case err == nil:
			if rt != nil {
				rt.onAck(due, time.Duration(now-due))
			}
			p.rec.record(time.Duration(now-due), in)
			r.acked.Add(1)
			if in {
				r.wAcked.Add(1)
			}
			if r.inWindow(now) {
				r.ackIn.Add(1)
			}
		case ctx.Err() != nil:
			// Cancelled by the hard stop or the caller: unacknowledged, not failed.
		default:
			if rt != nil {
				rt.onFail(due)
			}
			r.failed.Add(1)
			if in {
				r.wFailed.Add(1)
			}
			r.noteErr(err)
		}
		p.pool.Put(bp)
	})
}

// deliverTo returns the consumer callback that records into rec.
func (r *run) deliverTo(rec *recorder) func([]byte) {
	return func(payload []byte) {
		now := r.now()
		prod, due, err := readHeader(payload)
		if err != nil {
			r.foreign.Add(1)
			return
		}
		if prod == probeProducer {
			return
		}
		in := r.inWindow(due)
		rec.record(time.Duration(now-due), in)
		if r.firstRecv.Load() == math.MaxInt64 {
			r.firstRecv.CompareAndSwap(math.MaxInt64, now)
		}
		r.received.Add(1)
		if in {
			r.wReceived.Add(1)
		}
		if r.inWindow(now) {
			r.recvIn.Add(1)
		}
	}
}
