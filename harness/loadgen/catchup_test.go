package loadgen_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/harness/loadgen"
)

// logDriver keeps every message of a topic, as a log does, so a consumer
// that starts late reads from the start; each subscription has one cursor
// shared by its consumers, which together deliver at most readRate
// messages per second. Sends are acknowledged at once.
type logDriver struct {
	readRate float64

	mu     sync.Mutex
	topics map[string]*logTopic
}

type logTopic struct {
	mu      sync.Mutex
	msgs    [][]byte
	cursors map[string]*int
}

func newLogDriver(readRate float64) *logDriver {
	return &logDriver{readRate: readRate, topics: map[string]*logTopic{}}
}

func (d *logDriver) Name() string { return "log" }

func (d *logDriver) CreateTopic(_ context.Context, name string, _ int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.topics[name] = &logTopic{cursors: map[string]*int{}}
	return nil
}

func (d *logDriver) DeleteTopic(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.topics, name)
	return nil
}

func (d *logDriver) Describe(context.Context, string) (map[string]string, error) {
	return map[string]string{}, nil
}

func (d *logDriver) topic(name string) (*logTopic, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[name]
	if !ok {
		return nil, fmt.Errorf("no topic %s", name)
	}
	return t, nil
}

func (d *logDriver) NewProducer(_ context.Context, name string) (loadgen.Producer, error) {
	t, err := d.topic(name)
	return &logProducer{t: t}, err
}

func (d *logDriver) NewConsumer(_ context.Context, name, sub string, deliver func([]byte)) (loadgen.Consumer, error) {
	t, err := d.topic(name)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	cur, ok := t.cursors[sub]
	if !ok {
		cur = new(int)
		t.cursors[sub] = cur
	}
	t.mu.Unlock()
	c := &logConsumer{stop: make(chan struct{})}
	perTick := d.readRate / 1000 // one tick a millisecond
	c.wg.Go(func() {
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		credit := 0.0
		for {
			select {
			case <-c.stop:
				return
			case <-tk.C:
			}
			credit = math.Min(credit+perTick, perTick+1) // no burst after idle time
			t.mu.Lock()
			var batch [][]byte
			for credit >= 1 && *cur < len(t.msgs) {
				batch = append(batch, t.msgs[*cur])
				*cur++
				credit--
			}
			t.mu.Unlock()
			for _, m := range batch {
				deliver(m)
			}
		}
	})
	return c, nil
}

func (d *logDriver) Close() error { return nil }

type logProducer struct{ t *logTopic }

func (p *logProducer) Send(_ context.Context, _, payload []byte, done func(error)) {
	p.t.mu.Lock()
	p.t.msgs = append(p.t.msgs, append([]byte(nil), payload...))
	p.t.mu.Unlock()
	done(nil)
}

func (p *logProducer) Flush(context.Context) error { return nil }
func (p *logProducer) Close() error                { return nil }

type logConsumer struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func (c *logConsumer) Close() error {
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
	return nil
}

func catchUpWorkload(rate float64, backlog, test time.Duration) loadgen.Workload {
	return loadgen.Workload{Name: "catch-up", Topics: 1, PartitionsPerTopic: 4, MessageSize: 100,
		ProducersPerTopic: 1, ProducerRate: rate, SubscriptionsPerTopic: 1, ConsumerPerSubscription: 1,
		BacklogDuration: loadgen.Duration(backlog), TestDuration: loadgen.Duration(test)}
}

// 10 s of backlog at 1000 msg/s, then a consumer reading 4000 msg/s while
// production goes on: it gains 3000 msg/s, so it is within the slack (100
// messages: 100 ms of production, or 1% of the backlog) after 3.3 s, read
// at 4000 msg/s, 4× the produce rate.
func TestRunCatchUpMeasuresTheDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var progress strings.Builder
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: newLogDriver(4000), Workload: catchUpWorkload(1000, 10*time.Second, 10*time.Second),
			Progress: &syncWriter{b: &progress}, ProgressInterval: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		cu := res.CatchUp
		if cu == nil {
			t.Fatal("no catch-up result")
		}
		near := func(what string, got, want, tol float64) {
			if math.Abs(got-want) > tol {
				t.Errorf("%s = %v, want %v ± %v", what, got, want, tol)
			}
		}
		if cu.BacklogMessages < 10_000 || cu.BacklogMessages > 10_001 || cu.SlackMessages != 100 {
			t.Errorf("backlog %d slack %d; want 10000 (or 10001) and 100", cu.BacklogMessages, cu.SlackMessages)
		}
		if !cu.CaughtUp {
			t.Fatalf("not caught up: %+v", cu)
		}
		near("catch-up seconds", cu.CatchUpSeconds, 3.3, 0.03)
		near("read msg/s", cu.ReadMsgPerSec, 4000, 40)
		near("read ratio", cu.ReadRatio, 4, 0.04)
		near("first delivery ms", cu.FirstDeliveryMs, 1, 1)
		if cu.BacklogSeconds != 10 || cu.ProduceMsgPerSec != 1000 || cu.Delivered < 13_000 {
			t.Errorf("catch-up %+v", cu)
		}
		// The window starts with the consumers; all its messages arrive.
		if res.Sent != 10_000 || res.NotReceived != 0 || !res.Sustained {
			t.Errorf("sent %d not received %d sustained %v notes %v", res.Sent, res.NotReceived, res.Sustained, res.Notes)
		}
		// Messages produced during the catch-up waited for it.
		if res.EndToEndLatency.MaxMs < 2000 {
			t.Errorf("end-to-end max %v ms; the first window messages waited ~2.5 s behind the backlog", res.EndToEndLatency.MaxMs)
		}
		for _, want := range []string{"building a backlog for 10s", "starting 1 consumer(s) with a backlog of", "caught up after 3.3s"} {
			if !strings.Contains(progress.String(), want) {
				t.Errorf("progress lacks %q:\n%s", want, progress.String())
			}
		}
		var md strings.Builder
		loadgen.WriteMarkdown(&md, res)
		if !strings.Contains(md.String(), "| log catch-up | 10 | 1000") || !strings.Contains(md.String(), "| 1000 | 4.00× |") {
			t.Errorf("markdown lacks the catch-up row:\n%s", md.String())
		}
	})
}

// Consumers slower than the producers never catch up: the run says so.
func TestRunCatchUpThatNeverCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: newLogDriver(900), Workload: catchUpWorkload(1000, 2*time.Second, 3*time.Second), DrainTimeout: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.CatchUp == nil || res.CatchUp.CaughtUp || res.Sustained {
			t.Fatalf("catch-up %+v sustained %v", res.CatchUp, res.Sustained)
		}
		if !strings.Contains(strings.Join(res.Notes, "\n"), "had not caught up with the 2 s backlog") {
			t.Errorf("notes %v", res.Notes)
		}
		near := res.CatchUp.ReadMsgPerSec
		if near < 880 || near > 920 {
			t.Errorf("read %v msg/s, want the consumer's 900", near)
		}
	})
}
