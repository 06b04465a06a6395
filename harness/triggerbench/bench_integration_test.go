//go:build integration

package triggerbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/lambdatest"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// config is one run's size.
type config struct {
	reps       int
	partitions int32
	records    int           // T1
	rate       int           // T2, records/s
	duration   time.Duration // T2
	instances  int           // emulator processes per function
}

var smoke = config{reps: 1, partitions: 4, records: 20_000, rate: 1000, duration: 5 * time.Second, instances: 4}
var full = config{reps: 3, partitions: 8, records: 200_000, rate: 1000, duration: 30 * time.Second, instances: 8}

// TestIntegrationTriggerBenchSmoke runs the benchmark small (CI) or full
// (TRIGGER_BENCH_FULL=1, `task bench:triggers`, results written to
// TRIGGER_BENCH_OUT).
func TestIntegrationTriggerBenchSmoke(t *testing.T) {
	cfg := smoke
	if os.Getenv("TRIGGER_BENCH_FULL") == "1" {
		cfg = full
	}
	recDir := t.TempDir()
	pool := lambdatest.Start(t,
		lambdatest.Function{Name: "noop", Package: lambdatest.Recorder, Instances: cfg.instances},
		lambdatest.Function{Name: "rec", Package: lambdatest.Recorder, Instances: cfg.instances, Env: []string{"RECORDER_DIR=" + recDir}},
	)
	ctx := context.Background()
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dev := &bookieproc.Proc{ID: "dev", Addr: addr, Bin: bin, Command: "dev",
		Args: []string{"--addr", addr, "--data-dir", t.TempDir(), "--lambda-endpoint", pool.Endpoint(), "--trigger-refresh", "100ms"}}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Stop() })
	b := &bench{t: t, cfg: cfg, url: "http://" + addr, dev: dev, recDir: recDir}
	b.admin = sluicev1connect.NewAdminServiceClient(http.DefaultClient, b.url)
	b.prod = sluicev1connect.NewProducerServiceClient(http.DefaultClient, b.url)
	b.waitServing()

	var out strings.Builder
	fmt.Fprintf(&out, "# Trigger benchmark (%s)\n\nsluice dev with --lambda-endpoint; %d emulator processes per function; %d partitions; batch size 100.\n\n",
		time.Now().UTC().Format(time.RFC3339), cfg.instances, cfg.partitions)
	fmt.Fprintf(&out, "| run | T1 records | T1 seconds | records/s | invocations/s | throttled | dev CPU ms / invocation | T2 records | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for rep := 1; rep <= cfg.reps; rep++ {
		t1 := b.throughput(rep)
		t2 := b.latency(rep)
		line := fmt.Sprintf("| %d | %d | %.2f | %.0f | %.0f | %.0f | %.2f | %d | %.1f | %.1f | %.1f |", rep, t1.records, t1.seconds, float64(t1.records)/t1.seconds,
			t1.invocations/t1.seconds, t1.throttled, t1.cpuMs/t1.invocations, t2.n, t2.p50, t2.p99, t2.max)
		t.Log(line)
		out.WriteString(line + "\n")
	}
	if dir := os.Getenv("TRIGGER_BENCH_OUT"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Join(dir, "results.md"))
	}
}

type bench struct {
	t      *testing.T
	cfg    config
	url    string
	dev    *bookieproc.Proc
	recDir string
	admin  sluicev1connect.AdminServiceClient
	prod   sluicev1connect.ProducerServiceClient
}

func (b *bench) waitServing() {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Post(b.url+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader("{}"))
		if err == nil {
			var h struct{ Status string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Status == "SERVING" {
				return
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("sluice dev not SERVING after 60 s:\n%s", b.dev.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *bench) createTopic(name string) {
	if _, err := b.admin.CreateTopic(context.Background(), connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: b.cfg.partitions})); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bench) createTrigger(name, topic, function string, start sluicev1.TriggerStartingPosition) {
	_, err := b.admin.CreateTrigger(context.Background(), connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: name, Spec: &sluicev1.TriggerSpec{
		Topic: topic, Function: function, Enabled: true, BatchSize: 100, StartingPosition: start}}))
	if err != nil {
		b.t.Fatal(err)
	}
}

// lagZero reports whether every partition of the trigger has a committed
// offset and no lag, and the sum of committed offsets.
func (b *bench) lagZero(name string) (bool, int64) {
	resp, err := b.admin.DescribeTrigger(context.Background(), connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: name}))
	if err != nil {
		b.t.Fatal(err)
	}
	parts := resp.Msg.GetPartitions()
	var sum int64
	done := len(parts) == int(b.cfg.partitions)
	for _, p := range parts {
		sum += max(p.GetCommittedOffset(), 0)
		if p.GetLag() != 0 || p.GetCommittedOffset() < 0 {
			done = false
		}
	}
	return done, sum
}

// cpuMs is the dev process's user+system CPU time so far.
func (b *bench) cpuMs() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.dev.Pid()))
	if err != nil {
		b.t.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64) // utime, field 14
	st, _ := strconv.ParseFloat(f[12], 64) // stime, field 15
	return (ut + st) * 10                  // USER_HZ 100
}

// invocations reads sluice_trigger_invocations for one trigger from
// /metrics: the invocations the function ran (success, partial, function
// error) and those refused for concurrency or otherwise not run
// (throttled, transient, rejected).
func (b *bench) invocations(trigger string) (ran, refused float64) {
	resp, err := http.Get(b.url + "/metrics")
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	for name, fam := range fams {
		if !strings.HasPrefix(name, "sluice_trigger_invocations") {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["trigger"] != trigger {
				continue
			}
			switch labels["outcome"] {
			case "success", "partial", "function_error":
				ran += m.GetCounter().GetValue()
			default:
				refused += m.GetCounter().GetValue()
			}
		}
	}
	return ran, refused
}

type t1Result struct {
	records                       int
	seconds                       float64
	invocations, throttled, cpuMs float64
}

// throughput is T1.
func (b *bench) throughput(rep int) t1Result {
	topic := fmt.Sprintf("t1-%d", rep)
	b.createTopic(topic)
	value := []byte("0123456789abcdef")
	for i := 0; i < b.cfg.records; i += 1000 {
		var recs []*sluicev1.Record
		for j := i; j < min(i+1000, b.cfg.records); j++ {
			recs = append(recs, &sluicev1.Record{Key: []byte("k" + strconv.Itoa(j)), Value: value})
		}
		if _, err := b.prod.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: topic, Records: recs})); err != nil {
			b.t.Fatal(err)
		}
	}
	cpu0 := b.cpuMs()
	start := time.Now()
	b.createTrigger(topic, topic, "noop", sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST)
	var sum int64
	for {
		var done bool
		if done, sum = b.lagZero(topic); done {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.t.Fatalf("T1: the trigger processed %d of %d records in 10 minutes", sum, b.cfg.records)
		}
		time.Sleep(20 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	if sum != int64(b.cfg.records) {
		b.t.Fatalf("T1: committed offsets sum to %d, want %d", sum, b.cfg.records)
	}
	inv, refused := b.invocations(topic)
	if inv < float64(b.cfg.records)/100 {
		b.t.Fatalf("T1: %v invocations for %d records at batch 100", inv, b.cfg.records)
	}
	return t1Result{records: b.cfg.records, seconds: secs, invocations: inv, throttled: refused, cpuMs: b.cpuMs() - cpu0}
}

type t2Result struct {
	n             int
	p50, p99, max float64
}

// latency is T2.
func (b *bench) latency(rep int) t2Result {
	topic := fmt.Sprintf("t2-%d", rep)
	b.createTopic(topic)
	b.createTrigger(topic, topic, "rec", sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_LATEST)
	deadline := time.Now().Add(30 * time.Second)
	for done, _ := b.lagZero(topic); !done; done, _ = b.lagZero(topic) {
		if time.Now().After(deadline) {
			b.t.Fatal("T2: the trigger did not start on every partition within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Requests of 10 records every 10 ms; each value is its send time.
	sent := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	per := b.cfg.rate / 100
	for end := time.Now().Add(b.cfg.duration); time.Now().Before(end); <-tick.C {
		now := strconv.FormatInt(time.Now().UnixNano(), 10)
		recs := make([]*sluicev1.Record, per)
		for i := range recs {
			recs[i] = &sluicev1.Record{Key: []byte("k" + strconv.Itoa(sent+i)), Value: []byte(topic + ":" + now)}
		}
		if _, err := b.prod.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: topic, Records: recs})); err != nil {
			b.t.Fatal(err)
		}
		sent += per
	}
	var lat []float64
	deadline = time.Now().Add(60 * time.Second)
	for {
		lat = b.recorded(topic)
		if len(lat) >= sent {
			break
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("T2: the handler saw %d of %d records within 60 s of the last produce", len(lat), sent)
		}
		time.Sleep(100 * time.Millisecond)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return t2Result{n: len(lat), p50: pct(0.50), p99: pct(0.99), max: lat[len(lat)-1]}
}

// recorded reads the recorder's files: per record of topic (value
// "<topic>:<send ns>"), handler start − send time in ms, each record once
// (its first invocation).
func (b *bench) recorded(topic string) []float64 {
	files, err := filepath.Glob(filepath.Join(b.recDir, "*.jsonl"))
	if err != nil {
		b.t.Fatal(err)
	}
	first := map[string]float64{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			b.t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var line struct {
				Started int64 `json:"startedUnixNano"`
				Records []struct {
					Topic     string `json:"topic"`
					Partition int64  `json:"partition"`
					Offset    int64  `json:"offset"`
					Value     string `json:"value"`
				} `json:"records"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue // a line being written
			}
			for _, r := range line.Records {
				sentNs, ok := strings.CutPrefix(r.Value, topic+":")
				if !ok || r.Topic != topic {
					continue
				}
				ns, err := strconv.ParseInt(sentNs, 10, 64)
				if err != nil {
					b.t.Fatalf("recorded value %q", r.Value)
				}
				key := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
				ms := float64(line.Started-ns) / 1e6
				if old, seen := first[key]; !seen || ms < old {
					first[key] = ms
				}
			}
		}
		fh.Close()
	}
	out := make([]float64, 0, len(first))
	for _, v := range first {
		out = append(out, v)
	}
	return out
}
