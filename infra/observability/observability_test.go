package observability

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// prometheusOwn are series Prometheus makes itself, not Sluice.
var prometheusOwn = map[string]bool{"up": true}

// assetNames returns every metric family the dashboard and the rules use,
// with where each is used first.
func assetNames(t *testing.T) map[string]string {
	t.Helper()
	dash, err := DashboardExprs(DashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := RuleExprs(RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(dash) < 20 || len(rules) < 10 {
		t.Fatalf("%d dashboard queries and %d rules: the assets are not what this test was written for", len(dash), len(rules))
	}
	used := map[string]string{}
	for _, e := range append(dash, rules...) {
		names, err := MetricNames(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if _, ok := used[n]; !ok && !prometheusOwn[n] {
				used[Family(n)] = e.Where
			}
		}
	}
	return used
}

// catalogueRow matches a metric's row in docs/metrics.md: its name in
// backquotes first.
var catalogueRow = regexp.MustCompile("(?m)^\\| `([a-z_:][a-z0-9_:]*)`")

// catalogue returns the metric names docs/metrics.md describes.
func catalogue(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range catalogueRow.FindAllStringSubmatch(string(raw), -1) {
		names[m[1]] = true
	}
	if len(names) < 30 {
		t.Fatalf("docs/metrics.md lists %d metrics: its table is not what this test reads", len(names))
	}
	return names
}

// Every query of the dashboard and every rule parses with Prometheus's
// parser (the rules file as Prometheus loads it), and every metric they
// use is described in the metrics catalogue.
func TestAssetsParseAndUseCataloguedMetrics(t *testing.T) {
	cat := catalogue(t)
	for name, where := range assetNames(t) {
		if !cat[name] {
			t.Errorf("%s uses %s, which docs/metrics.md does not describe", where, name)
		}
	}
}

// The checks above can fail: a misspelt metric, a query that does not
// parse, and a rules file field Prometheus does not know are each caught.
func TestAssetChecksCatchMistakes(t *testing.T) {
	if _, err := MetricNames(Expr{Where: "x", Query: "sum(rate(sluice_ingest_records_total[5m]"}); err == nil {
		t.Error("an unbalanced query parsed")
	}
	names, err := MetricNames(Expr{Where: "x", Query: `histogram_quantile(0.99, sum by (le) (rate(sluice_ingest_produce_duration_seconds_bucket[5m]))) / on() group_left {__name__="sluice_fetch_sessions"}`})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "sluice_fetch_sessions,sluice_ingest_produce_duration_seconds_bucket" {
		t.Errorf("names = %v", names)
	}
	if Family("sluice_ingest_produce_duration_seconds_bucket") != "sluice_ingest_produce_duration_seconds" || Family("sluice_ingest_records_total") != "sluice_ingest_records_total" {
		t.Error("Family strips the wrong suffixes")
	}
	bad := t.TempDir() + "/rules.yml"
	if err := os.WriteFile(bad, []byte("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up == 0\n        for: 1m\n        severity: page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := RuleExprs(bad); err == nil {
		t.Error("a rule with an unknown field (severity outside labels) was accepted")
	}
	if cat := catalogue(t); cat["sluice_ingest_recrods_total"] {
		t.Error("the catalogue holds a misspelt name")
	}
}

// Every alert has a promtool unit test (the integration tier runs them).
func TestEveryAlertHasAUnitTest(t *testing.T) {
	rules, err := RuleExprs(RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(RuleTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		name := strings.TrimPrefix(r.Where, "rule ")
		if !strings.Contains(string(tests), "alertname: "+name+"\n") {
			t.Errorf("alert %s has no promtool unit test in %s", name, RuleTestsFile)
		}
	}
}
