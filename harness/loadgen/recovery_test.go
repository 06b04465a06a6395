package loadgen_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/memdriver"
)

// queueDriver acknowledges at most capacity messages per second, queueing
// the rest inside the "server" (Send does not block): an overload leaves a
// backlog that takes time to work off, which is what a recovery phase
// measures.
type queueDriver struct {
	loadgen.Driver
	capacity float64
}

type queued struct {
	ctx          context.Context
	key, payload []byte
	done         func(error)
}

type queueProducer struct {
	loadgen.Producer
	q    chan queued
	stop chan struct{}
	wg   sync.WaitGroup
}

func (d *queueDriver) NewProducer(ctx context.Context, topic string) (loadgen.Producer, error) {
	inner, err := d.Driver.NewProducer(ctx, topic)
	if err != nil {
		return nil, err
	}
	p := &queueProducer{Producer: inner, q: make(chan queued, 1<<20), stop: make(chan struct{})}
	p.wg.Go(func() {
		for {
			select {
			case m := <-p.q:
				time.Sleep(time.Duration(float64(time.Second) / d.capacity))
				p.Producer.Send(m.ctx, m.key, m.payload, m.done)
			case <-p.stop:
				return
			}
		}
	})
	return p, nil
}

func (p *queueProducer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	p.q <- queued{ctx, key, append([]byte(nil), payload...), done}
}

func (p *queueProducer) Close() error {
	close(p.stop)
	p.wg.Wait()
	return p.Producer.Close()
}

func recoveryWorkload(rate, recoveryRate float64, recovery time.Duration) loadgen.Workload {
	w := workload(rate, 0, 4*time.Second)
	w.ProducersPerTopic = 1
	w.SubscriptionsPerTopic, w.ConsumerPerSubscription = 0, 0
	w.RecoveryRate, w.RecoveryDuration = recoveryRate, loadgen.Duration(recovery)
	return w
}

func TestRunMeasuresRecoveryAfterOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 4 s at 1000 msg/s into a system that does 500: a backlog of ~2000
		// messages. At 250 msg/s it shrinks by 250 a second: about 8 s.
		w := recoveryWorkload(1000, 250, 12*time.Second)
		if err := w.Normalize(); err != nil {
			t.Fatal(err)
		}
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: &queueDriver{Driver: memdriver.New(), capacity: 500}, Workload: w, DrainTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		rc := res.Recovery
		if rc == nil {
			t.Fatal("no recovery in the result")
		}
		t.Logf("recovery: %+v", rc)
		if !rc.Recovered || rc.Seconds < 7 || rc.Seconds > 9 {
			t.Errorf("recovered %v after %.1f s; want about 8 s (a 2000-message backlog shrinking by 250/s)", rc.Recovered, rc.Seconds)
		}
		if rc.Sent < 2900 || rc.Sent > 3000 || rc.Failed != 0 || rc.LatencyBoundMs != 100 {
			t.Errorf("recovery %+v; want ~3000 sent at 250/s for 12 s, none failed, the default 100 ms bound", rc)
		}
		// The window's numbers are the overload's alone.
		if res.Sustained || res.TargetRate != 1000 {
			t.Errorf("window: sustained %v target %v", res.Sustained, res.TargetRate)
		}
		var md strings.Builder
		loadgen.WriteMarkdown(&md, res)
		if !strings.Contains(md.String(), "| recovery msg/s |") {
			t.Errorf("markdown lacks the recovery table:\n%s", md.String())
		}
	})
}

func TestRunReportsNoRecoveryWhileStillOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := recoveryWorkload(1000, 600, 5*time.Second) // still above the 500 it can do
		if err := w.Normalize(); err != nil {
			t.Fatal(err)
		}
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: &queueDriver{Driver: memdriver.New(), capacity: 500}, Workload: w, DrainTimeout: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if rc := res.Recovery; rc == nil || rc.Recovered || rc.Seconds != 5 {
			t.Errorf("recovery %+v; want not recovered within the 5 s phase", rc)
		}
	})
}

func TestRecoveryWorkloadValidation(t *testing.T) {
	for _, tc := range []struct {
		edit func(*loadgen.Workload)
		want string
	}{
		{func(w *loadgen.Workload) { w.RecoveryDuration = 0 }, "recoveryDuration"},
		{func(w *loadgen.Workload) { w.RecoveryRate = 0 }, "recoveryRate"},
		{func(w *loadgen.Workload) { w.RecoveryDuration = loadgen.Duration(time.Hour) }, "recoveryDuration"},
		{func(w *loadgen.Workload) { w.RecoveryLatency = loadgen.Duration(-time.Second) }, "recoveryLatency"},
	} {
		w := recoveryWorkload(1000, 250, 10*time.Second)
		tc.edit(&w)
		if err := w.Normalize(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an error naming %s", w, err, tc.want)
		}
	}
}
