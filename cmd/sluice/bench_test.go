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

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/internal/cluster"
)

func TestBenchHelp(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"bench", "-h"}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"sluice bench --driver kafka|sluice|mem --workload FILE --out DIR [flags]", "--brokers", "--workload", "--out",
		"--server-pids", "--sluice-addr", "intended send time", "ledger      benchmark the ledger tier alone"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchRejectsBadInvocations(t *testing.T) {
	wl := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(wl, []byte("name: w\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 64\nproducersPerTopic: 1\nproducerRate: 10\ntestDuration: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(tiny, []byte("name: w\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 21\nproducersPerTopic: 1\nproducerRate: 10\ntestDuration: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int // 2: the command line, 1: the workload file
		want string
	}{
		{[]string{"bench"}, 2, "--driver, --workload, --out required"},
		{[]string{"bench", "--driver", "nats", "--workload", wl, "--out", t.TempDir()}, 2, `--driver "nats": want kafka, sluice or mem`},
		{[]string{"bench", "--driver", "kafka", "--workload", wl, "--out", t.TempDir()}, 2, "--brokers is required"},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--brokers", "nohost"}, 2, `brokers: "nohost" is not host:port`},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--server-pids", "x"}, 2, `--server-pids: server pid "x"`},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--rate", "-1"}, 2, "--rate -1: want 0 (search for the maximum)"},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--rate", "NaN"}, 2, "--rate NaN"},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--recovery-rate", "0", "--test-duration", "0s",
			"--warmup-duration", "-1s", "--progress", "0s", "--drain-timeout", "-1s"},
			2, "--recovery-rate 0: want 1..10000000"},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--kafka-replication-factor", "0", "--kafka-linger", "2s",
			"--kafka-compression", "brotli", "--kafka-topic-config", "novalue", "--sluice-slow-batch", "-1s", "--pprof", "nohost"},
			2, `invalid argument "novalue" for "--kafka-topic-config" flag`},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--kafka-replication-factor", "0", "--kafka-linger", "2s",
			"--kafka-compression", "brotli", "--sluice-slow-batch", "-1s", "--pprof", "nohost"},
			2, `--kafka-compression "brotli": want none, gzip, snappy, lz4 or zstd`},
		{[]string{"bench", "ledger", "--duration", "0s", "--warmup", "-1s"}, 2, "--duration 0s: want a positive duration"},
		{[]string{"bench", "ledger", "--quick", "--duration", "5s"}, 2, "--quick sets --duration 2s and --warmup 0s: drop --duration or --quick"},
		{[]string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--rate", "0"}, 1, "warmupDuration:"},
		{[]string{"bench", "--driver", "mem", "--workload", "/nonexistent.yaml", "--out", t.TempDir()}, 1, "nonexistent.yaml"},
		{[]string{"bench", "--driver", "sluice", "--workload", wl, "--out", t.TempDir(), "--sluice-schema", "json"}, 2, `--sluice-schema "json": want avro`},
		{[]string{"bench", "--driver", "sluice", "--workload", tiny, "--out", t.TempDir(), "--sluice-schema", "avro"}, 1, "messageSize 21 is too small for --sluice-schema avro (at least 22 bytes"},
		{[]string{"bench", "--driver", "sluice", "--workload", wl, "--out", t.TempDir(), "--sluice-tls-ca", "/nonexistent/ca.pem"}, 2, "--sluice-tls-ca: "},
		{[]string{"bench", "--driver", "sluice", "--workload", wl, "--out", t.TempDir(), "--sluice-addr", "sluice.example:7420", "--sluice-token", "t"},
			2, "--sluice-tls-ca/--sluice-token: sluice driver: Token:"},
		{[]string{"bench", "--driver", "sluice", "--workload", wl, "--out", t.TempDir(), "--sluice-token", "Bearer t"}, 2, "Token has white space"},
	} {
		var errOut bytes.Buffer
		if code := run(context.Background(), tc.args, io.Discard, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
	}
	// Every bad flag of one command line is reported.
	var errOut bytes.Buffer
	run(context.Background(), []string{"bench", "--driver", "mem", "--workload", wl, "--out", t.TempDir(), "--recovery-rate", "0", "--test-duration", "0s",
		"--warmup-duration", "-1s", "--progress", "0s", "--drain-timeout", "-1s", "--kafka-replication-factor", "0", "--kafka-linger", "2s",
		"--sluice-slow-batch", "-1s", "--pprof", "nohost", "--sluice-addr", "x"}, io.Discard, &errOut)
	for _, want := range []string{"--recovery-rate 0", "--test-duration 0s: want 1s..24h0m0s", "--warmup-duration -1s: want 0..1h0m0s",
		"--progress 0s", "--drain-timeout -1s", "--kafka-replication-factor 0: want 1..16", "--kafka-linger 2s: want 0..1s",
		"--sluice-slow-batch -1s", `--pprof "nohost"`, `--sluice-addr "x"`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
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
