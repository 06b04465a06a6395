package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// callbackLog records the consumer's assignment callbacks.
type callbackLog struct {
	mu  sync.Mutex
	evs []string
}

func (l *callbackLog) opts() []sluice.ConsumerOption {
	return []sluice.ConsumerOption{
		sluice.OnAssigned(func(_ context.Context, ps []sluice.TopicPartition) { l.add(fmt.Sprintf("assigned %v", ps)) }),
		sluice.OnRevoked(func(_ context.Context, ps []sluice.TopicPartition, lost bool) {
			l.add(fmt.Sprintf("revoked %v lost=%v", ps, lost))
		}),
	}
}

func (l *callbackLog) add(s string) { l.mu.Lock(); l.evs = append(l.evs, s); l.mu.Unlock() }

func (l *callbackLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

// newTestConsumer returns a consumer of group "g", topic "t", on a
// groupServer; it is closed (and checked) when the test ends, before the
// server stops.
func newTestConsumer(t *testing.T, g *groupServer, opts ...sluice.ConsumerOption) *sluice.Consumer {
	t.Helper()
	addr := serveConsumer(t, g)
	c, err := sluice.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	opts = append([]sluice.ConsumerOption{sluice.WithReadBackoff(time.Millisecond, 10*time.Millisecond)}, opts...)
	k, err := c.NewConsumer("g", []string{"t"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return k
}

func lease(topic string, p int32, epoch, offset int64) *sluicev1.PartitionLease {
	return &sluicev1.PartitionLease{Topic: topic, Partition: p, Epoch: epoch, Offset: offset}
}

// pollN polls until n records came (or fails the test after 10 s).
func pollN(t *testing.T, k *sluice.Consumer, n int, check func(got int)) []sluice.ConsumedRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []sluice.ConsumedRecord
	for len(out) < n {
		recs, err := k.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, recs...)
		if check != nil {
			check(len(out))
		}
	}
	if len(out) != n {
		t.Fatalf("polled %d records; want %d", len(out), n)
	}
	return out
}

// pollIdle runs one Poll that should find nothing (it marks the earlier
// Polls' records processed, and runs the callbacks).
func pollIdle(t *testing.T, k *sluice.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if recs, err := k.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle Poll: %d records, %v", len(recs), err)
	}
}

func checkOffsets(t *testing.T, recs []sluice.ConsumedRecord, tp sluice.TopicPartition, from int64) {
	t.Helper()
	next := from
	for _, r := range recs {
		if r.Topic != tp.Topic || r.Partition != tp.Partition {
			continue
		}
		if r.Offset != next {
			t.Fatalf("%s: offset %d; want %d", tp, r.Offset, next)
		}
		if want := fmt.Sprintf("%s@%d", tp, next); string(r.Value[:len(want)]) != want {
			t.Fatalf("%s@%d: value %q", tp, next, r.Value)
		}
		next++
	}
}

// The server never holds more credits than the free part of the window:
// records delivered and not yet returned by Poll stay within the window
// (records and bytes), and the consumer grants more as Poll hands records
// out, so everything comes through, in order.
func TestConsumerGrantsCreditsInWindows(t *testing.T) {
	for _, tc := range []struct {
		name           string
		records, bytes int64
		size           int
	}{
		{"records", 10, sluice.MinCreditBytes, 100},
		{"bytes", 1000, sluice.MinCreditBytes, 10 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroupServer(time.Second, 10*time.Second)
			k := newTestConsumer(t, g, sluice.WithCreditWindow(int(tc.records), tc.bytes), sluice.WithMaxPollRecords(3))
			s := g.nextSession(t)
			if c := s.req.GetCredits(); c.GetRecords() != tc.records || c.GetBytes() != tc.bytes {
				t.Fatalf("Subscribe credits %v; want the window", c)
			}
			s.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 1, 0)}})
			const n = 100
			s.deliver("t", 0, 1, 0, n, tc.size)
			polled := 0
			recs := pollN(t, k, n, func(got int) {
				polled = got
				delivered, bytes, _ := s.counts()
				if held := delivered - int64(polled); held > tc.records {
					t.Fatalf("%d records delivered, %d polled: %d held > window %d", delivered, polled, held, tc.records)
				}
				if held := bytes - int64(polled*tc.size); held > tc.bytes {
					t.Fatalf("%d bytes held > window %d", held, tc.bytes)
				}
			})
			checkOffsets(t, recs, sluice.TopicPartition{Topic: "t"}, 0)
			_, _, grants := s.counts()
			var granted int64
			for _, c := range grants {
				granted += c.GetRecords()
			}
			if granted == 0 {
				t.Fatal("no credits granted after the initial window")
			}
		})
	}
}

// GrantCredits is the keepalive: the consumer calls it every heartbeat
// interval (with zero credits when the window is all granted) though the
// application does not poll, and the session does not expire.
func TestConsumerKeepalive(t *testing.T) {
	g := newGroupServer(20*time.Millisecond, 400*time.Millisecond)
	newTestConsumer(t, g)
	s := g.nextSession(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, grants := s.counts()
		if len(grants) >= 25 {
			for _, c := range grants {
				if c.GetRecords() != 0 || c.GetBytes() != 0 {
					t.Fatalf("keepalive granted %v with the window all granted", c)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keepalives in 10 s at a 20 ms heartbeat", len(grants))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, log := g.stored(); slices.ContainsFunc(log, func(s string) bool { return s[:6] == "expire" }) {
		t.Fatalf("session expired: %v", log)
	}
}

// A revoked (not lost) partition is committed at once with its lease
// epoch and the member id, at the offset processed: records of the Polls
// before the latest one.
func TestConsumerCommitOnRevokeUsesLeaseEpoch(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	var cb callbackLog
	k := newTestConsumer(t, g, append(cb.opts(), sluice.WithAutoCommit(time.Hour))...)
	s := g.nextSession(t)
	s.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 7, 0), lease("t", 1, 3, 5)}})
	s.deliver("t", 0, 7, 0, 4, 16)
	s.deliver("t", 1, 3, 5, 2, 16)
	pollN(t, k, 6, nil)
	pollIdle(t, k) // the 6 records are processed now
	s.deliver("t", 0, 7, 4, 2, 16)
	pollN(t, k, 2, nil) // offsets 4 and 5 of t/0: returned, not yet processed

	s.assign(&sluicev1.AssignmentChanged{Revoked: []*sluicev1.PartitionLease{lease("t", 0, 7, 0)}, RevokeTimeoutMs: 5000})
	waitFor(t, "commit on revoke", 5*time.Second, func() bool { c, _ := g.stored(); return len(c) == 1 })
	commits, _ := g.stored()
	c := commits[0]
	if c.GetMemberId() != s.member || c.GetGroup() != "g" || len(c.GetOffsets()) != 1 {
		t.Fatalf("commit %v; want member %s, group g, one offset", c, s.member)
	}
	if o := c.GetOffsets()[0]; o.GetTopic() != "t" || o.GetPartition() != 0 || o.GetOffset() != 4 || o.GetLeaseEpoch() != 7 {
		t.Fatalf("commit on revoke %v; want t/0 offset 4 epoch 7", o)
	}

	// Lost: no commit. Then nothing is leased, so Close commits nothing.
	s.assign(&sluicev1.AssignmentChanged{Revoked: []*sluicev1.PartitionLease{lease("t", 1, 3, 5)}, Lost: true})
	waitFor(t, "t/1 dropped", 5*time.Second, func() bool { return len(k.Assignment()) == 0 })
	pollIdle(t, k)
	want := []string{"assigned [t/0 t/1]", "revoked [t/0] lost=false", "revoked [t/1] lost=true"}
	if got := cb.get(); !slices.Equal(got, want) {
		t.Fatalf("callbacks %q; want %q", got, want)
	}
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if commits, _ := g.stored(); len(commits) != 1 {
		t.Fatalf("%d commits; want only the one on revoke: %v", len(commits), commits)
	}
}

// A commit refused with FAILED_PRECONDITION because one lease moved: the
// others are stored, Commit returns a *FencedError naming the fenced
// partition, and the consumer drops it. Without details the commit is
// split until the fenced partition stands alone; with an ErrorInfo
// LEASE_FENCED naming it, the rest is sent again at once.
func TestConsumerFencedCommitDropsPartition(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			var calls atomic.Int64
			g := newGroupServer(time.Second, 10*time.Second)
			g.onCommit = func(req *sluicev1.CommitRequest) error {
				calls.Add(1)
				for _, o := range req.GetOffsets() {
					if o.GetPartition() == 1 {
						ce := connect.NewError(connect.CodeFailedPrecondition, errors.New("lease epoch 2 of t/1 is stale"))
						if named {
							ce.AddDetail(errorInfo(t, "LEASE_FENCED", map[string]string{"topic": "t", "partitions": "1"}))
						}
						return ce
					}
				}
				return nil
			}
			checkFencedCommit(t, g)
			if named && calls.Load() != 2 {
				t.Fatalf("%d Commit calls; want 2 (refused, then the rest)", calls.Load())
			}
		})
	}
}

func errorInfo(t *testing.T, reason string, md map[string]string) *connect.ErrorDetail {
	d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reason, Domain: "sluice.dev", Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func checkFencedCommit(t *testing.T, g *groupServer) {
	t.Helper()
	var cb callbackLog
	k := newTestConsumer(t, g, append(cb.opts(), sluice.WithAutoCommit(0))...)
	s := g.nextSession(t)
	s.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 1, 0), lease("t", 1, 2, 0), lease("t", 2, 3, 0)}})
	for p := range int32(3) {
		s.deliver("t", p, int64(p)+1, 0, 3, 8)
	}
	pollN(t, k, 9, nil)
	err := k.Commit(context.Background())
	var fe *sluice.FencedError
	if !errors.Is(err, sluice.ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("Commit: %v; want a FencedError", err)
	}
	if want := []sluice.TopicPartition{{Topic: "t", Partition: 1}}; !slices.Equal(fe.Partitions, want) || connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("fenced %v (%v); want %v", fe.Partitions, err, want)
	}
	if got, want := k.Assignment(), []sluice.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 2}}; !slices.Equal(got, want) {
		t.Fatalf("assignment %v; want %v", got, want)
	}
	stored := map[int32]int64{}
	commits, _ := g.stored()
	for _, c := range commits {
		for _, o := range c.GetOffsets() {
			stored[o.GetPartition()] = o.GetOffset()
			if o.GetLeaseEpoch() != int64(o.GetPartition())+1 {
				t.Fatalf("commit %v with the wrong epoch", o)
			}
		}
	}
	if len(stored) != 2 || stored[0] != 3 || stored[2] != 3 {
		t.Fatalf("stored %v; want t/0 and t/2 at 3", stored)
	}
	// Records of the dropped partition are not returned any more.
	s.deliver("t", 1, 2, 3, 2, 8)
	s.deliver("t", 0, 1, 3, 1, 8)
	recs := pollN(t, k, 1, nil)
	if recs[0].Partition != 0 {
		t.Fatalf("polled %v after t/1 was fenced", recs[0])
	}
	pollIdle(t, k)
	if got := cb.get(); !slices.Contains(got, "revoked [t/1] lost=true") {
		t.Fatalf("callbacks %q lack the lost t/1", got)
	}
}

// A FAILED_PRECONDITION whose ErrorInfo is not LEASE_FENCED (an offset
// moving backwards) fails the commit without dropping anything.
func TestConsumerCommitConflictIsNotFencing(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	g.onCommit = func(*sluicev1.CommitRequest) error {
		ce := connect.NewError(connect.CodeFailedPrecondition, errors.New("offset lower than the committed offset"))
		ce.AddDetail(errorInfo(t, "OFFSET_REGRESSION", map[string]string{"topic": "t", "partitions": "0"}))
		return ce
	}
	k := newTestConsumer(t, g, sluice.WithAutoCommit(0))
	s := g.nextSession(t)
	s.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 1, 10), lease("t", 1, 1, 0)}})
	waitFor(t, "assignment", 5*time.Second, func() bool { return len(k.Assignment()) == 2 })
	err := k.CommitOffsets(context.Background(), map[sluice.TopicPartition]int64{{Topic: "t"}: 5, {Topic: "t", Partition: 1}: 1})
	if err == nil || errors.Is(err, sluice.ErrFenced) || connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("CommitOffsets: %v; want the conflict, not fencing", err)
	}
	if len(k.Assignment()) != 2 {
		t.Fatalf("assignment %v after a conflict", k.Assignment())
	}
}

// A failed session stream is replaced by a new session (new member id,
// whole window again); the partitions of the old one are lost.
func TestConsumerReconnectsAsNewSession(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	var cb callbackLog
	k := newTestConsumer(t, g, cb.opts()...)
	s1 := g.nextSession(t)
	s1.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 1, 0)}})
	s1.deliver("t", 0, 1, 0, 2, 8)
	checkOffsets(t, pollN(t, k, 2, nil), sluice.TopicPartition{Topic: "t"}, 0)
	s1.end <- connect.NewError(connect.CodeUnavailable, errors.New("fetch copy going away"))

	s2 := g.nextSession(t)
	if s2.member == s1.member || s2.req.GetCredits().GetRecords() != sluice.DefaultCreditRecords {
		t.Fatalf("second session %s with credits %v", s2.member, s2.req.GetCredits())
	}
	waitFor(t, "new member id", 5*time.Second, func() bool { return k.MemberID() == s2.member })
	s2.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 2, 2)}})
	s2.deliver("t", 0, 2, 2, 3, 8)
	checkOffsets(t, pollN(t, k, 3, nil), sluice.TopicPartition{Topic: "t"}, 2)
	want := []string{"assigned [t/0]", "revoked [t/0] lost=true", "assigned [t/0]"}
	if got := cb.get(); !slices.Equal(got, want) {
		t.Fatalf("callbacks %q; want %q", got, want)
	}
}

// A session that expires (no heartbeat: here the server expires it at
// once) is replaced too.
func TestConsumerSessionExpiryReconnects(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	k := newTestConsumer(t, g)
	s1 := g.nextSession(t)
	s1.end <- connect.NewError(connect.CodeFailedPrecondition, errors.New("session expired"))
	s2 := g.nextSession(t)
	waitFor(t, "second session", 5*time.Second, func() bool { return k.MemberID() == s2.member })
}

// Close commits what Poll returned, then ends the stream (leaving the
// group).
func TestConsumerCloseCommitsThenLeaves(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	k := newTestConsumer(t, g)
	s := g.nextSession(t)
	s.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 4, 10)}})
	s.deliver("t", 0, 4, 10, 5, 8)
	pollN(t, k, 5, nil)
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Poll(context.Background()); !errors.Is(err, sluice.ErrClosed) {
		t.Fatalf("Poll after Close: %v", err)
	}
	waitFor(t, "the stream to end", 5*time.Second, func() bool { _, log := g.stored(); return len(log) == 2 })
	commits, log := g.stored()
	if !slices.Equal(log, []string{"commit", "leave " + s.member}) {
		t.Fatalf("server saw %q; want the commit, then the member leaving", log)
	}
	if o := commits[0].GetOffsets()[0]; o.GetOffset() != 15 || o.GetLeaseEpoch() != 4 {
		t.Fatalf("final commit %v; want offset 15 epoch 4", o)
	}
}

// Auto-commit commits processed offsets in the background.
func TestConsumerAutoCommit(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	k := newTestConsumer(t, g, sluice.WithAutoCommit(20*time.Millisecond))
	s := g.nextSession(t)
	s.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 1, 0)}})
	s.deliver("t", 0, 1, 0, 3, 8)
	pollN(t, k, 3, nil)
	pollIdle(t, k)
	waitFor(t, "auto-commit", 5*time.Second, func() bool {
		c, _ := g.stored()
		return len(c) > 0 && c[len(c)-1].GetOffsets()[0].GetOffset() == 3
	})
}

// CommitOffsets commits the offsets given for leased partitions and names
// the others.
func TestConsumerCommitOffsets(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	k := newTestConsumer(t, g, sluice.WithAutoCommit(0))
	s := g.nextSession(t)
	s.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 5, 0)}})
	waitFor(t, "assignment", 5*time.Second, func() bool { return len(k.Assignment()) == 1 })
	err := k.CommitOffsets(context.Background(), map[sluice.TopicPartition]int64{{Topic: "t"}: 42, {Topic: "t", Partition: 9}: 1})
	if !errors.Is(err, sluice.ErrNotAssigned) {
		t.Fatalf("CommitOffsets: %v; want ErrNotAssigned for t/9", err)
	}
	commits, _ := g.stored()
	if len(commits) != 1 || commits[0].GetOffsets()[0].GetOffset() != 42 || commits[0].GetOffsets()[0].GetLeaseEpoch() != 5 {
		t.Fatalf("commits %v", commits)
	}
}

// An unknown topic fails the consumer: Poll says so.
func TestConsumerUnknownTopicFails(t *testing.T) {
	g := &notFoundServer{}
	addr := serveConsumer(t, g)
	c, err := sluice.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, err := c.NewConsumer("g", []string{"nope"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := k.Poll(ctx); !errors.Is(err, sluice.ErrUnknownTopic) {
		t.Fatalf("Poll: %v; want ErrUnknownTopic", err)
	}
}

type notFoundServer struct{ groupServer }

func (*notFoundServer) Subscribe(context.Context, *connect.Request[sluicev1.SubscribeRequest], *connect.ServerStream[sluicev1.SubscribeResponse]) error {
	return connect.NewError(connect.CodeNotFound, errors.New(`topic "nope" not found`))
}

// A server sending far beyond the credits is broken: the consumer bounds
// its memory by ending the session and starting a new one.
func TestConsumerServerBeyondCreditsEndsSession(t *testing.T) {
	g := newGroupServer(time.Second, 10*time.Second)
	k := newTestConsumer(t, g, sluice.WithCreditWindow(10, sluice.MinCreditBytes))
	s1 := g.nextSession(t)
	s1.mu.Lock()
	s1.broken = true
	s1.mu.Unlock()
	s1.assign(&sluicev1.AssignmentChanged{Added: []*sluicev1.PartitionLease{lease("t", 0, 1, 0)}})
	s1.deliver("t", 0, 1, 0, 100, 8)
	s2 := g.nextSession(t)
	waitFor(t, "second session", 5*time.Second, func() bool { return k.MemberID() == s2.member })
}
