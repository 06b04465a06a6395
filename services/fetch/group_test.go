package fetch_test

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
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/internal/quota"
	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/fetch"
)

// member is a test client of one Subscribe session.
type member struct {
	t      *testing.T
	cons   sluicev1connect.ConsumerServiceClient
	group  string
	cancel context.CancelFunc
	done   chan error

	mu       sync.Mutex
	id, sess string
	leases   map[string]int64 // "topic/p" → epoch (held, not revoked)
	next     map[string]int64 // "topic/p" → next offset processed
	records  map[string]int   // "topic/p@offset" → deliveries
	total    int
	revoked  []*sluicev1.PartitionLease
	changed  chan struct{}
	// Sessions with record_batches: deliveries that carried batches, and
	// the credits the server said it spent.
	batchMsgs             int
	spentRecs, spentBytes int64
}

func groupConfig() cluster.Config {
	return cluster.Config{Fetch: fetch.Config{BalanceInterval: 50 * time.Millisecond, RevokeTimeout: 2 * time.Second}}
}

func subscribe(t *testing.T, cons sluicev1connect.ConsumerServiceClient, req *sluicev1.SubscribeRequest, commitOnRevoke bool) *member {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{t: t, cons: cons, group: req.Group, cancel: cancel, done: make(chan error, 1),
		leases: map[string]int64{}, next: map[string]int64{}, records: map[string]int{}, changed: make(chan struct{}, 1)}
	stream, err := cons.Subscribe(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if !stream.Receive() {
		cancel()
		t.Fatalf("subscribe: %v", stream.Err())
	}
	st := stream.Msg().GetStarted()
	if st == nil || st.MemberId == "" || st.SessionId == "" || st.HeartbeatIntervalMs <= 0 {
		cancel()
		t.Fatalf("first message is not a usable SessionStarted: %v", stream.Msg())
	}
	m.id, m.sess = st.MemberId, st.SessionId
	go func() {
		defer stream.Close()
		for stream.Receive() {
			m.handle(stream.Msg(), commitOnRevoke)
		}
		m.done <- stream.Err()
	}()
	// Keepalive, as the SDK does.
	go func() {
		tick := time.NewTicker(time.Duration(st.HeartbeatIntervalMs) * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_, _ = cons.GrantCredits(ctx, connect.NewRequest(&sluicev1.GrantCreditsRequest{Group: m.group, SessionId: m.sess}))
			}
		}
	}()
	t.Cleanup(cancel)
	return m
}

func key(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

func (m *member) handle(msg *sluicev1.SubscribeResponse, commitOnRevoke bool) {
	m.mu.Lock()
	var commit []*sluicev1.CommitOffset
	switch ev := msg.Event.(type) {
	case *sluicev1.SubscribeResponse_Assignment:
		for _, l := range ev.Assignment.Added {
			m.leases[key(l.Topic, l.Partition)] = l.Epoch
			if _, ok := m.next[key(l.Topic, l.Partition)]; !ok || l.Offset > m.next[key(l.Topic, l.Partition)] {
				m.next[key(l.Topic, l.Partition)] = l.Offset
			}
		}
		for _, l := range ev.Assignment.Revoked {
			k := key(l.Topic, l.Partition)
			if !ev.Assignment.Lost && commitOnRevoke {
				commit = append(commit, &sluicev1.CommitOffset{Topic: l.Topic, Partition: l.Partition, Offset: m.next[k], LeaseEpoch: l.Epoch})
			}
			delete(m.leases, k)
			m.revoked = append(m.revoked, l)
		}
	case *sluicev1.SubscribeResponse_Records:
		r := ev.Records
		k := key(r.Topic, r.Partition)
		if m.leases[k] != r.Epoch {
			m.t.Errorf("member %s got records of %s at epoch %d while holding %d", m.id, k, r.Epoch, m.leases[k])
		}
		for _, rec := range r.Records {
			m.records[fmt.Sprintf("%s@%d", k, rec.Offset)]++
			m.total++
			m.next[k] = rec.Offset + 1
		}
		if len(r.RecordBatches) > 0 {
			m.batchMsgs++
		}
		for _, run := range r.RecordBatches {
			for rest := run; len(rest) > 0; {
				bt, tail, err := record.Split(rest)
				if err != nil {
					m.t.Errorf("delivered batches of %s: %v", k, err)
					break
				}
				rest = tail
				recs, err := record.Decode(bt, record.Limits{})
				if err != nil {
					m.t.Errorf("delivered batch of %s: %v", k, err)
				}
				for _, rec := range recs {
					if rec.Offset < m.next[k] {
						continue // the batch starts before the delivery position
					}
					m.records[fmt.Sprintf("%s@%d", k, rec.Offset)]++
					m.total++
					m.next[k] = rec.Offset + 1
				}
			}
		}
		if c := r.CreditsSpent; c != nil {
			m.spentRecs += c.Records
			m.spentBytes += c.Bytes
		}
	}
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
	if len(commit) > 0 {
		_, err := m.cons.Commit(context.Background(), connect.NewRequest(&sluicev1.CommitRequest{Group: m.group, MemberId: m.id, Offsets: commit}))
		if err != nil {
			m.t.Errorf("commit on revoke: %v", err)
		}
	}
}

func (m *member) held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.leases)
}

func (m *member) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

// commitAll commits what the member processed on the partitions it holds.
func (m *member) commitAll(t *testing.T) error {
	m.mu.Lock()
	var offs []*sluicev1.CommitOffset
	for k, epoch := range m.leases {
		var topic string
		var p int32
		fmt.Sscanf(k, "%s", &topic)
		for i := len(k) - 1; i >= 0; i-- {
			if k[i] == '/' {
				topic = k[:i]
				fmt.Sscanf(k[i+1:], "%d", &p)
				break
			}
		}
		offs = append(offs, &sluicev1.CommitOffset{Topic: topic, Partition: p, Offset: m.next[k], LeaseEpoch: epoch})
	}
	m.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	_, err := m.cons.Commit(context.Background(), connect.NewRequest(&sluicev1.CommitRequest{Group: m.group, MemberId: m.id, Offsets: offs}))
	return err
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two members share a topic's partitions fairly; a member joining takes
// its share while the other keeps consuming (commit on revoke); every
// record is delivered exactly once overall; a member leaving frees its
// partitions at once; a zombie commit after the lease moved is refused.
func TestGroupSharesPartitionsAndDeliversOnce(t *testing.T) {
	e := startCluster(t, groupConfig())
	const parts, per = 6, 40
	e.createTopic(t, "g", parts)
	for p := range int32(parts) {
		e.produce(t, "g", p, 0, per, per)
	}
	credits := &sluicev1.Credits{Records: 1_000_000, Bytes: 1 << 40}
	a := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "grp", Topics: []string{"g"}, Credits: credits}, true)
	waitFor(t, "a to take all partitions and read everything", 10*time.Second, func() bool { return a.held() == parts && a.count() == parts*per })
	if err := a.commitAll(t); err != nil {
		t.Fatal(err)
	}
	b := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "grp", Topics: []string{"g"}, Credits: credits}, true)
	waitFor(t, "a fair share each", 10*time.Second, func() bool { return a.held() == parts/2 && b.held() == parts/2 })
	// New records go to whoever holds the partition, once.
	for p := range int32(parts) {
		e.produce(t, "g", p, per, 10, 10)
	}
	waitFor(t, "the new records", 10*time.Second, func() bool { return a.count()+b.count() == parts*(per+10) })
	time.Sleep(200 * time.Millisecond)
	seen := map[string]int{}
	for _, m := range []*member{a, b} {
		m.mu.Lock()
		for k, n := range m.records {
			seen[k] += n
		}
		m.mu.Unlock()
	}
	if len(seen) != parts*(per+10) {
		t.Fatalf("%d distinct records delivered, want %d", len(seen), parts*(per+10))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("record %s delivered %d times", k, n)
		}
	}
	// A zombie commit: a's revoked lease epochs are stale now.
	a.mu.Lock()
	rv := a.revoked
	a.mu.Unlock()
	if len(rv) == 0 {
		t.Fatal("a was never asked to give partitions up")
	}
	_, err := e.cons.Commit(context.Background(), connect.NewRequest(&sluicev1.CommitRequest{Group: "grp", MemberId: a.id,
		Offsets: []*sluicev1.CommitOffset{{Topic: "g", Partition: rv[0].Partition, Offset: per + 10, LeaseEpoch: rv[0].Epoch}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("zombie commit: want FAILED_PRECONDITION, got %v", err)
	}
	if info := errorInfo(err); info == nil || info.Reason != fetch.ReasonLeaseFenced || info.Metadata["topic"] != "g" ||
		info.Metadata["partitions"] != fmt.Sprint(rv[0].Partition) {
		t.Fatalf("zombie commit: ErrorInfo %v does not name the fenced partition %d", info, rv[0].Partition)
	}
	// An offset lower than the committed one is refused, named as such.
	b.mu.Lock()
	var bp int32 = -1
	var be int64
	for k, ep := range b.leases {
		fmt.Sscanf(k[len("g/"):], "%d", &bp)
		be = ep
		break
	}
	b.mu.Unlock()
	if err := b.commitAll(t); err != nil {
		t.Fatal(err)
	}
	_, err = e.cons.Commit(context.Background(), connect.NewRequest(&sluicev1.CommitRequest{Group: "grp", MemberId: b.id,
		Offsets: []*sluicev1.CommitOffset{{Topic: "g", Partition: bp, Offset: 1, LeaseEpoch: be}}}))
	if info := errorInfo(err); connect.CodeOf(err) != connect.CodeFailedPrecondition || info == nil || info.Reason != fetch.ReasonOffsetRegression {
		t.Fatalf("backwards commit: want FAILED_PRECONDITION OFFSET_REGRESSION, got %v (%v)", err, info)
	}
	// b leaves: a gets everything back at once (no session timeout wait).
	start := time.Now()
	b.cancel()
	waitFor(t, "a to take b's partitions", 5*time.Second, func() bool { return a.held() == parts })
	t.Logf("partitions moved %v after b left", time.Since(start))
	// DescribeGroup shows the member, its leases and zero lag.
	if err := a.commitAll(t); err != nil {
		t.Fatal(err)
	}
	d, err := e.admin.DescribeGroup(context.Background(), connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "grp"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Msg.Members) != 1 || d.Msg.Members[0].MemberId != a.id || len(d.Msg.Partitions) != parts {
		t.Fatalf("describe: %v", d.Msg)
	}
	for _, gp := range d.Msg.Partitions {
		if gp.Owner != a.id || gp.CommittedOffset != per+10 || gp.EndOffset != per+10 || gp.Lag != 0 {
			t.Fatalf("describe partition: %v", gp)
		}
	}
	l, err := e.admin.ListGroups(context.Background(), connect.NewRequest(&sluicev1.ListGroupsRequest{}))
	if err != nil || len(l.Msg.Groups) != 1 || l.Msg.Groups[0] != "grp" {
		t.Fatalf("list groups: %v %v", l, err)
	}
	// Reset needs the group empty.
	_, err = e.admin.ResetGroupOffsets(context.Background(), connect.NewRequest(&sluicev1.ResetGroupOffsetsRequest{Group: "grp", Topic: "g", Position: sluicev1.StartPosition_START_POSITION_EARLIEST}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("reset with a live member: want FAILED_PRECONDITION, got %v", err)
	}
	// Leave answers once the member is gone: the group is empty at once.
	if _, err := e.cons.Leave(context.Background(), connect.NewRequest(&sluicev1.LeaveRequest{Group: "grp", MemberId: a.id})); err != nil {
		t.Fatal(err)
	}
	d, err = e.admin.DescribeGroup(context.Background(), connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "grp"}))
	if err != nil || len(d.Msg.Members) != 0 {
		t.Fatalf("after Leave: %v %v", d, err)
	}
	if err := <-a.done; err != nil {
		t.Fatalf("the left member's stream ended with %v", err)
	}
	if _, err := e.cons.Leave(context.Background(), connect.NewRequest(&sluicev1.LeaveRequest{Group: "grp", MemberId: a.id})); err != nil {
		t.Fatalf("leaving twice: %v", err)
	}
	r, err := e.admin.ResetGroupOffsets(context.Background(), connect.NewRequest(&sluicev1.ResetGroupOffsetsRequest{Group: "grp", Topic: "g", Partitions: []int32{2}, Offset: 5}))
	if err != nil || len(r.Msg.Partitions) != 1 || r.Msg.Partitions[0].CommittedOffset != 5 {
		t.Fatalf("reset: %v %v", r, err)
	}
	// A new member starts partition 2 at the reset offset.
	c := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "grp", Topics: []string{"g"}, Credits: credits}, true)
	waitFor(t, "re-delivery from the reset offset", 10*time.Second, func() bool { return c.count() == per+10-5 })
}

// The server never sends beyond the credits granted, and resumes when
// granted more; a session without keepalives expires.
func TestGroupCreditsAndKeepalive(t *testing.T) {
	e := startCluster(t, groupConfig())
	e.createTopic(t, "c", 2)
	e.produce(t, "c", 0, 0, 50, 50)
	e.produce(t, "c", 1, 0, 50, 50)
	m := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "cg", Topics: []string{"c"}, Credits: &sluicev1.Credits{Records: 7, Bytes: 1 << 20}}, true)
	waitFor(t, "7 records", 5*time.Second, func() bool { return m.count() == 7 })
	time.Sleep(300 * time.Millisecond)
	if n := m.count(); n != 7 {
		t.Fatalf("got %d records with 7 credits", n)
	}
	if _, err := e.cons.GrantCredits(context.Background(), connect.NewRequest(&sluicev1.GrantCreditsRequest{Group: "cg", SessionId: m.sess, Credits: &sluicev1.Credits{Records: 20, Bytes: 1 << 20}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "27 records", 5*time.Second, func() bool { return m.count() == 27 })
	time.Sleep(300 * time.Millisecond)
	if n := m.count(); n != 27 {
		t.Fatalf("got %d records with 27 credits", n)
	}
	// Byte credits: records 0..9 are 4 bytes each (key k<i>, value v<i>):
	// 4 bytes of credit buy exactly one record.
	bm := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "bytes", Topics: []string{"c"}, Credits: &sluicev1.Credits{Records: 1000, Bytes: 4}}, true)
	waitFor(t, "1 record", 5*time.Second, func() bool { return bm.count() == 1 })
	time.Sleep(300 * time.Millisecond)
	if n := bm.count(); n != 1 {
		t.Fatalf("got %d records with 4 bytes of credit", n)
	}

	// A session whose client stops calling ends with FAILED_PRECONDITION.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := e.cons.Subscribe(ctx, connect.NewRequest(&sluicev1.SubscribeRequest{Group: "silent", Topics: []string{"c"}, SessionTimeoutMs: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for stream.Receive() {
	}
	if connect.CodeOf(stream.Err()) != connect.CodeFailedPrecondition {
		t.Fatalf("silent session: want FAILED_PRECONDITION, got %v", stream.Err())
	}
	if el := time.Since(start); el < 900*time.Millisecond || el > 5*time.Second {
		t.Fatalf("silent session ended after %v (timeout 1 s)", el)
	}
	_, err = e.cons.GrantCredits(context.Background(), connect.NewRequest(&sluicev1.GrantCreditsRequest{Group: "cg", SessionId: "s-nope"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown session: want NOT_FOUND, got %v", err)
	}
}

// A session with record_batches gets the stored batches whole while they
// fit its credits; a first batch that cannot fit arrives as records within
// the credits; the rest of that batch comes whole later, and the member
// skips what it already has. credits_spent adds up to what was sent and
// never beyond the grant.
func TestGroupCreditsWithStoredBatches(t *testing.T) {
	e := startCluster(t, groupConfig())
	e.createTopic(t, "sb", 1)
	e.produce(t, "sb", 0, 0, 30, 10) // three batches of 10 records
	m := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "sb", Topics: []string{"sb"}, Credits: &sluicev1.Credits{Records: 25, Bytes: 1 << 20}, RecordBatches: true}, true)
	waitFor(t, "25 records", 5*time.Second, func() bool { return m.count() == 25 })
	time.Sleep(300 * time.Millisecond)
	m.mu.Lock()
	total, batchMsgs, spentRecs, spentBytes := m.total, m.batchMsgs, m.spentRecs, m.spentBytes
	m.mu.Unlock()
	if total != 25 || spentRecs != 25 {
		t.Fatalf("with 25 credits: %d records received, %d credits spent", total, spentRecs)
	}
	if batchMsgs == 0 {
		t.Fatal("no delivery carried stored batches")
	}
	if _, err := e.cons.GrantCredits(context.Background(), connect.NewRequest(&sluicev1.GrantCreditsRequest{Group: "sb", SessionId: m.sess, Credits: &sluicev1.Credits{Records: 100, Bytes: 1 << 20}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "30 records", 5*time.Second, func() bool { return m.count() == 30 })
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range 30 {
		if n := m.records[fmt.Sprintf("sb/0@%d", i)]; n != 1 {
			t.Errorf("offset %d delivered %d times", i, n)
		}
	}
	if m.spentRecs != 30 {
		t.Errorf("credits spent on 30 offsets: %d", m.spentRecs)
	}
	if m.spentBytes <= spentBytes {
		t.Errorf("byte credits spent did not grow with the last batch: %d then %d", spentBytes, m.spentBytes)
	}
}

// Browser-shaped clients: a group session over gRPC-web and over the
// Connect protocol with JSON, as a browser would use them (server stream +
// unary calls), with the credits respected over both.
func TestGroupSessionFromBrowserProtocols(t *testing.T) {
	e := startCluster(t, groupConfig())
	e.createTopic(t, "web", 1)
	e.produce(t, "web", 0, 0, 30, 30)
	for _, tc := range []struct {
		name string
		opts []connect.ClientOption
	}{
		{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
		{"connect-json", []connect.ClientOption{connect.WithProtoJSON()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// HTTP/1.1, as browsers' fetch commonly speaks to a server.
			h1 := &http.Client{Transport: &http.Transport{}}
			defer h1.CloseIdleConnections()
			cons := sluicev1connect.NewConsumerServiceClient(h1, e.url, tc.opts...)
			m := subscribe(t, cons, &sluicev1.SubscribeRequest{Group: "web-" + tc.name, Topics: []string{"web"}, Credits: &sluicev1.Credits{Records: 5, Bytes: 1 << 20}}, true)
			waitFor(t, "5 records", 5*time.Second, func() bool { return m.count() == 5 })
			time.Sleep(200 * time.Millisecond)
			if n := m.count(); n != 5 {
				t.Fatalf("%d records delivered with 5 credits", n)
			}
			if _, err := cons.GrantCredits(context.Background(), connect.NewRequest(&sluicev1.GrantCreditsRequest{Group: m.group, SessionId: m.sess, Credits: &sluicev1.Credits{Records: 100, Bytes: 1 << 20}})); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the rest", 5*time.Second, func() bool { return m.count() == 30 })
			if err := m.commitAll(t); err != nil {
				t.Fatal(err)
			}
			m.mu.Lock()
			for i := range 30 {
				if m.records[fmt.Sprintf("web/0@%d", i)] != 1 {
					t.Errorf("record %d delivered %d times", i, m.records[fmt.Sprintf("web/0@%d", i)])
				}
			}
			m.mu.Unlock()
		})
	}
}

// A group over its byte-rate quota has its deliveries spread out; Fetch
// answers for a client id over its quota report the throttle time.
func TestConsumerQuotas(t *testing.T) {
	cfg := groupConfig()
	cfg.Fetch.GroupQuota = quota.Config{Overrides: map[string]quota.Quota{"slow": {BytesPerSecond: 20 << 10}}}
	cfg.Fetch.ClientQuota = quota.Config{Default: quota.Quota{BytesPerSecond: 10 << 10}}
	e := startCluster(t, cfg)
	e.createTopic(t, "q", 1)
	p := int32(0)
	var recs []*sluicev1.Record
	for range 60 {
		recs = append(recs, &sluicev1.Record{Value: make([]byte, 1024)})
	}
	if _, err := e.prod.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: "q", Partition: &p, Records: recs})); err != nil {
		t.Fatal(err)
	}
	credits := &sluicev1.Credits{Records: 1000, Bytes: 1 << 30}
	start := time.Now()
	fast := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "fast", Topics: []string{"q"}, Credits: credits}, true)
	waitFor(t, "the unthrottled group", 10*time.Second, func() bool { return fast.count() == 60 })
	fastTook := time.Since(start)
	start = time.Now()
	slow := subscribe(t, e.cons, &sluicev1.SubscribeRequest{Group: "slow", Topics: []string{"q"}, Credits: credits}, true)
	waitFor(t, "the throttled group", 20*time.Second, func() bool { return slow.count() == 60 })
	slowTook := time.Since(start)
	// 60 KiB at 20 KiB/s with a 20 KiB burst: at least ~2 s.
	if slowTook < 1500*time.Millisecond {
		t.Fatalf("the throttled group read 60 KiB in %v (unthrottled: %v)", slowTook, fastTook)
	}
	t.Logf("unthrottled %v, throttled %v", fastTook, slowTook)

	req := connect.NewRequest(&sluicev1.FetchRequest{Topic: "q", MaxRecords: 30})
	req.Header().Set("Sluice-Client-Id", "reader-1")
	resp, err := e.cons.Fetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.ThrottleTimeMs <= 0 {
		t.Fatalf("30 KiB over a 10 KiB/s quota reported no throttle time")
	}
}

func errorInfo(err error) *errdetails.ErrorInfo {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				return ei
			}
		}
	}
	return nil
}

// Two fetch copies behind one "load balancer": a session's GrantCredits
// and Commit calls that reach the other copy are forwarded to the copy
// holding its stream — credits arrive, the keepalive holds, the commit is
// applied.
func TestSessionCallsRoutedAcrossCopies(t *testing.T) {
	e := startCluster(t, groupConfig())
	e.createTopic(t, "r", 1)
	e.produce(t, "r", 0, 0, 20, 20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other, err := fetch.New(fetch.Config{Address: ln.Addr().String()}, fetch.Deps{
		Catalog: e.c.Catalog, Ledgers: e.c.Ledgers, Bookkeeping: e.c.Bookkeeping, Forward: fetch.Forwarder(rpcclient.New(nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rpcserver.New(rpcserver.Config{}, telemetry.Discard())
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle(other.Handler(srv.HandlerOptions()...))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	ran := make(chan error, 1)
	go func() { ran <- other.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-served; <-ran })
	via := sluicev1connect.NewConsumerServiceClient(h2c, "http://"+ln.Addr().String(), connect.WithGRPC())

	// The session lives on the cluster's copy; its client talks to the
	// other copy only (a 1 s session timeout, kept alive through it).
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	stream, err := e.cons.Subscribe(sctx, connect.NewRequest(&sluicev1.SubscribeRequest{Group: "routed", Topics: []string{"r"}, SessionTimeoutMs: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	st := stream.Msg().GetStarted()
	got := make(chan *sluicev1.SubscribeResponse, 100)
	go func() {
		for stream.Receive() {
			got <- stream.Msg()
		}
		close(got)
	}()
	grant := func(n int64) {
		t.Helper()
		if _, err := via.GrantCredits(context.Background(), connect.NewRequest(&sluicev1.GrantCreditsRequest{Group: "routed", SessionId: st.SessionId, Credits: &sluicev1.Credits{Records: n, Bytes: 1 << 20}})); err != nil {
			t.Fatalf("grant through the other copy: %v", err)
		}
	}
	grant(20)
	var epoch int64
	n := 0
	deadline := time.After(10 * time.Second)
	for n < 20 {
		select {
		case msg, ok := <-got:
			if !ok {
				t.Fatal("stream ended")
			}
			if a := msg.GetAssignment(); a != nil && len(a.Added) == 1 {
				epoch = a.Added[0].Epoch
			}
			n += len(msg.GetRecords().GetRecords())
		case <-deadline:
			t.Fatalf("%d of 20 records with credits granted through the other copy", n)
		}
	}
	// Keepalives through the other copy hold the session past its timeout.
	for range 6 {
		time.Sleep(300 * time.Millisecond)
		grant(0)
	}
	select {
	case _, ok := <-got:
		if !ok {
			t.Fatal("the session expired although its keepalives went through the other copy")
		}
	default:
	}
	// A commit through the other copy is applied (and counts as keepalive).
	if _, err := via.Commit(context.Background(), connect.NewRequest(&sluicev1.CommitRequest{Group: "routed", MemberId: st.MemberId,
		Offsets: []*sluicev1.CommitOffset{{Topic: "r", Partition: 0, Offset: 20, LeaseEpoch: epoch}}})); err != nil {
		t.Fatal(err)
	}
	d, err := e.admin.DescribeGroup(context.Background(), connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "routed"}))
	if err != nil || len(d.Msg.Partitions) != 1 || d.Msg.Partitions[0].CommittedOffset != 20 {
		t.Fatalf("describe after a routed commit: %v %v", d, err)
	}
}

// DescribeGroup's end offsets and lag are current right after a partition
// gets its first records, though the lag report may use a partition chain
// read up to ChainTTL (30 s) ago: a chain whose tail cannot grow (no
// ledger yet, or a sealed one) is read again.
func TestDescribeGroupLagAfterFirstWrite(t *testing.T) {
	e := startCluster(t, cluster.Config{})
	e.createTopic(t, "t", 2)
	ctx := context.Background()
	if _, err := e.admin.ResetGroupOffsets(ctx, connect.NewRequest(&sluicev1.ResetGroupOffsetsRequest{Group: "g", Topic: "t",
		Position: sluicev1.StartPosition_START_POSITION_EARLIEST})); err != nil {
		t.Fatal(err)
	}
	lagOf := func() map[int32][2]int64 {
		resp, err := e.admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "g"}))
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32][2]int64{}
		for _, p := range resp.Msg.Partitions {
			out[p.Partition] = [2]int64{p.EndOffset, p.Lag}
		}
		return out
	}
	if got := lagOf(); got[0] != [2]int64{0, 0} || got[1] != [2]int64{0, 0} {
		t.Fatalf("before any write: end and lag %v, want 0 and 0", got)
	}
	e.produce(t, "t", 1, 0, 5, 5)
	if got := lagOf(); got[1] != [2]int64{5, 5} || got[0] != [2]int64{0, 0} {
		t.Fatalf("right after 5 records to partition 1: end and lag %v, want partition 1 at end 5, lag 5", got)
	}
}
