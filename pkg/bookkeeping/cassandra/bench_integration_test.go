//go:build integration

package cassandra

// Benchmarks of the Cassandra bookkeeping backend against a real node: the
// per-call budget DESIGN.md §2.5 asks for. Run them with
//
//	task bench:metadata
//
// or by hand (SLUICE_TEST_CASSANDRA=127.0.0.1:9042):
//
//	go test -tags integration -run '^$' -bench BenchmarkIntegration -benchtime 3s ./pkg/bookkeeping/cassandra/
//
// Each benchmark runs b.N calls spread over a fixed number of client
// goroutines ("clients=N", independent of GOMAXPROCS) sharing one Store (one
// driver session, as one process would). Every call's latency is recorded in
// a plain slice, sorted once at the end (no histogram dependency; at most
// some tens of thousands of samples per run), and reported with
// b.ReportMetric:
//
//	ops/s         calls completed per second of wall time, all clients together
//	p50-ms p99-ms latency of one call, nearest-rank percentiles
//	partitions/s  commits only: ops/s × partitions per call
//	acq-p50-ms …  lease moves only: the Acquire half of a move
//	errors        calls that failed with an operating error (a timeout) — counted,
//	              not fatal; a typed bookkeeping error (fenced, conflict,
//	              not found) means the benchmark itself is wrong and fails it
//
// ns/op is suppressed: with several clients it is 1/throughput, not latency.
//
// Each top-level benchmark uses a fresh keyspace (SimpleStrategy, RF 1: the
// stack has one node) and drops it at the end; fixtures (members joined,
// leases acquired) are built once per benchmark, outside the timer, and reused
// by b.N's ramp-up runs.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// benchClients are the client counts every benchmark runs with.
var benchClients = []int{1, 16}

// benchSession outlives every benchmark, so members never expire mid-run.
const benchSession = bookkeeping.MaxSessionTimeout

// BenchmarkIntegrationCassandraHeartbeat: one member heartbeat (read the
// member row, rewrite it with a new TTL; no Paxos). Client i is member i of
// one group.
func BenchmarkIntegrationCassandraHeartbeat(b *testing.B) {
	s := openBenchStore(b)
	ctx := b.Context()
	for c := range slices.Max(benchClients) {
		join(b, s, "hb", member(c))
	}
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			r := runClients(b, clients, func(client int) error {
				return s.Heartbeat(ctx, "hb", member(client))
			}, nil)
			r.report(b, 1)
		})
	}
}

// BenchmarkIntegrationCassandraLeaseMove: one lease changing owner, the
// graceful way a rebalance moves it — the holder Releases (one LWT) and the
// other member Acquires (serial read, liveness read, topic write, LWT). Each
// client ping-pongs its own partition between its own two members.
// acq-p50-ms/acq-p99-ms are the Acquire half alone — what a takeover after
// the owner expired or left costs, since that needs no Release.
//
// In the plain cases every client's partition is in its own topic, so clients
// run on different (group, topic) keys and do not contend. The "one-key" case
// puts the 16 clients' partitions in ONE topic of one group — what a
// rebalance inside a group does — so their Paxos rounds contend on one key.
func BenchmarkIntegrationCassandraLeaseMove(b *testing.B) {
	s := openBenchStore(b)
	const group = "lm"
	spread := setupPingPongs(b, s, group, slices.Max(benchClients), func(c int) (string, int32) {
		return fmt.Sprintf("t%d", c), 0
	})
	oneKey := setupPingPongs(b, s, group, 16, func(c int) (string, int32) { return "shared", int32(c) })
	type run struct {
		name     string
		fixtures []*pingPong
		clients  int
	}
	var runs []run
	for _, cl := range benchClients {
		runs = append(runs, run{fmt.Sprintf("clients=%d", cl), spread, cl})
	}
	runs = append(runs, run{"one-key/clients=16", oneKey, 16})
	for _, r := range runs {
		b.Run(r.name, func(b *testing.B) {
			fs := r.fixtures[:r.clients]
			res := runClients(b, r.clients, func(client int) error {
				return fs[client].move(b.Context(), s, group)
			}, func() {
				for _, f := range fs {
					f.acquire = f.acquire[:0]
				}
			})
			res.report(b, 1)
			var acq []time.Duration
			for _, f := range fs {
				acq = append(acq, f.acquire...)
			}
			reportLatency(b, "acq-", acq)
		})
	}
}

// pingPong is one partition moved back and forth between two members.
type pingPong struct {
	topic     string
	partition int32
	members   [2]string
	holder    int   // index into members
	epoch     int64 // holder's epoch
	acquire   []time.Duration
}

// setupPingPongs joins two members per client and gives each client's
// partition, placed by where(client), to the first one.
func setupPingPongs(b *testing.B, s *store, group string, clients int, where func(client int) (string, int32)) []*pingPong {
	fs := make([]*pingPong, clients)
	for c := range fs {
		topic, p := where(c)
		f := &pingPong{topic: topic, partition: p, members: [2]string{topic + "-a" + member(c), topic + "-b" + member(c)}}
		join(b, s, group, f.members[0])
		join(b, s, group, f.members[1])
		ep, err := s.Acquire(b.Context(), group, topic, p, f.members[0])
		if err != nil {
			b.Fatalf("setup: %v", err)
		}
		f.epoch = ep
		fs[c] = f
	}
	return fs
}

// move releases the partition from its holder and acquires it for the other
// member. After an operating error (a timeout: the outcome is unknown) it
// re-reads the lease, serially, to learn who holds it, and returns the error
// to be counted.
func (f *pingPong) move(ctx context.Context, s *store, group string) error {
	if err := s.Release(ctx, group, f.topic, f.partition, f.members[f.holder], f.epoch); err != nil {
		return f.resync(ctx, s, group, fmt.Errorf("release: %w", err))
	}
	t0 := time.Now()
	ep, err := s.Acquire(ctx, group, f.topic, f.partition, f.members[1-f.holder])
	f.acquire = append(f.acquire, time.Since(t0))
	if err != nil {
		return f.resync(ctx, s, group, fmt.Errorf("acquire: %w", err))
	}
	if ep != f.epoch+1 {
		return benchBug{fmt.Errorf("acquire: epoch %d after %d, want +1", ep, f.epoch)}
	}
	f.holder, f.epoch = 1-f.holder, ep
	return nil
}

func (f *pingPong) resync(ctx context.Context, s *store, group string, cause error) error {
	if fatal(cause) {
		return cause
	}
	var owner string
	var epoch int64
	if err := s.serialRead(selectLease, group, f.topic, f.partition).ScanContext(ctx, &owner, &epoch); err != nil {
		return benchBug{fmt.Errorf("%w; then reading the lease: %w", cause, err)}
	}
	switch owner {
	case f.members[0], f.members[1]:
		f.holder, f.epoch = 0, epoch
		if owner == f.members[1] {
			f.holder = 1
		}
	case "": // released, not yet taken
		ep, err := s.Acquire(ctx, group, f.topic, f.partition, f.members[0])
		if err != nil {
			return benchBug{fmt.Errorf("%w; then re-acquiring: %w", cause, err)}
		}
		f.holder, f.epoch = 0, ep
	default:
		return benchBug{fmt.Errorf("%w; lease now held by %q", cause, owner)}
	}
	return cause
}

// BenchmarkIntegrationCassandraCommit: one member's commit of all its
// partitions of a topic — one conditional batch, one Paxos round, whatever
// the partition count. Each client is the one member of its own group, so
// clients commit to different (group, topic) keys, as members of different
// groups do. partitions/s = ops/s × partitions.
//
// The "one-key" case is the contended shape instead: 16 members of ONE group
// committing their 16 partitions each of ONE topic — every batch a Paxos
// round on the same Cassandra partition, which Cassandra serialises.
func BenchmarkIntegrationCassandraCommit(b *testing.B) {
	s := openBenchStore(b)
	fixtures := map[string][]*committer{}
	for _, n := range []int{1, 16, 256} {
		key := fmt.Sprintf("partitions=%d", n)
		fixtures[key] = setupCommitters(b, s, slices.Max(benchClients), n, func(c int) (group, first int) {
			return c, 0 // own group, partitions [0, n)
		})
	}
	fixtures["one-key/partitions=16"] = setupCommitters(b, s, 16, 16, func(c int) (group, first int) {
		return 1000, c * 16 // one group, disjoint partitions
	})
	for _, key := range []string{"partitions=1", "partitions=16", "partitions=256", "one-key/partitions=16"} {
		fs := fixtures[key]
		n := len(fs[0].commit.Offsets)
		clients := benchClients
		if key == "one-key/partitions=16" {
			clients = []int{16}
		}
		for _, cl := range clients {
			b.Run(fmt.Sprintf("%s/clients=%d", key, cl), func(b *testing.B) {
				r := runClients(b, cl, func(client int) error { return fs[client].next(b.Context(), s) }, nil)
				r.report(b, n)
			})
		}
	}
}

// committer is one member with leases on its partitions, committing ever
// higher offsets.
type committer struct {
	commit bookkeeping.Commit
	offset int64
}

func (c *committer) next(ctx context.Context, s *store) error {
	c.offset++
	for i := range c.commit.Offsets {
		c.commit.Offsets[i].Offset = c.offset
	}
	return s.Commit(ctx, c.commit)
}

// setupCommitters joins clients members and acquires n partitions for each,
// placed by where(client). Members on different keys are set up in parallel;
// acquires on one key run one at a time (they would only contend).
func setupCommitters(b *testing.B, s *store, clients, n int, where func(client int) (group, first int)) []*committer {
	ctx := b.Context()
	const topic = "orders"
	fs := make([]*committer, clients)
	byKey := map[int][]int{} // group -> clients
	for c := range clients {
		g, first := where(c)
		group := fmt.Sprintf("cg%d-p%d", g, n)
		join(b, s, group, member(c))
		fs[c] = &committer{commit: bookkeeping.Commit{Group: group, Topic: topic, TopicID: "bench", Member: member(c)}}
		for p := range n {
			fs[c].commit.Offsets = append(fs[c].commit.Offsets, bookkeeping.PartitionOffset{Partition: int32(first + p)})
		}
		byKey[g] = append(byKey[g], c)
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for _, cs := range byKey {
		wg.Go(func() {
			for _, c := range cs {
				f := fs[c]
				for i, o := range f.commit.Offsets {
					ep, err := s.Acquire(ctx, f.commit.Group, topic, o.Partition, f.commit.Member)
					if err != nil {
						errs <- fmt.Errorf("setup: %w", err)
						return
					}
					f.commit.Offsets[i].Epoch = ep
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return fs
}

// benchBug marks an error that means the benchmark's own state is wrong (not
// a slow or failed call), so the run must stop.
type benchBug struct{ err error }

func (e benchBug) Error() string { return e.err.Error() }
func (e benchBug) Unwrap() error { return e.err }

// fatal reports whether err must stop the benchmark: a benchBug, or a typed
// bookkeeping error, which the benchmark's calls never provoke when correct.
func fatal(err error) bool {
	var bug benchBug
	var ve *bookkeeping.ValidationError
	return errors.As(err, &bug) || errors.As(err, &ve) || errors.Is(err, bookkeeping.ErrFenced) ||
		errors.Is(err, bookkeeping.ErrConflict) || errors.Is(err, bookkeeping.ErrNotFound) ||
		errors.Is(err, bookkeeping.ErrLeaseHeld)
}

// runResult is one run of b.N calls.
type runResult struct {
	ok, failed int
	elapsed    time.Duration
	latencies  []time.Duration // every call, failed ones included (the caller waited that long)
	firstErr   error
}

// warmupCalls is how many untimed calls each client makes before every timed
// run: the first calls on a key or after an idle pause are slower (Cassandra
// threads parked, caches cold) and would otherwise land in a short run's p99.
const warmupCalls = 3

// runClients makes b.N calls of op, spread over clients goroutines that take
// calls from a shared counter, after warmupCalls untimed calls per client.
// op(client) is only ever called from client's goroutine, so per-client state
// needs no lock. afterWarmup, if not nil, runs between the two phases (to
// drop samples op kept itself).
func runClients(b *testing.B, clients int, op func(client int) error, afterWarmup func()) runResult {
	b.Helper()
	warm := callClients(b, clients, clients*warmupCalls, op)
	if warm.failed > 0 {
		b.Logf("warm-up: %d calls failed; first: %v", warm.failed, warm.firstErr)
	}
	if afterWarmup != nil {
		afterWarmup()
	}
	b.ResetTimer()
	res := callClients(b, clients, b.N, op)
	b.StopTimer()
	if res.failed > 0 {
		b.Logf("%d of %d calls failed; first: %v", res.failed, b.N, res.firstErr)
	}
	return res
}

// callClients makes n calls of op over clients goroutines and waits for them.
// A call that fails with a fatal error stops all clients and the benchmark.
func callClients(b *testing.B, clients, n int, op func(client int) error) runResult {
	b.Helper()
	var (
		next, ok, failed atomic.Int64
		stop             atomic.Bool
		mu               sync.Mutex
		res              runResult
		wg               sync.WaitGroup
	)
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			lat := make([]time.Duration, 0, n/clients+1)
			var bug error
			for !stop.Load() && next.Add(1) <= int64(n) {
				t0 := time.Now()
				err := op(c)
				lat = append(lat, time.Since(t0))
				switch {
				case err == nil:
					ok.Add(1)
				case fatal(err):
					bug = err
					stop.Store(true)
				default:
					failed.Add(1)
					mu.Lock()
					if res.firstErr == nil {
						res.firstErr = err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, lat...)
			if bug != nil {
				b.Errorf("client %d: %v", c, bug)
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if b.Failed() {
		b.FailNow()
	}
	res.ok, res.failed = int(ok.Load()), int(failed.Load())
	return res
}

// report reports throughput, latency and errors; partitions > 1 adds
// partitions/s.
func (r runResult) report(b *testing.B, partitions int) {
	b.ReportMetric(0, "ns/op")
	ops := float64(r.ok) / r.elapsed.Seconds()
	b.ReportMetric(ops, "ops/s")
	if partitions > 1 {
		b.ReportMetric(ops*float64(partitions), "partitions/s")
	}
	reportLatency(b, "", r.latencies)
	b.ReportMetric(float64(r.failed), "errors")
}

// reportLatency reports the p50 and p99 of ds, in milliseconds.
func reportLatency(b *testing.B, prefix string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		// Nearest rank: the smallest sample with at least q of them at or below it.
		i := max(int(math.Ceil(q.q*float64(len(ds))))-1, 0)
		b.ReportMetric(float64(ds[i].Microseconds())/1000, prefix+q.name+"-ms")
	}
}

func member(client int) string { return fmt.Sprintf("m%02d", client) }

func join(b *testing.B, s *store, group, id string) {
	b.Helper()
	if err := s.Join(b.Context(), group, bookkeeping.Member{ID: id, SessionTimeout: benchSession}); err != nil {
		b.Fatalf("join %s/%s: %v", group, id, err)
	}
}

// openBenchStore opens a store on a fresh RF-1 keyspace, closed and dropped
// when b ends. It is the driver, not the *bookkeeping.Store callers get,
// because a resync reads the lease directly; the argument checks it skips
// cost nothing next to a round trip.
func openBenchStore(b *testing.B) *store {
	b.Helper()
	host, portStr, err := net.SplitHostPort(testenv.Cassandra(b))
	if err != nil {
		b.Fatalf("%s: %v", testenv.EnvCassandra, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		b.Fatalf("%s: port: %v", testenv.EnvCassandra, err)
	}
	cfg := Config{
		Hosts:       []string{host},
		Port:        port,
		Keyspace:    fmt.Sprintf("bk_bench_%s_%04x", strconv.FormatInt(time.Now().UnixNano(), 36), rand.N(1<<16)),
		Replication: Replication{Class: simpleStrategy, Factor: 1},
		// Schema changes on a busy node can be slow. The client timeout
		// only matters if the server does not answer: Cassandra's own write
		// and CAS contention timeouts (2 s, 1.8 s by default) fire first.
		Timeout:        20 * time.Second,
		ConnectTimeout: 20 * time.Second,
	}
	b.Cleanup(func() {
		session, err := cfg.withDefaults().clusterConfig("").CreateSession()
		if err != nil {
			b.Errorf("drop keyspace %s: connect: %v", cfg.Keyspace, err)
			return
		}
		defer session.Close()
		if err := session.Query("DROP KEYSPACE IF EXISTS " + cfg.Keyspace).Exec(); err != nil {
			b.Errorf("drop keyspace %s: %v", cfg.Keyspace, err)
		}
	})
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	s, err := open(ctx, cfg)
	if err != nil {
		b.Fatalf("open: %v", err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkIntegrationCassandraPutTxn: the transaction coordinator's
// compare-and-set (one LWT conditioned on the record's version), each
// client on a transactional id of its own, as producers with one
// transaction in flight each are (issue 24's T1M: two of these per
// transaction). Cassandra's own CPU per call is what bounds T1M on a
// machine it shares: measure it beside this (docs/open-work.md,
// "Transactions").
func BenchmarkIntegrationCassandraPutTxn(b *testing.B) {
	s := openBenchStore(b)
	for _, cl := range benchClients {
		txns := make([]bookkeeping.Txn, cl)
		for c := range txns {
			tid := fmt.Sprintf("bench-%d-%d", cl, c)
			p, err := s.InitProducer(b.Context(), tid)
			if err != nil {
				b.Fatal(err)
			}
			t, found, err := s.txn(b.Context(), tid)
			if err != nil || !found {
				b.Fatalf("read %s: %v (found %v)", tid, err, found)
			}
			t.ProducerID, t.Epoch = p.ID, p.Epoch
			txns[c] = t
		}
		b.Run(fmt.Sprintf("clients=%d", cl), func(b *testing.B) {
			r := runClients(b, cl, func(client int) error {
				t := txns[client]
				t.Status = bookkeeping.TxnOngoing
				if t.Version%2 == 0 {
					t.Status = bookkeeping.TxnPrepareCommit
				}
				t.Partitions = []bookkeeping.TxnPartition{{TopicID: "orders-1", Partition: int32(client)}}
				next, err := s.PutTxn(b.Context(), t)
				if err != nil {
					return err
				}
				txns[client] = next
				return nil
			}, nil)
			r.report(b, 1)
		})
	}
}

// BenchmarkIntegrationCassandraBatchedCAS: the lever docs/open-work.md
// ("Transactions") names for the coordinator's Cassandra cost — several
// transactional ids' compare-and-sets in one conditional batch, which
// Cassandra runs as one Paxos round when the rows share a partition (a
// bucketed table). One op is one batch of rows=N version-conditioned
// updates of distinct rows of one partition (rows=1: what PutTxn costs
// today, on a row of the size of a transaction's record). Beside the usual
// metrics it reports cass-cpu-ms/row: the CPU time the local Cassandra
// process spent per row updated, from /proc (not reported when no
// CassandraDaemon runs on this machine).
func BenchmarkIntegrationCassandraBatchedCAS(b *testing.B) {
	s := openBenchStore(b)
	ctx := b.Context()
	const table = `CREATE TABLE IF NOT EXISTS bench_txn_buckets (bucket int, id text, version bigint, state blob, PRIMARY KEY (bucket, id))`
	if err := s.session.Query(table).ExecContext(ctx); err != nil {
		b.Fatal(err)
	}
	const update = `UPDATE bench_txn_buckets SET version = ?, state = ? WHERE bucket = ? AND id = ? IF version = ?`
	state := make([]byte, 160) // about a record with one partition, one group
	for _, rows := range []int{1, 4, 16} {
		// Each client owns its bucket; each batch moves every row of it
		// one version on.
		const clients = 4
		versions := make([][]int64, clients)
		for c := range clients {
			versions[c] = make([]int64, rows)
			for r := range rows {
				q := s.session.Query(`INSERT INTO bench_txn_buckets (bucket, id, version, state) VALUES (?, ?, 0, ?)`, rows*100+c, fmt.Sprintf("tx-%d", r), state)
				if err := q.ExecContext(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(fmt.Sprintf("rows=%d/clients=%d", rows, clients), func(b *testing.B) {
			var cpu0 time.Duration
			res := runClients(b, clients, func(client int) error {
				bt := s.lwtBatch()
				for r := range rows {
					v := versions[client][r]
					bt.Query(update, v+1, state, rows*100+client, fmt.Sprintf("tx-%d", r), v)
				}
				applied, iter, err := bt.MapExecCASContext(ctx, map[string]any{})
				if iter != nil {
					_ = iter.Close()
				}
				if err != nil {
					return err
				}
				if !applied {
					return fmt.Errorf("batch of bucket %d not applied: %w", rows*100+client, bookkeeping.ErrConflict)
				}
				for r := range rows {
					versions[client][r]++
				}
				return nil
			}, func() { cpu0 = cassandraCPU() })
			cpu := cassandraCPU() - cpu0
			res.report(b, 1)
			if cpu0 > 0 && res.ok > 0 {
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(int(res.ok)*rows), "cass-cpu-ms/row")
			}
		})
	}
}

// cassandraCPU is the CPU time (user + system) the Cassandra process on
// this machine has used, from /proc/PID/stat; 0 when none is found.
func cassandraCPU() time.Duration {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmd, []byte("org.apache.cassandra.service.CassandraDaemon")) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		// Fields after the command's closing parenthesis: state is the
		// 3rd field, utime and stime the 14th and 15th.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		if len(f) < 13 {
			return 0
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * time.Second / clockTicks
	}
	return 0
}

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100
