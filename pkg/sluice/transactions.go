package sluice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/record/partition"
)

// Errors of transactions.
var (
	// ErrProducerFenced: a newer session of the transactional id exists
	// (another NewTransactionalProducer with the same id): this producer
	// is a zombie and can do nothing more. Close it.
	ErrProducerFenced = errors.New("sluice: transactional producer fenced by a newer session")
	// ErrTxnTimedOut: the coordinator aborted the transaction because it
	// stayed open past its timeout (WithTransactionTimeout). The producer
	// is not fenced (KIP-588): Abort, then Begin again. Wrapped in
	// ErrTransactionFailed.
	ErrTxnTimedOut = errors.New("sluice: the transaction timed out and the coordinator aborted it")
	// ErrNoTransaction: Send, SendOffsets, Commit or Abort without Begin.
	ErrNoTransaction = errors.New("sluice: no transaction open (call Begin)")
	// ErrTransactionFailed: a record or offset of the transaction could
	// not be stored; the transaction can only be aborted.
	ErrTransactionFailed = errors.New("sluice: the transaction failed; abort it")
)

// Reasons (google.rpc.ErrorInfo) the coordinator answers with.
const (
	reasonInvalidMapping = "INVALID_PRODUCER_ID_MAPPING"
	reasonTxnTimedOut    = "TRANSACTION_TIMED_OUT"
)

// maxNextPartitions bounds the partitions a commit names for the next
// transaction: a guess that misses costs the server a marker per
// partition, so a transaction spread wider names none.
const maxNextPartitions = 16

// TxnOption configures a TransactionalProducer.
type TxnOption func(*txnConfig)

type txnConfig struct {
	timeout      time.Duration
	codec        record.Codec
	batchBytes   int
	retryTimeout time.Duration
	maxBuffered  int64
	linger       time.Duration
}

// DefaultTxnMaxBuffered is how many bytes of records a TransactionalProducer
// holds before Send flushes them on its own.
const DefaultTxnMaxBuffered = 32 << 20

// WithTxnMaxBuffered bounds the bytes of records (keys, values, headers)
// Send buffers before it flushes them itself (default
// DefaultTxnMaxBuffered, at least 1 KiB): a large transaction is written as
// it goes, not held in memory until Commit.
func WithTxnMaxBuffered(n int64) TxnOption {
	return func(c *txnConfig) { c.maxBuffered = n }
}

// WithTxnLinger is how long a record may wait in the producer before Send
// hands what is buffered for the transaction's partitions to a produce in
// the background (default 0: records wait for Flush or Commit, or for
// WithTxnMaxBuffered). Records sent ahead are stored, still invisible to
// read_committed readers until the commit, so Commit has only the rest to
// write — but still one produce before EndTxn, so it gains only the time
// the rest takes less than the whole: worth it for large transactions,
// not for small ones, whose extra, smaller writes cost the server more
// (bench/results/2026-12-07-transactions-batched).
func WithTxnLinger(d time.Duration) TxnOption {
	return func(c *txnConfig) { c.linger = d }
}

// WithTransactionTimeout is how long a transaction may stay open before
// the coordinator aborts it (default 60 s, at most 15 min).
func WithTransactionTimeout(d time.Duration) TxnOption {
	return func(c *txnConfig) { c.timeout = d }
}

// WithTxnCompression compresses the transaction's batches.
func WithTxnCompression(codec record.Codec) TxnOption {
	return func(c *txnConfig) { c.codec = codec }
}

// WithTxnRetryTimeout bounds how long one call (a flush, a commit) retries
// retriable errors (default 30 s).
func WithTxnRetryTimeout(d time.Duration) TxnOption {
	return func(c *txnConfig) { c.retryTimeout = d }
}

// TransactionalProducer writes records in transactions (Kafka's
// transactional producer, KIP-98/447/890): the records of a transaction,
// on any partitions of any topics, and the consumer offsets sent with it
// become visible together when it commits — to read_committed readers —
// or never. One transaction at a time: Begin, Send records, optionally
// SendOffsets, then Commit or Abort.
//
// The transactional id names the producer across restarts: a new
// TransactionalProducer with the same id fences the older one (its calls
// then fail with ErrProducerFenced) and aborts the transaction it left
// open. Records are buffered until Flush or Commit writes them (or, with
// WithTxnLinger, in the background once the oldest waited that long). The first partition of a transaction is added to it in the
// background at its first Send. A record that fits no batch of the topic's
// max.message.bytes fails at Send.
//
// Safe for concurrent use; calls are serialised.
type TransactionalProducer struct {
	client *Client
	tid    string
	cfg    txnConfig

	mu     sync.Mutex
	pid    int64
	epoch  int16
	fatal  error // fenced: nothing more can be done
	open   bool  // Begin was called and neither Commit nor Abort finished
	failed error // a flush failed: the transaction can only be aborted
	topics map[string]*txnTopic
	// Per partition of the open transaction: whether it was added, the
	// next sequence, the batch being filled, the batches built and not
	// yet stored.
	added   map[TopicPartition]bool
	seq     map[TopicPartition]int32
	filling map[TopicPartition]*record.Builder
	ready   []txnBatch
	// buffered: bytes of records sent since the last flush (bounded by
	// maxBuffered: Send flushes beyond it).
	buffered int64
	// adding is the AddPartitionsToTxn call Send started for the first
	// partition new to the transaction, so that the coordinator's
	// compare-and-set runs while records are buffered rather than on
	// Commit's path (Kafka's producer sends it ahead too); nil when none
	// is pending. Partitions new while it is pending are added by flush.
	// Its partitions are in added; flush and Abort wait for it.
	adding *txnAdd
	// sending is the produce Send started in the background (linger):
	// one at a time, so a partition's batches are stored in sequence
	// order; flush and Abort wait for it, and its failure fails the
	// transaction. oldest is when the oldest record not handed to a
	// produce was buffered (zero: none).
	sending *bgCall
	oldest  time.Time
	// noCommitTxn: the server answered CommitTxn UNIMPLEMENTED (an older
	// one); commits store their last batches before EndTxn.
	noCommitTxn bool
	// keyed: partitions of the open transaction its records chose by key
	// or explicitly; sticky: topics it wrote keyless records to. A commit
	// names them (the sticky ones' next sticky partition) as where the
	// next transaction writes (next).
	keyed  map[TopicPartition]bool
	sticky map[string]bool
	// next: the partitions the last commit opened the next transaction
	// with (the server's answer), at nextAt: Begin counts them as added,
	// unless they are old enough for the coordinator to abort that
	// transaction soon — then the session is restarted first (stale).
	next   []TopicPartition
	nextAt time.Time
	stale  bool
	// resumed: the failed transaction timed out and the session was
	// restarted on the spot (InitProducer naming it): Abort has nothing
	// left to end.
	resumed bool
}

// bgCall is a call running in the background (a produce, or txnAdd's).
type bgCall struct {
	done chan struct{} // closed when err is set
	err  error
}

func newBgCall() *bgCall { return &bgCall{done: make(chan struct{})} }

// wait waits for the call to end; false when ctx ended first.
func (c *bgCall) wait(ctx context.Context) bool {
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// txnAdd is an AddPartitionsToTxn call in the background.
type txnAdd struct {
	*bgCall
	parts []TopicPartition
}

type txnTopic struct {
	nparts int32
	lim    record.Limits
	// part chooses partitions as the Producer does: by key, else sticky
	// (KIP-480) until the partition's batch is sealed — at the latest when
	// the transaction is flushed, so consecutive transactions move on.
	part *partition.Partitioner
}

type txnBatch struct {
	tp   TopicPartition
	data []byte
}

// NewTransactionalProducer starts the session of transactionalID
// (InitProducer): it fences every older session of the id and waits —
// retrying within ctx — while a transaction an older session left is
// aborted or completed.
func (c *Client) NewTransactionalProducer(ctx context.Context, transactionalID string, opts ...TxnOption) (*TransactionalProducer, error) {
	cfg := txnConfig{timeout: time.Minute, batchBytes: 1 << 20, retryTimeout: 30 * time.Second, maxBuffered: DefaultTxnMaxBuffered,
		linger: 0}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case transactionalID == "":
		return nil, fmt.Errorf("%w: transactional id required", ErrInvalidOption)
	case cfg.timeout < time.Millisecond || cfg.timeout > 15*time.Minute:
		return nil, fmt.Errorf("%w: WithTransactionTimeout %v outside [1ms, 15m]", ErrInvalidOption, cfg.timeout)
	case cfg.maxBuffered < 1<<10:
		return nil, fmt.Errorf("%w: WithTxnMaxBuffered %d is below 1 KiB", ErrInvalidOption, cfg.maxBuffered)
	case cfg.retryTimeout <= 0:
		return nil, fmt.Errorf("%w: WithTxnRetryTimeout %v must be positive", ErrInvalidOption, cfg.retryTimeout)
	case cfg.linger < 0 || cfg.linger > time.Minute:
		return nil, fmt.Errorf("%w: WithTxnLinger %v outside [0, 1m]", ErrInvalidOption, cfg.linger)
	}
	t := &TransactionalProducer{client: c, tid: transactionalID, cfg: cfg, topics: make(map[string]*txnTopic)}
	var resp *connect.Response[sluicev1.InitProducerResponse]
	err := t.retry(ctx, "InitProducer", func(ctx context.Context) error {
		var err error
		resp, err = c.producer.InitProducer(ctx, connect.NewRequest(&sluicev1.InitProducerRequest{
			TransactionalId: transactionalID, TransactionTimeoutMs: int32(cfg.timeout.Milliseconds())}))
		return err
	})
	if err != nil {
		return nil, err
	}
	t.pid, t.epoch = resp.Msg.GetProducerId(), int16(resp.Msg.GetProducerEpoch())
	return t, nil
}

// ProducerID and Epoch are the producer's session (for logs and tests).
func (t *TransactionalProducer) ProducerID() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pid
}

// Epoch is the producer's current epoch: bumped by every Commit and Abort.
func (t *TransactionalProducer) Epoch() int16 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.epoch
}

// Begin opens a transaction (on the client: the coordinator learns of it
// with the first partition or offset).
func (t *TransactionalProducer) Begin() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fatal != nil {
		return t.fatal
	}
	if t.open {
		return fmt.Errorf("%w: a transaction is already open", ErrInvalidOption)
	}
	t.open, t.failed, t.resumed = true, nil, false
	t.added = make(map[TopicPartition]bool)
	t.keyed, t.sticky = make(map[TopicPartition]bool), make(map[string]bool)
	if len(t.next) > 0 {
		// Opened by the last commit: in, unless that transaction may
		// time out under this one (half its timeout old) — the first call
		// restarts the session then (fresh).
		if time.Since(t.nextAt) < t.cfg.timeout/2 {
			for _, tp := range t.next {
				t.added[tp] = true
			}
		} else {
			t.stale = true
		}
		t.next = nil
	}
	t.seq = make(map[TopicPartition]int32)
	t.filling = make(map[TopicPartition]*record.Builder)
	t.ready, t.buffered, t.adding, t.sending, t.oldest = nil, 0, nil, nil, time.Time{}
	return nil
}

// Send buffers r in the open transaction. r.Partition AnyPartition picks
// the partition as the Producer does: by key (murmur2), else the sticky
// partition (KIP-480: keyless records go to one partition until its batch
// is sealed, so a transaction touches few partitions).
func (t *TransactionalProducer) Send(ctx context.Context, r *Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.fresh(ctx); err != nil {
		return err
	}
	tm, err := t.topic(ctx, r.Topic)
	if err != nil {
		return err
	}
	explicit := r.Partition
	if explicit == AnyPartition {
		explicit = partition.Unset
	} else if explicit < 0 || explicit >= tm.nparts {
		return fmt.Errorf("%w: partition %d of %q: the topic has %d", ErrInvalidRecord, explicit, r.Topic, tm.nparts)
	}
	p, err := tm.part.Partition(r.Key, explicit)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	tp := TopicPartition{Topic: r.Topic, Partition: p}
	if r.Key != nil || explicit != partition.Unset {
		t.keyed[tp] = true
	} else {
		t.sticky[r.Topic] = true
	}
	if !t.added[tp] && t.adding == nil {
		t.addAhead(ctx, tp)
	}
	ts := r.Timestamp.UnixMilli()
	if r.Timestamp.IsZero() {
		ts = time.Now().UnixMilli()
	}
	rec := &record.Record{Key: r.Key, Value: r.Value, Timestamp: ts}
	for _, h := range r.Headers {
		rec.Headers = append(rec.Headers, record.Header{Key: h.Key, Value: h.Value})
	}
	if !hasTraceHeader(r.Headers) {
		th := injectHeaders(ctx) // ctx's span, as Producer.Produce without a tracer
		rec.Headers = append(rec.Headers, th.headers()...)
	}
	for attempt := 0; ; attempt++ {
		b := t.filling[tp]
		if b == nil {
			b, err = record.NewBuilder(record.BuilderOptions{Codec: t.cfg.codec, Limits: tm.lim, Transactional: true,
				Producer: &record.Producer{ID: t.pid, Epoch: t.epoch, BaseSequence: t.seq[tp]}})
			if err != nil {
				return err
			}
			t.filling[tp] = b
		}
		err := b.Append(rec)
		switch {
		case err == nil:
			t.buffered += recordSize(r)
			if t.oldest.IsZero() {
				t.oldest = time.Now()
			}
			if b.Size() >= t.cfg.batchBytes {
				if err := t.seal(tp); err != nil {
					return err
				}
			}
			if t.buffered >= t.cfg.maxBuffered {
				return t.flush(ctx)
			}
			return t.sendAhead(ctx)
		case errors.Is(err, record.ErrBatchFull) && b.Len() > 0 && attempt == 0:
			if err := t.seal(tp); err != nil {
				return err
			}
		case errors.Is(err, record.ErrBatchFull):
			return fmt.Errorf("%w: a record of %d bytes does not fit a batch of %q (max.message.bytes)", ErrRecordTooLarge, len(r.Key)+len(r.Value), r.Topic)
		default:
			return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
	}
}

// seal builds tp's filling batch and queues it; its sequence numbers are
// taken.
func (t *TransactionalProducer) seal(tp TopicPartition) error { return t.sealAs(tp, true) }

// sealAs is seal; rotate says whether the sticky partitioner moves on (a
// batch sealed only to be sent ahead does not end the partition's turn:
// a transaction keeps touching few partitions).
func (t *TransactionalProducer) sealAs(tp TopicPartition, rotate bool) error {
	b := t.filling[tp]
	delete(t.filling, tp)
	if b == nil || b.Len() == 0 {
		return nil
	}
	n := int32(b.Len())
	data, err := b.Build()
	if err != nil {
		return err
	}
	t.seq[tp] = addSeq(t.seq[tp], n)
	t.ready = append(t.ready, txnBatch{tp, data})
	if tm := t.topics[tp.Topic]; rotate && tm != nil {
		tm.part.BatchDone(tp.Partition)
	}
	return nil
}

// Flush sends the records buffered so far and waits until they are
// stored (still invisible to read_committed readers until Commit).
func (t *TransactionalProducer) Flush(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.fresh(ctx); err != nil {
		return err
	}
	return t.flush(ctx)
}

// addAhead starts adding tp to the transaction in the background.
func (t *TransactionalProducer) addAhead(ctx context.Context, tp TopicPartition) {
	a := &txnAdd{bgCall: newBgCall(), parts: []TopicPartition{tp}}
	t.added[tp], t.adding = true, a
	req := &sluicev1.AddPartitionsToTxnRequest{Session: t.session(),
		Topics: []*sluicev1.TxnTopic{{Topic: tp.Topic, Partitions: []int32{tp.Partition}}}}
	// Send's context may end when Send returns: the call is bounded by
	// the retry timeout instead, and flush gives up waiting with its own.
	ctx = context.WithoutCancel(ctx)
	go func() {
		a.err = t.retry(ctx, "AddPartitionsToTxn", func(ctx context.Context) error {
			_, err := t.client.producer.AddPartitionsToTxn(ctx, connect.NewRequest(req))
			return err
		})
		close(a.done)
	}()
}

// awaitAdd waits for the background AddPartitionsToTxn call, if any: its
// error fails the transaction (its partitions are no longer counted as
// added). ctx ending first leaves it pending.
func (t *TransactionalProducer) awaitAdd(ctx context.Context) error {
	a := t.adding
	if a == nil {
		return nil
	}
	if !a.wait(ctx) {
		return fmt.Errorf("AddPartitionsToTxn (transactional id %q): %w", t.tid, ctx.Err())
	}
	t.adding = nil
	if a.err != nil {
		for _, tp := range a.parts {
			delete(t.added, tp)
		}
		return t.fail(ctx, a.err)
	}
	return nil
}

func (t *TransactionalProducer) flush(ctx context.Context) error {
	if err := t.readyAll(ctx); err != nil || len(t.ready) == 0 {
		return err
	}
	if err := t.produce(ctx, t.ready); err != nil {
		return t.fail(ctx, err)
	}
	t.ready, t.buffered, t.oldest = nil, 0, time.Time{}
	return nil
}

// readyAll seals every batch the transaction buffers into t.ready, once
// the background calls ended and the batches' partitions joined the
// transaction: what is left is to store them.
func (t *TransactionalProducer) readyAll(ctx context.Context) error {
	if err := t.awaitAdd(ctx); err != nil {
		return err
	}
	if err := t.awaitSend(ctx); err != nil {
		return err
	}
	for tp := range t.filling {
		if err := t.seal(tp); err != nil {
			return t.fail(ctx, err)
		}
	}
	if len(t.ready) == 0 {
		return nil
	}
	// Partitions new to the transaction join it first.
	byTopic := map[string][]int32{}
	for _, b := range t.ready {
		if !t.added[b.tp] {
			t.added[b.tp] = true // set now; undone below if the call fails
			byTopic[b.tp.Topic] = append(byTopic[b.tp.Topic], b.tp.Partition)
		}
	}
	if len(byTopic) > 0 {
		req := &sluicev1.AddPartitionsToTxnRequest{Session: t.session()}
		for topic, parts := range byTopic {
			req.Topics = append(req.Topics, &sluicev1.TxnTopic{Topic: topic, Partitions: parts})
		}
		if err := t.retry(ctx, "AddPartitionsToTxn", func(ctx context.Context) error {
			_, err := t.client.producer.AddPartitionsToTxn(ctx, connect.NewRequest(req))
			return err
		}); err != nil {
			for topic, parts := range byTopic {
				for _, p := range parts {
					delete(t.added, TopicPartition{topic, p})
				}
			}
			return t.fail(ctx, err)
		}
	}
	return nil
}

// sendAhead hands the records buffered for the transaction's partitions
// to a produce in the background once the oldest has waited the linger,
// unless a produce is still in flight. Partitions not yet added wait for
// flush, which adds them first. A produce that failed fails the
// transaction here.
func (t *TransactionalProducer) sendAhead(ctx context.Context) error {
	if t.cfg.linger <= 0 || t.oldest.IsZero() || time.Since(t.oldest) < t.cfg.linger {
		return nil
	}
	if s := t.sending; s != nil {
		select {
		case <-s.done:
		default:
			return nil
		}
		t.sending = nil
		if s.err != nil {
			return t.fail(ctx, s.err)
		}
	}
	for tp := range t.filling {
		if t.added[tp] {
			if err := t.sealAs(tp, false); err != nil {
				return t.fail(ctx, err)
			}
		}
	}
	var batches, rest []txnBatch
	for _, b := range t.ready {
		if t.added[b.tp] {
			batches = append(batches, b)
		} else {
			rest = append(rest, b)
		}
	}
	if len(batches) == 0 {
		return nil
	}
	t.ready = rest
	if len(rest) == 0 && len(t.filling) == 0 {
		t.buffered, t.oldest = 0, time.Time{}
	} else {
		t.oldest = time.Now() // what stays waits a linger more at most
	}
	s := newBgCall()
	t.sending = s
	add, sess := t.adding, t.sessionIDs()
	ctx = context.WithoutCancel(ctx) // as addAhead's
	go func() {
		defer close(s.done)
		if add != nil {
			<-add.done
			if add.err != nil {
				s.err = add.err
				return
			}
		}
		s.err = t.produceAs(ctx, sess, batches)
	}()
	return nil
}

// awaitSend waits for the background produce, if any: its error fails the
// transaction. ctx ending first leaves it pending.
func (t *TransactionalProducer) awaitSend(ctx context.Context) error {
	s := t.sending
	if s == nil {
		return nil
	}
	if !s.wait(ctx) {
		return fmt.Errorf("produce (transactional id %q): %w", t.tid, ctx.Err())
	}
	t.sending = nil
	if s.err != nil {
		return t.fail(ctx, s.err)
	}
	return nil
}

// produce stores batches on ProduceStreams, retrying the ones that fail
// retriably (the same bytes: the server deduplicates a batch it stored).
func (t *TransactionalProducer) produce(ctx context.Context, batches []txnBatch) error {
	return t.produceAs(ctx, t.sessionIDs(), batches)
}

// txnIDs are a session's producer id and epoch, as a background call
// captured them.
type txnIDs struct {
	pid   int64
	epoch int16
}

func (t *TransactionalProducer) sessionIDs() txnIDs { return txnIDs{t.pid, t.epoch} }

// produceAs is produce for the session sess (safe without mu: it reads
// only what never changes, so Send may run it in the background).
func (t *TransactionalProducer) produceAs(ctx context.Context, sess txnIDs, batches []txnBatch) error {
	left := batches
	return t.retry(ctx, "produce", func(ctx context.Context) error {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st := t.client.producer.ProduceStream(sctx)
		defer func() { _ = st.CloseResponse() }()
		for i, b := range left {
			req := &sluicev1.ProduceStreamRequest{CorrelationId: uint64(i), AnyOrder: true, TransactionalId: t.tid,
				ProducerId: sess.pid, ProducerEpoch: int32(sess.epoch),
				Request: &sluicev1.ProduceRequest{Topic: b.tp.Topic, Batches: []*sluicev1.EncodedBatch{{Partition: b.tp.Partition, Data: b.data}}}}
			if err := st.Send(req); err != nil {
				return err
			}
		}
		if err := st.CloseRequest(); err != nil {
			return err
		}
		failed := map[uint64]error{}
		answered := 0
		for answered < len(left) {
			resp, err := st.Receive()
			if err != nil {
				return err
			}
			answered++
			if e := resp.GetError(); e != nil {
				failed[resp.GetCorrelationId()] = streamError(e.GetCode(), e.GetMessage(), e.GetRetryAfterMs(), e.GetReason())
			}
		}
		if len(failed) == 0 {
			left = nil
			return nil
		}
		var again []txnBatch
		var first error
		for i, b := range left {
			if err, ok := failed[uint64(i)]; ok {
				again = append(again, b)
				if first == nil {
					first = fmt.Errorf("%s: %w", b.tp, err)
				}
			}
		}
		left = again
		return first
	})
}

// SendOffsets adds consumer offsets to the open transaction: committed for
// group when it commits (the next offset to consume per partition of
// topic), with the lease epochs memberID holds the partitions under (see
// Consumer.TransactionOffsets). A partition whose lease moved fails with
// an error wrapping ErrFenced: stop processing it, and abort.
func (t *TransactionalProducer) SendOffsets(ctx context.Context, group, memberID string, offsets map[TopicPartition]LeasedOffset) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.fresh(ctx); err != nil {
		return err
	}
	byTopic := map[string][]*sluicev1.TxnPartitionOffset{}
	for tp, o := range offsets {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], &sluicev1.TxnPartitionOffset{Partition: tp.Partition, Offset: o.Offset, LeaseEpoch: o.Epoch})
	}
	for topic, os := range byTopic {
		req := &sluicev1.SendOffsetsToTxnRequest{Session: t.session(), Group: group, MemberId: memberID, Topic: topic, Offsets: os}
		err := t.retry(ctx, "SendOffsetsToTxn", func(ctx context.Context) error {
			_, err := t.client.producer.SendOffsetsToTxn(ctx, connect.NewRequest(req))
			return err
		})
		var ce *connect.Error
		if errors.As(err, &ce) && errorReason(ce) == reasonLeaseFenced {
			return t.fail(ctx, fmt.Errorf("%w: %w", ErrFenced, err))
		}
		if err != nil {
			return t.fail(ctx, err)
		}
	}
	return nil
}

// LeasedOffset is a consumer offset with the lease epoch it was reached
// under.
type LeasedOffset struct {
	Offset int64
	Epoch  int64
}

// Commit sends what is buffered, then commits the transaction: it returns
// once every partition holds the commit marker (the records are visible to
// read_committed readers) and the offsets are committed. A transaction
// that failed (ErrTransactionFailed) cannot commit: abort it.
func (t *TransactionalProducer) Commit(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.fresh(ctx); err != nil {
		return err
	}
	if err := t.readyAll(ctx); err != nil {
		return err
	}
	// A last batch left alone goes with the commit (CommitTxn):
	// one round trip less, in a request the size of one the producer sends
	// anyway (so within the server's request limit when those are). Several
	// are stored first, as Flush does.
	if len(t.ready) > 1 {
		if err := t.produce(ctx, t.ready); err != nil {
			return t.fail(ctx, err)
		}
		t.ready = nil
	}
	if err := t.end(ctx, true, t.ready); err != nil {
		return err
	}
	t.ready, t.buffered, t.oldest = nil, 0, time.Time{}
	return nil
}

// Abort aborts the transaction: its records are never shown to
// read_committed readers and its offsets are dropped. Records still
// buffered are discarded.
func (t *TransactionalProducer) Abort(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fatal != nil {
		return t.fatal
	}
	if !t.open {
		return ErrNoTransaction
	}
	t.filling, t.ready, t.buffered, t.oldest = nil, nil, 0, time.Time{}
	// The background calls' outcomes do not matter to an abort, but they
	// must reach the server first (a late one would be fenced by the
	// abort's epoch, yet could race it).
	if a := t.adding; a != nil && !a.wait(ctx) {
		return fmt.Errorf("abort (transactional id %q): waiting for AddPartitionsToTxn: %w", t.tid, ctx.Err())
	}
	t.adding = nil
	if st := t.sending; st != nil && !st.wait(ctx) {
		return fmt.Errorf("abort (transactional id %q): waiting for a produce: %w", t.tid, ctx.Err())
	}
	t.sending = nil
	if t.stale || t.resumed {
		// Nothing of it reached the server (stale), or the coordinator
		// aborted it already and the session restarted (resumed).
		t.stale, t.resumed, t.open, t.failed = false, false, false, nil
		return nil
	}
	err := t.end(ctx, false, nil)
	if err != nil && t.resumed {
		// It had timed out: aborted, and the session restarted.
		t.resumed, t.open, t.failed = false, false, nil
		return nil
	}
	return err
}

// end ends the transaction. A commit with batches stores them first: in
// the same call (CommitTxn; the server deduplicates a retry's), or before
// EndTxn on a server without CommitTxn.
func (t *TransactionalProducer) end(ctx context.Context, commit bool, batches []txnBatch) error {
	var wantNext []*sluicev1.TxnTopic
	if commit {
		wantNext = t.nextGuess()
	}
	next, opened, ok, err := t.commitWith(ctx, batches, wantNext)
	if !ok && err == nil {
		if len(batches) > 0 {
			if err := t.produce(ctx, batches); err != nil {
				return t.fail(ctx, err)
			}
		}
		err = t.retry(ctx, "EndTxn", func(ctx context.Context) error {
			resp, err := t.client.producer.EndTxn(ctx, connect.NewRequest(&sluicev1.EndTxnRequest{Session: t.session(), Commit: commit, NextPartitions: wantNext}))
			if err == nil {
				next = txnIDs{resp.Msg.GetProducerId(), int16(resp.Msg.GetProducerEpoch())}
				opened = resp.Msg.GetNextPartitions()
			}
			return err
		})
	}
	if err != nil {
		return t.fail(ctx, err)
	}
	if next.pid != 0 {
		t.pid = next.pid // the old id's epochs are spent: a new one, at epoch 0
	}
	t.epoch = next.epoch
	t.open, t.failed = false, nil
	t.next, t.nextAt = nil, time.Now()
	for _, tt := range opened {
		for _, p := range tt.GetPartitions() {
			t.next = append(t.next, TopicPartition{Topic: tt.GetTopic(), Partition: p})
		}
	}
	return nil
}

// nextGuess is where the producer's next transaction will write, as far
// as this one tells: the partitions its records chose by key or
// explicitly, and each topic's next sticky partition for keyless ones —
// none when that is more than maxNextPartitions.
func (t *TransactionalProducer) nextGuess() []*sluicev1.TxnTopic {
	byTopic := map[string][]int32{}
	n := 0
	for tp := range t.keyed {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		n++
	}
	for topic := range t.sticky {
		tm := t.topics[topic]
		if tm == nil {
			continue
		}
		p, err := tm.part.Partition(nil, partition.Unset)
		if err != nil || t.keyed[TopicPartition{topic, p}] {
			continue
		}
		byTopic[topic] = append(byTopic[topic], p)
		n++
	}
	if n == 0 || n > maxNextPartitions {
		return nil
	}
	out := make([]*sluicev1.TxnTopic, 0, len(byTopic))
	for topic, ps := range byTopic {
		out = append(out, &sluicev1.TxnTopic{Topic: topic, Partitions: ps})
	}
	return out
}

// fresh restarts the session before the first call of a transaction that
// Begin found stale (see next): InitProducer naming it ends what its last
// commit opened (or finds it aborted by its timeout) at a new epoch.
func (t *TransactionalProducer) fresh(ctx context.Context) error {
	if !t.stale {
		return nil
	}
	if err := t.resume(ctx); err != nil {
		return t.fail(ctx, err)
	}
	t.stale = false
	return nil
}

// resume restarts the producer's session (KIP-588): InitProducer naming
// it, which the coordinator grants only to the current session or one a
// transaction timeout ended — never to a fenced one.
func (t *TransactionalProducer) resume(ctx context.Context) error {
	var resp *connect.Response[sluicev1.InitProducerResponse]
	err := t.retry(ctx, "InitProducer", func(ctx context.Context) error {
		var err error
		resp, err = t.client.producer.InitProducer(ctx, connect.NewRequest(&sluicev1.InitProducerRequest{
			TransactionalId: t.tid, TransactionTimeoutMs: int32(t.cfg.timeout.Milliseconds()), ProducerId: t.pid, ProducerEpoch: int32(t.epoch)}))
		return err
	})
	if err != nil {
		return err
	}
	t.pid, t.epoch = resp.Msg.GetProducerId(), int16(resp.Msg.GetProducerEpoch())
	return nil
}

// commitWith commits the transaction with its last batches in one
// CommitTxn call, and returns the session's next ids (a producer id only
// when it changed). ok false: there are none, or the server has no
// CommitTxn (remembered: the producer stores them before EndTxn).
func (t *TransactionalProducer) commitWith(ctx context.Context, batches []txnBatch, wantNext []*sluicev1.TxnTopic) (next txnIDs, opened []*sluicev1.TxnTopic, ok bool, err error) {
	if len(batches) == 0 || t.noCommitTxn {
		return txnIDs{}, nil, false, nil
	}
	req := &sluicev1.CommitTxnRequest{Session: t.session(), NextPartitions: wantNext}
	for _, b := range batches {
		req.Produce = append(req.Produce, &sluicev1.ProduceRequest{Topic: b.tp.Topic,
			Batches: []*sluicev1.EncodedBatch{{Partition: b.tp.Partition, Data: b.data}}})
	}
	err = t.retry(ctx, "CommitTxn", func(ctx context.Context) error {
		resp, err := t.client.producer.CommitTxn(ctx, connect.NewRequest(req))
		if err == nil {
			next = txnIDs{resp.Msg.GetProducerId(), int16(resp.Msg.GetProducerEpoch())}
			opened = resp.Msg.GetNextPartitions()
		}
		return err
	})
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		t.noCommitTxn = true
		return txnIDs{}, nil, false, nil
	}
	return next, opened, err == nil, err
}

// Close aborts an open transaction (within ctx) and ends the producer.
func (t *TransactionalProducer) Close(ctx context.Context) error {
	t.mu.Lock()
	open, fatal := t.open, t.fatal
	t.mu.Unlock()
	var err error
	if open && fatal == nil {
		err = t.Abort(ctx)
	}
	t.mu.Lock()
	if t.fatal == nil {
		t.fatal = ErrClosed
	}
	t.mu.Unlock()
	return err
}

func (t *TransactionalProducer) usable() error {
	switch {
	case t.fatal != nil:
		return t.fatal
	case !t.open:
		return ErrNoTransaction
	case t.failed != nil:
		return fmt.Errorf("%w: %w", ErrTransactionFailed, t.failed)
	}
	return nil
}

// fail records err: fencing ends the producer, anything else the
// transaction (it can only be aborted). A fenced or timed-out answer is
// settled by the coordinator: the session is restarted naming it
// (resume), which it grants only when the transaction timed out — then
// the transaction failed with ErrTxnTimedOut and the producer goes on —
// and refuses a fenced one.
func (t *TransactionalProducer) fail(ctx context.Context, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeFailedPrecondition {
		switch errorReason(ce) {
		case reasonFenced, reasonTxnTimedOut:
			rerr := t.resume(ctx)
			if rerr == nil {
				t.failed, t.resumed = fmt.Errorf("%w: %w", ErrTxnTimedOut, err), true
				return fmt.Errorf("%w: %w", ErrTransactionFailed, t.failed)
			}
			var re *connect.Error
			if errors.As(rerr, &re) && re.Code() == connect.CodeFailedPrecondition {
				t.fatal = fmt.Errorf("%w: %w", ErrProducerFenced, err)
				return t.fatal
			}
			// The coordinator did not answer: the transaction failed;
			// Abort asks again.
		case reasonInvalidMapping:
			t.fatal = fmt.Errorf("%w: %w", ErrProducerFenced, err)
			return t.fatal
		}
	}
	t.failed = err
	return fmt.Errorf("%w: %w", ErrTransactionFailed, err)
}

func (t *TransactionalProducer) session() *sluicev1.TxnSession {
	return &sluicev1.TxnSession{TransactionalId: t.tid, ProducerId: t.pid, ProducerEpoch: int32(t.epoch)}
}

// topic returns what the producer knows of a topic, asking the server
// the first time.
func (t *TransactionalProducer) topic(ctx context.Context, name string) (*txnTopic, error) {
	if tm := t.topics[name]; tm != nil {
		return tm, nil
	}
	info, err := t.client.DescribeTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	n := int32(len(info.GetPartitions()))
	if n < 1 {
		return nil, fmt.Errorf("%w: topic %q has no partitions", ErrUnknownTopic, name)
	}
	lim := record.DefaultLimits()
	lim.MaxBatchBytes = defaultMaxMessageBytes
	if v, err := strconv.Atoi(info.GetConfig()["max.message.bytes"]); err == nil && v > 0 {
		lim.MaxBatchBytes = v
	}
	part, err := partition.New(n, nil)
	if err != nil {
		return nil, err
	}
	tm := &txnTopic{nparts: n, lim: lim, part: part}
	t.topics[name] = tm
	return tm, nil
}

// retry runs call until it succeeds, fails for good, or the retry timeout
// (or ctx) ends; retriable: UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED (a
// race or CONCURRENT_TRANSACTIONS), transport errors.
func (t *TransactionalProducer) retry(ctx context.Context, what string, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.retryTimeout)
	defer cancel()
	for n := 1; ; n++ {
		err := call(ctx)
		if err == nil {
			return nil
		}
		c, d := classify(err)
		if c != classRetriable || ctx.Err() != nil {
			return fmt.Errorf("%s (transactional id %q): %w", what, t.tid, err)
		}
		if err := sleepCtx(ctx, max(d, backoffDelay(10*time.Millisecond, time.Second, n))); err != nil {
			return fmt.Errorf("%s (transactional id %q): %w (retrying: %w)", what, t.tid, err, ctx.Err())
		}
	}
}
