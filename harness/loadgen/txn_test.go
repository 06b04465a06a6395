package loadgen_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/memdriver"
)

// commitDriver is the in-memory driver with transactional producers whose
// commits take commitTime on average (on the sending goroutine, as
// TxnBatcher commits; from half to one and a half times as long, as a
// real system's vary): a producer can commit at most size messages per
// commitTime, however fast the rest is.
type commitDriver struct {
	*memdriver.Driver
	size       int
	commitTime time.Duration
	seed       uint64
}

func (d *commitDriver) SetTransactions(size int, _ bool) error {
	d.size = size
	return nil
}

func (d *commitDriver) NewProducer(ctx context.Context, topic string) (loadgen.Producer, error) {
	inner, err := d.Driver.NewProducer(ctx, topic)
	if err != nil {
		return nil, err
	}
	p := &commitProducer{inner: inner}
	d.seed++
	rng := rand.New(rand.NewPCG(d.seed, 1))
	p.b = loadgen.TxnBatcher{Size: d.size, Begin: func() error { return nil }, Commit: func(ctx context.Context) error {
		time.Sleep(d.commitTime/2 + time.Duration(rng.Int64N(int64(d.commitTime))))
		return inner.Flush(ctx)
	}}
	return p, nil
}

type commitProducer struct {
	inner loadgen.Producer
	b     loadgen.TxnBatcher
}

var _ loadgen.CommitWaiter = (*commitProducer)(nil)

func (p *commitProducer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	p.b.Send(ctx, func() error {
		p.inner.Send(ctx, key, payload, func(error) {})
		return nil
	}, done)
}

func (p *commitProducer) CommittingSince() (time.Time, bool) { return p.b.CommittingSince() }
func (p *commitProducer) Flush(ctx context.Context) error    { p.b.Flush(ctx); return nil }
func (p *commitProducer) Close() error                       { return p.inner.Close() }

// A transactional producer waits for each commit, as Kafka's does; the
// search must find the rate its commits allow (size messages per commit
// time per producer), not stop at the first step that ends while a commit
// longer than searchMaxLag is in flight — nor go past that rate, where
// each commit starts further behind.
func TestRunSearchFindsTheRateCommitsAllow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			producers  = 4
			size       = 100
			commitTime = 200 * time.Millisecond // longer than the search's 100 ms lag bound
			capacity   = producers * size * float64(time.Second) / float64(commitTime)
		)
		w := loadgen.Workload{Name: "txn", Topics: 1, PartitionsPerTopic: 4, MessageSize: 100,
			ProducersPerTopic: producers, TransactionSize: size,
			WarmupDuration: loadgen.Duration(40 * time.Second), TestDuration: loadgen.Duration(10 * time.Second)}
		res, err := loadgen.Run(t.Context(), loadgen.Options{
			Driver: &commitDriver{Driver: memdriver.New(), commitTime: commitTime}, Workload: w,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.TargetRate < 0.75*capacity || res.TargetRate > 1.15*capacity {
			t.Errorf("found %.0f msg/s, want 75-115%% of the %.0f msg/s the commits allow; steps %+v", res.TargetRate, capacity, res.RateSearch)
		}
		if res.Publish.MsgPerSec > 1.02*capacity {
			t.Errorf("published %.0f msg/s, more than the commits allow (%.0f)", res.Publish.MsgPerSec, capacity)
		}
	})
}
