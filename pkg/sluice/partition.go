package sluice

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/record"
)

// batchState is where a sealed batch is.
type batchState uint8

const (
	// stQueued: waiting to be sent (first time, or again after a failure).
	stQueued batchState = iota
	// stInflight: sent on the current stream, not answered.
	stInflight
	// stAcked: stored; base and dup are set.
	stAcked
	// stFailed: its records fail with err.
	stFailed
)

// batch is one sealed record batch of a partition.
type batch struct {
	ps   *partState
	data []byte // the encoded batch; identical on every resend of one (pid, epoch, seq)
	n    int32  // records
	lim  record.Limits
	// Idempotence fields encoded in data (pid -1 without idempotence).
	pid      int64
	epoch    int16
	seq      int32
	numbered bool // pid, epoch, seq are set for the partition's current epoch (send)

	cbs      []func(Result) // one per record, in order
	bytes    int64          // buffer bytes of the records
	created  time.Time      // first record produced
	deadline time.Time      // created + delivery timeout

	state    batchState
	sess     *session // while stInflight
	reqBytes int      // size of the request message that carried it last
	attempts int      // sends so far
	lastErr  error    // the last attempt's error
	err      error    // the outcome, when stFailed
	base     int64    // when stAcked
	dup      bool
	dead     *DeadLetter // when stAcked and dead-lettered (Offset: its first record's)
}

// partState is the producer's state for one partition.
//
// Invariants (under Producer.mu):
//   - q holds the sealed batches not yet completed, in sequence (= produce)
//     order; its first batch is never stAcked or stFailed (complete pops
//     those at once, which is what keeps callbacks in partition order).
//   - inflight is the number of batches of q in stInflight, at most
//     maxInFlight; they are all on the current session.
//   - A batch is sent only when every earlier stQueued batch of q has been;
//     after a failed attempt (rewind) nothing more is sent until inflight is
//     0, and then q is resent from its first stQueued batch, in order.
//   - With idempotence, a batch gets its (pid, epoch, sequence) when it is
//     first sent in the partition's current epoch (numbered); since batches
//     are sent in q order, the numbered batches of q in stQueued or
//     stInflight carry consecutive sequence numbers, the first following
//     the last acknowledged batch of the same epoch, or 0 after a
//     re-sequencing, and come before the unnumbered ones; nextSeq follows
//     the last numbered one. A batch that expires before it was ever sent
//     leaves no hole (Kafka numbers batches when it drains them, too).
type partState struct {
	topic *topicMeta
	id    int32

	// The open batch (nil when none).
	open      *record.Builder
	openCbs   []func(Result)
	openBytes int64
	openSince time.Time
	openLim   record.Limits
	openGen   uint64 // identifies the open batch for its linger timer

	// Idempotence: the partition's identity and next sequence.
	pid     int64
	epoch   int16
	nextSeq int32

	q        []*batch
	inflight int

	// rewind: an attempt failed; send nothing until inflight is 0, then
	// resend from the first unacknowledged batch.
	rewind bool
	// failures counts failed attempts in a row (backoff); retryAt is when
	// sending may resume.
	failures int
	retryAt  time.Time
	// unresolved: a batch that may have been stored failed to its
	// callbacks (delivery timeout), so the server may expect its sequence
	// or the next one. The next answer settles it: success (no hole) or out
	// of order (a hole: re-sequence).
	unresolved bool
	// resequence: a hole is certain; once inflight is 0, bump the epoch and
	// renumber the unacknowledged batches from 0. newID: take a new
	// producer id too (fenced).
	resequence bool
	newID      bool

	// zombies are the batches expire failed while they were in flight, in
	// sequence order: they keep their in-flight slots until answered or
	// their stream ends (settleZombie).
	zombies []*batch

	// Armed timers (to avoid duplicate heap entries).
	retryArmed    time.Time
	deadlineArmed time.Time
	zombieArmed   time.Time
}

func (p *Producer) newPartState(tm *topicMeta, id int32) *partState {
	return &partState{topic: tm, id: id, pid: p.pid}
}

// firstUnsettled is the first batch of q not yet acknowledged or failed.
func (ps *partState) firstUnsettled() *batch {
	for _, b := range ps.q {
		if b.state == stQueued || b.state == stInflight {
			return b
		}
	}
	return nil
}

// addSeq is s+n modulo 2³¹, Kafka's sequence arithmetic.
func addSeq(s, n int32) int32 { return int32((int64(s) + int64(n)) % (math.MaxInt32 + 1)) }

// appendToBatch appends rec to the partition's open batch, sealing it when
// full (before, if rec does not fit; after, once it reaches the batch
// size). Called with p.mu held.
func (p *Producer) appendToBatch(ps *partState, rec *record.Record, cb func(Result), size int64, now time.Time) error {
	if ps.open == nil {
		p.openBatch(ps, now)
	}
	err := ps.open.Append(rec)
	if errors.Is(err, record.ErrBatchFull) {
		p.seal(ps)
		p.openBatch(ps, now)
		err = ps.open.Append(rec)
		if errors.Is(err, record.ErrBatchFull) {
			err = fmt.Errorf("%w: does not fit an empty batch", ErrRecordTooLarge)
		}
	}
	if err != nil {
		if ps.open.Len() == 0 {
			p.dropOpen(ps)
		}
		if errors.Is(err, ErrRecordTooLarge) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	ps.openCbs = append(ps.openCbs, cb)
	ps.openBytes += size
	if ps.open.Size() >= ps.topic.batchBytes || p.cfg.linger == 0 || p.flushing > 0 {
		p.seal(ps)
	}
	return nil
}

// openBatch starts the partition's next batch with its producer fields.
func (p *Producer) openBatch(ps *partState, now time.Time) {
	var prod *record.Producer
	if p.cfg.idempotent {
		// The sequence is set when the batch is first sent (number).
		prod = &record.Producer{ID: ps.pid, Epoch: ps.epoch, BaseSequence: 0}
	}
	bld := p.builder(record.BuilderOptions{Codec: p.cfg.codec, Producer: prod, Limits: ps.topic.lim})
	ps.open, ps.openSince, ps.openLim = bld, now, ps.topic.lim
	ps.openGen++
	p.open[ps] = struct{}{}
	if p.cfg.linger > 0 && p.flushing == 0 {
		p.schedule(timerEvent{at: now.Add(p.cfg.linger), ps: ps, kind: evLinger, gen: ps.openGen})
	}
}

// dropOpen discards an empty open batch.
func (p *Producer) dropOpen(ps *partState) {
	p.putBuilder(ps.open)
	ps.open, ps.openCbs, ps.openBytes = nil, nil, 0
	delete(p.open, ps)
}

// seal closes the open batch and queues it for sending.
func (p *Producer) seal(ps *partState) {
	bld := ps.open
	n := int32(bld.Len())
	data, err := bld.Build()
	if err != nil {
		panic(fmt.Sprintf("sluice: build a batch of %d records: %v", n, err)) // records were checked by Append
	}
	b := &batch{
		ps: ps, data: data, n: n, lim: ps.openLim,
		pid: record.NoProducerID, epoch: record.NoProducerEpoch, seq: record.NoSequence,
		cbs: ps.openCbs, bytes: ps.openBytes, created: ps.openSince,
		deadline: ps.openSince.Add(p.cfg.deliveryTimeout),
	}
	if p.cfg.idempotent {
		b.pid, b.epoch = ps.pid, ps.epoch
	}
	ps.q = append(ps.q, b)
	p.dropOpen(ps)
	ps.topic.partitioner.BatchDone(ps.id)
	p.armDeadline(ps)
	p.markDirty(ps)
}

// builder takes a batch builder from the pool, reset to opts.
func (p *Producer) builder(opts record.BuilderOptions) *record.Builder {
	var bld *record.Builder
	if n := len(p.free); n > 0 {
		bld, p.free = p.free[n-1], p.free[:n-1]
		if err := bld.Reset(opts); err != nil {
			panic(fmt.Sprintf("sluice: reset batch builder: %v", err)) // options are ours
		}
		return bld
	}
	bld, err := record.NewBuilder(opts)
	if err != nil {
		panic(fmt.Sprintf("sluice: new batch builder: %v", err))
	}
	return bld
}

func (p *Producer) putBuilder(bld *record.Builder) {
	if len(p.free) < maxFreeBuilders {
		p.free = append(p.free, bld)
	}
}

// markDirty notes that the partition may have something to send and wakes
// the loop.
func (p *Producer) markDirty(ps *partState) {
	p.dirty[ps] = struct{}{}
	signal(p.wake)
}

// armDeadline makes sure a timer fires at the delivery deadline of the
// partition's first batch (deadlines do not decrease along q).
func (p *Producer) armDeadline(ps *partState) {
	if len(ps.q) == 0 || ps.q[0].deadline.Equal(ps.deadlineArmed) {
		return
	}
	ps.deadlineArmed = ps.q[0].deadline
	p.schedule(timerEvent{at: ps.deadlineArmed, ps: ps, kind: evDeadline})
}

// pump sends what the partition may send now. It returns false when it
// needs a stream and none is open (the partition stays dirty).
func (p *Producer) pump(ps *partState, now time.Time) bool {
	if ps.rewind || ps.resequence {
		if ps.inflight > 0 {
			return true // settle first; answers mark the partition dirty
		}
		if ps.resequence {
			p.resequenceBatches(ps, now)
		}
		ps.rewind = false
	}
	if now.Before(ps.retryAt) {
		if !ps.retryArmed.Equal(ps.retryAt) {
			ps.retryArmed = ps.retryAt
			p.schedule(timerEvent{at: ps.retryAt, ps: ps, kind: evRetry})
		}
		return true
	}
	for _, b := range ps.q {
		if b.state != stQueued {
			continue
		}
		if ps.inflight >= p.cfg.maxInFlight {
			return true
		}
		s := p.session(now)
		if s == nil {
			return false
		}
		p.send(s, b, now)
	}
	return true
}

// fail settles b with err. definite says the server refused it (so it is
// not stored); otherwise it may be. With idempotence a failed batch leaves a
// hole in the partition's sequence: certain when definite or never sent
// (re-sequence), possible otherwise (unresolved: the next answer tells).
func (p *Producer) fail(ps *partState, b *batch, err error, definite bool, now time.Time) {
	b.state, b.err, b.sess = stFailed, err, nil
	if p.cfg.idempotent && b.numbered {
		// An unnumbered batch was never sent in this epoch: no hole.
		if definite {
			ps.resequence = true
		} else {
			ps.unresolved = true
		}
	}
	if h := p.cfg.hooks.OnBatchFailed; h != nil {
		info := b.info(now)
		p.hook(func() { h(info, err) })
	}
}

// complete pops the settled batches at the front of q to the completer, so
// callbacks run in partition order.
func (p *Producer) complete(ps *partState) {
	n := 0
	for _, b := range ps.q {
		if b.state != stAcked && b.state != stFailed {
			break
		}
		p.comp = append(p.comp, completion{b: b})
		n++
	}
	if n > 0 {
		clear(ps.q[:n])
		ps.q = ps.q[n:]
		if len(ps.q) == 0 {
			ps.q = nil
		}
		signal(p.compWake)
	}
	p.armDeadline(ps)
}

// expire fails the batches at the front of q whose delivery deadline has
// passed.
//
// A batch in flight is failed too (its records get ErrDeliveryTimeout: it
// may be stored), but it keeps its in-flight slot on its stream until its
// answer comes or the stream ends (a zombie): the answer, or the answers
// to the batches sent after it, still settle the partition's sequence.
// Resetting the stream instead, as expire once did, threw away every other
// batch in flight with it; after an outage as long as the delivery
// timeout, every batch sent was about to expire, each expiry reset the
// stream again, and the producer never caught up while records kept
// coming. Only a stream that leaves a zombie unanswered for zombieGrace
// past its deadline is reset: it is stuck.
func (p *Producer) expire(ps *partState, now time.Time) {
	for _, b := range ps.q {
		if b.deadline.After(now) {
			break
		}
		if b.state != stQueued && b.state != stInflight {
			continue
		}
		err := fmt.Errorf("%w: %s/%d: %d records after %v", ErrDeliveryTimeout, ps.topic.name, ps.id, b.n, now.Sub(b.created).Round(time.Millisecond))
		if b.state == stInflight {
			err = fmt.Errorf("%w (sent, not answered: may be stored)", err)
		}
		if b.lastErr != nil {
			err = fmt.Errorf("%w (last error: %w)", err, b.lastErr)
		}
		if b.state == stInflight {
			s := b.sess
			p.fail(ps, b, err, false, now)
			b.sess = s
			ps.zombies = append(ps.zombies, b)
			continue
		}
		p.fail(ps, b, err, false, now)
	}
	if len(ps.zombies) == 0 {
		return
	}
	z := ps.zombies[0]
	stuck := z.deadline.Add(p.zombieGrace())
	if now.Before(stuck) {
		if !ps.zombieArmed.Equal(stuck) {
			ps.zombieArmed = stuck
			p.schedule(timerEvent{at: stuck, ps: ps, kind: evDeadline})
		}
		return
	}
	if z.sess != nil {
		p.breakSession(z.sess, fmt.Errorf("no answer for a batch of %s/%d %v after its delivery timeout", ps.topic.name, ps.id, p.zombieGrace()))
	}
}

// zombieGrace is how long a batch failed in flight (expire) may wait for
// its answer before its stream counts as stuck: half the delivery
// timeout, at least a second.
func (p *Producer) zombieGrace() time.Duration { return max(p.cfg.deliveryTimeout/2, time.Second) }

// settleZombie takes the answer (or the stream's end, answered false) for
// a batch expire failed while it was in flight on s. It reports false if
// b is no such batch. Called with p.mu held.
func (p *Producer) settleZombie(s *session, b *batch, answered bool, failed bool) bool {
	ps := b.ps
	i := slices.Index(ps.zombies, b)
	if i < 0 || b.sess != s {
		return false
	}
	ps.zombies = slices.Delete(ps.zombies, i, i+1)
	b.sess = nil
	ps.inflight--
	if answered && failed && p.cfg.idempotent && b.pid == ps.pid && b.epoch == ps.epoch {
		// Refused, so not stored: a hole in the sequence for certain.
		ps.rewind, ps.resequence = true, true
	}
	p.markDirty(ps)
	return true
}

// onAck settles a batch the server stored.
func (p *Producer) onAck(ps *partState, b *batch, base int64, dup bool, dead *DeadLetter, now time.Time) {
	b.state, b.base, b.dup, b.dead = stAcked, base, dup, dead
	ps.failures = 0
	if b.pid == ps.pid && b.epoch == ps.epoch {
		// Stored in sequence: every earlier sequence of this epoch is
		// stored too, so no hole is pending.
		ps.unresolved = false
	}
	if h := p.cfg.hooks.OnBatchAcked; h != nil {
		info := b.info(now)
		info.BaseOffset, info.Duplicate = base, dup
		p.hook(func() { h(info) })
	}
}

// onBatchError decides what a failed attempt means for b (see classify and
// the package doc's delivery semantics).
func (p *Producer) onBatchError(ps *partState, b *batch, err error, now time.Time) {
	cls, delay := classify(err)
	err = fmt.Errorf("produce %s/%d: %w", ps.topic.name, ps.id, err)
	b.lastErr = err
	if !p.cfg.idempotent && cls != classRetriable {
		cls = classFatal // sequence errors cannot happen without idempotence
	}
	retried := func() {
		if h := p.cfg.hooks.OnBatchRetried; h != nil {
			info := b.info(now)
			p.hook(func() { h(info, err) })
		}
	}
	switch cls {
	case classRetriable:
		ps.rewind = true
		ps.failures++
		if at := now.Add(max(delay, p.backoff(ps.failures))); at.After(ps.retryAt) {
			ps.retryAt = at
		}
		retried()
	case classOutOfOrder, classUnknownProducer:
		// Expected after an earlier batch failed: it is missing, so this
		// one is out of order. It is decisive only for the first
		// unsettled batch.
		ps.rewind = true
		if !ps.resequence && ps.firstUnsettled() == b {
			if cls == classOutOfOrder && !ps.unresolved {
				// Nothing of ours is missing, yet the server expects
				// another sequence: it lost state (e.g. read back less
				// than our window after a failover). b may be stored.
				p.fail(ps, b, err, false, now)
				return
			}
			ps.resequence = true
		}
		retried()
	case classFenced:
		// Another producer uses our id with a newer epoch (an id
		// collision): take a new id. b was refused, not stored.
		ps.rewind, ps.resequence, ps.newID = true, true, true
		retried()
	default:
		if p.cfg.idempotent {
			ps.rewind = true
		}
		if code := connect.CodeOf(err); code == connect.CodeNotFound ||
			(code == connect.CodeInvalidArgument && strings.Contains(err.Error(), "partition")) {
			ps.topic.stale = true // refresh the metadata with the next record
		}
		p.fail(ps, b, err, true, now)
	}
}

// resequenceBatches bumps the partition's epoch (or takes a new producer
// id) so its unacknowledged batches are numbered again from sequence 0 as
// they are sent — Kafka's recovery from a sequence hole (KIP-360). Called
// with inflight = 0.
func (p *Producer) resequenceBatches(ps *partState, now time.Time) {
	if ps.newID || ps.epoch == math.MaxInt16 {
		ps.pid, ps.epoch = newProducerID(), 0
	} else {
		ps.epoch++
	}
	n := 0
	for _, b := range ps.q {
		if b.state != stQueued {
			continue
		}
		b.numbered = false
		n++
	}
	ps.nextSeq = 0
	ps.resequence, ps.unresolved, ps.newID = false, false, false
	p.log.Info("producer epoch bumped", slog.String("topic", ps.topic.name), slog.Int("partition", int(ps.id)),
		slog.Int64("producer_id", ps.pid), slog.Int("epoch", int(ps.epoch)), slog.Int("batches", n))
	if h := p.cfg.hooks.OnEpochBump; h != nil {
		topic, part, pid, epoch := ps.topic.name, ps.id, ps.pid, ps.epoch
		p.hook(func() { h(topic, part, pid, epoch) })
	}
}

// number gives b the partition's producer id, epoch and next sequence,
// in its encoding too (the fields are covered by the CRC). Called when b
// is sent unnumbered.
func (p *Producer) number(ps *partState, b *batch) {
	b.pid, b.epoch, b.seq, b.numbered = ps.pid, ps.epoch, ps.nextSeq, true
	ps.nextSeq = addSeq(ps.nextSeq, b.n)
	if err := record.SetProducer(b.data, b.pid, b.epoch, b.seq); err != nil {
		panic(fmt.Sprintf("sluice: number our own batch: %v", err)) // we built it
	}
}

// abort fails every record not yet completed (Close gave up).
func (p *Producer) abort(err error) {
	now := time.Now()
	p.aborted = true
	for ps := range p.open {
		p.seal(ps)
	}
	for _, tm := range p.topics {
		for _, ps := range tm.parts {
			for _, b := range ps.q {
				if b.state == stQueued || b.state == stInflight {
					if b.state == stInflight {
						ps.inflight--
					}
					p.fail(ps, b, err, false, now)
				}
			}
			p.complete(ps)
		}
	}
}

// backoff is the delay before the n-th retry in a row (n ≥ 1): doubling from
// the initial backoff up to the max, with ±20% jitter.
func (p *Producer) backoff(n int) time.Duration {
	d := p.cfg.backoffInitial
	for i := 1; i < n && d < p.cfg.backoffMax; i++ {
		d *= 2
	}
	d = min(d, p.cfg.backoffMax)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// info describes b for hooks.
func (b *batch) info(now time.Time) BatchInfo {
	return BatchInfo{
		Topic: b.ps.topic.name, Partition: b.ps.id, Records: int(b.n), Bytes: len(b.data),
		ProducerID: b.pid, ProducerEpoch: b.epoch, BaseSequence: b.seq,
		Attempt: b.attempts, Age: now.Sub(b.created), BaseOffset: -1,
	}
}
