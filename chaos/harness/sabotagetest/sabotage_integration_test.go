//go:build integration

package sabotagetest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/chaos/harness"
)

// Each sabotage build disables one safety mechanism; the scenario that
// exercises it must then report anomalies. A checker that cannot fail
// proves nothing.
// sabotageAttempts bounds the runs of one sabotaged scenario. A run that
// finds nothing is retried, since a fault does not always meet the broken
// mechanism at work; the scenarios make the meeting near certain (the
// muted producer link of kill-bookies stores batches whose answers are
// lost every round), so a retry is rare and costs time only then.
const sabotageAttempts = 3

// copySabotages are the build tags that each break one mechanism of
// transactions; the exactly-once copy must catch every one: marker
// filtering (aborted batches shown), the last stable offset (open
// transactions shown), InitProducer's fence (the new session carries on
// the fenced one's open transaction, so its commit commits what the
// fenced session wrote), and the per-transaction epoch bump (markers of
// an unbumped epoch write nothing: transactions never end).
var copySabotages = []string{"sabotage_markers", "sabotage_lso", "sabotage_initfence", "sabotage_txnbump"}

func TestIntegrationChaosSabotage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	list := os.Getenv("CHAOS_SABOTAGE")
	if list == "none" {
		t.Skip("CHAOS_SABOTAGE=none")
	}
	var sums []harness.Summary
	var env harness.Env
	var results string // where the summary goes
	// CHAOS_SABOTAGE_PER_TAG=1 (the integration tier's smoke version):
	// each tag once, with its quickest scenario; else every pair.
	scale := harness.DefaultScale
	if f, err := strconv.ParseFloat(os.Getenv("CHAOS_SCALE"), 64); err == nil {
		scale = f
	}
	perTag := os.Getenv("CHAOS_SABOTAGE_PER_TAG") == "1"
	for _, sr := range harness.SabotageRuns(harness.Scenarios(), scale, perTag) {
		sc, tag := sr.Scenario, sr.Tag
		if !harness.Selected(list, tag) || !harness.Selected(os.Getenv("CHAOS_SCENARIOS"), sc.Name) {
			continue
		}
		// Named by scenario (two scenarios may break the same mechanism),
		// and by tag when the scenario has several.
		name := sc.Name
		if len(sc.Sabotages()) > 1 {
			name += "/" + tag
		}
		t.Run(name, func(t *testing.T) {
			bin, err := harness.Build(ctx, t.TempDir(), tag)
			if err != nil {
				t.Fatal(err)
			}
			env = harness.EnvFromEnviron(t, bin)
			results = harness.ResultsDir(env)
			// Beside, not over, the regular scenarios' histories.
			env.Out = filepath.Join(env.Out, "sabotage")
			run := *sc
			run.Sabotage = tag
			run.MinPhase = sc.SabotagePhase(env.Scale)
			// A fault does not always meet the broken mechanism at work
			// (an ingest kill with no retried batch in flight exercises no
			// dedup; the muted producer links of kill-bookies make retries
			// of stored batches certain): a clean run is run again, up to
			// sabotageAttempts, and every run is reported.
			var s harness.Summary
			for attempt := 1; attempt <= sabotageAttempts; attempt++ {
				s = harness.RunScenario(ctx, t, env, &run)
				s.Sabotage = tag
				sums = append(sums, s)
				t.Logf("%s under %s (attempt %d): %d anomalies %v (error %q); report %s", sc.Name, tag, attempt, s.Anomalies, s.ByKind, s.Error, s.Report)
				if s.Anomalies > 0 {
					break
				}
			}
			if s.Anomalies == 0 {
				t.Errorf("%s built with %s found no anomaly in %d runs: the scenario cannot detect the broken mechanism", sc.Name, tag, sabotageAttempts)
			}
		})
	}
	// The exactly-once copy, under each transaction mechanism broken.
	var copySums []harness.CopySummary
	for _, tag := range copySabotages {
		if !harness.Selected(list, tag) || !harness.Selected(os.Getenv("CHAOS_SCENARIOS"), harness.ExactlyOnceCopy().Name) {
			continue
		}
		t.Run(tag, func(t *testing.T) {
			bin, err := harness.Build(ctx, t.TempDir(), tag)
			if err != nil {
				t.Fatal(err)
			}
			env = harness.EnvFromEnviron(t, bin)
			results = harness.ResultsDir(env)
			env.Out = filepath.Join(env.Out, "sabotage")
			sc := harness.ExactlyOnceCopy()
			sc.Sabotage = tag
			var s harness.CopySummary
			for attempt := 1; attempt <= sabotageAttempts; attempt++ {
				s = harness.RunCopy(ctx, t, env, sc)
				copySums = append(copySums, s)
				t.Logf("%s under %s (attempt %d): %d anomalies %v (error %q); report %s", sc.Name, tag, attempt, s.Anomalies, s.ByKind, s.Error, s.Report)
				if s.Anomalies > 0 {
					break
				}
			}
			if s.Anomalies == 0 {
				t.Errorf("%s built with %s found no anomaly in %d runs: the scenario cannot detect the broken mechanism", sc.Name, tag, sabotageAttempts)
			}
		})
	}
	if len(copySums) > 0 && (os.Getenv("CHAOS_OUT") != "" || os.Getenv("CHAOS_RESULTS") != "") {
		if b, err := json.MarshalIndent(copySums, "", "  "); err == nil {
			_ = os.MkdirAll(filepath.Join(results, "sabotage"), 0o755)
			_ = os.WriteFile(filepath.Join(results, "sabotage", "exactly-once-copy.json"), append(b, '\n'), 0o644)
		}
	}
	if os.Getenv("CHAOS_OUT") != "" || os.Getenv("CHAOS_RESULTS") != "" { // else every dir was a subtest's temp dir
		md, err := harness.WriteSummaries(filepath.Join(results, "sabotage"), sums,
			"sabotage run: seed "+strconv.FormatInt(env.Seed, 10)+", scale "+strconv.FormatFloat(env.Scale, 'g', -1, 64)+
				" (each scenario built with the tag that disables the mechanism it exercises; anomalies > 0 is the expected result)")
		if err == nil {
			t.Logf("sabotage summary:\n%s", md)
		}
	}
}
