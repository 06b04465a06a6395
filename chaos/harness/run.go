package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/chaos/checker"
	"github.com/sluicemq/sluice/chaos/fault"
	"github.com/sluicemq/sluice/chaos/history"
	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// Env is what every scenario of one run shares.
type Env struct {
	Bin         string // the sluice binary (real or sabotaged)
	AWSEndpoint string
	Cassandra   string
	Seed        int64
	// Scale multiplies the scenarios' fault phases (1: the short version
	// for CI; 3: the full version of `task chaos`).
	Scale float64
	// Out is where histories and reports go.
	Out string
}

// Scenario is one fault schedule over a cluster.
type Scenario struct {
	Name        string
	Description string
	Cluster     ClusterConfig // Bin and endpoints are filled from Env
	Partitions  int32
	// TopicConfig is the topic's config (nil: the defaults).
	TopicConfig map[string]string
	Members     int // group members (0: no group consumers)
	MemberCfg   func(i int, c *MemberConfig)
	Phase       time.Duration // the fault phase at Scale 1
	MinPhase    time.Duration // the phase never gets shorter (one round of the schedule)
	// Faults injects faults until ctx ends or its own schedule is done.
	// It must stop promptly when ctx ends.
	Faults func(ctx context.Context, r *Run) error
	// Sabotage names the build tag that disables the safety mechanism
	// this scenario exercises ("" if none).
	Sabotage string
	// MoreSabotages are tags of further mechanisms the scenario exercises;
	// each is a sabotage run of its own, which must fail as well.
	MoreSabotages []string
	// SabotageMinPhase is the shortest phase of a sabotage run: long
	// enough that the broken mechanism is exercised more than once (0:
	// MinPhase).
	SabotageMinPhase time.Duration
}

// SabotagePhase is the fault phase of the scenario's sabotage runs at
// scale.
func (sc *Scenario) SabotagePhase(scale float64) time.Duration {
	return max(time.Duration(float64(sc.Phase)*scale), sc.MinPhase, sc.SabotageMinPhase)
}

// SabotageRun is one sabotage run: a scenario built with one of its tags.
type SabotageRun struct {
	Scenario *Scenario
	Tag      string
}

// SabotageRuns lists the sabotage runs of scs: every (scenario, tag) pair,
// or with perTag each tag once, with the scenario whose sabotage phase at
// scale is the shortest (the first on a tie) — the smoke version CI runs;
// `task chaos` runs every pair.
func SabotageRuns(scs []*Scenario, scale float64, perTag bool) []SabotageRun {
	var runs []SabotageRun
	best := map[string]int{} // tag → index in runs
	for _, sc := range scs {
		for _, tag := range sc.Sabotages() {
			i, seen := best[tag]
			switch {
			case !perTag:
				runs = append(runs, SabotageRun{sc, tag})
			case !seen:
				best[tag] = len(runs)
				runs = append(runs, SabotageRun{sc, tag})
			case sc.SabotagePhase(scale) < runs[i].Scenario.SabotagePhase(scale):
				runs[i].Scenario = sc
			}
		}
	}
	return runs
}

// Sabotages lists every sabotage tag of the scenario.
func (sc *Scenario) Sabotages() []string {
	if sc.Sabotage == "" {
		return nil
	}
	return append([]string{sc.Sabotage}, sc.MoreSabotages...)
}

// Run is one scenario in progress: what a fault schedule works with.
type Run struct {
	T         testing.TB
	Env       Env
	Scenario  *Scenario
	Cluster   *Cluster
	Rec       *history.Recorder
	Inject    *fault.Injector
	Rand      *rand.Rand
	Topic     string
	Producers []*Producer
	Members   []*Member
	HTTP      *http.Client

	mu     sync.Mutex                // guards killed and skewed: schedules kill from several goroutines
	killed map[*bookieproc.Proc]bool // killed and not restarted yet
	skewed map[*bookieproc.Proc]bool // clock offset not yet put right
}

// Summary is one scenario's result, for the summary table.
type Summary struct {
	Scenario      string         `json:"scenario"`
	Sabotage      string         `json:"sabotage,omitempty"`
	Seed          int64          `json:"seed"`
	Seconds       float64        `json:"seconds"`
	Produced      int            `json:"produced"`
	Acknowledged  int            `json:"acknowledged"`
	Indeterminate int            `json:"indeterminate"`
	Consumed      int            `json:"consumed"`
	Commits       int            `json:"commits"`
	Rejected      int            `json:"commits_rejected"`
	Faults        int            `json:"faults"`
	FaultsByKind  map[string]int `json:"faults_by_kind"`
	Anomalies     int            `json:"anomalies"`
	ByKind        map[string]int `json:"anomalies_by_kind,omitempty"`
	Undrained     int            `json:"undrained"`
	History       string         `json:"history"`
	Report        string         `json:"report"`
	Error         string         `json:"error,omitempty"`
}

// OK reports whether the scenario ran and its history has no anomaly.
func (s Summary) OK() bool { return s.Error == "" && s.Anomalies == 0 }

// RunScenario runs sc from start to verdict. It fails t only for harness
// failures (a process that will not start); anomalies are in the Summary,
// so a sabotage test can assert them.
func RunScenario(ctx context.Context, t testing.TB, env Env, sc *Scenario) Summary {
	t.Helper()
	began := time.Now()
	if env.Scale <= 0 {
		env.Scale = 1
	}
	cc := sc.Cluster
	cc.Bin, cc.AWSEndpoint, cc.Cassandra = env.Bin, env.AWSEndpoint, env.Cassandra
	if sc.Members == 0 {
		cc.Cassandra = ""
	}
	cluster := StartCluster(ctx, t, cc)
	if err := os.MkdirAll(env.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	defer cluster.SaveLogs(t, filepath.Join(env.Out, sc.Name+".logs"))
	histPath := filepath.Join(env.Out, sc.Name+".history.jsonl")
	f, err := os.Create(histPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := history.NewRecorder(f, history.Config{Scenario: sc.Name, Seed: env.Seed})
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	defer hc.CloseIdleConnections()
	r := &Run{T: t, Env: env, Scenario: sc, Cluster: cluster, Rec: rec, Inject: fault.NewInjector(rec, 0),
		Rand: rand.New(rand.NewPCG(uint64(env.Seed), uint64(len(sc.Name)))), Topic: "chaos", HTTP: hc,
		killed: map[*bookieproc.Proc]bool{}, skewed: map[*bookieproc.Proc]bool{}}
	sum := Summary{Scenario: sc.Name, Seed: env.Seed, History: histPath}
	fail := func(format string, args ...any) Summary {
		sum.Error = fmt.Sprintf(format, args...)
		sum.Seconds = time.Since(began).Seconds()
		_ = rec.Close()
		return sum
	}

	sc0, err := sluice.NewClient(cluster.Ingests[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc0.Close()
	if _, err := sc0.CreateTopic(ctx, r.Topic, sc.Partitions, sc.TopicConfig); err != nil {
		return fail("create topic: %v", err)
	}
	if _, err := cluster.WaitOwners(ctx, r.Topic, len(cluster.Ingests) > 1, 60*time.Second); err != nil {
		return fail("%v", err)
	}
	for range cluster.Ingests {
		if err := r.StartProducer(ctx); err != nil {
			return fail("%v", err)
		}
	}
	for i := 0; i < sc.Members; i++ {
		mc := MemberConfig{Name: fmt.Sprintf("c%d", i+1), Addr: cluster.Fetches[i%len(cluster.Fetches)].Addr, Group: "chaos-group", Topic: r.Topic}
		if sc.MemberCfg != nil {
			sc.MemberCfg(i, &mc)
		}
		r.Members = append(r.Members, StartMember(ctx, hc, rec, mc))
	}

	// Faults, bounded by the phase (and a margin for the schedule's last
	// step, which must not start after the phase ended).
	phase := max(time.Duration(float64(sc.Phase)*env.Scale), sc.MinPhase)
	fctx, cancel := context.WithTimeout(ctx, phase)
	ferr := sc.Faults(fctx, r)
	cancel()
	if ferr != nil && ctx.Err() == nil && fctx.Err() == nil {
		t.Logf("%s: fault schedule: %v", sc.Name, ferr)
		sum.Error = "fault schedule: " + ferr.Error()
	}

	// Heal: continue paused processes, heal links, restart the dead.
	if err := r.Heal(); err != nil {
		return fail("heal: %v", err)
	}
	// Let the cluster settle under load, then stop producing and wait for
	// every outcome.
	sleepOr(ctx, nil, 2*time.Second)
	for _, p := range r.Producers {
		if err := p.Stop(ctx); err != nil {
			t.Logf("%s: %v", sc.Name, err)
		}
	}
	// Let the members catch up, then stop them (they commit and leave).
	sleepOr(ctx, nil, 2*time.Second)
	for _, m := range r.Members {
		if err := m.Stop(ctx); err != nil {
			return fail("member %s: %v", m.Name(), err)
		}
	}
	// Drain what storage holds, not what a fetch copy cached before the
	// faults (entries it read before a power loss stay in its cache): a
	// fresh process has an empty cache.
	for _, p := range cluster.Fetches {
		if err := p.Kill(); err != nil {
			return fail("restart %s before the drain: %v", p.ID, err)
		}
		if err := p.Start(); err != nil { // returns once it listens
			return fail("restart %s before the drain: %v", p.ID, err)
		}
	}
	var api sluicev1connect.ConsumerServiceClient
	if len(cluster.Fetches) > 0 {
		api = sluicev1connect.NewConsumerServiceClient(hc, "http://"+cluster.Fetches[0].Addr)
	} else {
		return fail("scenario %s has no fetch copy to drain with", sc.Name)
	}
	if err := Drain(ctx, api, rec, r.Topic, sc.Partitions, 2*time.Minute); err != nil {
		t.Logf("%s: %v", sc.Name, err)
		sum.Error = err.Error()
	}
	if err := rec.Close(); err != nil {
		return fail("history: %v", err)
	}
	if err := f.Sync(); err != nil {
		return fail("history: %v", err)
	}
	res, err := checker.CheckFile(histPath, checker.Options{
		// The harness's producers are all idempotent: no duplicate is
		// tolerated, whatever the history's idempotence fields say.
		AllowDuplicates: func(string, bool) bool { return false },
	})
	if err != nil {
		return fail("check: %v", err)
	}
	sum.Report = filepath.Join(env.Out, sc.Name+".report.txt")
	if rf, err := os.Create(sum.Report); err == nil {
		_ = res.Report(rf)
		rf.Close()
	}
	sum.Produced, sum.Acknowledged, sum.Indeterminate = res.Produces, res.Acknowledged, res.Indeterminate
	sum.Consumed, sum.Commits, sum.Rejected = res.Consumed, res.Commits, res.CommitsRejected
	sum.Faults, sum.FaultsByKind = r.Inject.Count()
	sum.Anomalies, sum.Undrained = res.Failures(), res.Undrained
	sum.ByKind = map[string]int{}
	for k, n := range res.Anomalies {
		if n > 0 {
			sum.ByKind[string(k)] = n
		}
	}
	sum.Seconds = time.Since(began).Seconds()
	return sum
}

// StartProducer starts one more producer through the ingest copies in turn.
func (r *Run) StartProducer(ctx context.Context) error {
	i := len(r.Producers)
	in := r.Cluster.Ingests[i%len(r.Cluster.Ingests)]
	addr := in.Addr
	if link := r.Cluster.IngestLinks[i%len(r.Cluster.IngestLinks)]; link != nil {
		addr = link.Addr() // through the proxy, so link faults from Harness reach the producers
	}
	name := fmt.Sprintf("p%d", i+1)
	cfg := ProducerConfig{Name: name, Addr: addr, Topic: r.Topic, Partitions: r.Scenario.Partitions}
	dir := filepath.Join(r.Env.Out, r.Scenario.Name+".logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lf, err := os.Create(filepath.Join(dir, "producer-"+name+".log"))
	if err != nil {
		return err
	}
	r.T.Cleanup(func() { _ = lf.Close() })
	cfg.Log = slog.New(slog.NewTextHandler(lf, nil)).With(slog.String("producer", name))
	p, err := StartProducer(ctx, r.Rec, cfg)
	if err != nil {
		return err
	}
	r.Producers = append(r.Producers, p)
	return nil
}

// StopProducers stops every producer running (and waits for outcomes).
func (r *Run) StopProducers(ctx context.Context) error {
	var first error
	for _, p := range r.Producers {
		// Not bounded by the fault phase: every outcome must be in.
		if err := p.Stop(context.WithoutCancel(ctx)); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Kill kills p (recorded); Heal restarts it if the schedule did not.
func (r *Run) Kill(p *bookieproc.Proc) error {
	err := r.Inject.Kill(p)
	r.mu.Lock()
	r.killed[p] = true
	r.mu.Unlock()
	return err
}

// Lose kills p and deletes its data for good (recorded); Heal leaves it
// dead.
func (r *Run) Lose(p *bookieproc.Proc) error {
	r.mu.Lock()
	delete(r.killed, p)
	r.mu.Unlock()
	return r.Inject.Lose(p)
}

// Restart restarts a killed p (recorded).
func (r *Run) Restart(p *bookieproc.Proc) error {
	err := r.Inject.Restart(p)
	if err == nil {
		r.mu.Lock()
		delete(r.killed, p)
		r.mu.Unlock()
	}
	return err
}

// Skew offsets p's wall clock by d (recorded as fault "skew"; 0 puts it
// right); Heal puts every clock right.
func (r *Run) Skew(p *bookieproc.Proc, d time.Duration) error {
	return r.Inject.Do("skew", fmt.Sprintf("%s %+v", p.ID, d), func() error {
		if err := r.Cluster.SetClock(p, d); err != nil {
			return err
		}
		r.mu.Lock()
		if d == 0 {
			delete(r.skewed, p)
		} else {
			r.skewed[p] = true
		}
		r.mu.Unlock()
		return nil
	})
}

// Heal resumes paused processes, heals every link, puts every clock
// right and restarts every killed process.
func (r *Run) Heal() error {
	err := r.Inject.ResumeAll()
	r.mu.Lock()
	var skewed []*bookieproc.Proc
	for p := range r.skewed {
		skewed = append(skewed, p)
	}
	r.mu.Unlock()
	sort.Slice(skewed, func(i, j int) bool { return skewed[i].ID < skewed[j].ID })
	for _, p := range skewed {
		err = errors.Join(err, r.Skew(p, 0))
	}
	links := append(append([]*fault.Proxy(nil), r.Cluster.BookieLinks...), r.Cluster.IngestLinks...)
	for _, l := range append(links, r.Cluster.CassandraLink, r.Cluster.AWSLink) {
		if l != nil && l.Mode() != fault.Pass {
			err = errors.Join(err, r.Inject.Heal(l))
		}
		if l != nil {
			for _, src := range l.Sources() {
				err = errors.Join(err, r.Inject.HealFrom(l, src))
			}
		}
	}
	var ps []*bookieproc.Proc
	r.mu.Lock()
	for p := range r.killed {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	for _, p := range ps {
		err = errors.Join(err, r.Restart(p))
	}
	return err
}

// Pick returns a random element of ps.
func (r *Run) Pick(ps []*bookieproc.Proc) *bookieproc.Proc { return ps[r.Rand.IntN(len(ps))] }

// Jitter returns d ± 25 %, from the run's seeded source.
func (r *Run) Jitter(d time.Duration) time.Duration {
	return d*3/4 + time.Duration(r.Rand.Int64N(int64(d)/2+1))
}

// WriteSummaries writes sums as JSON and as a markdown table into dir.
func WriteSummaries(dir string, sums []Summary, header string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(sums, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	md := header + "\n\n" + Table(sums)
	return md, os.WriteFile(filepath.Join(dir, "summary.md"), []byte(md), 0o644)
}

// Table renders sums as a markdown table.
func Table(sums []Summary) string {
	s := "| scenario | sabotage | seconds | produced | acked | indeterminate | consumed | commits (rejected) | faults | anomalies | result |\n" +
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
	for _, x := range sums {
		res := "OK"
		switch {
		case x.Error != "":
			res = "ERROR: " + x.Error
		case x.Anomalies > 0:
			res = fmt.Sprintf("FAIL %v", x.ByKind)
		}
		sab := x.Sabotage
		if sab == "" {
			sab = "-"
		}
		s += fmt.Sprintf("| %s | %s | %.0f | %d | %d | %d | %d | %d (%d) | %d %v | %d | %s |\n",
			x.Scenario, sab, x.Seconds, x.Produced, x.Acknowledged, x.Indeterminate, x.Consumed, x.Commits, x.Rejected, x.Faults, x.FaultsByKind, x.Anomalies, res)
	}
	return s
}
