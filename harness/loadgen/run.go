package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultProgressInterval = 5 * time.Second
	DefaultDrainTimeout     = 30 * time.Second
	DefaultTopicPrefix      = "sluice-bench"

	// sustainFraction is the fraction of the target rate a measured window
	// must publish (and consume, per subscription) to count as sustained.
	sustainFraction = 0.95
	// maxEndLag is how far behind schedule producers may be at the end of a
	// sustained window: more means the rate was not held, whatever the
	// averages say.
	maxEndLag = time.Second
)

// Options configure one run.
type Options struct {
	Driver   Driver   // required
	Workload Workload // validated by Run
	Label    string   // names the run in tables (default "<driver> <workload>")
	// Servers are the processes of the system under test: their CPU during
	// the measured window is the run's server cost. None: no cost figures.
	Servers []ServerProcess
	// Progress receives a status line every ProgressInterval (default 5 s)
	// and a line at each phase change; nil for none.
	Progress         io.Writer
	ProgressInterval time.Duration
	// DrainTimeout bounds how long after the measured window the run waits
	// for sends, acknowledgements and deliveries of the window's messages
	// (default 30 s). What is still missing then is reported, not waited for.
	DrainTimeout time.Duration
	// TopicPrefix starts every topic and subscription name (default
	// "sluice-bench"); a random run id follows, so runs never share topics.
	TopicPrefix string
	// KeepTopics leaves the topics in place after the run (default: deleted).
	KeepTopics bool
}

// plan is what producers do until the next plan replaces it: one fixed-rate
// schedule. The runner publishes plans through an atomic pointer; each
// producer picks up a new one before its next message.
type plan struct {
	gen      int
	start    int64   // due time of the first message, run clock ns
	rate     float64 // messages/s of each producer
	end      int64   // no message due at or after end is sent under this plan
	final    bool    // no plan follows: producers exit once they reach end
	window   bool    // the measured window's plan (its unsent messages count as notSent)
	hardStop int64   // producers give up sending at this time (final plan only)
}

type producerState struct {
	idx      int
	prod     Producer
	rec      *recorder
	template []byte // a payload with this producer's random fill; the header is rewritten per message
	keys     func() []byte
	pool     sync.Pool    // *[]byte payload buffers, returned after done
	nextDue  atomic.Int64 // due time of the next message; MaxInt64 while idle (for the lag)
	notSent  int64        // window messages left unsent at the hard stop; written by the producer goroutine
}

// run is the state of one Run. Counters are atomics updated from driver
// callbacks; "window" counters count messages whose intended send time is
// inside the measured window, "in" counters count events that happened
// inside it.
type run struct {
	opts Options
	w    Workload
	base time.Time // the run clock's origin; times are ns since base (monotonic)

	plan     atomic.Pointer[plan]
	winStart atomic.Int64 // MaxInt64 until the window is fixed
	winEnd   atomic.Int64
	stopping atomic.Bool // producers stop at their next message
	drainEnd atomic.Int64

	sent, acked, failed, received     atomic.Int64 // totals since the start
	wSent, wAcked, wFailed, wReceived atomic.Int64
	ackIn, recvIn                     atomic.Int64
	foreign                           atomic.Int64

	errMu    sync.Mutex
	firstErr error

	producers []*producerState
	// consRecs are the consumers' recorders, made up front (one per
	// consumer of the workload, in topic, subscription, consumer order) so
	// consumers started late (catch-up runs) never change the slice under
	// the progress printer.
	consRecs  []*recorder
	topics    []string
	runID     string
	consumers []Consumer // started so far; the Run goroutine's
	// firstRecv is the run time of the first delivery (MaxInt64 before).
	firstRecv atomic.Int64
	// recovery tracks the recovery phase's messages (nil before it).
	recovery atomic.Pointer[recoveryTracker]
	phase    atomic.Pointer[string]
	// progressMu serializes progress lines: the run and its progress
	// ticker both write them, and the writer need not be safe for that.
	progressMu sync.Mutex
}

func (r *run) now() int64 { return int64(time.Since(r.base)) }

func (r *run) inWindow(t int64) bool { return t >= r.winStart.Load() && t < r.winEnd.Load() }

func (r *run) setPhase(p string) { r.phase.Store(&p) }

func (r *run) progressf(format string, args ...any) {
	if r.opts.Progress != nil {
		r.progressMu.Lock()
		defer r.progressMu.Unlock()
		fmt.Fprintf(r.opts.Progress, "[bench] "+format+"\n", args...)
	}
}

func (r *run) noteErr(err error) {
	r.errMu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.errMu.Unlock()
}

// Run runs one workload against one driver: it creates the topics, starts
// the consumers and producers, warms up (searching for the maximum rate if
// the workload asks for it), measures for the test duration, drains, deletes
// the topics and returns the result. Errors setting up (topics, clients) end
// the run; failures of individual messages are counted in the result.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Driver == nil {
		return nil, errors.New("loadgen: no driver")
	}
	w := opts.Workload
	if err := w.Normalize(); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.TopicPrefix == "" {
		opts.TopicPrefix = DefaultTopicPrefix
	}
	if w.TransactionSize > 0 || w.ReadCommitted {
		td, ok := opts.Driver.(TransactionalDriver)
		if !ok {
			return nil, fmt.Errorf("loadgen: the %s driver has no transactions (the workload's transactionSize %d, readCommitted %v)", opts.Driver.Name(), w.TransactionSize, w.ReadCommitted)
		}
		if err := td.SetTransactions(w.TransactionSize, w.ReadCommitted); err != nil {
			return nil, err
		}
	}
	r := &run{opts: opts, w: w, base: time.Now()}
	r.firstRecv.Store(math.MaxInt64)
	r.winStart.Store(math.MaxInt64)
	r.winEnd.Store(math.MaxInt64)
	r.drainEnd.Store(math.MaxInt64)
	r.setPhase("setup")
	res := &Result{
		Label: opts.Label, Driver: opts.Driver.Name(), Workload: w, Started: time.Now().UTC(),
		Host: Host{Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
			Kernel: readTrim("/proc/sys/kernel/osrelease"), LoadAvgFrom: loadAvg()},
	}

	// Topics.
	runID := randomID()
	topics := make([]string, w.Topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s-%s-%s-%d", opts.TopicPrefix, slug(w.Name), runID, i)
	}
	r.progressf("creating %d topic(s) of %d partitions (%s-…-%s-*)", w.Topics, w.PartitionsPerTopic, opts.TopicPrefix, runID)
	var created []string
	defer func() {
		if opts.KeepTopics || len(created) == 0 {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, t := range created {
			if err := opts.Driver.DeleteTopic(dctx, t); err != nil {
				r.progressf("warning: could not delete topic %s: %v", t, err)
			}
		}
	}()
	createStart := time.Now()
	for _, t := range topics {
		if err := opts.Driver.CreateTopic(ctx, t, w.PartitionsPerTopic); err != nil {
			return nil, fmt.Errorf("create topic %s: %w", t, err)
		}
		created = append(created, t)
	}
	r.progressf("topic(s) ready in %v", time.Since(createStart).Round(100*time.Millisecond))
	settings, err := opts.Driver.Describe(ctx, topics[0])
	if err != nil {
		return nil, fmt.Errorf("describe topic %s: %w", topics[0], err)
	}
	res.DriverSettings = settings

	// Consumers first, so they are subscribed before the first message;
	// in a catch-up run, once the backlog is built (measure).
	r.topics, r.runID = topics, runID
	for range w.Consumers() {
		r.consRecs = append(r.consRecs, newRecorder())
	}
	defer func() {
		for _, c := range r.consumers {
			if err := c.Close(); err != nil {
				r.progressf("warning: closing a consumer: %v", err)
			}
		}
	}()
	if w.BacklogDuration == 0 {
		if err := r.startConsumers(ctx); err != nil {
			return nil, err
		}
	}

	// Producers.
	defer func() {
		for _, p := range r.producers {
			if err := p.prod.Close(); err != nil {
				r.progressf("warning: closing a producer: %v", err)
			}
		}
	}()
	for ti, t := range topics {
		for range w.ProducersPerTopic {
			prod, err := opts.Driver.NewProducer(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("producer of %s: %w", t, err)
			}
			idx := len(r.producers)
			p := &producerState{idx: idx, prod: prod, rec: newRecorder(),
				template: randomPayload(w.MessageSize, uint64(idx)),
				keys:     keyGen(w.KeyDistributor, w.PartitionsPerTopic, uint64(ti)<<32|uint64(idx))}
			p.nextDue.Store(math.MaxInt64)
			r.producers = append(r.producers, p)
		}
	}

	if err := r.probe(ctx); err != nil {
		return nil, err
	}
	if err := r.awaitAssignment(ctx, res); err != nil {
		return nil, err
	}
	return r.measure(ctx, res)
}

// ConsumerReadyTimeout bounds the wait for the consumers to hold every
// partition (awaitAssignment); the run starts anyway after it, with a note.
const ConsumerReadyTimeout = 2 * time.Minute

// awaitAssignment waits until the consumers started so far hold all the
// partitions of their subscriptions, if they can tell (AssignmentCounter).
func (r *run) awaitAssignment(ctx context.Context, res *Result) error {
	if len(r.consumers) == 0 {
		return nil
	}
	counters := make([]AssignmentCounter, 0, len(r.consumers))
	for _, c := range r.consumers {
		a, ok := c.(AssignmentCounter)
		if !ok {
			return nil
		}
		counters = append(counters, a)
	}
	w := r.w
	want := len(r.topics) * w.SubscriptionsPerTopic * w.PartitionsPerTopic
	start := time.Now()
	lastNote := start
	for {
		held := 0
		for _, a := range counters {
			held += a.Assigned()
		}
		waited := time.Since(start).Round(100 * time.Millisecond)
		switch {
		case held >= want:
			r.progressf("consumers hold all %d partitions after %v", want, waited)
			return nil
		case waited >= ConsumerReadyTimeout:
			res.Notes = append(res.Notes, fmt.Sprintf("the consumers held %d of %d partitions when the run started (after waiting %v)", held, want, waited))
			r.progressf("warning: consumers hold %d of %d partitions after %v; starting anyway", held, want, waited)
			return nil
		case time.Since(lastNote) >= 5*time.Second:
			r.progressf("waiting for the consumers: %d of %d partitions held", held, want)
			lastNote = time.Now()
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// startConsumers creates the workload's consumers: one consumer group per
// subscription, each reading from the start of its topic.
func (r *run) startConsumers(ctx context.Context) error {
	w, i := r.w, 0
	for ti, t := range r.topics {
		for s := range w.SubscriptionsPerTopic {
			sub := fmt.Sprintf("%s-%s-t%d-s%d", r.opts.TopicPrefix, r.runID, ti, s)
			for range w.ConsumerPerSubscription {
				c, err := r.opts.Driver.NewConsumer(ctx, t, sub, r.deliverTo(r.consRecs[i]))
				if err != nil {
					return fmt.Errorf("consumer of %s in %s: %w", t, sub, err)
				}
				r.consumers = append(r.consumers, c)
				i++
			}
		}
	}
	return nil
}

// ProbeTimeout bounds the wait for each producer's first acknowledgement.
const ProbeTimeout = time.Minute

// probeProducer marks probe messages in the header's producer field, so
// consumers skip them.
const probeProducer = math.MaxUint32

// probe sends one message through every producer and waits for its
// acknowledgement before the clock starts, as the OpenMessaging Benchmark
// does: connecting, fetching metadata and (Kafka) getting a producer id
// take seconds on a fresh client, and belong to no rate.
func (r *run) probe(ctx context.Context) error {
	r.progressf("probing %d producer(s)", len(r.producers))
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	errs := make(chan error, len(r.producers))
	for _, p := range r.producers {
		buf := append([]byte(nil), p.template...)
		putHeader(buf, probeProducer, r.now())
		p.prod.Send(ctx, p.keys(), buf, func(err error) { errs <- err })
	}
	// A transactional producer completes a message when its transaction
	// commits: Flush ends the probe's (and is only a wait for the others).
	for _, p := range r.producers {
		if err := p.prod.Flush(ctx); err != nil {
			return fmt.Errorf("probe message: flush: %w", err)
		}
	}
	for range r.producers {
		select {
		case err := <-errs:
			if err != nil {
				return fmt.Errorf("probe message: %w", err)
			}
		case <-ctx.Done():
			return fmt.Errorf("probe message not acknowledged within %v: %w", ProbeTimeout, ctx.Err())
		}
	}
	return nil
}

// measure runs the warm-up, the window and the drain, and fills res.
func (r *run) measure(ctx context.Context, res *Result) (*Result, error) {
	w, opts := r.w, r.opts
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	search := w.ProducerRate == 0
	nProd := float64(len(r.producers))

	t0 := r.now()
	backlog := w.BacklogDuration > 0
	recovering := w.RecoveryDuration > 0
	warmEnd := t0 + int64(w.WarmupDuration) + int64(w.BacklogDuration)
	if search {
		r.plan.Store(&plan{gen: 0, start: t0, rate: SearchStartRate / nProd, end: warmEnd})
		r.setPhase("search")
	} else {
		r.fixWindow(warmEnd)
		r.plan.Store(&plan{gen: 0, start: t0, rate: w.ProducerRate / nProd, end: r.winEnd.Load(),
			final: !recovering, window: true, hardStop: r.drainEnd.Load()})
		r.setPhase("warm-up")
		if backlog {
			r.setPhase("backlog")
		} else if w.WarmupDuration == 0 {
			r.setPhase("measure")
		}
	}
	switch {
	case search:
		r.progressf("searching for the maximum sustainable rate for %v, from %d msg/s", w.WarmupDuration, SearchStartRate)
	case backlog:
		r.progressf("producing %.0f msg/s: building a backlog for %v with no consumer, then starting the consumers and measuring %v", w.ProducerRate, w.BacklogDuration, w.TestDuration)
	default:
		r.progressf("producing %.0f msg/s: warm-up %v, then measuring %v", w.ProducerRate, w.WarmupDuration, w.TestDuration)
	}

	// Sends are cancelled at the hard stop, so a Send blocked on a full
	// buffer cannot hold a producer past it.
	sendCtx, cancelSends := context.WithCancel(ctx)
	defer cancelSends()
	var wg sync.WaitGroup
	for _, p := range r.producers {
		wg.Go(func() { r.produceLoop(sendCtx, p) })
	}
	// On every return (an early one when the caller cancels), the producer
	// goroutines stop and are waited for before the producers are closed.
	defer func() {
		r.stopping.Store(true)
		cancelSends()
		wg.Wait()
	}()
	stopProgress := r.startProgress()
	defer stopProgress()
	// If the caller cancels, producers stop at once.
	stopWatch := context.AfterFunc(ctx, func() { r.stopping.Store(true) })
	defer stopWatch()

	target := w.ProducerRate
	if search {
		rs := newRateSearch(SearchStartRate)
		target = r.runSearch(ctx, rs, warmEnd)
		res.RateSearch = rs.steps
		// The window starts a little after the switch, so that no message of
		// the search's schedule (due before the switch) falls into it.
		r.fixWindow(r.now() + int64(planSwitchMargin))
		r.plan.Store(&plan{gen: len(rs.steps) + 1, start: r.winStart.Load(), rate: target / nProd,
			end: r.winEnd.Load(), final: !recovering, window: true, hardStop: r.drainEnd.Load()})
		r.progressf("search done: measuring at %.0f msg/s for %v", target, w.TestDuration)
	}
	res.TargetRate = target

	// The window.
	if err := r.sleepUntil(ctx, r.winStart.Load()); err != nil {
		return nil, err
	}
	r.setPhase("measure")
	r.progressf("measuring for %v at %.0f msg/s", w.TestDuration, target)
	cpuA, cpuErrA := takeCPU(opts.Servers)
	if backlog {
		cu, err := r.catchUp(ctx)
		if err != nil {
			return nil, err
		}
		res.CatchUp = cu
	}
	if err := r.sleepUntil(ctx, r.winEnd.Load()); err != nil {
		return nil, err
	}
	cpuB, cpuErrB := takeCPU(opts.Servers)
	endLag := r.lag(r.now())
	res.LagAtEndMs = float64(endLag) / float64(time.Millisecond)
	if recovering {
		// The producers drop what they have not sent of the window and go
		// on at the recovery rate.
		start := r.now()
		end := start + int64(w.RecoveryDuration)
		r.recovery.Store(newRecoveryTracker(start, w.RecoveryDuration.D(), w.RecoveryLatency.D()))
		r.plan.Store(&plan{gen: r.plan.Load().gen + 1, start: start, rate: w.RecoveryRate / nProd, end: end,
			final: true, hardStop: r.drainEnd.Load()})
		r.setPhase("recovery")
		r.progressf("window over; recovery at %.0f msg/s for %v", w.RecoveryRate, w.RecoveryDuration)
		if err := r.sleepUntil(ctx, end); err != nil {
			return nil, err
		}
	}
	r.setPhase("drain")
	r.progressf("window over; draining (at most %v)", opts.DrainTimeout)
	res.Host.LoadAvgTo = loadAvg()

	// Drain: producers finish the window's schedule (or give up at the hard
	// stop), then acknowledgements and deliveries get until the same deadline.
	stopSends := time.AfterFunc(time.Duration(r.drainEnd.Load()-r.now()), cancelSends)
	wg.Wait()
	stopSends.Stop()
	for _, p := range r.producers {
		fctx, fcancel := context.WithTimeout(ctx, max(time.Duration(r.drainEnd.Load()-r.now()), time.Second))
		if err := p.prod.Flush(fctx); err != nil && ctx.Err() == nil {
			r.progressf("flush: %v", err)
		}
		fcancel()
	}
	subs := int64(w.SubscriptionsPerTopic)
	for r.wReceived.Load() < r.wAcked.Load()*subs && r.now() < r.drainEnd.Load() && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.setPhase("done")
	stopProgress()
	if rt := r.recovery.Load(); rt != nil {
		res.Recovery = rt.result(w.RecoveryRate)
	}

	r.fill(res, cpuA, cpuB, errors.Join(cpuErrA, cpuErrB))
	return res, nil
}

// Catch-up: consumers count as caught up once the backlog (acknowledged
// messages × subscriptions, minus deliveries) is at most catchUpSlack of
// production, or 1% of the backlog they started with, whichever is larger
// (what is in flight in a healthy pipeline is not backlog). The backlog is
// sampled every catchUpPoll.
const (
	catchUpSlack = 100 * time.Millisecond
	catchUpPoll  = 10 * time.Millisecond
)

// catchUp starts the consumers of a catch-up run at the window's start and
// follows the backlog until they caught up or the window ended.
func (r *run) catchUp(ctx context.Context) (*CatchUp, error) {
	w := r.w
	subs := int64(w.SubscriptionsPerTopic)
	start := r.now()
	cu := &CatchUp{BacklogSeconds: w.BacklogDuration.D().Seconds(), BacklogMessages: r.acked.Load() * subs,
		ProduceMsgPerSec: w.ProducerRate}
	cu.SlackMessages = max(int64(w.ProducerRate*float64(subs)*catchUpSlack.Seconds()), cu.BacklogMessages/100, 1)
	r.setPhase("catch-up")
	r.progressf("starting %d consumer(s) with a backlog of %d messages", w.Consumers(), cu.BacklogMessages)
	if err := r.startConsumers(ctx); err != nil {
		return nil, err
	}
	tk := time.NewTicker(catchUpPoll)
	defer tk.Stop()
	end := r.winEnd.Load()
	var now, recv int64
	for {
		now, recv = r.now(), r.received.Load()
		if recv > 0 && r.acked.Load()*subs-recv <= cu.SlackMessages {
			cu.CaughtUp = true
			break
		}
		if now >= end {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tk.C:
		}
	}
	cu.CatchUpSeconds = float64(now-start) / 1e9
	cu.Delivered = recv
	if first := r.firstRecv.Load(); first != math.MaxInt64 && first < now {
		cu.FirstDeliveryMs = float64(first-start) / 1e6
		secs := float64(now-first) / 1e9
		cu.ReadMsgPerSec = float64(recv) / secs
		cu.ReadMiBPerSec = float64(recv) * float64(w.MessageSize) / mib / secs
		cu.ReadRatio = cu.ReadMsgPerSec / (w.ProducerRate * float64(subs))
	}
	if cu.CaughtUp {
		r.progressf("caught up after %.1fs: read %.0f msg/s, %.1f× the produce rate", cu.CatchUpSeconds, cu.ReadMsgPerSec, cu.ReadRatio)
	} else {
		r.progressf("consumers had not caught up when the window ended (%d messages behind)", r.acked.Load()*subs-recv)
	}
	r.setPhase("measure")
	return cu, nil
}

// fixWindow sets the measured window to start at start.
func (r *run) fixWindow(start int64) {
	end := start + int64(r.w.TestDuration)
	r.winEnd.Store(end)
	r.winStart.Store(start)
	r.drainEnd.Store(end + int64(r.w.RecoveryDuration) + int64(r.opts.DrainTimeout))
}

// runSearch holds each rate for SearchInterval, judges it, and moves to the
// next, until the warm-up ends; it returns the rate found.
func (r *run) runSearch(ctx context.Context, rs *rateSearch, warmEnd int64) float64 {
	nProd := float64(len(r.producers))
	rate := float64(SearchStartRate)
	for gen := 1; ; gen++ {
		stepStart := r.now()
		stepEnd := stepStart + int64(SearchInterval)
		if stepEnd > warmEnd {
			break
		}
		s0, a0, v0 := r.sent.Load(), r.acked.Load(), r.received.Load()
		if r.sleepUntil(ctx, stepEnd) != nil {
			break
		}
		now := r.now()
		sample := SearchSample{Rate: rate, Seconds: float64(now-stepStart) / 1e9,
			Sent: r.sent.Load() - s0, Acked: r.acked.Load() - a0, Received: r.received.Load() - v0,
			Subs: r.w.SubscriptionsPerTopic, Lag: r.searchLag(now), Held: int64(len(r.producers) * r.w.TransactionSize)}
		next := rs.step(sample)
		st := rs.steps[len(rs.steps)-1]
		verdict := "kept up"
		if !st.KeptUp {
			verdict = "did not keep up: " + st.Why
		}
		r.progressf("search: %.0f msg/s %s; next %.0f msg/s", rate, verdict, next)
		rate = next
		r.plan.Store(&plan{gen: gen, start: r.now(), rate: rate / nProd, end: warmEnd})
	}
	return rs.result()
}

// lag is the worst producer's lag behind its schedule at now.
func (r *run) lag(now int64) time.Duration { return r.worstLag(now, false) }

// searchLag is lag as the rate search judges it: a producer waiting for
// its transaction's commit (a CommitWaiter) is as far behind as it was
// when the commit began. The wait itself is the transactional API's — a
// producer cannot send the next transaction's messages before — and shows
// in the publish latency; a producer whose commits outlast the time its
// schedule gives a transaction starts each commit further behind, and
// fails the step by that.
func (r *run) searchLag(now int64) time.Duration { return r.worstLag(now, true) }

// worstLag is the worst producer's lag at now; with commits, measured at
// the start of a commit in progress.
func (r *run) worstLag(now int64, commits bool) time.Duration {
	var worst time.Duration
	for _, p := range r.producers {
		at := now
		if cw, ok := p.prod.(CommitWaiter); ok && commits {
			if start, ok := cw.CommittingSince(); ok {
				at = min(at, int64(start.Sub(r.base)))
			}
		}
		if d := at - p.nextDue.Load(); d > 0 && time.Duration(d) > worst {
			worst = time.Duration(d)
		}
	}
	return worst
}

// randomPayload returns a payload template of size bytes: header space, then
// pseudo-random bytes (incompressible, reproducible per producer).
func randomPayload(size int, seed uint64) []byte {
	b := make([]byte, size)
	rng := mrand.New(mrand.NewPCG(seed, 0x5eed))
	for i := HeaderSize; i < size; i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// keyGen returns a function giving each message's key under distributor.
// The returned keys are never modified, so drivers may keep them.
func keyGen(distributor string, partitions int, seed uint64) func() []byte {
	switch distributor {
	case KeyRoundRobin:
		keys := make([][]byte, partitions)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "key-%d", i)
		}
		next := 0
		return func() []byte {
			k := keys[next]
			next = (next + 1) % len(keys)
			return k
		}
	case KeyRandom:
		rng := mrand.New(mrand.NewPCG(seed, 0xcafe))
		return func() []byte { return fmt.Appendf(nil, "%016x", rng.Uint64()) }
	default:
		return func() []byte { return nil }
	}
}

// slug makes s safe in a topic name (Kafka's [a-zA-Z0-9._-], at most 40 here).
func slug(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 40 {
		out = out[:40]
	}
	if out == "" {
		out = "workload"
	}
	return out
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func loadAvg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
