package harness

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/chaos/history"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// MemberConfig configures one consumer-group member.
type MemberConfig struct {
	Name  string // the history's member name (one per Member, never reused)
	Addr  string // the fetch copy
	Group string
	Topic string
	// SessionTimeout is the session's timeout (default 4 s): a member
	// paused longer loses its leases.
	SessionTimeout time.Duration
	// CommitEvery is how often the member commits what it read (default
	// 1 s); negative: only on revoke and at Stop and Resume.
	CommitEvery time.Duration
	// MaxSessions bounds the sessions the member opens over its life
	// (default 1000): a member whose sessions keep failing gives up.
	MaxSessions int
}

// Member is a group member speaking the Connect API directly (not the SDK
// consumer), so it can record exactly what it saw: every lease it was
// granted, every record under its lease epoch, every commit and its
// answer. Pause makes it stop calling the server (no credits, no commits:
// its session lapses like a paused process's) and Resume makes it commit
// what it read with the epochs it held — the zombie commit that fencing
// must reject. Its run goroutine is started by StartMember and waited for
// by Stop.
type Member struct {
	cfg MemberConfig
	rec *history.Recorder
	api sluicev1connect.ConsumerServiceClient

	mu       sync.Mutex
	member   string          // the server's member id of the current session
	leases   map[int32]int64 // partition → epoch held
	pos      map[int32]int64 // partition → next offset to read (one past the last read)
	done     map[int32]int64 // partition → offset committed (accepted) under the current epoch
	gate     chan struct{}   // closed unless paused
	errs     []error         // history write errors (at most a few kept)
	sessions int             // sessions opened
	lastErr  error           // the last session error, for reports
	commits  map[history.Outcome]int

	stop   chan struct{}
	cancel context.CancelFunc // ends the run goroutine's calls at Stop
	exit   chan struct{}
}

// StartMember joins the group and consumes until Stop.
func StartMember(ctx context.Context, hc *http.Client, rec *history.Recorder, cfg MemberConfig) *Member {
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 4 * time.Second
	}
	if cfg.CommitEvery == 0 {
		cfg.CommitEvery = time.Second
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 1000
	}
	m := &Member{cfg: cfg, rec: rec, api: sluicev1connect.NewConsumerServiceClient(hc, "http://"+cfg.Addr),
		leases: map[int32]int64{}, pos: map[int32]int64{}, done: map[int32]int64{}, gate: make(chan struct{}),
		commits: map[history.Outcome]int{}, stop: make(chan struct{}), exit: make(chan struct{})}
	close(m.gate)
	ctx, m.cancel = context.WithCancel(ctx)
	go func() {
		defer close(m.exit)
		m.run(ctx)
	}()
	return m
}

// Name is the member's history name.
func (m *Member) Name() string { return m.cfg.Name }

// run opens sessions one after another until Stop, the context, or the
// session budget ends it.
func (m *Member) run(ctx context.Context) {
	for m.sessions < m.cfg.MaxSessions {
		select {
		case <-m.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		m.sessions++
		err := m.session(ctx)
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
		m.waitGate(ctx)
		if !sleepOr(ctx, m.stop, 200*time.Millisecond) {
			return
		}
	}
}

// session runs one Subscribe stream with its keepalive and commit loop.
func (m *Member) session(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const credits = 500
	stream, err := m.api.Subscribe(sctx, connect.NewRequest(&sluicev1.SubscribeRequest{
		Group: m.cfg.Group, Topics: []string{m.cfg.Topic},
		Credits:          &sluicev1.Credits{Records: credits, Bytes: 1 << 20},
		SessionTimeoutMs: int32(m.cfg.SessionTimeout / time.Millisecond),
		Start:            sluicev1.StartPosition_START_POSITION_EARLIEST,
		ClientInfo:       "chaos/" + m.cfg.Name,
	}))
	if err != nil {
		return err
	}
	defer stream.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before wg.Wait: the helpers stop with the session
	for stream.Receive() {
		m.waitGate(sctx) // a paused member reads nothing
		msg := stream.Msg()
		switch ev := msg.Event.(type) {
		case *sluicev1.SubscribeResponse_Started:
			s := ev.Started
			m.mu.Lock()
			m.member = s.GetMemberId()
			m.mu.Unlock()
			hb := time.Duration(s.GetHeartbeatIntervalMs()) * time.Millisecond
			if hb <= 0 {
				hb = time.Second
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.keepalive(sctx, s.GetSessionId(), hb, credits)
			}()
		case *sluicev1.SubscribeResponse_Assignment:
			m.onAssignment(sctx, ev.Assignment)
		case *sluicev1.SubscribeResponse_Records:
			m.onRecords(ev.Records)
		}
	}
	// A paused member does not see its stream end either: it learns of it
	// only after Resume made its late commit with the leases it held.
	m.waitGate(sctx)
	m.mu.Lock()
	clear(m.leases) // the session ended: its leases are gone
	m.mu.Unlock()
	return stream.Err()
}

// keepalive grants credits (the session's heartbeat) and commits, every
// interval, until the session ends. A paused member does neither.
func (m *Member) keepalive(ctx context.Context, session string, every time.Duration, credits int64) {
	lastCommit := time.Now()
	for sleepOr(ctx, m.stop, every) {
		m.waitGate(ctx)
		if ctx.Err() != nil {
			return
		}
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := m.api.GrantCredits(gctx, connect.NewRequest(&sluicev1.GrantCreditsRequest{
			Group: m.cfg.Group, SessionId: session, Credits: &sluicev1.Credits{Records: credits, Bytes: 1 << 20}}))
		cancel()
		_ = err // a failed grant shows as the stream ending; nothing else to do here
		if m.cfg.CommitEvery > 0 && time.Since(lastCommit) >= m.cfg.CommitEvery {
			m.Commit(ctx, nil)
			lastCommit = time.Now()
		}
	}
}

func (m *Member) onAssignment(ctx context.Context, a *sluicev1.AssignmentChanged) {
	var revoked []int32
	m.mu.Lock()
	for _, l := range a.GetAdded() {
		if l.GetTopic() != m.cfg.Topic {
			continue
		}
		p := l.GetPartition()
		m.leases[p] = l.GetEpoch()
		m.pos[p] = l.GetOffset()
		m.done[p] = l.GetOffset()
		m.record(history.Op{Kind: history.Lease, Topic: m.cfg.Topic, Partition: p, Group: m.cfg.Group, Member: m.cfg.Name, LeaseEpoch: l.GetEpoch()})
	}
	for _, l := range a.GetRevoked() {
		revoked = append(revoked, l.GetPartition())
	}
	if a.GetLost() {
		for _, p := range revoked {
			delete(m.leases, p)
		}
		revoked = nil
	}
	m.mu.Unlock()
	if len(revoked) > 0 {
		// Commit on revoke: what was read under the lease, with its epoch;
		// the server releases the lease on this commit.
		m.Commit(ctx, revoked)
		m.mu.Lock()
		for _, p := range revoked {
			delete(m.leases, p)
		}
		m.mu.Unlock()
	}
}

func (m *Member) onRecords(d *sluicev1.RecordsDelivered) {
	if d.GetTopic() != m.cfg.Topic {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := d.GetPartition()
	for _, r := range d.GetRecords() {
		m.record(history.Op{Kind: history.Consume, Topic: m.cfg.Topic, Partition: p, Offset: r.GetOffset(), Value: string(r.GetValue()),
			Group: m.cfg.Group, Member: m.cfg.Name, LeaseEpoch: d.GetEpoch()})
		if e, ok := m.leases[p]; ok && e == d.GetEpoch() {
			m.pos[p] = r.GetOffset() + 1
		}
	}
}

// Commit commits the position of the given partitions (nil: every
// partition leased) with the epochs held, and records each outcome.
func (m *Member) Commit(ctx context.Context, parts []int32) {
	m.mu.Lock()
	member := m.member
	var offs []*sluicev1.CommitOffset
	if parts == nil {
		for p := range m.leases {
			parts = append(parts, p)
		}
	}
	for _, p := range parts {
		e, ok := m.leases[p]
		if !ok || m.pos[p] <= m.done[p] {
			continue
		}
		offs = append(offs, &sluicev1.CommitOffset{Topic: m.cfg.Topic, Partition: p, Offset: m.pos[p], LeaseEpoch: e})
	}
	m.mu.Unlock()
	if len(offs) == 0 || member == "" {
		return
	}
	invoke := m.rec.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := m.api.Commit(cctx, connect.NewRequest(&sluicev1.CommitRequest{Group: m.cfg.Group, Offsets: offs, MemberId: member}))
	cancel()
	outcome := history.Accepted
	errText := ""
	if err != nil {
		errText = err.Error()
		switch connect.CodeOf(err) {
		case connect.CodeFailedPrecondition, connect.CodeAborted, connect.CodeInvalidArgument, connect.CodeNotFound:
			// Definite answers: the LWT batch was not applied.
			outcome = history.Rejected
		default:
			outcome = history.Indeterminate
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits[outcome]++
	for _, o := range offs {
		if outcome == history.Accepted && m.leases[o.Partition] == o.LeaseEpoch {
			m.done[o.Partition] = max(m.done[o.Partition], o.Offset)
		}
		m.record(history.Op{Kind: history.Commit, Invoke: invoke, Topic: m.cfg.Topic, Partition: o.Partition, Offset: o.Offset,
			Outcome: outcome, Error: errText, Group: m.cfg.Group, Member: m.cfg.Name, LeaseEpoch: o.LeaseEpoch})
	}
}

// record writes op, keeping the first history errors. Called with mu held.
func (m *Member) record(op history.Op) {
	if err := m.rec.Record(op); err != nil && len(m.errs) < 5 {
		m.errs = append(m.errs, err)
	}
}

// Pause makes the member stop reading, granting and committing, like a
// process under SIGSTOP: its TCP connections stay open, it says nothing.
func (m *Member) Pause() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.gate:
		m.gate = make(chan struct{})
	default:
	}
}

// Resume wakes a paused member. Before anything else, it commits what it
// read under the leases it held when paused (the late commit a zombie
// makes; the server must reject it if a lease moved) and returns that
// commit's outcomes.
func (m *Member) Resume(ctx context.Context) {
	m.Commit(ctx, nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.gate:
	default:
		close(m.gate)
	}
}

func (m *Member) waitGate(ctx context.Context) {
	m.mu.Lock()
	g := m.gate
	m.mu.Unlock()
	select {
	case <-g:
	case <-ctx.Done():
	case <-m.stop:
	}
}

// Stop commits what was read (with the epochs held), leaves, and waits for
// the run goroutine. It returns the history write errors, if any.
func (m *Member) Stop(ctx context.Context) error {
	m.Resume(ctx)
	m.Commit(ctx, nil)
	m.mu.Lock()
	member := m.member
	m.mu.Unlock()
	if member != "" {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = m.api.Leave(lctx, connect.NewRequest(&sluicev1.LeaveRequest{Group: m.cfg.Group, MemberId: member}))
		cancel()
	}
	close(m.stop)
	m.cancel()
	<-m.exit
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(m.errs...)
}

// Stats returns the sessions opened, commits per outcome and the last
// session error.
func (m *Member) Stats() (sessions int, commits map[history.Outcome]int, last error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := make(map[history.Outcome]int, len(m.commits))
	for k, v := range m.commits {
		c[k] = v
	}
	return m.sessions, c, m.lastErr
}

// sleepOr waits d; false if ctx or stop ended first.
func sleepOr(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}
