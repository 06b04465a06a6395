package tfcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
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
