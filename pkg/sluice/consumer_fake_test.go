package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// groupServer is a scripted ConsumerService. Like the real server it
// starts every session with SessionStarted, sends records only within the
// credits granted (records and bytes), expires a session that makes no
// GrantCredits or Commit call for its timeout, and records every call. The
// test drives each session: assignment changes and records to deliver, in
// order, and the answer to commits.
type groupServer struct {
	sluicev1connect.UnimplementedConsumerServiceHandler
	heartbeat      time.Duration
	sessionTimeout time.Duration
	sessions       chan *fakeSession // every new session
	// onCommit answers a Commit (nil: store everything).
	onCommit func(*sluicev1.CommitRequest) error
	// fetch answers Fetch (Reader tests).
	fetch func(*sluicev1.FetchRequest) (*sluicev1.FetchResponse, error)

	mu      sync.Mutex
	n       int
	byID    map[string]*fakeSession
	commits []*sluicev1.CommitRequest // answered without error
	log     []string                  // "commit", "leave <member>", "expire <member>"
}

func newGroupServer(heartbeat, timeout time.Duration) *groupServer {
	return &groupServer{heartbeat: heartbeat, sessionTimeout: timeout, sessions: make(chan *fakeSession, 16), byID: make(map[string]*fakeSession)}
}

// fakeSession is one Subscribe stream of the groupServer.
type fakeSession struct {
	member string
	req    *sluicev1.SubscribeRequest
	wake   chan struct{} // cap 1
	end    chan error    // the stream ends with this error

	mu        sync.Mutex
	queue     []queued // to send, in order
	credR     int64    // credits left
	credB     int64
	delivered int64 // records sent
	bytesSent int64
	grants    []*sluicev1.Credits
	lastBeat  time.Time
	broken    bool // send records whatever the credits (a broken server)
}

// queued is a message to send, or records to send within credits.
type queued struct {
	msg  *sluicev1.SubscribeResponse
	recs *sluicev1.RecordsDelivered
}

func (s *fakeSession) push(q queued) {
	s.mu.Lock()
	s.queue = append(s.queue, q)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// assign sends an AssignmentChanged.
func (s *fakeSession) assign(a *sluicev1.AssignmentChanged) {
	s.push(queued{msg: &sluicev1.SubscribeResponse{Event: &sluicev1.SubscribeResponse_Assignment{Assignment: a}}})
}

// deliver queues records (offsets from..from+n-1, values of size bytes)
// of a partition, sent as credits allow.
func (s *fakeSession) deliver(topic string, partition int32, epoch, from int64, n, size int) {
	d := &sluicev1.RecordsDelivered{Topic: topic, Partition: partition, Epoch: epoch}
	for i := range n {
		v := make([]byte, size)
		copy(v, fmt.Sprintf("%s/%d@%d", topic, partition, from+int64(i)))
		d.Records = append(d.Records, &sluicev1.ConsumedRecord{Offset: from + int64(i), Value: v})
	}
	s.push(queued{recs: d})
}

func recBytes(r *sluicev1.ConsumedRecord) int64 {
	n := int64(len(r.GetKey()) + len(r.GetValue()))
	for _, h := range r.GetHeaders() {
		n += int64(len(h.GetKey()) + len(h.GetValue()))
	}
	return n
}

// next returns the next message the credits allow, or nil.
func (s *fakeSession) next() *sluicev1.SubscribeResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil
	}
	q := &s.queue[0]
	if q.msg != nil {
		m := q.msg
		s.queue = s.queue[1:]
		return m
	}
	out := &sluicev1.RecordsDelivered{Topic: q.recs.Topic, Partition: q.recs.Partition, Epoch: q.recs.Epoch}
	for len(q.recs.Records) > 0 && len(out.Records) < 7 {
		r := q.recs.Records[0]
		if !s.broken && (s.credR < 1 || s.credB < recBytes(r)) {
			break
		}
		s.credR--
		s.credB -= recBytes(r)
		s.delivered++
		s.bytesSent += recBytes(r)
		out.Records = append(out.Records, r)
		q.recs.Records = q.recs.Records[1:]
	}
	if len(q.recs.Records) == 0 {
		s.queue = s.queue[1:]
	}
	if len(out.Records) == 0 {
		return nil
	}
	return &sluicev1.SubscribeResponse{Event: &sluicev1.SubscribeResponse_Records{Records: out}}
}

func (s *fakeSession) counts() (delivered, bytes int64, grants []*sluicev1.Credits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered, s.bytesSent, append([]*sluicev1.Credits(nil), s.grants...)
}

func (g *groupServer) Subscribe(ctx context.Context, req *connect.Request[sluicev1.SubscribeRequest], st *connect.ServerStream[sluicev1.SubscribeResponse]) error {
	g.mu.Lock()
	g.n++
	s := &fakeSession{member: fmt.Sprintf("m%d", g.n), req: req.Msg, wake: make(chan struct{}, 1), end: make(chan error, 1),
		credR: req.Msg.GetCredits().GetRecords(), credB: req.Msg.GetCredits().GetBytes(), lastBeat: time.Now()}
	g.byID[s.member] = s
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.byID, s.member)
		g.log = append(g.log, "leave "+s.member)
		g.mu.Unlock()
	}()
	if err := st.Send(&sluicev1.SubscribeResponse{Event: &sluicev1.SubscribeResponse_Started{Started: &sluicev1.SessionStarted{
		MemberId: s.member, SessionId: "sess-" + s.member,
		SessionTimeoutMs: int32(g.sessionTimeout.Milliseconds()), HeartbeatIntervalMs: int32(g.heartbeat.Milliseconds()),
	}}}); err != nil {
		return err
	}
	g.sessions <- s
	tick := time.NewTicker(g.heartbeat / 4)
	defer tick.Stop()
	for {
		for m := s.next(); m != nil; m = s.next() {
			if err := st.Send(m); err != nil {
				return err
			}
		}
		select {
		case <-s.wake:
		case <-tick.C:
			s.mu.Lock()
			expired := time.Since(s.lastBeat) > g.sessionTimeout
			s.mu.Unlock()
			if expired {
				g.mu.Lock()
				g.log = append(g.log, "expire "+s.member)
				g.mu.Unlock()
				return connect.NewError(connect.CodeFailedPrecondition, errors.New("session expired"))
			}
		case err := <-s.end:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

func (g *groupServer) session(id string) *fakeSession {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.byID {
		if "sess-"+s.member == id || s.member == id {
			return s
		}
	}
	return nil
}

func (g *groupServer) GrantCredits(_ context.Context, req *connect.Request[sluicev1.GrantCreditsRequest]) (*connect.Response[sluicev1.GrantCreditsResponse], error) {
	s := g.session(req.Msg.GetSessionId())
	if s == nil {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such session"))
	}
	s.mu.Lock()
	c := req.Msg.GetCredits()
	s.credR += c.GetRecords()
	s.credB += c.GetBytes()
	s.grants = append(s.grants, c)
	s.lastBeat = time.Now()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return connect.NewResponse(&sluicev1.GrantCreditsResponse{}), nil
}

func (g *groupServer) Commit(_ context.Context, req *connect.Request[sluicev1.CommitRequest]) (*connect.Response[sluicev1.CommitResponse], error) {
	if s := g.session(req.Msg.GetMemberId()); s != nil {
		s.mu.Lock()
		s.lastBeat = time.Now()
		s.mu.Unlock()
	}
	if g.onCommit != nil {
		if err := g.onCommit(req.Msg); err != nil {
			return nil, err
		}
	}
	g.mu.Lock()
	g.commits = append(g.commits, req.Msg)
	g.log = append(g.log, "commit")
	g.mu.Unlock()
	return connect.NewResponse(&sluicev1.CommitResponse{}), nil
}

func (g *groupServer) Fetch(_ context.Context, req *connect.Request[sluicev1.FetchRequest]) (*connect.Response[sluicev1.FetchResponse], error) {
	resp, err := g.fetch(req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// stored returns the commits answered without error, and the event log.
func (g *groupServer) stored() ([]*sluicev1.CommitRequest, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*sluicev1.CommitRequest(nil), g.commits...), append([]string(nil), g.log...)
}

// nextSession waits for the next session.
func (g *groupServer) nextSession(t *testing.T) *fakeSession {
	t.Helper()
	select {
	case s := <-g.sessions:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no session opened")
		return nil
	}
}

// serveConsumer serves a ConsumerService over h2c on a loopback port until
// the test ends (register consumers' Close after, so they run first).
func serveConsumer(t *testing.T, h sluicev1connect.ConsumerServiceHandler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(sluicev1connect.NewConsumerServiceHandler(h))
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: mux, Protocols: &protos}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); <-done })
	return ln.Addr().String()
}
