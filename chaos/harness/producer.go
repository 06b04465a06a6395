package harness

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// ProducerConfig configures one idempotent producer of the workload.
type ProducerConfig struct {
	Name       string // unique in the history; values are Name-0000001, ...
	Addr       string // the ingest copy it talks to
	Topic      string
	Partitions int32
	// Batch records are produced every Every (default 4 per 40 ms, about
	// 100 records/s: every partition busy, and little CPU on 2 cores shared
	// by eight processes and the emulators).
	Batch int
	Every time.Duration
	// MaxRecords bounds the records produced (default 1,000,000).
	MaxRecords int
	// DeliveryTimeout bounds one record's retries (default 12 s: longer
	// than an ingest copy's restart plus a lease takeover).
	DeliveryTimeout time.Duration
	// Log, if set, gets the SDK's warnings and one line per batch retried
	// or failed: with the servers' logs, the timeline of an outage as the
	// producer saw it.
	Log *slog.Logger
}

// Producer produces unique values round-robin over the partitions with
// the SDK's idempotent producer and records one produce op per value. Its
// run goroutine is started by StartProducer and waited for by Stop.
type Producer struct {
	cfg  ProducerConfig
	rec  *history.Recorder
	cli  *sluice.Client
	prod *sluice.Producer

	// idem maps an acknowledged record's partition and offset to its
	// producer id, epoch and sequence, filled by the OnBatchAcked hook,
	// which the SDK runs before the batch's callbacks on the same
	// goroutine.
	idemMu sync.Mutex
	idem   map[idemKey]history.Idempotence

	sent, acked, failed atomic.Int64
	recErr              atomic.Pointer[error] // the first history write error

	// pending holds the attempts whose callback has not run, by value
	// (their invoke time): at Stop, an attempt the SDK never answered is
	// recorded indeterminate by the harness, and its late callback, if
	// any, is ignored. Without this, a record the SDK stored but never
	// answered would be read with no produce op: "unknown value".
	pendMu  sync.Mutex
	pending map[string]attempt

	stop      chan struct{}
	cancelRun context.CancelFunc // unblocks a Produce waiting for buffer space
	done      chan struct{}
	stopOnce  sync.Once
	stopErr   error
}

type attempt struct {
	invoke    time.Duration
	partition int32
}

type idemKey struct {
	partition int32
	offset    int64
}

// StartProducer starts producing at once.
func StartProducer(ctx context.Context, rec *history.Recorder, cfg ProducerConfig) (*Producer, error) {
	if cfg.Batch == 0 {
		cfg.Batch = 4
	}
	if cfg.Every == 0 {
		cfg.Every = 40 * time.Millisecond
	}
	if cfg.MaxRecords == 0 {
		cfg.MaxRecords = 1_000_000
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 12 * time.Second
	}
	p := &Producer{cfg: cfg, rec: rec, idem: map[idemKey]history.Idempotence{}, pending: map[string]attempt{},
		stop: make(chan struct{}), done: make(chan struct{})}
	var copts []sluice.ClientOption
	hooks := sluice.Hooks{OnBatchAcked: p.onAcked}
	if l := cfg.Log; l != nil {
		copts = append(copts, sluice.WithLogger(l))
		hooks.OnBatchRetried = func(b sluice.BatchInfo, err error) {
			l.Info("batch retried", batchAttrs(b, err)...)
		}
		hooks.OnBatchFailed = func(b sluice.BatchInfo, err error) {
			l.Warn("batch failed", batchAttrs(b, err)...)
		}
	}
	cli, err := sluice.NewClient(cfg.Addr, copts...)
	if err != nil {
		return nil, fmt.Errorf("producer %s: client: %w", cfg.Name, err)
	}
	prod, err := cli.NewProducer(sluice.WithIdempotence(true), sluice.WithLinger(2*time.Millisecond),
		sluice.WithDeliveryTimeout(cfg.DeliveryTimeout), sluice.WithRetryBackoff(50*time.Millisecond, time.Second),
		sluice.WithHooks(hooks))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("producer %s: %w", cfg.Name, err)
	}
	p.cli, p.prod = cli, prod
	ctx, p.cancelRun = context.WithCancel(ctx)
	go func() {
		defer close(p.done)
		p.run(ctx)
	}()
	return p, nil
}

func batchAttrs(b sluice.BatchInfo, err error) []any {
	return []any{slog.Int("partition", int(b.Partition)), slog.Int("records", b.Records),
		slog.Int64("producer_id", b.ProducerID), slog.Int("epoch", int(b.ProducerEpoch)), slog.Int("sequence", int(b.BaseSequence)),
		slog.Int("attempt", b.Attempt), slog.Duration("age", b.Age), slog.Any("err", err)}
}

func (p *Producer) onAcked(b sluice.BatchInfo) {
	if b.ProducerID < 0 {
		return
	}
	p.idemMu.Lock()
	defer p.idemMu.Unlock()
	for i := 0; i < b.Records; i++ {
		p.idem[idemKey{b.Partition, b.BaseOffset + int64(i)}] = history.Idempotence{
			ProducerID: b.ProducerID, ProducerEpoch: int32(b.ProducerEpoch), Sequence: b.BaseSequence + int32(i)}
	}
}

func (p *Producer) run(ctx context.Context) {
	tick := time.NewTicker(p.cfg.Every)
	defer tick.Stop()
	for i := 0; i < p.cfg.MaxRecords; {
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-tick.C:
		}
		for j := 0; j < p.cfg.Batch && i < p.cfg.MaxRecords; j, i = j+1, i+1 {
			p.produce(ctx, i)
		}
	}
}

// produce sends one value; its callback records the outcome.
func (p *Producer) produce(ctx context.Context, i int) {
	part := int32(i) % p.cfg.Partitions
	value := fmt.Sprintf("%s-%07d", p.cfg.Name, i)
	invoke := p.rec.Now()
	p.sent.Add(1)
	p.pendMu.Lock()
	p.pending[value] = attempt{invoke, part}
	p.pendMu.Unlock()
	p.prod.Produce(ctx, &sluice.Record{Topic: p.cfg.Topic, Partition: part, Value: []byte(value)}, func(r sluice.Result) {
		p.pendMu.Lock()
		_, mine := p.pending[value]
		delete(p.pending, value)
		p.pendMu.Unlock()
		if !mine {
			return // abandoned at Stop and already recorded
		}
		op := history.Op{Kind: history.Produce, Invoke: invoke, Producer: p.cfg.Name, Topic: p.cfg.Topic, Partition: part, Value: value}
		if r.Err != nil {
			// The SDK cannot tell whether a batch it gave up on reached
			// the log (a timeout, a lost answer): never claim "failed".
			op.Outcome, op.Error = history.Indeterminate, r.Err.Error()
			p.failed.Add(1)
		} else {
			op.Outcome, op.Partition, op.Offset = history.OK, r.Partition, r.Offset
			p.idemMu.Lock()
			k := idemKey{r.Partition, r.Offset}
			if id, ok := p.idem[k]; ok {
				op.Idempotence = &id
				delete(p.idem, k)
			}
			p.idemMu.Unlock()
			p.acked.Add(1)
		}
		if err := p.rec.Record(op); err != nil {
			p.recErr.CompareAndSwap(nil, &err)
		}
	})
}

// Stop stops producing, waits (up to the delivery timeout and a margin)
// for every record's outcome and closes the producer. It returns the
// history write error, if any. Later calls return the first call's error.
func (p *Producer) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() { p.stopErr = p.halt(ctx) })
	return p.stopErr
}

func (p *Producer) halt(ctx context.Context) error {
	close(p.stop)
	p.cancelRun()
	<-p.done
	wait := p.cfg.DeliveryTimeout + 10*time.Second
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var ferr, cerr error
	closed := make(chan struct{})
	go func() {
		// Owned by halt; may outlive it only if the SDK's Close hangs
		// past its context (seen: a produce stream's receiver that never
		// returns), and then ends when the cluster's processes stop.
		defer close(closed)
		ferr = p.prod.Flush(fctx)
		cerr = p.prod.Close(fctx)
	}()
	select {
	case <-closed:
	case <-time.After(wait + 5*time.Second):
		ferr = fmt.Errorf("the SDK producer's Flush/Close did not return within %v (past its context)", wait+5*time.Second)
	}
	p.cli.Close()
	p.abandon()
	if e := p.recErr.Load(); e != nil {
		return fmt.Errorf("producer %s: history: %w", p.cfg.Name, *e)
	}
	if ferr != nil {
		return fmt.Errorf("producer %s: flush: %w", p.cfg.Name, ferr)
	}
	if cerr != nil {
		return fmt.Errorf("producer %s: close: %w", p.cfg.Name, cerr)
	}
	return nil
}

// abandon records every attempt the SDK has not answered as
// indeterminate, and makes their callbacks no-ops.
func (p *Producer) abandon() {
	p.pendMu.Lock()
	defer p.pendMu.Unlock()
	for value, a := range p.pending {
		err := p.rec.Record(history.Op{Kind: history.Produce, Invoke: a.invoke, Producer: p.cfg.Name, Topic: p.cfg.Topic,
			Partition: a.partition, Value: value, Outcome: history.Indeterminate, Error: "no answer from the SDK when the harness stopped waiting"})
		if err != nil {
			p.recErr.CompareAndSwap(nil, &err)
		}
		p.failed.Add(1)
	}
	clear(p.pending)
}

// Counts returns the records sent, acknowledged and not acknowledged.
func (p *Producer) Counts() (sent, acked, failed int64) {
	return p.sent.Load(), p.acked.Load(), p.failed.Load()
}
