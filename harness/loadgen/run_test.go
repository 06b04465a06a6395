package loadgen_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/memdriver"
)

// These tests run the whole runner against the in-memory driver inside a
// synctest bubble: time is virtual (it moves only when every goroutine
// waits), so a 20 s run takes milliseconds and the counts are exact.

func workload(rate float64, warmup, test time.Duration) loadgen.Workload {
	return loadgen.Workload{Name: "unit", Topics: 1, PartitionsPerTopic: 4, MessageSize: 100,
		ProducersPerTopic: 2, ProducerRate: rate, SubscriptionsPerTopic: 2, ConsumerPerSubscription: 2,
		WarmupDuration: loadgen.Duration(warmup), TestDuration: loadgen.Duration(test)}
}

func TestRunFixedRateCountsEveryMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drv := memdriver.New()
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: drv, Workload: workload(1000, time.Second, 3*time.Second),
			Servers: []loadgen.ServerProcess{{Name: "self", PID: os.Getpid()}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sent != 3000 || res.Publish.Messages != 3000 || res.PublishLatency.Count != 3000 {
			t.Errorf("sent %d, published %d, publish latencies %d; want 3000 each", res.Sent, res.Publish.Messages, res.PublishLatency.Count)
		}
		// Two subscriptions: every message is received twice.
		if res.Consume.Messages != 6000 || res.EndToEndLatency.Count != 6000 {
			t.Errorf("consumed %d, end-to-end latencies %d; want 6000", res.Consume.Messages, res.EndToEndLatency.Count)
		}
		if res.Publish.MsgPerSec != 1000 || res.TargetRate != 1000 || res.WindowSeconds != 3 {
			t.Errorf("rate %v target %v window %v", res.Publish.MsgPerSec, res.TargetRate, res.WindowSeconds)
		}
		if !res.Sustained || res.NotSent+res.Failed+res.Unacked+res.NotReceived != 0 {
			t.Errorf("not a clean run: %+v", res)
		}
		if len(res.CPU.Servers) != 1 || res.DriverSettings["partitions"] != "4" {
			t.Errorf("servers %+v settings %v", res.CPU.Servers, res.DriverSettings)
		}
		// Topics are deleted after the run.
		if _, err := drv.NewProducer(t.Context(), "anything"); err == nil {
			t.Error("topic lookup should fail")
		}
	})
}

// stallDriver stalls one Send (the stallAt-th call) for stall.
type stallDriver struct {
	loadgen.Driver
	calls   atomic.Int64
	stallAt int64
	stall   time.Duration
}

func (d *stallDriver) NewProducer(ctx context.Context, topic string) (loadgen.Producer, error) {
	p, err := d.Driver.NewProducer(ctx, topic)
	return &stallProducer{Producer: p, d: d}, err
}

type stallProducer struct {
	loadgen.Producer
	d *stallDriver
}

func (p *stallProducer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	if p.d.calls.Add(1) == p.d.stallAt {
		time.Sleep(p.d.stall)
	}
	p.Producer.Send(ctx, key, payload, done)
}

// One 500 ms stall in a 3 s window at 1000 msg/s delays every message that
// came due during it: about 500 of 3000, by 500 ms down to 0. A harness
// that measured from the actual send time would see one slow message and
// report a p99 of zero.
func TestRunCountsAStallInLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := workload(1000, time.Second, 3*time.Second)
		w.ProducersPerTopic = 1
		drv := &stallDriver{Driver: memdriver.New(), stallAt: 1 + 1000 + 1000, stall: 500 * time.Millisecond}
		res, err := loadgen.Run(t.Context(), loadgen.Options{Driver: drv, Workload: w})
		if err != nil {
			t.Fatal(err)
		}
		p := res.PublishLatency
		if p.MaxMs < 499 || p.MaxMs > 501 {
			t.Errorf("max %v ms, want the 500 ms stall", p.MaxMs)
		}
		if p.P99Ms < 400 {
			t.Errorf("p99 %v ms: the messages queued behind the stall were not counted (coordinated omission)", p.P99Ms)
		}
		if p.P50Ms != 0 {
			t.Errorf("p50 %v ms, want 0 (virtual time, most messages unaffected)", p.P50Ms)
		}
		if res.EndToEndLatency.P99Ms < 400 {
			t.Errorf("end-to-end p99 %v ms, want the stall", res.EndToEndLatency.P99Ms)
		}
		if res.Sent != 3000 || !res.Sustained {
			t.Errorf("sent %d sustained %v notes %v", res.Sent, res.Sustained, res.Notes)
		}
	})
}

// capDriver acknowledges at most capacity messages per second: Send waits
// for its slot, like a client whose buffer is full.
type capDriver struct {
	loadgen.Driver
	capacity float64
	mu       sync.Mutex
	next     time.Time
}

func (d *capDriver) NewProducer(ctx context.Context, topic string) (loadgen.Producer, error) {
	p, err := d.Driver.NewProducer(ctx, topic)
	return &capProducer{Producer: p, d: d}, err
}

type capProducer struct {
	loadgen.Producer
	d *capDriver
}

func (p *capProducer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	p.d.mu.Lock()
	now := time.Now()
	if p.d.next.Before(now) {
		p.d.next = now
	}
	p.d.next = p.d.next.Add(time.Duration(float64(time.Second) / p.d.capacity))
	wait := p.d.next.Sub(now)
	p.d.mu.Unlock()
	time.Sleep(wait)
	p.Producer.Send(ctx, key, payload, done)
}

func TestRunSearchesForTheMaximumRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const capacity = 2000
		w := workload(0, 20*time.Second, 4*time.Second)
		var progress strings.Builder
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: &capDriver{Driver: memdriver.New(), capacity: capacity}, Workload: w,
			Progress: &syncWriter{b: &progress}, ProgressInterval: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.TargetRate > capacity || res.TargetRate < 0.8*capacity {
			t.Errorf("found %v msg/s, want 80-100%% of the capacity %d; steps %+v", res.TargetRate, capacity, res.RateSearch)
		}
		if len(res.RateSearch) < 5 || res.RateSearch[0].KeptUp {
			t.Errorf("search steps %+v: want several, the first (10000/s) failing", res.RateSearch)
		}
		if !res.Sustained {
			t.Errorf("the found rate was not sustained: %v", res.Notes)
		}
		for _, want := range []string{"search: 10000 msg/s did not keep up", "search done: measuring at", "measuring for 4s at"} {
			if !strings.Contains(progress.String(), want) {
				t.Errorf("progress lacks %q:\n%s", want, progress.String())
			}
		}
	})
}

// failDriver fails every 10th send after the probe.
type failDriver struct {
	loadgen.Driver
	calls atomic.Int64
}

func (d *failDriver) NewProducer(ctx context.Context, topic string) (loadgen.Producer, error) {
	p, err := d.Driver.NewProducer(ctx, topic)
	return &failProducer{Producer: p, d: d}, err
}

type failProducer struct {
	loadgen.Producer
	d *failDriver
}

var errBroken = errors.New("broken")

func (p *failProducer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	if n := p.d.calls.Add(1); n > 1 && n%10 == 0 {
		done(errBroken)
		return
	}
	p.Producer.Send(ctx, key, payload, done)
}

func TestRunReportsFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := workload(1000, 0, 2*time.Second)
		w.ProducersPerTopic = 1
		res, err := loadgen.Run(t.Context(), loadgen.Options{Driver: &failDriver{Driver: memdriver.New()}, Workload: w})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed != 200 || res.FirstError != "broken" || res.Sustained {
			t.Errorf("failed %d first %q sustained %v", res.Failed, res.FirstError, res.Sustained)
		}
		if !strings.Contains(strings.Join(res.Notes, "\n"), "200 messages failed; first error: broken") {
			t.Errorf("notes %v", res.Notes)
		}
	})
}

func TestRunStopsWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel)
		start := time.Now()
		_, err := loadgen.Run(ctx, loadgen.Options{Driver: memdriver.New(), Workload: workload(1000, time.Second, time.Hour)})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v to stop", d)
		}
	})
}

func TestRunRejectsABadWorkload(t *testing.T) {
	w := workload(1000, 0, time.Second)
	w.PartitionsPerTopic = 0
	_, err := loadgen.Run(t.Context(), loadgen.Options{Driver: memdriver.New(), Workload: w})
	if err == nil || !strings.Contains(err.Error(), "partitionsPerTopic:") {
		t.Fatalf("err %v", err)
	}
}

// syncWriter lets the progress goroutine and the test share a builder.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// A fixed rate above what the system takes is reported as not sustained,
// with the reasons, and the run still ends on time (drain bounded).
func TestRunReportsAnOverloadedFixedRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := workload(1000, 0, 4*time.Second)
		w.ProducersPerTopic = 1
		start := time.Now()
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: &capDriver{Driver: memdriver.New(), capacity: 500}, Workload: w, DrainTimeout: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("run took %v, want the window plus at most the drain", d)
		}
		notes := strings.Join(res.Notes, "\n")
		if res.Sustained || res.NotSent == 0 || res.LagAtEndMs < 1500 {
			t.Errorf("sustained %v notSent %d lag %v ms", res.Sustained, res.NotSent, res.LagAtEndMs)
		}
		for _, want := range []string{"were never sent", "below 95% of the target", "behind schedule at the end of the window"} {
			if !strings.Contains(notes, want) {
				t.Errorf("notes lack %q:\n%s", want, notes)
			}
		}
		// Latency is measured from the schedule: the last messages waited ~2 s.
		if res.PublishLatency.MaxMs < 1500 {
			t.Errorf("publish max %v ms: queueing in the load generator was not counted", res.PublishLatency.MaxMs)
		}
	})
}

// groupDriver's consumers report their share of the partitions as held
// only from readyAt on (never, when readyAt is zero): a group still forming.
type groupDriver struct {
	loadgen.Driver
	readyAt time.Time
	share   int
}

func (d *groupDriver) NewConsumer(ctx context.Context, topic, sub string, deliver func([]byte)) (loadgen.Consumer, error) {
	c, err := d.Driver.NewConsumer(ctx, topic, sub, deliver)
	return &groupConsumer{Consumer: c, d: d}, err
}

type groupConsumer struct {
	loadgen.Consumer
	d *groupDriver
}

func (c *groupConsumer) Assigned() int {
	if c.d.readyAt.IsZero() || time.Now().Before(c.d.readyAt) {
		return 0
	}
	return c.d.share
}

// The clock starts once the consumers hold every partition (two
// subscriptions × 4 partitions, two members each holding 2); a group that
// never forms delays the run by ConsumerReadyTimeout and is noted.
func TestRunWaitsForTheConsumersToHoldEveryPartition(t *testing.T) {
	for _, ready := range []bool{true, false} {
		t.Run(fmt.Sprintf("ready=%v", ready), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				drv := &groupDriver{Driver: memdriver.New(), share: 2}
				start := time.Now()
				if ready {
					drv.readyAt = start.Add(12 * time.Second)
				}
				var progress strings.Builder
				res, err := loadgen.Run(t.Context(), loadgen.Options{
					Driver: drv, Workload: workload(1000, time.Second, 2*time.Second),
					Progress: &syncWriter{b: &progress}, ProgressInterval: time.Hour,
				})
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				note := strings.Contains(strings.Join(res.Notes, "\n"), "the consumers held 0 of 8 partitions")
				if ready {
					if !strings.Contains(progress.String(), "consumers hold all 8 partitions after 12s") || note {
						t.Errorf("progress:\n%s\nnotes %q", progress.String(), res.Notes)
					}
					if took < 15*time.Second || took > time.Minute {
						t.Errorf("the run took %v; want the 12 s wait plus its 3 s", took)
					}
				} else {
					if !note {
						t.Errorf("no note of the missing assignment: %q", res.Notes)
					}
					if took < loadgen.ConsumerReadyTimeout {
						t.Errorf("the run took %v; want at least ConsumerReadyTimeout", took)
					}
				}
				if res.Consume.Messages != 4000 {
					t.Errorf("consumed %d; want 4000 (2 subscriptions × 2000)", res.Consume.Messages)
				}
			})
		})
	}
}
