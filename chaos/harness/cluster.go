package harness

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicemq/sluice/chaos/fault"
	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/localcluster"
	"github.com/sluicemq/sluice/pkg/catalog"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
)

// Build compiles the sluice binary into dir with the given build tags
// (e.g. "sabotage_fencing"; none for the real thing) plus the chaos tags:
// chaos_volatilefs — the harness's bookies keep unsynced writes in process
// memory and revert unsynced directory entries at the next start
// (internal/volatilefs), so every SIGKILL of a bookie loses what a power
// cut would lose — and chaos_clock — every process's wall clock is offset
// by the duration in its clock file (Run.Skew).
func Build(ctx context.Context, dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "sluice")
	args := []string{"build", "-o", bin, "-tags", joinComma(append([]string{"chaos_volatilefs", "chaos_clock"}, tags...))}
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/sluicemq/sluice/cmd/sluice")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %v: %w\n%s", tags, err, out)
	}
	return bin, nil
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// ClusterConfig sizes a cluster. Zero fields take the defaults noted.
type ClusterConfig struct {
	Bin         string // the sluice binary (required)
	AWSEndpoint string // the AWS emulator (required)
	Cassandra   string // host:port; empty: no fetch copies
	Bookies     int    // default 3
	Ingests     int    // default 2
	Fetches     int    // default 1 (0 with no Cassandra)
	// OwnerTTL is the ingest copies' --owner-ttl (default 4 s): how long a
	// paused or dead copy keeps its partitions. Much shorter and a copy
	// loses its own partitions on a loaded 2-core machine (the serialised
	// catalog answers heartbeats late).
	OwnerTTL time.Duration
	// BookieArgs are extra `sluice bookie` flags for every bookie.
	BookieArgs []string
	// ProxyIngests puts a fault.Proxy in front of every ingest copy (its
	// advertised address: where producers and the other copy send).
	ProxyIngests bool
	// ProxyBookies puts a fault.Proxy in front of every bookie (its
	// advertised address), so links to it can be cut.
	ProxyBookies bool
	// IngestBookkeeping gives the ingest copies the Cassandra keyspace
	// too (producer ids, transactions); needs Cassandra.
	IngestBookkeeping bool
	// CompactorArgs, if set, runs one `sluice compactor` with these extra
	// flags (its objects go to a directory of the cluster's).
	CompactorArgs []string
	// ProxyMetadata puts a fault.Proxy between every process and Cassandra
	// (CassandraLink) and the AWS emulator (AWSLink), so the metadata
	// stores can be cut off. The harness's own catalog client goes around.
	ProxyMetadata bool
}

// Cluster is the processes of one scenario. Everything stops when the test
// that started it ends.
type Cluster struct {
	Bookies []*bookieproc.Proc
	// BookieLinks[i] is the proxy in front of Bookies[i] (nil without
	// ProxyBookies).
	BookieLinks []*fault.Proxy
	Ingests     []*bookieproc.Proc
	// IngestLinks[i] is the proxy in front of Ingests[i] (its advertised
	// address; nil without ProxyIngests).
	IngestLinks []*fault.Proxy
	Fetches     []*bookieproc.Proc
	Compactor   *bookieproc.Proc // nil without ClusterConfig.CompactorArgs
	// CassandraLink and AWSLink stand between every process and the
	// metadata stores (nil without ProxyMetadata).
	CassandraLink, AWSLink *fault.Proxy
	Catalog                *catalog.Catalog
	Table                  string
	Keyspace               string
	OwnerTTL               time.Duration // the ingest copies' --owner-ttl

	mu     sync.Mutex
	procs  []*bookieproc.Proc          // every process started, for source
	clocks map[*bookieproc.Proc]string // each process's clock file (guarded by mu)
}

// StartCluster starts the processes of cfg and waits until each listens.
func StartCluster(ctx context.Context, t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	if cfg.Bookies == 0 {
		cfg.Bookies = 3
	}
	if cfg.Ingests == 0 {
		cfg.Ingests = 2
	}
	if cfg.Fetches == 0 && cfg.Cassandra != "" {
		cfg.Fetches = 1
	}
	if cfg.OwnerTTL == 0 {
		cfg.OwnerTTL = 4 * time.Second
	}
	moto := newSerialProxy(t, cfg.AWSEndpoint)
	c := &Cluster{Table: fmt.Sprintf("sluice-chaos-%d", time.Now().UnixNano()), OwnerTTL: cfg.OwnerTTL}
	awsCfg, err := awsConfig(ctx, moto)
	if err != nil {
		t.Fatal(err)
	}
	dc, opts := catdynamo.NewClient(awsCfg), catdynamo.Options{Table: c.Table}
	c.Catalog, err = catdynamo.New(dc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := catdynamo.EnsureTable(ctx, dc, opts); err != nil {
		t.Fatalf("create catalog table: %v", err)
	}
	procMoto, procCassandra := moto, cfg.Cassandra // what the processes dial
	if cfg.ProxyMetadata {
		u, err := url.Parse(moto)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []struct {
			link   **fault.Proxy
			name   string
			target string
		}{{&c.AWSLink, "aws", u.Host}, {&c.CassandraLink, "cassandra", cfg.Cassandra}} {
			if l.target == "" {
				continue
			}
			p, err := fault.NewProxy(l.name, l.target)
			if err != nil {
				t.Fatal(err)
			}
			p.Identify(c.source) // one process's link can be cut alone
			t.Cleanup(func() { _ = p.Close() })
			*l.link = p
		}
		procMoto = "http://" + c.AWSLink.Addr()
		if c.CassandraLink != nil {
			procCassandra = c.CassandraLink.Addr()
		}
	}
	env := []string{"AWS_ENDPOINT_URL=" + procMoto, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1"}
	root := t.TempDir()
	c.clocks = map[*bookieproc.Proc]string{}
	start := func(p *bookieproc.Proc) *bookieproc.Proc {
		t.Helper()
		clock := filepath.Join(root, p.ID+".clock")
		p.Env = append(slices.Clip(p.Env), "SLUICE_CHAOS_CLOCK_FILE="+clock)
		c.mu.Lock()
		c.procs = append(c.procs, p)
		c.clocks[p] = clock
		c.mu.Unlock()
		t.Cleanup(func() {
			_ = p.Signal(syscallSIGCONT) // a paused process handles SIGTERM only once continued
			_ = p.Stop()
			if t.Failed() {
				t.Logf("%s output (tail):\n%s", p.ID, tail(p.Log(), 4000))
			}
		})
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// proxy puts a fault.Proxy in front of addr when on; args then
	// advertise it.
	proxy := func(on bool, id, addr string, args []string) (*fault.Proxy, []string) {
		if !on {
			return nil, args
		}
		link, err := fault.NewProxy(id, addr)
		if err != nil {
			t.Fatal(err)
		}
		link.Identify(c.source)
		t.Cleanup(func() { _ = link.Close() })
		return link, append(args, "--advertise", link.Addr())
	}
	if cfg.Fetches > 0 || cfg.IngestBookkeeping && cfg.Cassandra != "" {
		c.Keyspace = createKeyspace(ctx, t, cfg.Cassandra)
	}
	// The processes' flags are harness/localcluster's (what
	// localstack/cluster.sh runs), plus the chaos timings: short
	// heartbeats and owner TTLs, so faults show within a scenario.
	lc := localcluster.Config{
		Bookies: cfg.Bookies, Ingests: cfg.Ingests, Fetches: cfg.Fetches,
		Dir: root, Table: c.Table, Keyspace: c.Keyspace, AWSEndpoint: procMoto,
		NoIngestBookkeeping: !cfg.IngestBookkeeping || c.Keyspace == "",
		AddrOf:              func(string) string { return freeAddr(t) },
		Extra: map[string][]string{
			localcluster.RoleBookie: append([]string{"--heartbeat", "1s", "--instance", "sluice-test"}, cfg.BookieArgs...),
			localcluster.RoleIngest: {"--owner-ttl", cfg.OwnerTTL.String(), "--heartbeat", (cfg.OwnerTTL / 3).String(), "--balance-interval", "500ms"},
			localcluster.RoleFetch:  {"--balance-interval", "500ms"},
			// The last --objects wins: a local directory, so no bucket is needed.
			localcluster.RoleCompactor: append([]string{"--objects", "file://" + filepath.Join(root, "objects")}, cfg.CompactorArgs...),
		},
	}
	if cfg.CompactorArgs != nil {
		lc.Compactors = 1
	}
	if c.Keyspace != "" {
		lc.Cassandra = procCassandra
	}
	plan, err := lc.Plan()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan {
		proc := &bookieproc.Proc{ID: p.Name, Addr: p.Addr, Bin: cfg.Bin, Env: env, Command: p.Role, Args: p.Args[1:]}
		switch p.Role {
		case localcluster.RoleBookie:
			proc.Dir = filepath.Join(root, "data", p.Name) // as the plan's --dir
			link, args := proxy(cfg.ProxyBookies, p.Name, p.Addr, proc.Args)
			proc.Args = args
			c.BookieLinks = append(c.BookieLinks, link)
			c.Bookies = append(c.Bookies, start(proc))
		case localcluster.RoleIngest:
			link, args := proxy(cfg.ProxyIngests, p.Name, p.Addr, proc.Args)
			proc.Args = args
			c.IngestLinks = append(c.IngestLinks, link)
			c.Ingests = append(c.Ingests, start(proc))
		case localcluster.RoleFetch:
			c.Fetches = append(c.Fetches, start(proc))
		case localcluster.RoleCompactor:
			proc.Addr = "" // it serves nothing
			c.Compactor = start(proc)
		}
	}
	return c
}

// SetClock offsets p's wall clock by d (the chaos_clock build reads its
// clock file every 50 ms); 0 puts it right.
func (c *Cluster) SetClock(p *bookieproc.Proc, d time.Duration) error {
	c.mu.Lock()
	path, ok := c.clocks[p]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("skew %s: not a process of this cluster", p.ID)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path) // the process never reads half a file
}

// WaitOwners waits until every partition of topic has a live owner among
// the ingest copies, and (if balanced) until the copies own equal shares
// (give or take one): producing while the balancer still moves partitions
// would mix its moves into the scenario's faults.
func (c *Cluster) WaitOwners(ctx context.Context, topic string, balanced bool, within time.Duration) (map[int]string, error) {
	deadline := time.Now().Add(within)
	for {
		page, err := c.Catalog.ListPartitions(ctx, topic, "", 0)
		owners := map[int]string{}
		perCopy := map[string]int{}
		if err == nil {
			for i, p := range page.Items {
				owners[i] = p.Owner
				perCopy[p.Owner]++
			}
			ok := len(page.Items) > 0 && perCopy[""] == 0
			if balanced {
				fair := len(page.Items) / len(c.Ingests)
				for _, in := range c.Ingests {
					ok = ok && perCopy[in.ID] >= fair && perCopy[in.ID] <= fair+1
				}
			}
			if ok {
				return owners, nil
			}
		}
		if time.Now().After(deadline) {
			return owners, fmt.Errorf("partitions of %s not owned (balanced=%v) within %v: %v (last error %v)", topic, balanced, within, perCopy, err)
		}
		select {
		case <-ctx.Done():
			return owners, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// source names the cluster process holding the other end of a connection
// a proxy accepted: a process's ID, Harness, or "" for anything else.
func (c *Cluster) source(conn net.Conn) string {
	c.mu.Lock()
	procs := slices.Clone(c.procs)
	c.mu.Unlock()
	byPID := map[int]string{}
	var pids []int
	for _, p := range procs {
		if pid := p.Pid(); pid > 0 {
			byPID[pid] = p.ID
			pids = append(pids, pid)
		}
	}
	self := os.Getpid()
	byPID[self] = Harness
	pids = append(pids, self)
	pid, err := fault.PeerPID(conn, pids)
	if err != nil || pid == 0 {
		return ""
	}
	return byPID[pid]
}

// SaveLogs writes what every process printed, over all its restarts, into
// dir (one file per process) for reading after the run.
func (c *Cluster) SaveLogs(t testing.TB, dir string) {
	c.mu.Lock()
	procs := slices.Clone(c.procs)
	c.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("save logs: %v", err)
		return
	}
	for _, p := range procs {
		if err := os.WriteFile(filepath.Join(dir, p.ID+".log"), []byte(p.AllLogs()), 0o644); err != nil {
			t.Logf("save logs: %v", err)
		}
	}
}

// Harness is the source name of the test process itself (its producers
// and group members) on a proxied link.
const Harness = "harness"

// Ingest returns the ingest process with the given id.
func (c *Cluster) Ingest(id string) *bookieproc.Proc {
	for _, p := range c.Ingests {
		if p.ID == id {
			return p
		}
	}
	return nil
}

func awsConfig(ctx context.Context, endpoint string) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithBaseEndpoint(endpoint),
		config.WithRetryMaxAttempts(3),
	)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws config for %s: %w", endpoint, err)
	}
	return cfg, nil
}

// newSerialProxy forwards to the AWS emulator one request at a time (moto
// is not safe under concurrent DynamoDB requests; see the package doc).
func newSerialProxy(t testing.TB, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // clients hanging up (killed processes) are expected
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// handedOut are the addresses freeAddr gave out in this test binary: a
// port is free when picked, not reserved, so two processes of a cluster
// could otherwise be given the same one (seen: an ingest copy failing to
// bind the port a bookie had just taken).
var handedOut = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func freeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		a, err := bookieproc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		handedOut.Lock()
		dup := handedOut.m[a]
		handedOut.m[a] = true
		handedOut.Unlock()
		if !dup {
			return a
		}
	}
	t.Fatal("no free address that was not handed out already")
	return ""
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
