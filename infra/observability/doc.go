// Package observability holds Sluice's monitoring assets and their checks:
//
//	grafana/sluice.json              the Grafana dashboard
//	prometheus/sluice-alerts.yml     alerting rules
//	prometheus/sluice-alerts_test.yml promtool unit tests of the rules
//	prometheus/prometheus.yml        a scrape configuration with the job names the rules expect
//
// The Go tests hold them against the code: every expression parses
// (Prometheus's own PromQL parser), every metric they use is in the
// metrics catalogue (docs/metrics.md) and — in the integration tier — is
// served by a running `sluice dev` driven through a workload; promtool,
// built from the Prometheus module (internal/tools/promtool), checks the
// rules and runs their unit tests.
package observability

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// Paths of the assets, relative to this directory.
const (
	DashboardFile = "grafana/sluice.json"
	RulesFile     = "prometheus/sluice-alerts.yml"
	RuleTestsFile = "prometheus/sluice-alerts_test.yml"
	ScrapeFile    = "prometheus/prometheus.yml"
)

// Expr is one PromQL expression of an asset, and where it is.
type Expr struct {
	Where string // "dashboard panel \"...\" A", "rule SluiceBookieDown"
	Query string
}

// grafanaVars are the dashboard's Grafana variables, replaced by values
// PromQL accepts before parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "${datasource}", "prometheus")

// DashboardExprs returns the expressions of every panel target of the
// dashboard file at path.
func DashboardExprs(path string) ([]Expr, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Expr
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, t := range p.Targets {
			out = append(out, Expr{Where: fmt.Sprintf("dashboard panel %q %s", p.Title, t.RefID), Query: grafanaVars.Replace(t.Expr)})
		}
	}
	return out, nil
}

// RuleExprs parses the rules file at path as Prometheus does (unknown
// fields refused, every expression and template checked) and returns the
// expressions of its rules.
func RuleExprs(path string) ([]Expr, error) {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %v", path, errs)
	}
	var out []Expr
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			out = append(out, Expr{Where: "rule " + name, Query: r.Expr})
		}
	}
	return out, nil
}

// MetricNames parses e and returns the metric names it selects.
func MetricNames(e Expr) ([]string, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(e.Query)
	if err != nil {
		return nil, fmt.Errorf("%s: %q: %w", e.Where, e.Query, err)
	}
	seen := map[string]bool{}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			if name == "" {
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel {
						name = m.Value
					}
				}
			}
			if name != "" {
				seen[name] = true
			}
		}
		return nil
	})
	if len(seen) == 0 {
		return nil, fmt.Errorf("%s: %q selects no metric by name", e.Where, e.Query)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// suffixes are the series a histogram or counter family exposes beyond
// its name in the catalogue.
var suffixRE = regexp.MustCompile(`_(bucket|count|sum)$`)

// Family is the catalogue name of a series name: a histogram's _bucket,
// _count and _sum series belong to the family without the suffix.
func Family(series string) string { return suffixRE.ReplaceAllString(series, "") }
