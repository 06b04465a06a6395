package sluice

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
)

// AnyPartition in Record.Partition lets the producer choose the partition:
// Kafka's murmur2 of the key when the key is not nil, else the sticky
// partition (all keyless records go to one partition until its batch is
// sealed).
const AnyPartition int32 = -1

// Record is one record to produce. The producer references Key, Value and
// Headers until the record's callback has run: do not modify them before.
type Record struct {
	// Topic to produce to. Required.
	Topic string
	// Partition is the target partition, or AnyPartition (-1) to let the
	// producer choose. Note that the zero value is partition 0; NewRecord
	// sets AnyPartition.
	Partition int32
	// Key partitions the record (murmur2, as Kafka) when Partition is
	// AnyPartition. nil is no key; an empty non-nil key is a key.
	Key []byte
	// Value is the payload; nil is a tombstone on compacted topics.
	Value []byte
	// Headers are kept in order; keys need not be unique.
	Headers []Header
	// Timestamp is the record's creation time; zero means the time of
	// Produce. Millisecond precision.
	Timestamp time.Time
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// NewRecord returns a record for topic whose partition the producer chooses
// (by key, or sticky when key is nil).
func NewRecord(topic string, key, value []byte) *Record {
	return &Record{Topic: topic, Partition: AnyPartition, Key: key, Value: value}
}

// Result is the outcome of one record.
type Result struct {
	Topic string
	// Partition the record was written to (or the record's Partition when
	// it failed before one was chosen).
	Partition int32
	// Offset of the record in its partition; -1 when Err is set.
	Offset int64
	// Duplicate: the server recognised a retry of a batch it had already
	// stored and answered with the original offsets (idempotence). The
	// record is stored once.
	Duplicate bool
	// Err is nil when the record is stored. Otherwise see IsRetriable,
	// connect.CodeOf and the Err* values of this package.
	Err error
	// DeadLetter is set when the topic refused the record's batch for its
	// schema and wrote it to its dead-letter topic instead (the topic has
	// schema.validation=dlq; only batches of a producer without
	// idempotence, see WithIdempotence). Offset is then -1.
	DeadLetter *DeadLetter
}

// DeadLetter says where a dead-lettered record went, and why. A batch is
// dead-lettered whole and its records partitioned by key there like any
// others: Partition and Offset are where the batch's first record went.
type DeadLetter struct {
	Topic     string
	Partition int32
	Offset    int64
	Reason    string // the first invalid record's
	SchemaID  int64  // the schema id the first invalid record named, or 0
}

// recordOverhead approximates a record's encoding beyond its bytes (length,
// attributes, deltas, key/value lengths, header count) for buffer
// accounting.
const recordOverhead = 24

// recordSize is what a record counts against WithMaxBufferedBytes.
func recordSize(r *Record) int64 {
	n := int64(recordOverhead + len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value) + 4)
	}
	return n
}

// Producer sends records to Sluice in batches over one ProduceStream. It is
// safe for concurrent use. See the package doc for the delivery semantics
// and the design (goroutines and locks).
type Producer struct {
	client *Client
	cfg    producerConfig
	log    *slog.Logger
	buf    buffer

	// runCtx ends when Close stops waiting: it cancels the stream.
	runCtx    context.Context
	cancelRun context.CancelFunc
	wake      chan struct{} // cap 1: the loop has work or a new timer
	stop      chan struct{} // closed by Close after the flush: the loop exits
	loopDone  chan struct{}
	compWake  chan struct{} // cap 1: completions queued
	compDone  chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex
	// Everything below is guarded by mu.
	closing  bool // Close was called: Produce refuses records
	aborted  bool // Close gave up on the flush: everything failed, stream cancelled
	compStop bool // the completer exits once its queue is empty
	flushing int  // Flush calls running: batches are sealed at once
	topics   map[string]*topicMeta
	open     map[*partState]struct{} // partitions with an open batch
	dirty    map[*partState]struct{} // partitions that may have batches to send
	timers   timerHeap
	armed    time.Time // when the loop's timer fires; zero: not armed
	sess     *session  // the stream; nil between streams
	// streamFailures counts streams broken in a row (reset by an answer);
	// the next one opens at reconnectAt.
	streamFailures int
	reconnectAt    time.Time
	corr           uint64
	comp           []completion
	free           []*record.Builder // bounded pool (maxFreeBuilders)
	hdrs           []record.Header   // scratch for converting headers
	// pid is the producer id every partition starts with: -1 without
	// idempotence; 0 until InitProducer answered (initPID), when nothing
	// is sent yet.
	pid int64
	// pidFailures counts InitProducer calls failed in a row; the next is
	// due at pidRetryAt.
	pidFailures int
	pidRetryAt  time.Time
}

// maxFreeBuilders bounds the pool of batch builders kept for reuse (each
// keeps its buffers, up to a batch).
const maxFreeBuilders = 8

// NewProducer starts a producer. It validates the options (reporting every
// one out of bounds, see the With* functions) and starts the producer's
// goroutines; the stream opens with the first batch. Close it.
func (c *Client) NewProducer(opts ...ProducerOption) (*Producer, error) {
	cfg, err := newProducerConfig(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{
		client: c, cfg: cfg, log: c.log,
		buf:    buffer{max: cfg.maxBuffered, changed: make(chan struct{})},
		runCtx: ctx, cancelRun: cancel,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), loopDone: make(chan struct{}),
		compWake: make(chan struct{}, 1), compDone: make(chan struct{}),
		topics: make(map[string]*topicMeta),
		open:   make(map[*partState]struct{}),
		dirty:  make(map[*partState]struct{}),
		pid:    -1,
	}
	if cfg.idempotent {
		p.pid = 0 // InitProducer, before the first send (initPID)
	}
	go p.loop()
	go p.completer()
	return p, nil
}

// initPIDTimeout bounds one InitProducer call.
const initPIDTimeout = 10 * time.Second

// initPID asks the server for the producer's id (InitProducer) before the
// first batch is sent. Called by the loop without p.mu. A server without a
// producer id store (UNIMPLEMENTED) leaves the producer a random id
// (newProducerID); any other failure is retried with backoff while the
// records wait (their delivery timeout bounds it).
func (p *Producer) initPID() (int64, error) {
	ctx, cancel := context.WithTimeout(p.runCtx, initPIDTimeout)
	defer cancel()
	resp, err := p.client.producer.InitProducer(ctx, connect.NewRequest(&sluicev1.InitProducerRequest{}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		p.log.Info("the server hands out no producer ids (InitProducer unimplemented): using a random one")
		return newProducerID(), nil
	}
	if err != nil {
		return 0, err
	}
	if resp.Msg.GetProducerId() < 1 || resp.Msg.GetProducerEpoch() != 0 {
		return 0, fmt.Errorf("InitProducer answered id %d epoch %d; want an id ≥ 1 at epoch 0", resp.Msg.GetProducerId(), resp.Msg.GetProducerEpoch())
	}
	return resp.Msg.GetProducerId(), nil
}

// adoptPID takes initPID's answer. Called with p.mu held.
func (p *Producer) adoptPID(id int64, err error, now time.Time) {
	if err != nil {
		p.pidFailures++
		p.pidRetryAt = now.Add(p.backoff(p.pidFailures))
		p.log.Warn("InitProducer failed; retrying", slog.Int("failures", p.pidFailures), slog.Any("err", err))
		return
	}
	p.pid, p.pidFailures = id, 0
	for _, tm := range p.topics {
		for _, ps := range tm.parts {
			if ps.pid == 0 {
				ps.pid = id
			}
		}
	}
}

// newProducerID is a random positive int63 from crypto/rand, for servers
// without InitProducer and for a partition that needs a new id (KIP-360's
// recovery, resequenceBatches). Two producers share a random id with
// probability about n²/2⁶⁴ for n producers alive on a partition at once
// (about 5·10⁻⁸ for a million). Sharing an id breaks the dedup of both:
// one's batches may be taken for the other's retries (answered Duplicate but
// not stored) or fenced.
func newProducerID() int64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (Go ≥ 1.24)
		if id := int64(binary.BigEndian.Uint64(b[:]) >> 1); id > 0 {
			return id
		}
	}
}

// Produce buffers r and calls cb with its Result once the record is stored
// or has failed. ctx bounds only what Produce may wait for: the topic's
// metadata (the first record of a topic) and buffer space (when
// WithMaxBufferedBytes is reached). After Produce returns, the delivery
// timeout bounds the record.
//
// Callbacks of records that were buffered run on the producer's completion
// goroutine, one at a time, in per-partition order (the order of Produce
// calls for that partition, from one goroutine). A record that fails before
// it is buffered — closed producer, unknown topic, invalid record, ctx ended
// while waiting — has its callback called before Produce returns, on the
// caller's goroutine. Callbacks must be quick and must not block on the
// producer (Produce into a full buffer, Flush, Close): that would stall
// every other callback. cb may be nil.
//
// The record carries the trace context of ctx's span (or, with
// WithTracerProvider, of its own "send" span, a child of ctx's) in the
// traceparent and tracestate headers, unless r already has one of them
// (tracing.go). r itself is not changed.
func (p *Producer) Produce(ctx context.Context, r *Record, cb func(Result)) {
	if cb == nil {
		cb = func(Result) {}
	}
	if r == nil {
		cb(Result{Partition: AnyPartition, Offset: -1, Err: fmt.Errorf("%w: nil record", ErrInvalidRecord)})
		return
	}
	th, cb := p.traceRecord(ctx, r, cb)
	fail := func(err error) { cb(Result{Topic: r.Topic, Partition: r.Partition, Offset: -1, Err: err}) }
	size := recordSize(r) + th.size()
	if size > p.cfg.maxBuffered {
		fail(fmt.Errorf("%w: %d bytes, more than the %d bytes of buffer", ErrRecordTooLarge, size, p.cfg.maxBuffered))
		return
	}
	if p.isClosing() {
		fail(ErrClosed)
		return
	}
	tm, err := p.topic(ctx, r.Topic)
	if err != nil {
		fail(err)
		return
	}
	if err := p.buf.reserve(ctx, size); err != nil {
		fail(err)
		return
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	p.mu.Lock()
	err = p.appendRecord(tm, r, th.headers(), ts.UnixMilli(), cb, size)
	p.mu.Unlock()
	if err != nil {
		p.buf.release(size, 1)
		fail(err)
	}
}

// ProduceSync produces r and waits for its outcome. If ctx ends first it
// returns ctx's error, and the record may still be stored later.
func (p *Producer) ProduceSync(ctx context.Context, r *Record) (Result, error) {
	done := make(chan Result, 1)
	p.Produce(ctx, r, func(res Result) { done <- res })
	select {
	case res := <-done:
		return res, res.Err
	case <-ctx.Done():
		err := context.Cause(ctx)
		res := Result{Partition: AnyPartition, Offset: -1, Err: err}
		if r != nil {
			res.Topic, res.Partition = r.Topic, r.Partition
		}
		return res, err
	}
}

// Flush sends every buffered record at once (ignoring the linger) and waits
// until no record is buffered: every callback of a record produced before
// Flush — and of any produced while it waits — has returned. It returns
// ctx's error if ctx ends first; the records stay buffered.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.flushing++
	for ps := range p.open {
		p.seal(ps)
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	if err := p.buf.waitEmpty(ctx); err != nil {
		return fmt.Errorf("sluice: flush: %w", err)
	}
	return nil
}

// Close stops the producer: Produce fails with ErrClosed from now on,
// buffered records are flushed (Flush), the stream is closed, and every
// goroutine of the producer has exited when Close returns. If ctx ends
// before the flush completes, the records still buffered fail with an error
// wrapping ErrClosed (they may or may not be stored), and Close returns
// ctx's error. Close may be called more than once; later calls wait for the
// first and return its result.
func (p *Producer) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

func (p *Producer) close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	err := p.Flush(ctx)
	if err != nil {
		p.mu.Lock()
		p.abort(fmt.Errorf("%w: %w", ErrClosed, err))
		p.mu.Unlock()
	}
	close(p.stop)
	select {
	case <-p.loopDone:
	case <-ctx.Done():
		p.cancelRun()
		<-p.loopDone
	}
	p.cancelRun()
	p.mu.Lock()
	p.compStop = true
	p.mu.Unlock()
	signal(p.compWake)
	<-p.compDone
	return err
}

func (p *Producer) isClosing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

// appendRecord adds a record to its partition's open batch, with the trace
// context headers th after its own. Called with p.mu held.
func (p *Producer) appendRecord(tm *topicMeta, r *Record, th []record.Header, ts int64, cb func(Result), size int64) error {
	if p.closing {
		return ErrClosed
	}
	part, err := tm.partitioner.Partition(r.Key, r.Partition)
	if err != nil {
		return fmt.Errorf("%w: topic %q has %d partitions: %w", ErrInvalidRecord, tm.name, tm.nparts, err)
	}
	ps := tm.parts[part]
	p.hdrs = p.hdrs[:0]
	for _, h := range r.Headers {
		p.hdrs = append(p.hdrs, record.Header{Key: h.Key, Value: h.Value})
	}
	p.hdrs = append(p.hdrs, th...)
	rec := record.Record{Timestamp: ts, Key: r.Key, Value: r.Value, Headers: p.hdrs}
	err = p.appendToBatch(ps, &rec, cb, size, time.Now())
	clear(p.hdrs) // drop references to the caller's header values
	return err
}

// completion is one item for the completer: a finished batch (its
// callbacks run, then its buffer space is released) or a hook call.
type completion struct {
	b    *batch
	hook func()
}

// completer runs callbacks and hooks, in the order they were queued, off
// every lock. It exits when Close says so and the queue is empty.
func (p *Producer) completer() {
	defer close(p.compDone)
	for {
		p.mu.Lock()
		items, stop := p.comp, p.compStop
		p.comp = nil
		p.mu.Unlock()
		for _, it := range items {
			if it.hook != nil {
				it.hook()
				continue
			}
			b := it.b
			for i, cb := range b.cbs {
				res := Result{Topic: b.ps.topic.name, Partition: b.ps.id, Offset: -1, Err: b.err}
				switch {
				case b.err != nil:
				case b.dead != nil:
					d := *b.dead
					res.DeadLetter = &d
				default:
					res.Offset, res.Duplicate = b.base+int64(i), b.dup
				}
				cb(res)
			}
			p.buf.release(b.bytes, int64(len(b.cbs)))
		}
		if len(items) == 0 {
			if stop {
				return
			}
			<-p.compWake
		}
	}
}

// hook queues a hook call for the completer. Called with p.mu held.
func (p *Producer) hook(f func()) {
	p.comp = append(p.comp, completion{hook: f})
	signal(p.compWake)
}

// signal does a non-blocking send on a capacity-1 channel.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// buffer accounts for the records between Produce and their callback.
type buffer struct {
	mu      sync.Mutex
	max     int64
	bytes   int64
	records int64
	changed chan struct{} // closed and replaced whenever space is released
}

// reserve takes n bytes for one record, waiting for space until ctx ends.
func (b *buffer) reserve(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.bytes+n <= b.max {
			b.bytes += n
			b.records++
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrBufferFull, context.Cause(ctx))
		}
	}
}

func (b *buffer) release(n, records int64) {
	b.mu.Lock()
	b.bytes -= n
	b.records -= records
	if b.bytes < 0 || b.records < 0 {
		panic(fmt.Sprintf("sluice: buffer accounting below zero (%d bytes, %d records)", b.bytes, b.records))
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// waitEmpty waits until no record is buffered.
func (b *buffer) waitEmpty(ctx context.Context) error {
	for {
		b.mu.Lock()
		if b.records == 0 {
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
