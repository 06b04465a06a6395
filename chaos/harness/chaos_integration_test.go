//go:build integration

package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Every scenario against the real build: 0 anomalies each.
func TestIntegrationChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bin, err := Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := EnvFromEnviron(t, bin)
	var sums []Summary
	for _, sc := range Scenarios() {
		if !Selected(os.Getenv("CHAOS_SCENARIOS"), sc.Name) {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			s := RunScenario(ctx, t, env, sc)
			sums = append(sums, s)
			t.Logf("%s: %.0f s, %d produced (%d acked), %d consumed, %d faults, %d anomalies; report %s",
				sc.Name, s.Seconds, s.Produced, s.Acknowledged, s.Consumed, s.Faults, s.Anomalies, s.Report)
			if !s.OK() {
				if b, err := os.ReadFile(s.Report); err == nil {
					t.Logf("report:\n%s", b)
				}
				t.Errorf("%s: error %q, %d anomalies %v (history %s)", sc.Name, s.Error, s.Anomalies, s.ByKind, s.History)
			}
		})
	}
	dir := ResultsDir(env)
	if sc := ExactlyOnceCopy(); Selected(os.Getenv("CHAOS_SCENARIOS"), sc.Name) {
		t.Run(sc.Name, func(t *testing.T) { runCopyScenario(ctx, t, env, sc, dir) })
	}
	md, err := WriteSummaries(dir, sums, "chaos run: seed "+strconv.FormatInt(env.Seed, 10)+", scale "+strconv.FormatFloat(env.Scale, 'g', -1, 64))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary (%s):\n%s", filepath.Join(dir, "summary.md"), md)
}

// runCopyScenario runs the exactly-once copy and writes its summary as
// DIR/exactly-once-copy.json: every record of A in B exactly once, no
// aborted read, torn transaction, zombie write or order violation.
func runCopyScenario(ctx context.Context, t *testing.T, env Env, sc *CopyScenario, dir string) {
	s := RunCopy(ctx, t, env, sc)
	t.Logf("%s: %.0f s, %d source records, %d copied in %d transactions, %d faults %v, %d anomalies; report %s",
		sc.Name, s.Seconds, s.Source, s.Copied, s.Transactions, s.Faults, s.FaultsByKind, s.Anomalies, s.Report)
	if b, err := os.ReadFile(s.Report); err == nil {
		t.Logf("report:\n%s", b)
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if b, err := json.MarshalIndent(s, "", "  "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, sc.Name+".json"), append(b, '\n'), 0o644)
		}
	}
	if !s.OK() {
		t.Errorf("%s: error %q, %d anomalies %v", sc.Name, s.Error, s.Anomalies, s.ByKind)
	}
}
