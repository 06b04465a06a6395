package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// sessionStartTimeout bounds the wait for SessionStarted after Subscribe.
const sessionStartTimeout = 30 * time.Second

// minHeartbeat bounds the heartbeat interval from below, whatever the
// server says (a bad answer must not make a hot loop).
const minHeartbeat = 10 * time.Millisecond

// errStreamEnded: the server ended the session stream without an error.
var errStreamEnded = errors.New("the server ended the group session")

// errProtocol: the server broke the session protocol (retried as a new
// session).
var errProtocol = errors.New("group session protocol error")

// groupSession is one Subscribe stream: one member session. Its receiver
// goroutine is owned by serve, which cancels ctx and waits for it.
type groupSession struct {
	gen       uint64
	memberID  string
	sessionID string
	heartbeat time.Duration // GrantCredits at least this often
	timeout   time.Duration // the server's session timeout
	ctx       context.Context
	cancel    context.CancelCauseFunc
	stream    *connect.ServerStreamForClient[sluicev1.SubscribeResponse]
	started   time.Time
	batches   *batchDecoder // used by the receiver alone
}

// run opens sessions one after the other until Close (runCtx) or a fatal
// error. A session that fails, or cannot be opened, is replaced by a new
// one after a backoff; retriable failures with no session for
// WithReadRetryTimeout make the Consumer fail.
func (k *Consumer) run() {
	defer close(k.runDone)
	failures := 0
	var failingSince time.Time
	for {
		s, err := k.open()
		if err == nil {
			err = k.serve(s)
			k.endSession(s, err)
			if time.Since(s.started) > s.heartbeat {
				failures, failingSince = 0, time.Time{} // it worked for a while
			}
		}
		if k.runCtx.Err() != nil {
			return
		}
		if ferr := fatalSessionError(k.group, err); ferr != nil {
			k.fail(ferr)
			return
		}
		failures++
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		_, delay := classify(err)
		wait := max(k.cfg.backoff(failures), delay)
		if time.Since(failingSince)+wait > k.cfg.retryTimeout {
			k.fail(fmt.Errorf("%w: group %q: no session for %v: %w", ErrRetriesExhausted, k.group, k.cfg.retryTimeout, err))
			return
		}
		k.log.Warn("sluice: group session failed; reconnecting", slog.Any("err", err), slog.Duration("wait", wait))
		if sleepCtx(k.runCtx, wait) != nil {
			return
		}
	}
}

// fatalSessionError returns the error the Consumer fails with when err
// (from Subscribe or the stream) cannot be helped by a new session, else
// nil. A session the server ended (FAILED_PRECONDITION: it expired; a
// clean end; a protocol error) and the retriable codes are worth a new
// session.
func fatalSessionError(group string, err error) error {
	if errors.Is(err, errStreamEnded) || errors.Is(err, errProtocol) || errors.Is(err, errSessionGone) || errors.Is(err, errRestart) {
		return nil
	}
	switch connect.CodeOf(err) {
	case connect.CodeFailedPrecondition:
		return nil
	case connect.CodeNotFound:
		return fmt.Errorf("%w: group %q: %w", ErrUnknownTopic, group, err)
	case connect.CodeUnimplemented:
		return fmt.Errorf("sluice: group %q: the server does not serve consumer groups (ConsumerService): %w", group, err)
	}
	if c, _ := classify(err); c == classRetriable {
		return nil
	}
	return fmt.Errorf("sluice: group %q: subscribe: %w", group, err)
}

// open starts a session: Subscribe with the whole credit window, then wait
// for SessionStarted.
func (k *Consumer) open() (*groupSession, error) {
	ctx, cancel := context.WithCancelCause(k.runCtx)
	start, _, _ := k.cfg.start.proto()
	req := &sluicev1.SubscribeRequest{
		Group: k.group, Topics: k.topics,
		Credits:          &sluicev1.Credits{Records: k.cfg.windowRecords, Bytes: k.cfg.windowBytes},
		SessionTimeoutMs: int32(k.cfg.sessionTimeout.Milliseconds()),
		Start:            start, ClientInfo: k.cfg.clientInfo,
		RecordBatches: !k.cfg.perRecord, ReadCommitted: k.cfg.readCommitted,
	}
	timer := time.AfterFunc(sessionStartTimeout, func() {
		cancel(fmt.Errorf("%w: no SessionStarted within %v", errProtocol, sessionStartTimeout))
	})
	defer timer.Stop()
	stream, err := k.client.consumer.Subscribe(ctx, connect.NewRequest(req))
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("sluice: group %q: subscribe: %w", k.group, err)
	}
	fail := func(err error) (*groupSession, error) {
		cancel(nil)
		_ = stream.Close()
		return nil, fmt.Errorf("sluice: group %q: subscribe: %w", k.group, err)
	}
	if !stream.Receive() {
		if cause := context.Cause(ctx); cause != nil && k.runCtx.Err() == nil {
			return fail(cause)
		}
		if err := stream.Err(); err != nil {
			return fail(err)
		}
		return fail(errStreamEnded)
	}
	st := stream.Msg().GetStarted()
	if st == nil {
		return fail(fmt.Errorf("%w: first message is not SessionStarted", errProtocol))
	}
	if !timer.Stop() {
		return fail(context.Cause(ctx))
	}
	s := &groupSession{
		memberID: st.GetMemberId(), sessionID: st.GetSessionId(),
		timeout:   time.Duration(st.GetSessionTimeoutMs()) * time.Millisecond,
		heartbeat: time.Duration(st.GetHeartbeatIntervalMs()) * time.Millisecond,
		ctx:       ctx, cancel: cancel, stream: stream, started: time.Now(),
		batches: newBatchDecoder(),
	}
	if s.timeout <= 0 {
		s.timeout = max(k.cfg.sessionTimeout, 10*time.Second)
	}
	if s.heartbeat <= 0 {
		s.heartbeat = s.timeout / 3
	}
	s.heartbeat = max(s.heartbeat, minHeartbeat)
	k.mu.Lock()
	k.gen++
	s.gen = k.gen
	k.sess = s
	k.credRecords, k.credBytes = k.cfg.windowRecords, k.cfg.windowBytes
	k.mu.Unlock()
	k.log.Info("sluice: group session started", slog.String("member", s.memberID),
		slog.Duration("heartbeat", s.heartbeat), slog.Duration("session_timeout", s.timeout))
	return s, nil
}

// serve runs session s until its stream ends, the server says it is gone,
// or Close: its receiver reads the stream, and serve itself calls
// GrantCredits at every heartbeat (the keepalive; zero credits if none are
// free) and whenever half a window is free. It returns why the session
// ended, after the receiver exited.
func (k *Consumer) serve(s *groupSession) error {
	recvDone := make(chan error, 1)
	go func() { recvDone <- k.receive(s) }()
	end := func(err error) error {
		s.cancel(err)
		<-recvDone
		return err
	}
	hb := time.NewTimer(s.heartbeat)
	defer hb.Stop()
	failures := 0
	for {
		select {
		case err := <-recvDone:
			s.cancel(err)
			return err
		case <-k.runCtx.Done():
			return end(context.Cause(k.runCtx))
		case <-hb.C:
		case <-k.grantWake:
			k.mu.Lock()
			due := k.grantDue()
			k.mu.Unlock()
			if !due {
				continue
			}
		}
		err := k.grant(s)
		switch {
		case err == nil:
			failures = 0
			hb.Reset(s.heartbeat)
		case k.runCtx.Err() != nil:
			return end(context.Cause(k.runCtx))
		case sessionGone(err):
			return end(fmt.Errorf("%w: GrantCredits: %w", errSessionGone, err))
		default:
			failures++
			k.log.Warn("sluice: heartbeat failed", slog.String("member", s.memberID), slog.Any("err", err))
			hb.Reset(min(s.heartbeat, k.cfg.backoff(failures)))
		}
	}
}

// errRestart: the Consumer ended its own session to start over from the
// committed offsets (restartSession).
var errRestart = errors.New("group session restarted")

// restartSession ends the current session, if any, with cause: the run
// loop opens a new one, whose leases start at the committed offsets. For
// a caller that consumed records it can no longer process and must read
// again (RunTransactions after its producer was fenced).
func (k *Consumer) restartSession(cause error) {
	k.mu.Lock()
	s := k.sess
	if s != nil {
		// At once, not when the session has ended: nothing more of it is
		// leased here (LeaseOf), polled or buffered.
		k.loseParts()
	}
	k.mu.Unlock()
	if s != nil {
		s.cancel(fmt.Errorf("%w: %w", errRestart, cause))
	}
}

// errSessionGone: the server no longer knows the session (it expired).
var errSessionGone = errors.New("group session gone")

// sessionGone: a GrantCredits or Commit error saying the session (or the
// member) is gone.
func sessionGone(err error) bool {
	c := connect.CodeOf(err)
	return c == connect.CodeNotFound || c == connect.CodeFailedPrecondition
}

// grant calls GrantCredits with the free part of the window (possibly
// nothing: a keepalive). The credits count as granted from before the call
// (records may come back before its answer) and are taken back if it
// fails. A failure after the server applied the grant (a lost answer)
// lets the server send up to that grant beyond the window: credits are
// additive, so a retry cannot be made idempotent (see the package doc).
func (k *Consumer) grant(s *groupSession) error {
	k.mu.Lock()
	if k.sess != s {
		k.mu.Unlock()
		return nil
	}
	r, b := k.free()
	r, b = max(r, 0), max(b, 0)
	k.credRecords += r
	k.credBytes += b
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	_, err := k.client.consumer.GrantCredits(ctx, connect.NewRequest(&sluicev1.GrantCreditsRequest{
		Group: k.group, SessionId: s.sessionID, Credits: &sluicev1.Credits{Records: r, Bytes: b},
	}))
	cancel()
	if err != nil {
		k.mu.Lock()
		if k.sess == s {
			k.credRecords -= r
			k.credBytes -= b
		}
		k.mu.Unlock()
	}
	return err
}

// receive reads session s's stream until it ends; owned by serve.
func (k *Consumer) receive(s *groupSession) error {
	defer func() { _ = s.stream.Close() }()
	for s.stream.Receive() {
		switch ev := s.stream.Msg().GetEvent().(type) {
		case *sluicev1.SubscribeResponse_Assignment:
			k.onAssignment(s, ev.Assignment)
		case *sluicev1.SubscribeResponse_Records:
			k.onRecords(s, ev.Records)
		case *sluicev1.SubscribeResponse_Started:
			return fmt.Errorf("%w: a second SessionStarted", errProtocol)
		default:
			// A newer server's event: nothing to do with it.
		}
	}
	if cause := context.Cause(s.ctx); cause != nil {
		return cause
	}
	if err := s.stream.Err(); err != nil {
		return err
	}
	return errStreamEnded
}

// loseParts forgets every partition leased in the current session, with
// their buffered records, and queues OnRevoked (lost) for them. k.mu held.
func (k *Consumer) loseParts() {
	lost := make([]TopicPartition, 0, len(k.parts))
	for tp, p := range k.parts {
		k.dropBuffer(p)
		lost = append(lost, tp)
	}
	clear(k.parts)
	clear(k.revoking)
	if len(lost) > 0 {
		k.queueEvent(lost, true, true)
	}
}

// endSession forgets session s: its leases ended with it (OnRevoked with
// lost for the partitions it had), its buffered records are dropped.
func (k *Consumer) endSession(s *groupSession, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sess != s {
		return
	}
	k.loseParts()
	if k.bufRecords != 0 || k.bufBytes != 0 {
		panic(fmt.Sprintf("sluice: consumer buffer accounting off after a session (%d records, %d bytes)", k.bufRecords, k.bufBytes))
	}
	k.sess = nil
	k.credRecords, k.credBytes = 0, 0
	k.notify()
	if k.runCtx.Err() == nil {
		k.log.Info("sluice: group session ended", slog.String("member", s.memberID), slog.Any("err", err))
	}
}
