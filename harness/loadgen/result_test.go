package loadgen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleResult() *Result {
	return &Result{
		Driver:          "kafka",
		Workload:        Workload{Name: "s1", TestDuration: Duration(time.Minute)},
		Host:            Host{Cores: 2, GoVersion: "go1.26", Kernel: "6.1", LoadAvgFrom: "0.1 0.2 0.3"},
		TargetRate:      50000,
		Publish:         Throughput{Messages: 3_000_000, MsgPerSec: 50000, MiBPerSec: 48.83},
		Consume:         Throughput{Messages: 3_000_000, MsgPerSec: 49990},
		PublishLatency:  LatencySummary{Count: 3_000_000, P50Ms: 3.2, P99Ms: 12.345, P999Ms: 40, MaxMs: 120},
		EndToEndLatency: LatencySummary{Count: 3_000_000, P50Ms: 4, P99Ms: 15, P999Ms: 45, MaxMs: 130},
		CPU: CPUCost{Servers: []ProcessCPU{{ServerProcess: ServerProcess{"kafka-1", 1}, CPUSeconds: 60}},
			ServerSeconds: 60, LoadGeneratorSeconds: 20},
		Cost:      Cost{MiBPerServerCore: 48.83, ServerCPUSecondsPerGiB: 20.97},
		Sustained: true,
	}
}

func TestWriteMarkdown(t *testing.T) {
	r := sampleResult()
	other := sampleResult()
	other.Label, other.Sustained, other.CPU.Servers = "kafka flush", false, nil
	other.EndToEndLatency = LatencySummary{}
	other.Notes = []string{"published 100 msg/s, below 95% of the target"}
	var b strings.Builder
	WriteMarkdown(&b, r, other)
	md := b.String()
	for _, want := range []string{
		"Machine: 2 cores, go1.26, Linux 6.1; load average 0.1 0.2 0.3",
		"| run | driver | workload | target msg/s | published msg/s | MiB/s |",
		"| kafka s1 | kafka | s1 | 50000 | 50000 | 48.8 | 49990 | 60.0 | 48.8 | 21.0 | 20.0 | yes |",
		// No server pids: cost columns say "-", not 0; not sustained is bold.
		"| kafka flush | kafka | s1 | 50000 | 50000 | 48.8 | 49990 | - | - | - | 20.0 | **no** |",
		"| kafka s1 | 3.20 | 12.3 | 40.0 | 120.0 | 4.00 | 15.0 | 45.0 | 130.0 |",
		"| kafka flush | 3.20 | 12.3 | 40.0 | 120.0 | - | - | - | - |",
		"Notes on kafka flush:\n- published 100 msg/s, below 95% of the target\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table row has as many cells as its header.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| kafka s1 | kafka") && strings.Count(line, "|") != 13 {
			t.Errorf("row has %d cells: %s", strings.Count(line, "|")-1, line)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteFiles(dir, sampleResult()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"testDuration": "1m0s"`) {
		t.Errorf("durations should be written as strings:\n%s", b)
	}
	var back []*Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 1 || back[0].PublishLatency.P99Ms != 12.345 || back[0].Workload.TestDuration.D() != time.Minute {
		t.Fatalf("round trip: %+v", back)
	}
	if md, err := os.ReadFile(filepath.Join(dir, "results.md")); err != nil || !strings.Contains(string(md), "| kafka s1 |") {
		t.Fatalf("results.md: %v\n%s", err, md)
	}
}
