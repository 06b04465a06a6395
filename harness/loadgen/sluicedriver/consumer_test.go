package sluicedriver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/harness/loadgen/sluicedriver"
	"github.com/sluicemq/sluice/internal/cluster"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/fetch"
)

// startCluster runs an in-process Sluice for the test; balancing rounds are
// fast so assignments come quickly.
func startCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := cluster.New(cluster.Config{Dir: t.TempDir(), Addr: "127.0.0.1:0",
		Fetch: fetch.Config{BalanceInterval: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cluster Run: %v", err)
		}
	})
	return c
}

func newDriver(t *testing.T, cfg sluicedriver.Config) *sluicedriver.Driver {
	t.Helper()
	d, err := sluicedriver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// sink records what a consumer delivered.
type sink struct {
	mu   sync.Mutex
	seen map[string]int
	n    int
}

func newSink() *sink { return &sink{seen: map[string]int{}} }

func (s *sink) deliver(p []byte) {
	s.mu.Lock()
	s.seen[string(p)]++
	s.n++
	s.mu.Unlock()
}

func (s *sink) counts() (distinct, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen), s.n
}

func produce(t *testing.T, d *sluicedriver.Driver, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := d.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	errs := make(chan error, n)
	for i := from; i < from+n; i++ {
		p.Send(ctx, nil, fmt.Appendf(nil, "m-%d", i), func(err error) { errs <- err })
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
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

// proxy forwards TCP connections to target until cut, which drops every
// open connection (the consumer's stream fails as if the network did).
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(out, in); _ = out.Close() })
		p.wg.Go(func() { _, _ = io.Copy(in, out); _ = in.Close() })
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// A consumer with a small credit window reads everything (credits are
// given back as records are delivered), survives a cut connection (it
// subscribes again and skips what it already delivered: each record once),
// keeps its session alive while idle for longer than the session timeout,
// and commits what it delivered: the group's committed offsets reach the
// end offsets.
func TestConsumerCreditsReconnectKeepaliveCommit(t *testing.T) {
	c := startCluster(t)
	direct := newDriver(t, sluicedriver.Config{Addr: c.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, parts = "cons", 3
	if err := direct.CreateTopic(ctx, topic, parts); err != nil {
		t.Fatal(err)
	}
	produce(t, direct, topic, 0, 300)

	px := startProxy(t, c.Addr())
	viaProxy := newDriver(t, sluicedriver.Config{Addr: px.ln.Addr().String(),
		CreditRecords: 16, CreditBytes: 1 << 20, CommitInterval: 100 * time.Millisecond, SessionTimeout: time.Second})
	s := newSink()
	cons, err := viaProxy.NewConsumer(ctx, topic, "grp", s.deliver)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first 300 records through a 16-record window", 30*time.Second, func() bool { d, _ := s.counts(); return d == 300 })

	// Idle for three session timeouts: the keepalive holds the session.
	time.Sleep(3 * time.Second)
	produce(t, direct, topic, 300, 30)
	waitFor(t, "records produced after the idle time", 10*time.Second, func() bool { d, _ := s.counts(); return d == 330 })

	// Cut the connection: the consumer subscribes again.
	px.cut()
	produce(t, direct, topic, 330, 300)
	waitFor(t, "every record after the reconnect", 30*time.Second, func() bool { d, _ := s.counts(); return d == 630 })
	time.Sleep(300 * time.Millisecond) // room for duplicates to show
	if d, n := s.counts(); n != d {
		t.Errorf("%d deliveries of %d distinct records: redeliveries reached the load generator", n, d)
	}
	err = cons.Close()
	if err == nil || !strings.Contains(err.Error(), "resumed") {
		t.Errorf("Close: %v; want the session failure the consumer recovered from", err)
	}

	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &h2}}
	defer hc.CloseIdleConnections()
	adm := sluicev1connect.NewAdminServiceClient(hc, "http://"+c.Addr(), connect.WithGRPC())
	waitFor(t, "committed offsets at the end offsets", 10*time.Second, func() bool {
		g, err := adm.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "grp"}))
		if err != nil || len(g.Msg.Partitions) != parts {
			return false
		}
		var end int64
		for _, p := range g.Msg.Partitions {
			if p.EndOffset > 0 && p.CommittedOffset != p.EndOffset {
				return false
			}
			end += p.EndOffset
		}
		return end == 630
	})
}

// The consume smoke workload (bench/workloads/csmoke.yaml, the one CI runs)
// through the whole harness against an in-process Sluice: every message is
// acknowledged and delivered exactly once, with end-to-end latencies. Not
// a performance gate: under -race on a busy machine the rate is not held,
// so only completeness is checked.
func TestSluiceDriverConsumeSmoke(t *testing.T) {
	c := startCluster(t)
	drv := newDriver(t, sluicedriver.Config{Addr: c.Addr()})
	w, err := loadgen.LoadWorkload("../../../bench/workloads/csmoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := loadgen.Run(ctx, loadgen.Options{Driver: drv, Workload: w, DrainTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	loadgen.WriteMarkdown(&md, res)
	t.Log("\n" + md.String())
	if res.Failed+res.Unacked+res.NotSent+res.NotReceived != 0 || res.FirstError != "" {
		t.Errorf("lost or failed messages: failed %d unacked %d not sent %d not received %d (%s)",
			res.Failed, res.Unacked, res.NotSent, res.NotReceived, res.FirstError)
	}
	if want := int64(0.9 * w.ProducerRate * w.TestDuration.D().Seconds()); res.Sent < want || res.Consume.Messages == 0 {
		t.Errorf("too little traffic: sent %d (want %d), consumed %d in the window", res.Sent, want, res.Consume.Messages)
	}
	if res.EndToEndLatency.Count != res.Sent {
		t.Errorf("%d end-to-end latencies for %d messages sent in the window: want each delivered once", res.EndToEndLatency.Count, res.Sent)
	}
}

// The transactions smoke workload (bench/workloads/tsmoke.yaml: a
// transaction every 100 messages, read_committed consumers) through the
// whole harness against an in-process Sluice: every message acknowledged
// once its transaction committed and delivered exactly once.
func TestSluiceDriverTransactionsSmoke(t *testing.T) {
	c := startCluster(t)
	drv := newDriver(t, sluicedriver.Config{Addr: c.Addr()})
	w, err := loadgen.LoadWorkload("../../../bench/workloads/tsmoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := loadgen.Run(ctx, loadgen.Options{Driver: drv, Workload: w, DrainTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed+res.Unacked+res.NotSent+res.NotReceived != 0 || res.FirstError != "" {
		t.Errorf("lost or failed messages: failed %d unacked %d not sent %d not received %d (%s)",
			res.Failed, res.Unacked, res.NotSent, res.NotReceived, res.FirstError)
	}
	if res.Sent == 0 || res.EndToEndLatency.Count != res.Sent {
		t.Errorf("%d end-to-end latencies for %d messages sent in the window: want each delivered once", res.EndToEndLatency.Count, res.Sent)
	}
	if d, err := drv.Describe(ctx, "x"); err == nil && d["producer.transactions"] == "" {
		t.Errorf("Describe does not say the producers are transactional: %v", d)
	}
}
