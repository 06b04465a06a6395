package sluice

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// Consumer is a member of a consumer group: it reads the partitions the
// group leases to it, one Subscribe stream per member session, and commits
// their offsets. It is safe for concurrent use; Poll calls run one at a
// time. See the package doc ("Consuming") for the semantics and the design.
type Consumer struct {
	client *Client
	cfg    consumerConfig
	group  string
	topics []string
	log    *slog.Logger

	// runCtx ends when Close is done committing: it cancels the session
	// stream and every RPC in flight, and stops run and committer.
	runCtx     context.Context
	cancelRun  context.CancelFunc
	runDone    chan struct{}  // closed when run exits
	commitDone chan struct{}  // closed when committer exits
	commitReqs chan commitReq // Commit, CommitOffsets and Close to the committer
	revokeWake chan struct{}  // cap 1: partitions were revoked (commit on revoke)
	grantWake  chan struct{}  // cap 1: credits were freed (Poll, dropped records)
	closeOnce  sync.Once
	closeErr   error

	pollMu sync.Mutex // one Poll at a time; callbacks run under it

	mu sync.Mutex
	// Everything below is guarded by mu.
	sess *groupSession // the session; nil between sessions
	gen  uint64        // sessions opened so far
	// parts are the partitions leased to the session (and being polled);
	// revoking the ones revoked (not lost) whose commit on revoke is
	// pending. A partition is in at most one of them.
	parts    map[TopicPartition]*leasedPart
	revoking map[TopicPartition]*leasedPart
	events   []assignEvent // for Poll to hand to the callbacks, in order
	rr       int           // Poll's round-robin start over partitions
	// Records and bytes buffered in parts (sum of their bufs).
	bufRecords, bufBytes int64
	// Credits the server holds for the session (granted, not yet
	// delivered). Invariant (the memory bound): credits + buffered ≤ the
	// window, except by the grants that failed ambiguously (see grant).
	credRecords, credBytes int64
	failed                 error // fatal: Poll returns it
	closing                bool
	changed                chan struct{} // closed and replaced when Poll has something new
}

// leasedPart is one leased partition of the current session.
type leasedPart struct {
	tp    TopicPartition
	epoch int64 // lease epoch: commits carry it
	buf   []bufferedRecord
	// next is the offset after the last record delivered: later
	// deliveries start at or after it (duplicates are dropped). polled is
	// the offset after the last record Poll returned; done is polled as of
	// the latest Poll's start (the records before it are processed);
	// committed is the last offset stored. -1: unknown (the lease did not
	// say where delivery starts and no record came yet). Invariant:
	// done ≤ polled ≤ next.
	next, polled, done, committed int64
	revokeBy                      time.Time // revoking: when the server releases the lease anyway
}

type bufferedRecord struct {
	rec  ConsumedRecord
	size int64 // creditBytes
}

// assignEvent is an assignment change for the callbacks.
type assignEvent struct {
	parts   []TopicPartition
	revoked bool
	lost    bool
}

// maxPendingEvents bounds the assignment events waiting for Poll; beyond
// it the oldest are dropped (logged): callbacks are notifications, and
// Assignment is always current.
const maxPendingEvents = 4096

// NewConsumer starts a member of group consuming topics. It validates the
// group, the topics and the options (reporting every one out of bounds),
// then starts its goroutines: the session opens in the background, and
// Poll returns records once partitions are leased. Close it.
func (c *Client) NewConsumer(group string, topics []string, opts ...ConsumerOption) (*Consumer, error) {
	cfg, err := newConsumerConfig(group, topics, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Consumer{
		client: c, cfg: cfg, group: group, topics: slices.Clone(topics),
		log:    c.log.With(slog.String("group", group)),
		runCtx: ctx, cancelRun: cancel,
		runDone: make(chan struct{}), commitDone: make(chan struct{}),
		commitReqs: make(chan commitReq),
		revokeWake: make(chan struct{}, 1), grantWake: make(chan struct{}, 1),
		parts:    make(map[TopicPartition]*leasedPart),
		revoking: make(map[TopicPartition]*leasedPart),
		changed:  make(chan struct{}),
	}
	go k.run()
	go k.committer()
	return k, nil
}

// Poll returns the next records of the leased partitions, at most
// WithMaxPollRecords, waiting until some arrive or ctx ends (then ctx's
// error). Records of one partition come in offset order; partitions take
// turns. Before records it runs the OnAssigned and OnRevoked callbacks of
// the assignment changes since the last Poll, on this goroutine.
//
// Calling Poll marks the records every earlier Poll returned as processed
// (see the package doc): auto-commit and commit on revoke commit those.
//
// It returns ErrClosed after Close, and the Consumer's fatal error when it
// failed (an unknown topic, an invalid group, a cluster unreachable for
// WithReadRetryTimeout).
func (k *Consumer) Poll(ctx context.Context) ([]ConsumedRecord, error) {
	k.pollMu.Lock()
	defer k.pollMu.Unlock()
	k.mu.Lock()
	for _, p := range k.parts {
		p.done = p.polled
	}
	k.mu.Unlock()
	for {
		k.mu.Lock()
		if k.closing {
			k.mu.Unlock()
			return nil, ErrClosed
		}
		if evs := k.events; len(evs) > 0 {
			k.events = nil
			k.mu.Unlock()
			k.callbacks(ctx, evs)
			continue
		}
		if recs := k.take(); len(recs) > 0 {
			k.wakeGrant()
			k.mu.Unlock()
			return recs, nil
		}
		if k.failed != nil {
			err := k.failed
			k.mu.Unlock()
			return nil, err
		}
		ch := k.changed
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// callbacks runs the callbacks of evs, off every lock but pollMu.
func (k *Consumer) callbacks(ctx context.Context, evs []assignEvent) {
	for _, ev := range evs {
		switch {
		case ev.revoked && k.cfg.onRevoked != nil:
			k.cfg.onRevoked(ctx, ev.parts, ev.lost)
		case !ev.revoked && k.cfg.onAssigned != nil:
			k.cfg.onAssigned(ctx, ev.parts)
		}
	}
}

// take removes up to maxPollRecords buffered records, partitions taking
// turns. Called with mu held.
func (k *Consumer) take() []ConsumedRecord {
	if k.bufRecords == 0 {
		return nil
	}
	ready := make([]*leasedPart, 0, len(k.parts))
	for _, p := range k.parts {
		if len(p.buf) > 0 {
			ready = append(ready, p)
		}
	}
	slices.SortFunc(ready, func(a, b *leasedPart) int { return compareTP(a.tp, b.tp) })
	first := k.rr % len(ready)
	k.rr++
	limit := k.cfg.maxPollRecords
	out := make([]ConsumedRecord, 0, min(int64(limit), k.bufRecords))
	for i := 0; i < len(ready) && len(out) < limit; i++ {
		p := ready[(first+i)%len(ready)]
		n := min(len(p.buf), limit-len(out))
		for _, b := range p.buf[:n] {
			out = append(out, b.rec)
			k.bufRecords--
			k.bufBytes -= b.size
		}
		p.polled = out[len(out)-1].Offset + 1
		clear(p.buf[:n])
		if p.buf = p.buf[n:]; len(p.buf) == 0 {
			p.buf = nil
		}
	}
	return out
}

// Commit commits the offsets of every record Poll has returned, for the
// partitions still leased, with their lease epochs, and waits for the
// answer. Partitions whose lease moved fail with a *FencedError (wrapping
// ErrFenced) naming them; the Consumer drops them (OnRevoked with lost).
// Retriable failures are retried for up to WithReadRetryTimeout. With no
// session (between reconnects) there is nothing to commit: leases ended
// with the session.
func (k *Consumer) Commit(ctx context.Context) error {
	if k.isClosing() {
		return ErrClosed
	}
	return k.requestCommit(ctx, commitReq{mode: commitPolled})
}

// CommitOffsets commits the given offsets (the next offset to read, one
// past the last processed record) of leased partitions. Partitions not
// leased to this member are left out and named in an error wrapping
// ErrNotAssigned; fenced ones as for Commit.
func (k *Consumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	if k.isClosing() {
		return ErrClosed
	}
	for tp, o := range offsets {
		if o < 0 {
			return fmt.Errorf("%w: CommitOffsets: %s: offset %d is negative", ErrInvalidOption, tp, o)
		}
	}
	return k.requestCommit(ctx, commitReq{mode: commitGiven, offsets: offsets})
}

// Assignment returns the partitions leased to this member now, in order.
func (k *Consumer) Assignment() []TopicPartition {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]TopicPartition, 0, len(k.parts))
	for tp := range k.parts {
		out = append(out, tp)
	}
	return sortTPs(out)
}

// MemberID is the member id of the current session, or "" between
// sessions.
func (k *Consumer) MemberID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sess == nil {
		return ""
	}
	return k.sess.memberID
}

// Close leaves the group: with auto-commit on, it first commits the offsets
// of every record Poll returned (the application is done with them); then
// it leaves the group (the member's leases are free when Close returns) and
// ends the session stream, and waits for the Consumer's goroutines. Poll and Commit return ErrClosed
// from its start. If ctx ends before the commit is answered, Close still
// leaves and returns ctx's error. It returns the final commit's error, if
// any. Later calls return the first one's result.
func (k *Consumer) Close(ctx context.Context) error {
	k.closeOnce.Do(func() { k.closeErr = k.close(ctx) })
	return k.closeErr
}

func (k *Consumer) close(ctx context.Context) error {
	k.mu.Lock()
	k.closing = true
	k.events = nil
	k.notify()
	k.mu.Unlock()
	var err error
	if k.cfg.autoCommit > 0 {
		err = k.requestCommit(ctx, commitReq{mode: commitPolled})
	}
	// Leave before ending the stream, so the member's leases are free when
	// Close returns (ending the stream alone frees them a moment later).
	if member := k.MemberID(); member != "" {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, lerr := k.client.consumer.Leave(lctx, connect.NewRequest(&sluicev1.LeaveRequest{Group: k.group, MemberId: member})); lerr != nil {
			k.log.Debug("sluice: leave failed; the stream's end frees the leases", slog.String("group", k.group), slog.Any("err", lerr))
		}
		cancel()
	}
	k.cancelRun()
	<-k.runDone
	<-k.commitDone
	if err != nil {
		return fmt.Errorf("sluice: group %q: final commit: %w", k.group, err)
	}
	return nil
}

func (k *Consumer) isClosing() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closing
}

// notify wakes Poll. Called with mu held.
func (k *Consumer) notify() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// queueEvent queues an assignment change for the callbacks. Called with mu
// held.
func (k *Consumer) queueEvent(parts []TopicPartition, revoked, lost bool) {
	if k.closing || len(parts) == 0 {
		return
	}
	if len(k.events) >= maxPendingEvents {
		k.log.Warn("sluice: assignment events dropped: Poll is not called", slog.Int("dropped", 1))
		k.events = k.events[1:]
	}
	k.events = append(k.events, assignEvent{parts: sortTPs(parts), revoked: revoked, lost: lost})
	k.notify()
}

// fail makes the Consumer fail with err.
func (k *Consumer) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failed == nil {
		k.failed = err
		k.log.Error("sluice: consumer failed", slog.Any("err", err))
	}
	k.notify()
}

// free is the credit window not granted and not buffered. Called with mu
// held.
func (k *Consumer) free() (records, bytes int64) {
	return k.cfg.windowRecords - max(k.credRecords, 0) - k.bufRecords,
		k.cfg.windowBytes - max(k.credBytes, 0) - k.bufBytes
}

// grantDue: half a window (of records or bytes) is free, worth a grant
// before the next heartbeat. Called with mu held.
func (k *Consumer) grantDue() bool {
	r, b := k.free()
	return r >= max(k.cfg.windowRecords/2, 1) || b >= k.cfg.windowBytes/2
}

// wakeGrant wakes the session loop if a grant is due. Called with mu held.
func (k *Consumer) wakeGrant() {
	if k.sess != nil && k.grantDue() {
		signal(k.grantWake)
	}
}

// dropBuffer drops p's buffered records (revoked, lost, fenced). Called
// with mu held.
func (k *Consumer) dropBuffer(p *leasedPart) {
	for _, b := range p.buf {
		k.bufRecords--
		k.bufBytes -= b.size
	}
	p.buf = nil
}

// onAssignment applies an AssignmentChanged of session s. Revocations are
// applied (and reported) before additions.
func (k *Consumer) onAssignment(s *groupSession, a *sluicev1.AssignmentChanged) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sess != s {
		return
	}
	revokeBy := time.Now().Add(time.Duration(a.GetRevokeTimeoutMs()) * time.Millisecond)
	var revoked []TopicPartition
	for _, l := range a.GetRevoked() {
		tp := TopicPartition{l.GetTopic(), l.GetPartition()}
		p := k.parts[tp]
		if p == nil {
			continue
		}
		delete(k.parts, tp)
		k.dropBuffer(p)
		revoked = append(revoked, tp)
		if !a.GetLost() && k.cfg.commitOnRevoke {
			if l.GetEpoch() != 0 {
				p.epoch = l.GetEpoch() // the revocation's word is the latest
			}
			p.revokeBy = revokeBy
			k.revoking[tp] = p
		}
	}
	k.queueEvent(revoked, true, a.GetLost())
	var added []TopicPartition
	for _, l := range a.GetAdded() {
		tp := TopicPartition{l.GetTopic(), l.GetPartition()}
		if old := k.parts[tp]; old != nil {
			k.dropBuffer(old) // leased again with a new epoch: start over
		}
		delete(k.revoking, tp) // leased back before the revoke commit: moot
		o := max(l.GetOffset(), -1)
		k.parts[tp] = &leasedPart{tp: tp, epoch: l.GetEpoch(), next: o, polled: o, done: o, committed: o}
		added = append(added, tp)
	}
	k.queueEvent(added, false, false)
	if len(k.revoking) > 0 {
		signal(k.revokeWake)
	}
	k.wakeGrant()
}

// onRecords buffers a RecordsDelivered of session s. Records of partitions
// not (or no longer) leased under that epoch, and records before the
// partition's next offset, are dropped (their credits are spent anyway).
// Owned by the session's receiver, which alone uses s.batches.
func (k *Consumer) onRecords(s *groupSession, d *sluicev1.RecordsDelivered) {
	tp := TopicPartition{d.GetTopic(), d.GetPartition()}
	k.mu.Lock()
	if k.sess != s {
		k.mu.Unlock()
		return
	}
	from := int64(-1)
	if p := k.parts[tp]; p != nil && p.epoch == d.GetEpoch() {
		from = p.next
	}
	k.mu.Unlock()

	// Decode outside the lock. What the delivery spent of the credits is
	// what the server says (sessions with stored batches), else the
	// records' sizes; the records of stored batches share the bytes spent.
	var recs []ConsumedRecord
	var sizes []int64
	var spentRecs, spentBytes int64
	var decodeErr error
	if runs := d.GetRecordBatches(); len(runs) > 0 {
		recs, decodeErr = s.batches.decode(nil, tp, runs, from)
		spentRecs = int64(len(recs))
		for _, r := range runs {
			spentBytes += int64(len(r))
		}
	} else {
		recs = make([]ConsumedRecord, len(d.GetRecords()))
		sizes = make([]int64, len(d.GetRecords()))
		for i, r := range d.GetRecords() {
			recs[i], sizes[i] = consumedRecord(tp.Topic, tp.Partition, r), creditBytes(r)
			spentBytes += sizes[i]
		}
		spentRecs = int64(len(recs))
	}
	if c := d.GetCreditsSpent(); c != nil {
		spentRecs, spentBytes = c.GetRecords(), c.GetBytes()
	}
	if len(d.GetRecordBatches()) > 0 {
		sizes = shareBytes(nil, spentBytes, len(recs))
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sess != s {
		return
	}
	if decodeErr != nil {
		s.cancel(fmt.Errorf("%w: partition %s: delivered record batches do not decode: %w", errProtocol, tp, decodeErr))
		return
	}
	k.credRecords -= spentRecs
	k.credBytes -= spentBytes
	if k.credRecords < 0 || k.credBytes < 0 {
		k.log.Debug("sluice: server sent beyond the credits this consumer counted", slog.String("partition", tp.String()),
			slog.Int64("records", k.credRecords), slog.Int64("bytes", k.credBytes))
	}
	if k.bufRecords+spentRecs > 2*k.cfg.windowRecords || k.bufBytes+spentBytes > 2*k.cfg.windowBytes {
		// Far beyond the credits (a lost grant answer explains up to one
		// window): the server is broken; bound the memory, start over.
		s.cancel(fmt.Errorf("%w: %d records buffered, %d more delivered: beyond the credits", errProtocol, k.bufRecords, spentRecs))
		return
	}
	p := k.parts[tp]
	if p == nil || p.epoch != d.GetEpoch() {
		k.wakeGrant()
		return
	}
	added := 0
	for i := range recs {
		r := &recs[i]
		if p.next >= 0 && r.Offset < p.next {
			continue
		}
		p.buf = append(p.buf, bufferedRecord{rec: *r, size: sizes[i]})
		p.next = r.Offset + 1
		k.bufRecords++
		k.bufBytes += sizes[i]
		added++
	}
	if added < len(recs) {
		k.log.Warn("sluice: records delivered twice dropped", slog.String("partition", tp.String()), slog.Int("dropped", len(recs)-added))
		k.wakeGrant()
	}
	if added > 0 {
		k.notify()
	}
}

// shareBytes spreads the bytes a delivery of stored batches spent over its
// n records (appended to dst), so that the buffer gives back to the credit
// window exactly what the delivery took.
func shareBytes(dst []int64, bytes int64, n int) []int64 {
	if n == 0 {
		return dst
	}
	each, rest := bytes/int64(n), bytes%int64(n)
	for i := range n {
		size := each
		if int64(i) < rest {
			size++
		}
		dst = append(dst, size)
	}
	return dst
}
