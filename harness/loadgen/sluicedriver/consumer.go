package sluicedriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
)

// A consumer is one member of a consumer group, spoken to over the
// generated ConsumerService client (sluice.v1.ConsumerService, see
// proto/sluice/v1/consumer.proto):
//
//   - Subscribe opens the member session: a server stream of
//     SessionStarted, AssignmentChanged and RecordsDelivered events. One
//     goroutine (run, the receive loop) reads it and calls deliver for each
//     record, synchronously, so a record is "processed" once its deliver
//     call returned.
//   - Credits: the session starts with a window of CreditRecords records
//     and CreditBytes bytes. The receive loop counts what it delivered;
//     the granter goroutine gives it back with GrantCredits once half of
//     either window was used, so the server always has room to send ahead
//     while never holding more than one window undelivered.
//   - Keepalive: the granter also calls GrantCredits (with zero credits if
//     nothing is due) at least every half heartbeat_interval_ms, so a live
//     consumer never loses its leases to the session timeout.
//   - Commit: the committer goroutine commits each held partition's next
//     offset, with its lease epoch, every CommitInterval when it moved; a
//     partition revoked without `lost` is committed at once (commit on
//     revoke, which also releases the lease to its next owner); a lost one
//     is dropped uncommitted. Close commits what was delivered.
//   - Reconnect: when the stream fails, the session's goroutines stop and
//     the receive loop subscribes again after a backoff (100 ms doubling to
//     5 s). Delivery restarts at the committed offsets, so records since
//     the last commit come again: the consumer remembers, per partition,
//     the next offset it delivered and skips records below it, so each
//     record reaches the load generator once per consumer and its
//     end-to-end latency is counted once, at its first delivery.
//
// Goroutines: run is owned by the consumer (Close cancels and waits); the
// granter and committer are owned by one session (serve starts them and
// waits for them before it returns).
type consumer struct {
	cfg     Config
	cons    sluicev1connect.ConsumerServiceClient
	topic   string
	group   string
	deliver func([]byte)

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// deliverMu is held by the receive loop while it calls deliver, and by
	// Close to set closed: no deliver call starts after Close returns.
	deliverMu sync.Mutex
	closed    bool

	// delivered is each partition's next offset not yet delivered by this
	// consumer (redeliveries below it are skipped). Receive loop only.
	delivered map[int32]int64

	// assigned is how many partitions the open session holds (Assigned).
	assigned atomic.Int64

	mu       sync.Mutex
	cur      *session // the open session, nil between sessions
	failures int      // sessions that ended with an error
	firstErr error
}

// session is one Subscribe stream.
type session struct {
	c         *consumer
	member    string
	id        string
	heartbeat time.Duration
	grantNow  chan struct{}    // buffered 1: credits are due
	it        *record.Iterator // stored batches; the receive loop's

	mu        sync.Mutex
	leases    map[int32]*lease // held and not revoked
	pendRecs  int64            // delivered since the last grant
	pendBytes int64
}

// lease is a partition held by the session.
type lease struct {
	epoch     int64
	next      int64 // next offset to deliver (one past the last delivered)
	committed int64 // last offset committed (or where delivery started)
}

// Reconnect backoff bounds.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// errClosed ends the receive loop: Close was called.
var errClosed = errors.New("consumer closed")

// maxFrameBytes bounds one message read from the stream: far above the
// server's largest RecordsDelivered (1 MiB by default, 16 MiB at most).
const maxFrameBytes = 64 << 20

func newConsumer(cfg Config, cons sluicev1connect.ConsumerServiceClient, topic, group string, deliver func([]byte)) *consumer {
	ctx, cancel := context.WithCancel(context.Background())
	return &consumer{cfg: cfg, cons: cons, topic: topic, group: group, deliver: deliver,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), delivered: make(map[int32]int64)}
}

// start opens the first session (its errors are the caller's: a bad topic
// or an unreachable server fail NewConsumer) and starts the receive loop.
func (c *consumer) start(ctx context.Context) error {
	st, err := c.subscribe(ctx)
	if err != nil {
		c.cancel()
		close(c.done)
		return err
	}
	go func() {
		defer close(c.done)
		c.run(st)
	}()
	return nil
}

// openStream is a Subscribe stream whose SessionStarted was read.
type openStream struct {
	stream  *connect.ServerStreamForClient[sluicev1.SubscribeResponse]
	cancel  context.CancelFunc
	started *sluicev1.SessionStarted
}

// subscribe opens a session and reads its SessionStarted. The stream lives
// under the consumer's context (not ctx, which only bounds the wait for
// SessionStarted).
func (c *consumer) subscribe(ctx context.Context) (*openStream, error) {
	sctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	req := &sluicev1.SubscribeRequest{
		Group:            c.group,
		Topics:           []string{c.topic},
		Credits:          &sluicev1.Credits{Records: c.cfg.CreditRecords, Bytes: c.cfg.CreditBytes},
		SessionTimeoutMs: int32(c.cfg.SessionTimeout.Milliseconds()),
		Start:            sluicev1.StartPosition_START_POSITION_EARLIEST,
		ClientInfo:       "sluice bench (harness/loadgen/sluicedriver)",
		RecordBatches:    !c.cfg.PerRecord,
		ReadCommitted:    c.cfg.ReadCommitted,
	}
	stream, err := c.cons.Subscribe(sctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("subscribe %s in group %s: %w", c.topic, c.group, err)
	}
	if !stream.Receive() {
		err := stream.Err()
		_ = stream.Close()
		cancel()
		if err == nil {
			err = errors.New("stream ended before SessionStarted")
		}
		return nil, fmt.Errorf("subscribe %s in group %s: %w", c.topic, c.group, err)
	}
	st := stream.Msg().GetStarted()
	if st == nil || st.MemberId == "" || st.SessionId == "" || st.HeartbeatIntervalMs <= 0 {
		_ = stream.Close()
		cancel()
		return nil, fmt.Errorf("subscribe %s in group %s: first message is not a usable SessionStarted: %v", c.topic, c.group, stream.Msg())
	}
	return &openStream{stream: stream, cancel: cancel, started: st}, nil
}

// run serves sessions until the consumer closes, subscribing again after a
// backoff whenever one fails.
func (c *consumer) run(st *openStream) {
	backoff := minBackoff
	for {
		var err error
		if st == nil {
			st, err = c.subscribe(c.ctx)
		}
		if err == nil {
			var healthy bool
			healthy, err = c.serve(st)
			st = nil
			if healthy {
				backoff = minBackoff
			}
		}
		if c.ctx.Err() != nil || errors.Is(err, errClosed) {
			return
		}
		c.noteErr(err)
		t := time.NewTimer(backoff)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (c *consumer) noteErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	if c.firstErr == nil {
		c.firstErr = err
	}
}

// serve runs one session until its stream ends; healthy reports that it
// delivered or was assigned something (the backoff starts over).
func (c *consumer) serve(st *openStream) (healthy bool, err error) {
	hb := time.Duration(st.started.HeartbeatIntervalMs) * time.Millisecond
	ss := &session{c: c, member: st.started.MemberId, id: st.started.SessionId, heartbeat: hb,
		grantNow: make(chan struct{}, 1), leases: make(map[int32]*lease)}
	gctx, stopSession := context.WithCancel(c.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ss.grant(gctx) })
	wg.Go(func() { ss.commitLoop(gctx) })
	c.mu.Lock()
	c.cur = ss
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.cur = nil
		c.mu.Unlock()
		c.assigned.Store(0) // a session's leases end with it
		stopSession()
		wg.Wait()
		st.cancel()
		_ = st.stream.Close()
	}()
	for st.stream.Receive() {
		healthy = true
		switch ev := st.stream.Msg().Event.(type) {
		case *sluicev1.SubscribeResponse_Assignment:
			ss.assignment(gctx, ev.Assignment)
		case *sluicev1.SubscribeResponse_Records:
			if !ss.records(ev.Records) {
				return healthy, errClosed
			}
		}
	}
	if err := st.stream.Err(); err != nil {
		return healthy, fmt.Errorf("group %s session %s: %w", c.group, ss.id, err)
	}
	return healthy, fmt.Errorf("group %s session %s: the server ended the stream", c.group, ss.id)
}

// assignment applies an AssignmentChanged; revoked partitions not lost are
// committed at once (commit on revoke).
func (ss *session) assignment(ctx context.Context, a *sluicev1.AssignmentChanged) {
	var commit []*sluicev1.CommitOffset
	ss.mu.Lock()
	for _, l := range a.Added {
		if l.Topic == ss.c.topic {
			ss.leases[l.Partition] = &lease{epoch: l.Epoch, next: l.Offset, committed: l.Offset}
		}
	}
	for _, l := range a.Revoked {
		held, ok := ss.leases[l.Partition]
		if l.Topic != ss.c.topic || !ok || held.epoch != l.Epoch {
			continue
		}
		delete(ss.leases, l.Partition)
		if !a.Lost {
			commit = append(commit, &sluicev1.CommitOffset{Topic: l.Topic, Partition: l.Partition, Offset: held.next, LeaseEpoch: held.epoch})
		}
	}
	ss.c.assigned.Store(int64(len(ss.leases)))
	ss.mu.Unlock()
	if len(commit) > 0 {
		// Failures are not fatal: the lease is released after the revoke
		// timeout anyway, and the next owner starts at the last commit.
		_ = ss.commit(ctx, commit)
	}
}

// records delivers one RecordsDelivered event; false when the consumer
// closed (nothing was delivered then).
func (ss *session) records(r *sluicev1.RecordsDelivered) bool {
	c := ss.c
	var n, size int64
	p := r.Partition
	skipBelow, seen := c.delivered[p]
	ss.mu.Lock()
	if l, ok := ss.leases[p]; ok && l.epoch == r.Epoch && l.next >= 0 {
		// Stored batches may start before the delivery position.
		skipBelow, seen = max(skipBelow, l.next), true
	}
	ss.mu.Unlock()
	next := int64(-1)
	c.deliverMu.Lock()
	if c.closed {
		c.deliverMu.Unlock()
		return false
	}
	for _, rec := range r.Records {
		n++
		size += recordSize(rec)
		if seen && rec.Offset < skipBelow {
			continue // delivered by an earlier session
		}
		c.deliver(rec.Value)
		next = rec.Offset + 1
	}
	end := int64(-1) // one past the last record in the event
	if len(r.Records) > 0 {
		end = r.Records[len(r.Records)-1].Offset + 1
	}
	var err error
	if len(r.RecordBatches) > 0 {
		next, end, err = ss.batches(r.RecordBatches, seen, skipBelow)
	}
	c.deliverMu.Unlock()
	if err != nil {
		c.noteErr(fmt.Errorf("partition %d: delivered record batches do not decode: %w", p, err))
		return false
	}
	if cs := r.CreditsSpent; cs != nil {
		n, size = cs.Records, cs.Bytes
	}
	if next >= 0 {
		c.delivered[p] = next
	}
	ss.mu.Lock()
	if l, ok := ss.leases[p]; ok && l.epoch == r.Epoch && end >= 0 {
		l.next = max(l.next, end)
	}
	ss.pendRecs += n
	ss.pendBytes += size
	due := ss.pendRecs >= c.cfg.CreditRecords/2 || ss.pendBytes >= c.cfg.CreditBytes/2
	ss.mu.Unlock()
	if due {
		select {
		case ss.grantNow <- struct{}{}:
		default:
		}
	}
	return true
}

// batches delivers the records of stored record batches (each run one or
// more batches back to back), skipping control batches and, when seen,
// records below skipBelow. next is the offset after the last record
// delivered, end after the last record in the batches (-1 if none). Called
// by the receive loop with deliverMu held.
func (ss *session) batches(runs [][]byte, seen bool, skipBelow int64) (next, end int64, err error) {
	next, end = -1, -1
	if ss.it == nil {
		ss.it = record.NewIterator(record.MaxLimits())
	}
	for _, run := range runs {
		for rest := run; len(rest) > 0; {
			bt, r, err := record.Split(rest)
			if err != nil {
				return next, end, err
			}
			rest = r
			if bt.Attributes().Control() {
				continue
			}
			if seen && bt.LastOffset() < skipBelow {
				end = bt.NextOffset()
				continue
			}
			if err := ss.it.Reset(bt); err != nil {
				return next, end, err
			}
			for ss.it.Next() {
				rec := ss.it.Record()
				end = rec.Offset + 1
				if seen && rec.Offset < skipBelow {
					continue
				}
				ss.c.deliver(rec.Value) // synchronous: the value is not kept
				next = rec.Offset + 1
			}
			if err := ss.it.Err(); err != nil {
				return next, end, err
			}
		}
	}
	return next, end, nil
}

// recordSize is what a record costs in byte credits: key, value, header
// keys and values (as the server counts).
func recordSize(r *sluicev1.ConsumedRecord) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// grant gives delivered credits back and keeps the session alive, until
// ctx ends.
func (ss *session) grant(ctx context.Context) {
	c := ss.c
	// Half the heartbeat interval: a slow call or a busy machine still
	// keeps within it.
	tick := time.NewTicker(max(ss.heartbeat/2, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-ss.grantNow:
		}
		ss.mu.Lock()
		recs, size := ss.pendRecs, ss.pendBytes
		ss.pendRecs, ss.pendBytes = 0, 0
		ss.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, ss.heartbeat)
		_, err := c.cons.GrantCredits(cctx, connect.NewRequest(&sluicev1.GrantCreditsRequest{
			Group: c.group, SessionId: ss.id, Credits: &sluicev1.Credits{Records: recs, Bytes: size}}))
		cancel()
		if err != nil {
			// Give the credits another try: whether the server applied
			// them is unknown, and credits lost for good would shrink the
			// window until delivery stalls; one granted twice only widens
			// it. A session the server no longer knows fails its stream
			// too, and the receive loop subscribes again.
			ss.mu.Lock()
			ss.pendRecs += recs
			ss.pendBytes += size
			ss.mu.Unlock()
		}
	}
}

// commitLoop commits delivered offsets every CommitInterval until ctx ends.
func (ss *session) commitLoop(ctx context.Context) {
	tick := time.NewTicker(ss.c.cfg.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_ = ss.commitDelivered(ctx)
	}
}

// commitDelivered commits the next offset of every held partition that
// moved since its last commit.
func (ss *session) commitDelivered(ctx context.Context) error {
	var offs []*sluicev1.CommitOffset
	ss.mu.Lock()
	for p, l := range ss.leases {
		if l.next > l.committed {
			offs = append(offs, &sluicev1.CommitOffset{Topic: ss.c.topic, Partition: p, Offset: l.next, LeaseEpoch: l.epoch})
		}
	}
	ss.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	if err := ss.commit(ctx, offs); err != nil {
		return err
	}
	ss.mu.Lock()
	for _, o := range offs {
		if l, ok := ss.leases[o.Partition]; ok && l.epoch == o.LeaseEpoch {
			l.committed = max(l.committed, o.Offset)
		}
	}
	ss.mu.Unlock()
	return nil
}

// commit sends one Commit with the member id. FAILED_PRECONDITION means a
// lease moved: the server's next assignment event says so, and the new
// owner starts from the last commit that succeeded.
func (ss *session) commit(ctx context.Context, offs []*sluicev1.CommitOffset) error {
	cctx, cancel := context.WithTimeout(ctx, max(ss.heartbeat, time.Second))
	defer cancel()
	_, err := ss.c.cons.Commit(cctx, connect.NewRequest(&sluicev1.CommitRequest{Group: ss.c.group, MemberId: ss.member, Offsets: offs}))
	return err
}

// closeTimeout bounds the final commit of Close.
const closeTimeout = 2 * time.Second

// Close stops delivery, commits what was delivered, and ends the session
// (which releases the member's leases at once). It returns the session
// failures the consumer recovered from, if any, so a run's log shows them.
// Assigned implements loadgen.AssignmentCounter: the partitions the open
// session holds.
func (c *consumer) Assigned() int { return int(c.assigned.Load()) }

func (c *consumer) Close() error {
	c.once.Do(func() {
		c.deliverMu.Lock()
		c.closed = true
		c.deliverMu.Unlock()
		c.mu.Lock()
		ss := c.cur
		c.mu.Unlock()
		if ss != nil {
			ctx, cancel := context.WithTimeout(c.ctx, closeTimeout)
			_ = ss.commitDelivered(ctx)
			cancel()
		}
		c.cancel()
		<-c.done
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstErr != nil {
		return fmt.Errorf("sluice consumer of %s in %s: %d session(s) failed and were resumed, first: %w", c.topic, c.group, c.failures, c.firstErr)
	}
	return nil
}
