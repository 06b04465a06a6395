package tfcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// The compactor function's metrics: CloudWatch embedded metric format
// records it writes after each pass.
const compactorEMF = repoRoot + "/services/compactor/lambda/emf.go"

// TestCompactorAlarmsUseItsMetrics: an alarm on the compactor function's
// own metrics names the namespace, a metric and the dimension that
// services/compactor/lambda/emf.go writes; an alarm on a metric nobody
// writes never fires.
func TestCompactorAlarmsUseItsMetrics(t *testing.T) {
	namespace := goStringConst(t, compactorEMF, "EMFNamespace")
	metrics := emfMetricNames(t)
	m := loadModule(t, modulesDir+"/sluice-observability")
	n := 0
	for _, a := range m.find("resource", "aws_cloudwatch_metric_alarm") {
		if literal(t, a, "namespace").AsString() != namespace {
			continue
		}
		n++
		if name := literal(t, a, "metric_name").AsString(); !slices.Contains(metrics, name) {
			t.Errorf("alarm %s: metric %s/%s is not one the compactor function writes (%v)", a.Labels[1], namespace, name, metrics)
		}
		dims, ok := a.Body.Attributes["dimensions"]
		if !ok || m.source(dims.Expr) != "{ FunctionName = var.compactor_function_name }" {
			t.Errorf("alarm %s: the function's metrics have one dimension, FunctionName", a.Labels[1])
		}
	}
	if n == 0 {
		t.Fatalf("no alarm on namespace %s in sluice-observability", namespace)
	}
}

// emfMetricNames returns the metric names of emf.go's emfMetrics table.
func emfMetricNames(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), compactorEMF, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "emfMetrics" || len(vs.Values) != 1 {
			return true
		}
		for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
			entry, ok := e.(*ast.CompositeLit)
			if !ok || len(entry.Elts) == 0 {
				continue
			}
			if lit, ok := entry.Elts[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					names = append(names, s)
				}
			}
		}
		return false
	})
	if len(names) < 3 {
		t.Fatalf("%s: found only %v in emfMetrics: has its shape changed?", compactorEMF, names)
	}
	return names
}

// The repository's Prometheus alerting rules, which envs/aws can load into
// the Prometheus workspace (alert_rules_file).
const (
	alertRulesFromEnv = "../../../observability/prometheus/sluice-alerts.yml" // as envs/aws names it
	alertRules        = envsDir + "/aws/" + alertRulesFromEnv
)

// TestScrapeJobsMatchAlertRules: every scrape job the repository's alerting
// rules select (job="...") is one the workspace's scrape configuration
// defines: sluice-<service> for each service of sluice-services, and
// sluice-bookie. A rule on a job nobody scrapes never fires.
func TestScrapeJobsMatchAlertRules(t *testing.T) {
	src, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatalf("the alerting rules envs/aws points at (%s): %v", alertRulesFromEnv, err)
	}
	obs := loadModule(t, modulesDir+"/sluice-observability")
	var text strings.Builder
	for _, f := range obs.files {
		text.Write(f.Bytes)
	}
	jobs := map[string]bool{}
	if strings.Contains(text.String(), `job_name = "sluice-bookie"`) {
		jobs["sluice-bookie"] = true
	}
	if strings.Contains(text.String(), `job_name = "sluice-${svc}"`) {
		services := loadModule(t, modulesDir+"/sluice-services")
		obj, ok := localExpr(t, services, "services").(*hclsyntax.ObjectConsExpr)
		if !ok {
			t.Fatal("sluice-services: local.services is not an object")
		}
		for _, item := range obj.Items {
			jobs["sluice-"+services.source(item.KeyExpr)] = true
		}
	}
	if len(jobs) < 3 {
		t.Fatalf("the scrape configuration's jobs: %v; has its shape changed?", jobs)
	}
	used := regexp.MustCompile(`job\s*=~?\s*"([^"]+)"`).FindAllStringSubmatch(string(src), -1)
	for _, m := range used {
		if !jobs[m[1]] {
			t.Errorf("%s selects job %q, which the workspace's scrape configuration does not define (%v)", relPath(alertRules), m[1], jobs)
		}
	}
}
