package loadgen

// A run's reporting: progress lines while it runs and the Result it
// fills at the end.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// startProgress prints a status line every ProgressInterval until the
// returned function is called (which waits for the printer to exit).
func (r *run) startProgress() (stop func()) {
	if r.opts.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(r.opts.ProgressInterval)
		defer tk.Stop()
		pub, e2e := newHist(), newHist()
		last := r.now()
		s0, a0, v0 := r.sent.Load(), r.acked.Load(), r.received.Load()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			now := r.now()
			secs := float64(now-last) / 1e9
			s1, a1, v1 := r.sent.Load(), r.acked.Load(), r.received.Load()
			pub.Reset()
			e2e.Reset()
			for _, p := range r.producers {
				p.rec.takePeriod(pub)
			}
			for _, c := range r.consRecs {
				c.takePeriod(e2e)
			}
			rate := 0.0
			if pl := r.plan.Load(); pl != nil {
				rate = pl.rate * float64(len(r.producers))
			}
			backlog := a1*int64(r.w.SubscriptionsPerTopic) - v1
			r.progressf("%-7s %4.0fs  target %.0f/s | sent %.0f/s acked %.0f/s %.1f MiB/s recv %.0f/s | publish p50 %s p99 %s ms | e2e p50 %s p99 %s ms | backlog %d lag %v failed %d",
				*r.phase.Load(), time.Duration(now).Seconds(), rate,
				float64(s1-s0)/secs, float64(a1-a0)/secs, float64(a1-a0)*float64(r.w.MessageSize)/mib/secs,
				float64(v1-v0)/secs, pctl(pub, 50), pctl(pub, 99), pctl(e2e, 50), pctl(e2e, 99),
				backlog, r.lag(now).Round(time.Millisecond), r.failed.Load())
			last, s0, a0, v0 = now, s1, a1, v1
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

func pctl(h *hdrhistogram.Histogram, q float64) string {
	if h.TotalCount() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(h.ValueAtQuantile(q))/1000)
}

// fill computes the result from the counters, histograms and CPU samples.
func (r *run) fill(res *Result, cpuA, cpuB cpuSnapshot, cpuErr error) {
	w := r.w
	secs := w.TestDuration.D().Seconds()
	res.WindowSeconds = secs
	size := float64(w.MessageSize)
	tp := func(n int64) Throughput {
		return Throughput{Messages: n, MsgPerSec: float64(n) / secs, MiBPerSec: float64(n) * size / mib / secs}
	}
	res.Publish = tp(r.ackIn.Load())
	res.Consume = tp(r.recvIn.Load())

	pub, e2e := newHist(), newHist()
	for _, p := range r.producers {
		p.rec.mergeWindow(pub)
	}
	for _, c := range r.consRecs {
		c.mergeWindow(e2e)
	}
	res.PublishLatency, res.EndToEndLatency = summarize(pub), summarize(e2e)

	res.Sent = r.wSent.Load()
	for _, p := range r.producers {
		res.NotSent += p.notSent
	}
	res.Failed = r.wFailed.Load()
	res.Unacked = max(res.Sent-r.wAcked.Load()-res.Failed, 0)
	subs := int64(w.SubscriptionsPerTopic)
	res.NotReceived = max(r.wAcked.Load()*subs-r.wReceived.Load(), 0)
	r.errMu.Lock()
	if r.firstErr != nil {
		res.FirstError = r.firstErr.Error()
	}
	r.errMu.Unlock()

	if len(r.opts.Servers) > 0 {
		procs, err := cpuDelta(r.opts.Servers, cpuA, cpuB)
		res.CPU.Servers = procs
		for _, p := range procs {
			res.CPU.ServerSeconds += p.CPUSeconds
		}
		if err := errors.Join(cpuErr, err); err != nil {
			res.Notes = append(res.Notes, "server CPU is unreliable: "+err.Error())
		}
	}
	res.CPU.LoadGeneratorSeconds = (cpuB.self - cpuA.self).Seconds()
	gibs := float64(res.Publish.Messages) * size / gib
	if res.CPU.ServerSeconds > 0 && gibs > 0 {
		res.Cost.MiBPerServerCore = res.Publish.MiBPerSec / (res.CPU.ServerSeconds / secs)
		res.Cost.ServerCPUSecondsPerGiB = res.CPU.ServerSeconds / gibs
	}
	if gibs > 0 {
		res.Cost.LoadGeneratorCPUSecondsPerGiB = res.CPU.LoadGeneratorSeconds / gibs
	}

	// Did the run keep up with its target? If not, say how it fell short.
	var notes []string
	if len(res.RateSearch) > 0 {
		notes = append(notes, fmt.Sprintf("target rate %.0f msg/s found by searching during the warm-up (%d steps; see rateSearch)", res.TargetRate, len(res.RateSearch)))
	}
	short := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	sustained := true
	if res.NotSent > 0 {
		sustained = false
		short("%d messages of the window were never sent: producers were still behind schedule %v after the window", res.NotSent, r.opts.DrainTimeout)
	}
	if res.Failed > 0 {
		sustained = false
		short("%d messages failed; first error: %s", res.Failed, res.FirstError)
	}
	if res.Unacked > 0 {
		sustained = false
		short("%d messages were not acknowledged within %v after the window", res.Unacked, r.opts.DrainTimeout)
	}
	if res.NotReceived > 0 {
		sustained = false
		short("%d acknowledged deliveries had not arrived %v after the window", res.NotReceived, r.opts.DrainTimeout)
	}
	if res.Publish.MsgPerSec < sustainFraction*res.TargetRate {
		sustained = false
		short("published %.0f msg/s, below %.0f%% of the target %.0f msg/s", res.Publish.MsgPerSec, sustainFraction*100, res.TargetRate)
	}
	if subs > 0 && res.Consume.MsgPerSec < sustainFraction*res.TargetRate*float64(subs) {
		sustained = false
		short("consumed %.0f msg/s, below %.0f%% of the target × %d subscription(s)", res.Consume.MsgPerSec, sustainFraction*100, subs)
	}
	if lag := time.Duration(res.LagAtEndMs * float64(time.Millisecond)); lag > maxEndLag {
		sustained = false
		short("producers were %v behind schedule at the end of the window (more than %v)", lag.Round(time.Millisecond), maxEndLag)
	}
	if cu := res.CatchUp; cu != nil && !cu.CaughtUp {
		sustained = false
		short("consumers had not caught up with the %.0f s backlog when the %v window ended", cu.BacklogSeconds, w.TestDuration)
	}
	if n := r.foreign.Load(); n > 0 {
		short("%d received messages were not written by this run", n)
	}
	res.Sustained = sustained
	res.Notes = append(res.Notes, notes...)
}
