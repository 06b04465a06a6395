package fetch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch/membership"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// A session is one Subscribe stream: one group member. Three parties share
// it:
//   - the Subscribe handler's goroutine, the delivery loop: it alone sends
//     on the stream (queued assignment events first, then records within
//     the credits, round-robin over the delivering partitions);
//   - the coordinator goroutine (owned by the handler): keepalive check,
//     then the member's cycles (member.go; services/fetch/membership
//     decides): heartbeat in bookkeeping, and balancing rounds that
//     acquire, revoke and release leases;
//   - unary calls: GrantCredits (credits + keepalive) and Commit (keepalive,
//     and the release of leases being revoked once committed).
//
// mu (member.mu) guards the fields below it and the member's machine; no
// I/O runs under it. The delivery loop reads the leases it delivers from
// the machine (AppendFollowed, Lease) and moves their positions with
// Advance, all under mu.
type session struct {
	member  // mu guards the session's fields below too
	id      string
	batches bool // deliver stored record batches (SubscribeRequest.record_batches)
	// readCommitted: deliver only committed transactions' records
	// (SubscribeRequest.read_committed).
	readCommitted bool

	cancel context.CancelCauseFunc
	wake   chan struct{} // buffered 1: credits, assignment, new data
	left   chan struct{} // closed once the member left the group (or never joined)
	leftMu sync.Once

	// Guarded by member.mu:
	credRecs   int64
	credBytes  int64
	lastActive time.Time
	events     []*sluicev1.SubscribeResponse
}

const maxCredits = 1 << 50

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (ss *session) signal() {
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

func (ss *session) touch() {
	ss.mu.Lock()
	ss.lastActive = ss.s.now()
	ss.mu.Unlock()
}

// errLeft ends a session whose member called Leave.
var errLeft = errors.New("the member left the group")

// errSessionExpired ends a session whose client went silent.
var errSessionExpired = errors.New("session expired: no GrantCredits or Commit call within the session timeout; subscribe again")

// Subscribe runs one group member session.
func (s *Service) Subscribe(ctx context.Context, req *connect.Request[sluicev1.SubscribeRequest], stream *connect.ServerStream[sluicev1.SubscribeResponse]) error {
	m := req.Msg
	timeout, err := validateSubscribe(m)
	if err != nil {
		return err
	}
	topics := slices.Clone(m.Topics)
	slices.Sort(topics)
	for i, t := range topics {
		if i > 0 && topics[i-1] == t {
			return apierr.Invalid("topics", "topic %q is listed twice", t)
		}
		if _, err := s.topic(ctx, t); err != nil {
			return apierr.FromCatalog(err)
		}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ss := &session{id: s.routedID("s-"), batches: m.RecordBatches, readCommitted: m.ReadCommitted, cancel: cancel, wake: make(chan struct{}, 1), left: make(chan struct{}),
		lastActive: s.now()}
	s.initMember(&ss.member, m.Group, s.routedID("m-"), topics, timeout)
	ss.start, ss.info, ss.ctx = m.Start, m.ClientInfo, sctx
	ss.hooks = memberHooks{
		follow: func(l membership.Lease) func() {
			return s.logs.Follow(l.Topic, int(l.Partition), ss.wake)
		},
		changed: func(a membership.Announce) {
			revokeMs := int32(s.cfg.RevokeTimeout.Milliseconds())
			if a.Lost {
				revokeMs = 0
			}
			ss.events = append(ss.events, assignment(partitionLeases(a.Added), partitionLeases(a.Revoked), a.Lost, revokeMs))
			ss.signal()
		},
		alive: ss.alive,
	}
	if c := m.Credits; c != nil {
		if c.Records < 0 || c.Bytes < 0 {
			return apierr.Invalid("credits", "records and bytes must not be negative")
		}
		ss.credRecs, ss.credBytes = min(c.Records, maxCredits), min(c.Bytes, maxCredits)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return connect.NewError(connect.CodeUnavailable, errors.New("the fetch copy is shutting down; subscribe again"))
	}
	if len(s.sessions) >= s.cfg.MaxSessions {
		s.mu.Unlock()
		return apierr.Exhausted(s.cfg.RetryAfter, fmt.Errorf("the fetch copy serves its maximum of %d sessions", s.cfg.MaxSessions))
	}
	s.sessions[ss.id] = ss
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, ss.id)
		s.mu.Unlock()
		ss.markLeft()
		s.wg.Done()
	}()
	// The service's end ends the session too.
	stopOnClose := context.AfterFunc(s.ctx, func() {
		cancel(connect.NewError(connect.CodeUnavailable, errors.New("the fetch copy is shutting down; subscribe again")))
	})
	defer stopOnClose()

	if err := ss.join(ctx); err != nil {
		return bookkeepingErr(err)
	}
	defer func() {
		ss.leave()
		ss.markLeft()
	}()
	if err := stream.Send(&sluicev1.SubscribeResponse{Event: &sluicev1.SubscribeResponse_Started{Started: &sluicev1.SessionStarted{
		MemberId: ss.memberID, SessionId: ss.id, SessionTimeoutMs: int32(timeout.Milliseconds()),
		HeartbeatIntervalMs: int32((timeout / 3).Milliseconds()),
	}}}); err != nil {
		return err
	}
	s.log.Info("group session started", slog.String("group", ss.group), slog.String("member", ss.memberID), slog.Any("topics", topics))
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		if err := ss.coordinate(); err != nil {
			ss.cancel(err)
		}
	}()
	err = ss.deliver(stream)
	cancel(err)
	<-coordDone
	cause := context.Cause(sctx)
	s.log.Info("group session ended", slog.String("group", ss.group), slog.String("member", ss.memberID), slog.Any("cause", cause))
	switch {
	case errors.Is(cause, errSessionExpired):
		return connect.NewError(connect.CodeFailedPrecondition, cause)
	case errors.Is(cause, errLeft):
		return nil
	case ctx.Err() != nil:
		return nil // the client went away
	}
	var ce *connect.Error
	if errors.As(cause, &ce) {
		return ce
	}
	if cause != nil && !errors.Is(cause, context.Canceled) {
		return connect.NewError(connect.CodeUnavailable, cause)
	}
	return nil
}

// alive ends a session whose client went silent past its timeout.
func (ss *session) alive() error {
	ss.mu.Lock()
	silent := ss.s.now().Sub(ss.lastActive)
	ss.mu.Unlock()
	if silent > ss.timeout {
		return errSessionExpired
	}
	return nil
}

func (ss *session) markLeft() { ss.leftMu.Do(func() { close(ss.left) }) }

// deliver is the delivery loop (see session).
func (ss *session) deliver(stream *connect.ServerStream[sluicev1.SubscribeResponse]) error {
	s := ss.s
	var order []tp // round-robin order of delivering partitions
	rr := 0
	idle := time.NewTimer(time.Second)
	defer idle.Stop()
	for {
		if err := ss.ctx.Err(); err != nil {
			return context.Cause(ss.ctx)
		}
		ss.mu.Lock()
		events := ss.events
		ss.events = nil
		order = ss.mach.AppendFollowed(order[:0]) // by topic and partition
		ss.mu.Unlock()
		for _, ev := range events {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		sent := false
		for i := range order {
			k := order[(rr+i)%len(order)]
			moved, err := ss.deliverOne(stream, k)
			if err != nil {
				return err
			}
			if moved {
				sent = true
			}
		}
		if len(order) > 0 {
			rr = (rr + 1) % len(order)
		}
		if sent {
			continue
		}
		idle.Reset(s.cfg.BalanceInterval)
		select {
		case <-ss.wake:
		case <-idle.C:
		case <-ss.ctx.Done():
		}
	}
}

// deliverOne reads and sends one batch of a partition within the credits;
// moved reports that the delivery position moved (records sent, or only
// skipped: an aborted transaction's, on a read_committed session), so
// there may be more to read at once.
func (ss *session) deliverOne(stream *connect.ServerStream[sluicev1.SubscribeResponse], k tp) (moved bool, err error) {
	s := ss.s
	ss.mu.Lock()
	l, ok := ss.mach.Lease(k)
	if !ok || l.Revoking || ss.credRecs <= 0 || ss.credBytes <= 0 {
		ss.mu.Unlock()
		return false, nil
	}
	epoch, next := l.Epoch, l.Next
	recs, bytes := ss.credRecs, ss.credBytes
	ss.mu.Unlock()
	if hw := s.logs.HighWatermark(k.Topic, int(k.Partition)); hw >= 0 && hw <= next {
		return false, nil
	}
	lim := partlog.Limits{
		MaxRecords:     int(min(recs, int64(s.cfg.SessionBatchRecords))),
		MaxBytes:       int(min(bytes, int64(s.cfg.SessionBatchBytes))),
		HardMaxBytes:   int(min(bytes, MaxMaxBytes)),
		Batches:        ss.batches,
		HardMaxRecords: int(min(recs, 1<<30)),
		ReadCommitted:  ss.readCommitted,
	}
	res, err := s.read(ss.ctx, k.Topic, int(k.Partition), next, lim)
	if err != nil {
		var ce *connect.Error
		switch {
		case ss.ctx.Err() != nil:
			return false, nil
		case errors.As(err, &ce) && ce.Code() == connect.CodeOutOfRange:
			ss.resetBelowStart(k, epoch, next)
			return false, nil
		case errors.As(err, &ce) && ce.Code() == connect.CodeDataLoss:
			return false, err // never skip corrupt data
		default:
			s.log.Warn("group delivery read failed; retrying", slog.String("topic", k.Topic), slog.Int("partition", int(k.Partition)), slog.Any("err", err))
			return false, nil
		}
	}
	if res.Count == 0 {
		if res.Next > next {
			ss.step(membership.Advance{Key: k, Epoch: epoch, From: next, To: res.Next})
			return true, nil
		}
		return false, nil
	}
	ss.mu.Lock()
	l, ok = ss.mach.Lease(k)
	if !ok || l.Epoch != epoch || l.Revoking || l.Next != next {
		ss.mu.Unlock()
		return false, nil
	}
	ss.credRecs -= int64(res.Count)
	ss.credBytes -= int64(res.Bytes)
	ss.stepLocked(membership.Advance{Key: k, Epoch: epoch, From: next, To: res.Next})
	ss.mu.Unlock()
	s.m.delivered(ss.ctx, k.Topic, res, true, time.Now())
	if d := throttle(s.groupQ, ss.group, res.Bytes); d > 0 {
		s.m.throttledFor(ss.ctx, min(d, time.Minute))
		if err := sleepCtx(ss.ctx, min(d, time.Minute)); err != nil {
			return false, nil
		}
	}
	d := &sluicev1.RecordsDelivered{
		Topic: k.Topic, Partition: k.Partition, Epoch: epoch, Records: consumed(res.Records), RecordBatches: res.Batches, HighWatermark: res.HighWatermark,
		LastStableOffset: res.StableEnd,
	}
	if ss.batches {
		d.CreditsSpent = &sluicev1.Credits{Records: int64(res.Count), Bytes: int64(res.Bytes)}
	}
	span := s.deliveries.start(ss.ctx, k.Topic, k.Partition, ss.group, res) // tracing.go
	err = stream.Send(&sluicev1.SubscribeResponse{Event: &sluicev1.SubscribeResponse_Records{Records: d}})
	s.deliveries.end(span, err)
	return res.Count > 0, err
}

// resetBelowStart moves a lease's delivery position that retention passed
// (below the log start) by the member's start policy, as Kafka's
// auto.offset.reset does: earliest continues at the log start, latest at
// the end. It is never skipped silently: it is logged, and DescribeGroup
// shows the committed offset BELOW_LOG_START until the member commits
// again. A position past the end is left alone (delivery waits for the log
// to reach it; commits cannot put it there).
func (ss *session) resetBelowStart(k tp, epoch, next int64) {
	s := ss.s
	start, end, err := s.logs.Bounds(ss.ctx, k.Topic, int(k.Partition))
	if err != nil || next >= start {
		return
	}
	to, policy := start, "earliest"
	if startOf(ss.start) == sluicev1.StartPosition_START_POSITION_LATEST {
		to, policy = end, "latest"
	}
	ss.mu.Lock()
	l, ok := ss.mach.Lease(k)
	moved := ok && l.Epoch == epoch && l.Next == next
	if moved {
		ss.stepLocked(membership.Advance{Key: k, Epoch: epoch, From: next, To: to})
	}
	ss.mu.Unlock()
	if moved {
		s.log.Warn("group partition offset below the log start (retention): reset by the member's start policy",
			slog.String("group", ss.group), slog.String("member", ss.memberID), slog.String("topic", k.Topic), slog.Int("partition", int(k.Partition)),
			slog.Int64("offset", next), slog.Int64("log_start", start), slog.Int64("high_watermark", end),
			slog.String("policy", policy), slog.Int64("reset_to", to))
	}
}

// partitionLeases converts the machine's leases for an AssignmentChanged.
func partitionLeases(ls []membership.Lease) []*sluicev1.PartitionLease {
	var out []*sluicev1.PartitionLease
	for _, l := range ls {
		out = append(out, &sluicev1.PartitionLease{Topic: l.Topic, Partition: l.Partition, Epoch: l.Epoch, Offset: l.Offset})
	}
	return out
}

func assignment(added, revoked []*sluicev1.PartitionLease, lost bool, revokeMs int32) *sluicev1.SubscribeResponse {
	return &sluicev1.SubscribeResponse{Event: &sluicev1.SubscribeResponse_Assignment{Assignment: &sluicev1.AssignmentChanged{
		Added: added, Revoked: revoked, Lost: lost, RevokeTimeoutMs: revokeMs,
	}}}
}

// GrantCredits adds credits to a session (and keeps it alive).
func (s *Service) GrantCredits(ctx context.Context, req *connect.Request[sluicev1.GrantCreditsRequest]) (*connect.Response[sluicev1.GrantCreditsResponse], error) {
	m := req.Msg
	if err := bookkeeping.ValidateName("group", m.Group); err != nil {
		return nil, bookkeepingErr(err)
	}
	if m.SessionId == "" {
		return nil, apierr.Invalid("session_id", "is required")
	}
	c := m.Credits
	if c != nil && (c.Records < 0 || c.Bytes < 0) {
		return nil, apierr.Invalid("credits", "records and bytes must not be negative")
	}
	s.mu.Lock()
	ss, ok := s.sessions[m.SessionId]
	s.mu.Unlock()
	if addr := s.forwardTo(m.SessionId, req.Header(), ok); addr != "" {
		return s.forwardGrant(ctx, addr, req)
	}
	if !ok || ss.group != m.Group {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("session %q of group %q is not open on this fetch copy (it ended, or the stream is served by another copy); subscribe again", m.SessionId, m.Group))
	}
	ss.mu.Lock()
	ss.lastActive = s.now()
	if c != nil {
		ss.credRecs = min(ss.credRecs+c.Records, maxCredits)
		ss.credBytes = min(ss.credBytes+c.Bytes, maxCredits)
	}
	ss.mu.Unlock()
	ss.signal()
	return connect.NewResponse(&sluicev1.GrantCreditsResponse{}), nil
}

// Leave ends a member's session and leaves the group, then answers.
func (s *Service) Leave(ctx context.Context, req *connect.Request[sluicev1.LeaveRequest]) (*connect.Response[sluicev1.LeaveResponse], error) {
	m := req.Msg
	if err := bookkeeping.ValidateName("group", m.Group); err != nil {
		return nil, bookkeepingErr(err)
	}
	if err := bookkeeping.ValidateName("member_id", m.MemberId); err != nil {
		return nil, bookkeepingErr(err)
	}
	ss := s.sessionOf(m.Group, m.MemberId)
	if ss == nil {
		if addr := s.forwardTo(m.MemberId, req.Header(), false); addr != "" {
			fwd := connect.NewRequest(m)
			fwd.Header().Set(forwardedHeader, "1")
			if _, err := s.d.Forward(addr).Leave(ctx, fwd); err == nil || connect.CodeOf(err) != connect.CodeUnavailable {
				if err != nil {
					return nil, forwardErr(addr, err)
				}
				return connect.NewResponse(&sluicev1.LeaveResponse{}), nil
			}
		}
		// No session here (it ended, or its copy is gone): leave directly.
		if err := s.d.Bookkeeping.Leave(ctx, m.Group, m.MemberId); err != nil && !errors.Is(err, bookkeeping.ErrNotFound) {
			return nil, bookkeepingErr(err)
		}
		return connect.NewResponse(&sluicev1.LeaveResponse{}), nil
	}
	ss.cancel(errLeft)
	select {
	case <-ss.left:
	case <-ctx.Done():
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	return connect.NewResponse(&sluicev1.LeaveResponse{}), nil
}

// sessionOf returns this copy's session of a member, or nil.
func (s *Service) sessionOf(group, member string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		if ss.group == group && ss.memberID == member {
			return ss
		}
	}
	return nil
}

func validateSubscribe(m *sluicev1.SubscribeRequest) (time.Duration, error) {
	if err := bookkeeping.ValidateName("group", m.Group); err != nil {
		return 0, bookkeepingErr(err)
	}
	if err := notTriggerGroup(m.Group); err != nil {
		return 0, err
	}
	if len(m.Topics) == 0 {
		return 0, apierr.Invalid("topics", "must name at least one topic")
	}
	if len(m.Topics) > MaxTopicsPerSession {
		return 0, apierr.TooLarge("topics", apierr.TopicsPerSession, int64(len(m.Topics)), MaxTopicsPerSession)
	}
	timeout := DefaultSessionTimeout
	if m.SessionTimeoutMs != 0 {
		timeout = time.Duration(m.SessionTimeoutMs) * time.Millisecond
		if timeout < MinSessionTimeout || timeout > MaxSessionTimeout {
			return 0, apierr.Invalid("session_timeout_ms", "%d is outside %d..%d", m.SessionTimeoutMs, MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
		}
	}
	if m.Start < 0 || m.Start > sluicev1.StartPosition_START_POSITION_TIMESTAMP {
		return 0, apierr.Invalid("start", "unknown start position %d", m.Start)
	}
	if m.Start == sluicev1.StartPosition_START_POSITION_TIMESTAMP {
		return 0, apierr.Invalid("start", "TIMESTAMP needs a timestamp; subscriptions take EARLIEST or LATEST")
	}
	if len(m.ClientInfo) > MaxClientInfoBytes {
		return 0, apierr.TooLarge("client_info", apierr.ClientInfoBytes, int64(len(m.ClientInfo)), MaxClientInfoBytes)
	}
	return timeout, nil
}

// notTriggerGroup refuses a client's Subscribe or Commit in a trigger's
// group: only the trigger runtime is a member there (ResetGroupOffsets,
// with the trigger disabled, moves its position).
func notTriggerGroup(group string) error {
	if strings.HasPrefix(group, TriggerGroupPrefix) {
		return apierr.Invalid("group", "group names starting with %q belong to triggers; choose another name (to move a trigger's position, disable it and reset the group's offsets)", TriggerGroupPrefix)
	}
	return nil
}
