//go:build integration

package harness

import (
	"context"
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
	md, err := WriteSummaries(dir, sums, "chaos run: seed "+strconv.FormatInt(env.Seed, 10)+", scale "+strconv.FormatFloat(env.Scale, 'g', -1, 64))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary (%s):\n%s", filepath.Join(dir, "summary.md"), md)
}
