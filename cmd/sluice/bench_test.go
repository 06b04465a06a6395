package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/internal/loadgen"
)

func TestBenchHelp(t *testing.T) {
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"bench", "-h"}, io.Discard, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Usage: sluice bench --driver kafka", "-brokers", "-workload", "-out", "-server-pids", "intended send time"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, errOut.String())
		}
	}
}

func TestBenchRejectsBadInvocations(t *testing.T) {
	wl := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(wl, []byte("name: w\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 64\nproducersPerTopic: 1\nproducerRate: 10\ntestDuration: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "--driver, --workload, --out required"},
		{[]string{"bench", "--driver", "nats", "--workload", wl, "--out", t.TempDir()}, `--driver "nats": must be kafka, sluice`},
		{[]string{"bench", "--driver", "kafka", "--workload", wl, "--out", t.TempDir()}, "--brokers is required"},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--rate", "0"}, "warmupDuration:"},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--server-pids", "x"}, `server pid "x"`},
		{[]string{"bench", "--driver", "mem", "--workload", "/nonexistent.yaml", "--out", t.TempDir()}, "nonexistent.yaml"},
	} {
		var errOut bytes.Buffer
		if code := run(context.Background(), tc.args, io.Discard, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// A one-second run against the in-memory driver writes both result files
// and prints the table and progress.
func TestBenchMemWritesResults(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wl, []byte("name: tiny\ntopics: 1\npartitionsPerTopic: 2\nmessageSize: 64\nproducersPerTopic: 1\nproducerRate: 500\nsubscriptionsPerTopic: 1\ntestDuration: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--driver", "mem", "--workload", wl, "--out", out,
		"--progress", "300ms", "--server-pids", "me=" + itoa(os.Getpid()), "--label", "tiny run"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	for _, f := range []string{"results.json", "results.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stdout.String(), "| tiny run | mem | tiny | 500 |") {
		t.Errorf("stdout lacks the table row:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "[bench] measure") || !strings.Contains(stderr.String(), "wrote "+out) {
		t.Errorf("stderr lacks progress:\n%s", stderr.String())
	}
}

// The consume smoke workload through `sluice bench --driver sluice`
// against an in-process Sluice: the command's path end to end (producers,
// a consumer group session, results). Completeness only, not performance.
func TestBenchSluiceConsumeSmoke(t *testing.T) {
	c, err := cluster.New(cluster.Config{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("cluster Run: %v", err)
		}
	}()
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"bench", "--driver", "sluice", "--sluice-addr", c.Addr(),
		"--workload", "../../bench/workloads/csmoke.yaml", "--out", out, "--progress", "1s", "--drain-timeout", "30s"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []loadgen.Result
	if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 1 {
		t.Fatalf("results.json: %v (%d results)", err, len(rs))
	}
	r := rs[0]
	if r.Driver != "sluice" || r.Sent == 0 || r.NotReceived+r.Failed+r.Unacked != 0 || r.EndToEndLatency.Count != r.Sent {
		t.Errorf("driver %s sent %d not received %d failed %d unacked %d end-to-end latencies %d\n%s",
			r.Driver, r.Sent, r.NotReceived, r.Failed, r.Unacked, r.EndToEndLatency.Count, stderr.String())
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
