package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/chaos/checker"
	"github.com/sluicemq/sluice/chaos/fault"
	"github.com/sluicemq/sluice/chaos/history"
	"github.com/sluicemq/sluice/harness/bookieproc"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// The exactly-once copy scenario (issue 24): `sluice copy` workers —
// separate processes, consume-transform-produce in transactions — copy
// topic A to topic B while a producer keeps writing keyed records to A,
// and the workers, ingest copies, bookies and the fetch copy are killed
// (SIGKILL), paused (SIGSTOP) and restarted. After the faults heal and
// the copy caught up, A is read back (every record stored) and B with
// read_committed, and checker.CheckCopy judges: lost, duplicate, aborted
// read, torn transaction, zombie write, order per key. All must be zero.

// txnTagHeader is `sluice copy --tag-transactions`'s header.
const txnTagHeader = "sluice.txn"

// CopyScenario is the exactly-once copy: its size and fault schedule.
type CopyScenario struct {
	Name        string
	Description string
	Cluster     ClusterConfig
	Partitions  int32
	Workers     int
	Keys        int
	Phase       time.Duration // the fault phase at Scale 1
	MinPhase    time.Duration
	// Sabotage names the build tag that breaks a transaction mechanism
	// this scenario must catch ("" if none).
	Sabotage string
}

// ExactlyOnceCopy is the scenario: 3 workers copy a 4-partition topic
// under kills and pauses of everything.
func ExactlyOnceCopy() *CopyScenario {
	return &CopyScenario{
		Name:        "exactly-once-copy",
		Description: "3 `sluice copy` workers copy A to B in transactions while workers, ingest copies, bookies and the fetch copy are killed and paused; a read_committed drain of B must hold every record of A exactly once",
		Cluster:     ClusterConfig{Bookies: 4, Ingests: 2, IngestBookkeeping: true, ProxyIngests: true, ProxyBookies: true},
		Partitions:  4,
		Workers:     3,
		Keys:        32,
		Phase:       40 * time.Second,
		MinPhase:    14 * time.Second,
	}
}

// CopySummary is the copy scenario's result.
type CopySummary struct {
	Scenario     string         `json:"scenario"`
	Sabotage     string         `json:"sabotage,omitempty"`
	Seed         int64          `json:"seed"`
	Seconds      float64        `json:"seconds"`
	Source       int            `json:"source_records"`
	Copied       int            `json:"copied_records"`
	Transactions int            `json:"transactions"`
	Faults       int            `json:"faults"`
	FaultsByKind map[string]int `json:"faults_by_kind"`
	Anomalies    int            `json:"anomalies"`
	ByKind       map[string]int `json:"anomalies_by_kind,omitempty"`
	Report       string         `json:"report"`
	Error        string         `json:"error,omitempty"`
}

// OK reports whether the scenario ran and found nothing.
func (s CopySummary) OK() bool { return s.Error == "" && s.Anomalies == 0 }

// RunCopy runs the exactly-once copy scenario from start to verdict.
func RunCopy(ctx context.Context, t testing.TB, env Env, sc *CopyScenario) CopySummary {
	t.Helper()
	began := time.Now()
	if env.Scale <= 0 {
		env.Scale = 1
	}
	cc := sc.Cluster
	cc.Bin, cc.AWSEndpoint, cc.Cassandra = env.Bin, env.AWSEndpoint, env.Cassandra
	cluster := StartCluster(ctx, t, cc)
	if err := os.MkdirAll(env.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	defer cluster.SaveLogs(t, filepath.Join(env.Out, sc.Name+".logs"))
	hf, err := os.Create(filepath.Join(env.Out, sc.Name+".faults.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	rec, err := history.NewRecorder(hf, history.Config{Scenario: sc.Name, Seed: env.Seed})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	sum := CopySummary{Scenario: sc.Name, Sabotage: sc.Sabotage, Seed: env.Seed}
	fail := func(format string, args ...any) CopySummary {
		sum.Error = fmt.Sprintf(format, args...)
		sum.Seconds = time.Since(began).Seconds()
		return sum
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	defer hc.CloseIdleConnections()
	r := &Run{T: t, Env: env, Cluster: cluster, Rec: rec, Inject: fault.NewInjector(rec, 0),
		Rand: rand.New(rand.NewPCG(uint64(env.Seed), uint64(len(sc.Name)))), HTTP: hc, killed: map[*bookieproc.Proc]bool{}, skewed: map[*bookieproc.Proc]bool{}}

	const src, dst = "copy-a", "copy-b"
	admin, err := sluice.NewClient(cluster.Ingests[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, topic := range []string{src, dst} {
		if _, err := admin.CreateTopic(ctx, topic, sc.Partitions, nil); err != nil {
			return fail("create topic %s: %v", topic, err)
		}
		if _, err := cluster.WaitOwners(ctx, topic, true, 60*time.Second); err != nil {
			return fail("%v", err)
		}
	}
	fetch := cluster.Fetches[0]

	// The source: keyed records with unique values, until stopped.
	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	var produced atomic.Int64
	prodDone := make(chan error, 1)
	go func() { prodDone <- produceSource(prodCtx, cluster.Ingests[1].Addr, src, sc.Keys, &produced) }()

	// The workers.
	logDir := filepath.Join(env.Out, sc.Name+".logs")
	var workers []*bookieproc.Proc
	for i := range sc.Workers {
		// Through the ingest copy's proxy, so a cut link cuts them off.
		in := cluster.Ingests[i%len(cluster.Ingests)].Addr
		if l := cluster.IngestLinks[i%len(cluster.Ingests)]; l != nil {
			in = l.Addr()
		}
		w := &bookieproc.Proc{ID: fmt.Sprintf("copier-%d", i+1), Bin: env.Bin, Command: "copy",
			Args: []string{src, dst, "--addr", in, "--consumer-addr", fetch.Addr, "--group", "copiers",
				"--transactional-id", "eos", "--tag-transactions", "--max-poll", "400", "--session-timeout", "3s",
				"--transaction-timeout", "10s", "--progress", "2s", "--hold", "100ms"}}
		if err := w.Start(); err != nil {
			return fail("start %s: %v", w.ID, err)
		}
		t.Cleanup(func() {
			_ = w.Signal(syscall.SIGCONT)
			_ = w.Stop()
			_ = os.WriteFile(filepath.Join(logDir, w.ID+".log"), []byte(w.AllLogs()), 0o644)
		})
		workers = append(workers, w)
	}

	// A read_committed reader tails B while the copy runs: everything it
	// sees must be in B in the end (nothing read before it committed).
	api := sluicev1connect.NewConsumerServiceClient(hc, "http://"+fetch.Addr)
	liveCtx, stopLive := context.WithCancel(ctx)
	defer stopLive()
	live := make([][]checker.CopyRecord, sc.Partitions)
	var liveWG sync.WaitGroup
	for p := range sc.Partitions {
		liveWG.Go(func() { live[p] = tailCommitted(liveCtx, api, dst, p) })
	}

	// Faults.
	phase := max(time.Duration(float64(sc.Phase)*env.Scale), sc.MinPhase)
	fctx, cancel := context.WithTimeout(ctx, phase)
	ferr := copyFaults(fctx, r, workers)
	cancel()
	if ferr != nil && ctx.Err() == nil && fctx.Err() == nil {
		sum.Error = "fault schedule: " + ferr.Error()
	}
	if err := r.Heal(); err != nil {
		return fail("heal: %v", err)
	}
	stopProducing()
	if err := <-prodDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("%s: source producer: %v", sc.Name, err)
	}

	// Wait for the copy to catch up: B (read_committed) as large as A, or
	// no progress for a while (then what is missing is lost).
	var source, copied []checker.CopyRecord
	var drainErr error
	deadline, lastGrowth, lastLen := time.Now().Add(3*time.Minute), time.Now(), -1
	for {
		source, err = drainCopy(ctx, api, src, sc.Partitions, false)
		if err != nil {
			return fail("drain %s: %v", src, err)
		}
		copied, drainErr = drainCopy(ctx, api, dst, sc.Partitions, true)
		// Caught up when every source record is in B (counted by value:
		// a broken build may show B more records than A and still lack
		// some).
		have := copiedOf(source, copied)
		if have > lastLen {
			lastLen, lastGrowth = have, time.Now()
		}
		if have >= len(source) || time.Now().After(deadline) || time.Since(lastGrowth) > 40*time.Second {
			break
		}
		sleepOr(ctx, nil, 2*time.Second)
	}
	// Stop the workers, and read B once more: nothing may change.
	for _, w := range workers {
		_ = w.Signal(syscall.SIGCONT)
		if err := w.Stop(); err != nil {
			t.Logf("%s: stop %s: %v", sc.Name, w.ID, err)
		}
	}
	if drainErr == nil {
		copied, drainErr = drainCopy(ctx, api, dst, sc.Partitions, true)
	}
	if drainErr != nil {
		// Judged all the same: what could not be read is lost.
		sum.Error = fmt.Sprintf("drain %s: %v", dst, drainErr)
	}
	stopLive()
	liveWG.Wait()
	var seen []checker.CopyRecord
	for _, l := range live {
		seen = append(seen, l...)
	}
	res := checker.CheckCopy(source, copied, seen)
	sum.Report = filepath.Join(env.Out, sc.Name+".report.txt")
	if rf, err := os.Create(sum.Report); err == nil {
		_ = res.Report(rf)
		rf.Close()
	}
	sum.Source, sum.Copied, sum.Transactions = res.Source, res.Copied, res.Transactions
	sum.Faults, sum.FaultsByKind = r.Inject.Count()
	sum.Anomalies = res.Failures()
	sum.ByKind = map[string]int{}
	for k, n := range res.Anomalies {
		if n > 0 {
			sum.ByKind[string(k)] = n
		}
	}
	sum.Seconds = time.Since(began).Seconds()
	return sum
}

// copyFaults is the schedule: every ~2 s one of — stop and kill a worker
// inside a written transaction (killHolding; always the first fault),
// SIGKILL a worker at a random moment (restarted 1 s later), SIGSTOP a
// worker past its session timeout (its partitions move; resumed, it is a
// zombie whose transaction must be fenced), SIGKILL an ingest copy (a
// coordinator and partition writer; restarted 2 s later), cut every link
// to an ingest copy for 1.5 s (workers, and the other copy's markers and
// forwards), SIGKILL a bookie (restarted 1.5 s later), cut every link to
// a bookie for 1.5 s, SIGSTOP the fetch copy for a second, SIGKILL the
// fetch copy (restarted 1 s later: every session and long poll cut).
func copyFaults(ctx context.Context, r *Run, workers []*bookieproc.Proc) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := map[*bookieproc.Proc]bool{}
	var mu sync.Mutex
	async := func(p *bookieproc.Proc, f func() error) {
		mu.Lock()
		if busy[p] {
			mu.Unlock()
			return
		}
		busy[p] = true
		mu.Unlock()
		wg.Go(func() {
			if err := f(); err != nil {
				r.T.Logf("fault on %s: %v", p.ID, err)
			}
			mu.Lock()
			delete(busy, p)
			mu.Unlock()
		})
	}
	for i := 0; i < 1000 && fault.Sleep(ctx.Done(), r.Jitter(2*time.Second)); i++ {
		switch n := r.Rand.IntN(11); {
		case i == 0 || n < 2:
			// The first fault, and a fifth of the rest, strike a worker
			// holding a written transaction: every run has transactions
			// whose records are in B and must never be read.
			w := r.Pick(workers)
			async(w, func() error { return killHolding(ctx, r, w) })
		case n < 3:
			w := r.Pick(workers)
			async(w, func() error { return killFor(ctx, r, w, time.Second) })
		case n < 5:
			w := r.Pick(workers)
			async(w, func() error {
				if err := r.Inject.Pause(w); err != nil {
					return err
				}
				fault.Sleep(ctx.Done(), 5*time.Second) // the session timeout is 3 s
				return r.Inject.Resume(w)
			})
		case n < 6:
			in := r.Pick(r.Cluster.Ingests)
			async(in, func() error { return killFor(ctx, r, in, 2*time.Second) })
		case n < 7:
			i := r.Rand.IntN(len(r.Cluster.Ingests))
			async(r.Cluster.Ingests[i], func() error { return cutFor(ctx, r, r.Cluster.IngestLinks[i], 1500*time.Millisecond) })
		case n < 8:
			b := r.Pick(r.Cluster.Bookies)
			async(b, func() error { return killFor(ctx, r, b, 1500*time.Millisecond) })
		case n < 9:
			i := r.Rand.IntN(len(r.Cluster.Bookies))
			async(r.Cluster.Bookies[i], func() error { return cutFor(ctx, r, r.Cluster.BookieLinks[i], 1500*time.Millisecond) })
		case n < 10:
			f := r.Cluster.Fetches[0]
			async(f, func() error {
				if err := r.Inject.Pause(f); err != nil {
					return err
				}
				fault.Sleep(ctx.Done(), time.Second)
				return r.Inject.Resume(f)
			})
		default:
			f := r.Cluster.Fetches[0]
			async(f, func() error { return killFor(ctx, r, f, time.Second) })
		}
	}
	return nil
}

// copiedOf counts the records of source whose value is in copied.
func copiedOf(source, copied []checker.CopyRecord) int {
	in := make(map[string]bool, len(copied))
	for _, c := range copied {
		in[c.Value] = true
	}
	n := 0
	for _, s := range source {
		if in[s.Value] {
			n++
		}
	}
	return n
}

// cutFor cuts every link through proxy l for d (or until ctx ends), then
// heals it (Heal heals it too if the schedule ends first).
func cutFor(ctx context.Context, r *Run, l *fault.Proxy, d time.Duration) error {
	if err := r.Inject.Cut(l); err != nil {
		return err
	}
	fault.Sleep(ctx.Done(), d)
	return r.Inject.Heal(l)
}

// killHolding waits (up to 10 s) for worker w to announce that it holds a
// written transaction (`sluice copy --hold` says so), SIGSTOPs it at once
// — inside the hold, before its commit — for a second, in which a
// read_committed reader must not see those records, then SIGKILLs it and
// restarts it a second later: the next owner of its input partition fences
// the transaction and aborts it.
func killHolding(ctx context.Context, r *Run, w *bookieproc.Proc) error {
	holding := w.Watch("holding transaction ")
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s announced no held transaction in 10s", w.ID)
	case <-ctx.Done():
		return nil
	}
	if err := r.Inject.Do("pause-in-txn", w.ID, func() error { return w.Signal(syscall.SIGSTOP) }); err != nil {
		return err
	}
	fault.Sleep(ctx.Done(), time.Second)
	if err := r.Kill(w); err != nil {
		return err
	}
	fault.Sleep(ctx.Done(), time.Second)
	return r.Restart(w)
}

// produceSource writes keyed records with unique values to topic until
// ctx ends: whatever is stored, acknowledged or not, is the source.
func produceSource(ctx context.Context, addr, topic string, keys int, n *atomic.Int64) error {
	c, err := sluice.NewClient(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := c.NewProducer(sluice.WithLinger(2*time.Millisecond), sluice.WithDeliveryTimeout(20*time.Second))
	if err != nil {
		return err
	}
	defer p.Close(context.WithoutCancel(ctx))
	seq := 0
	for ctx.Err() == nil {
		for range 8 {
			key := "k" + strconv.Itoa(seq%keys)
			p.Produce(ctx, sluice.NewRecord(topic, []byte(key), []byte(key+"-"+strconv.Itoa(seq))), func(sluice.Result) {})
			seq++
			n.Add(1)
		}
		sleepOr(ctx, nil, 20*time.Millisecond)
	}
	return ctx.Err()
}

// tailCommitted reads partition p of topic with read_committed long polls
// until ctx ends, and returns what it read.
func tailCommitted(ctx context.Context, api sluicev1connect.ConsumerServiceClient, topic string, p int32) []checker.CopyRecord {
	var out []checker.CopyRecord
	next := int64(0)
	for ctx.Err() == nil {
		resp, err := api.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Partition: p, Offset: next, MaxRecords: 1000, MaxWaitMs: 500, ReadCommitted: true}))
		if err != nil {
			sleepOr(ctx, nil, 200*time.Millisecond)
			continue
		}
		out = append(out, copyRecords(p, resp.Msg.GetRecords())...)
		next = max(next, resp.Msg.GetNextOffset())
	}
	return out
}

func copyRecords(p int32, recs []*sluicev1.ConsumedRecord) []checker.CopyRecord {
	out := make([]checker.CopyRecord, 0, len(recs))
	for _, r := range recs {
		cr := checker.CopyRecord{Partition: p, Offset: r.GetOffset(), Key: string(r.GetKey()), Value: string(r.GetValue())}
		for _, h := range r.GetHeaders() {
			if h.GetKey() == txnTagHeader {
				cr.Tag = string(h.GetValue())
			}
		}
		out = append(out, cr)
	}
	return out
}

// drainCopy reads every partition of topic to its end; with committed, as
// a read_committed reader, to the last stable offset, which must reach the
// high watermark (a transaction left open is waited for, up to 20 s of no
// progress — 2 s once a partition was stuck — then it returns what it
// read, and the error).
func drainCopy(ctx context.Context, api sluicev1connect.ConsumerServiceClient, topic string, partitions int32, committed bool) ([]checker.CopyRecord, error) {
	var out []checker.CopyRecord
	var stuck error
	for p := range partitions {
		next := int64(0)
		var lastErr error
		progress := time.Now()
		patience := 20 * time.Second
		if stuck != nil {
			patience = 2 * time.Second // one partition stuck already: the rest likely are
		}
		for {
			if time.Since(progress) > patience {
				stuck = errors.Join(stuck, fmt.Errorf("%s/%d: stuck at offset %d (last error: %v)", topic, p, next, lastErr))
				break
			}
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := api.Fetch(fctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Partition: p, Offset: next, MaxRecords: 1000, ReadCommitted: committed}))
			cancel()
			if err != nil {
				lastErr = err
				if !sleepOr(ctx, nil, 200*time.Millisecond) {
					return nil, ctx.Err()
				}
				continue
			}
			m := resp.Msg
			out = append(out, copyRecords(p, m.GetRecords())...)
			if m.GetNextOffset() > next {
				next, progress = m.GetNextOffset(), time.Now()
				continue
			}
			if next >= m.GetHighWatermark() && (!committed || m.GetLastStableOffset() >= m.GetHighWatermark()) {
				break
			}
			if !sleepOr(ctx, nil, 200*time.Millisecond) { // held at the LSO: an open transaction
				return nil, ctx.Err()
			}
		}
	}
	return out, stuck
}
