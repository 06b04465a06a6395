//go:build integration

package processtest

import (
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/testenv"
	bkcassandra "github.com/sluicemq/sluice/pkg/bookkeeping/cassandra"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is the processes a test runs on: 3 bookies, one ingest copy and
// one fetch copy (or more: clusterConfig), plus the sluice binary to start
// consumers with.
type cluster struct {
	bin       string
	fetchAddr string // the first fetch copy's
	http      *http.Client
	admin     sluicev1connect.AdminServiceClient    // the ingest copy's (topics)
	groups    sluicev1connect.AdminServiceClient    // the first fetch copy's (groups)
	consumer  sluicev1connect.ConsumerServiceClient // the first fetch copy's
	producer  sluicev1connect.ProducerServiceClient // the ingest copy's
	// procs are the processes by id: bookie-1..3, ingest, fetch (and
	// fetch-2.. with clusterConfig.fetchCopies).
	procs map[string]*bookieproc.Proc
	// fetches are the fetch copies' ids, in order, and fetchAdmin their
	// AdminServices by id.
	fetches    []string
	fetchAdmin map[string]sluicev1connect.AdminServiceClient
	// cassandra and keyspace are where the fetch copies keep groups,
	// leases and offsets.
	cassandra, keyspace string
}

// clusterConfig changes what startClusterWith starts.
type clusterConfig struct {
	// fetchCopies is how many fetch copies run (0: one), with ids fetch,
	// fetch-2, fetch-3, …, sharing the catalog and the keyspace.
	fetchCopies int
	// fetchArgs returns extra flags for the fetch copy with id, given the
	// ingest copy's address (nil: none).
	fetchArgs func(id, ingestAddr string) []string
}

// startCluster builds sluice and starts the processes; everything stops
// when t ends. The fetch copy gets a fresh Cassandra keyspace.
func startCluster(ctx context.Context, t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(ctx, t, clusterConfig{})
}

// startClusterWith is startCluster with cfg.
func startClusterWith(ctx context.Context, t *testing.T, cfg clusterConfig) *cluster {
	t.Helper()
	cassandra := testenv.Cassandra(t)
	moto := newMotoProxy(t, testenv.AWSEndpoint(t))
	table := fmt.Sprintf("sluice-groups-%d", time.Now().UnixNano())
	dc := catdynamo.NewClient(testenv.AWSConfig(t, moto.endpoint("test")))
	if err := catdynamo.EnsureTable(ctx, dc, catdynamo.Options{Table: table}); err != nil {
		t.Fatal(err)
	}
	keyspace := createKeyspace(ctx, t, cassandra)
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := func(label string) []string {
		return []string{"AWS_ENDPOINT_URL=" + moto.endpoint(label), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1"}
	}
	root := t.TempDir()
	procs := map[string]*bookieproc.Proc{}
	start := func(p *bookieproc.Proc) *bookieproc.Proc {
		t.Helper()
		procs[p.ID] = p
		t.Cleanup(func() {
			_ = p.Stop()
			if t.Failed() {
				t.Logf("%s output (tail):\n%s", p.ID, tail(p.Log(), 6000))
			}
		})
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	addr := func() string {
		a, err := bookieproc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for i := 1; i <= 3; i++ {
		start(&bookieproc.Proc{ID: fmt.Sprintf("bookie-%d", i), Addr: addr(), Dir: filepath.Join(root, fmt.Sprintf("b%d", i)), Bin: bin, Env: env("bookie"),
			Args: []string{"--catalog-table", table}})
	}
	ingestAddr := addr()
	start(&bookieproc.Proc{ID: "ingest", Addr: ingestAddr, Bin: bin, Env: env("ingest"), Command: "ingest",
		Args: []string{"--addr", ingestAddr, "--id", "ingest", "--catalog-table", table, "--balance-interval", "300ms"}})
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	t.Cleanup(hc.CloseIdleConnections)
	c := &cluster{bin: bin, http: hc, procs: procs, fetchAdmin: map[string]sluicev1connect.AdminServiceClient{},
		cassandra: cassandra, keyspace: keyspace}
	// The balance interval is left at its default: the timings measured are
	// the ones a deployment gets.
	for i := range max(cfg.fetchCopies, 1) {
		id := "fetch"
		if i > 0 {
			id = fmt.Sprintf("fetch-%d", i+1)
		}
		fetchAddr := addr()
		args := []string{"--addr", fetchAddr, "--catalog-table", table, "--cassandra", cassandra, "--keyspace", keyspace}
		if cfg.fetchArgs != nil {
			args = append(args, cfg.fetchArgs(id, ingestAddr)...)
		}
		start(&bookieproc.Proc{ID: id, Addr: fetchAddr, Bin: bin, Env: env(id), Command: "fetch", Args: args})
		c.fetches = append(c.fetches, id)
		c.fetchAdmin[id] = sluicev1connect.NewAdminServiceClient(hc, "http://"+fetchAddr)
		if i == 0 {
			c.fetchAddr = fetchAddr
		}
	}
	ingestURL, fetchURL := "http://"+ingestAddr, "http://"+c.fetchAddr
	c.admin = sluicev1connect.NewAdminServiceClient(hc, ingestURL)
	c.groups = sluicev1connect.NewAdminServiceClient(hc, fetchURL)
	c.consumer = sluicev1connect.NewConsumerServiceClient(hc, fetchURL)
	c.producer = sluicev1connect.NewProducerServiceClient(hc, ingestURL)
	return c
}

// createKeyspace creates and migrates a fresh keyspace with replication
// factor 1 (the stack's Cassandra is one node), dropped when t ends.
// `sluice fetch` would create it with the default factor 3, on which a
// one-node cluster answers no quorum read or write; it finds it existing
// and current instead.
func createKeyspace(ctx context.Context, t *testing.T, cassandra string) string {
	t.Helper()
	keyspace := fmt.Sprintf("fetch_proc_%s_%04x", strconv.FormatInt(time.Now().UnixNano(), 36), rand.N(1<<16))
	t.Cleanup(func() {
		cl := gocql.NewCluster(cassandra)
		cl.Timeout, cl.ConnectTimeout = 30*time.Second, 20*time.Second
		s, err := cl.CreateSession()
		if err != nil {
			t.Errorf("drop keyspace %s: %v", keyspace, err)
			return
		}
		defer s.Close()
		if err := s.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); err != nil {
			t.Errorf("drop keyspace %s: %v", keyspace, err)
		}
	})
	// Schema changes on a busy 2-core node can be slow.
	st, err := bkcassandra.Open(ctx, bkcassandra.Config{Hosts: []string{cassandra}, Keyspace: keyspace,
		Replication: bkcassandra.Replication{Class: "SimpleStrategy", Factor: 1},
		Timeout:     20 * time.Second, ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("create keyspace %s: %v", keyspace, err)
	}
	st.Close()
	return keyspace
}

// motoProxy forwards to moto one request at a time: moto's DynamoDB is not
// safe under concurrent requests (docs/testing.md), and here five processes share
// it. Real DynamoDB needs no such thing. Each process gets its own
// listener, so the summary tells who asked what: moto's throughput is what
// the processes share, and a process that saturates it slows every other.
type motoProxy struct {
	t  *testing.T
	rp *httputil.ReverseProxy

	mu    sync.Mutex // held while a request is forwarded
	calls map[string]int
	busy  map[string]time.Duration
}

func newMotoProxy(t *testing.T, target string) *motoProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // clients hanging up at shutdown are expected
	p := &motoProxy{t: t, rp: rp, calls: map[string]int{}, busy: map[string]time.Duration{}}
	t.Cleanup(func() { t.Logf("moto requests by process: %s", p.summary()) })
	return p
}

// endpoint returns a URL for the process named label.
func (p *motoProxy) endpoint(label string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		start := time.Now()
		p.rp.ServeHTTP(w, r)
		p.busy[label] += time.Since(start)
		p.calls[label+" "+strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")]++
	}))
	p.t.Cleanup(srv.Close)
	return srv.URL
}

func (p *motoProxy) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, label := range slices.Sorted(maps.Keys(p.busy)) {
		fmt.Fprintf(&b, "%s (busy %v:", label, p.busy[label].Round(time.Millisecond))
		for _, call := range slices.Sorted(maps.Keys(p.calls)) {
			if op, ok := strings.CutPrefix(call, label+" "); ok {
				fmt.Fprintf(&b, " %s %d", op, p.calls[call])
			}
		}
		b.WriteString(") ")
	}
	return b.String()
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
