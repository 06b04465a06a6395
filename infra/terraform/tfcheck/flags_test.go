package tfcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestFlagsExist: every flag the modules pass to `sluice ingest`, `fetch`
// and `bookie` is one that command takes, as its --help lists them (the
// binary is built from this tree).
func TestFlagsExist(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}

	services := loadModule(t, modulesDir+"/sluice-services")
	task := services.one(t, "resource", "aws_ecs_task_definition", "this")
	taskFlags := flagsIn(services, task.Body.Attributes["container_definitions"].Expr) // --advertise
	bookies := loadModule(t, modulesDir+"/sluice-bookies")
	userData, err := os.ReadFile(modulesDir + "/sluice-bookies/bookie-user-data.sh.tftpl")
	if err != nil {
		t.Fatal(err)
	}

	for cmd, flags := range map[string][]string{
		"ingest": append(flagsIn(services, localExpr(t, services, "ingest_args")), taskFlags...),
		"fetch":  append(flagsIn(services, localExpr(t, services, "fetch_args")), taskFlags...),
		"bookie": append(flagsIn(bookies, localExpr(t, bookies, "bookie_args")), flagRE.FindAllString(execStart(t, string(userData)), -1)...),
	} {
		help, err := exec.Command(bin, cmd, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("sluice %s --help: %v\n%s", cmd, err, help)
		}
		var takes []string
		for _, m := range helpFlagRE.FindAllStringSubmatch(string(help), -1) {
			takes = append(takes, m[1])
		}
		if len(takes) < 5 {
			t.Fatalf("sluice %s --help lists only %v: has its format changed?", cmd, takes)
		}
		if len(flags) < 3 {
			t.Fatalf("found only %v passed to sluice %s: has the module changed shape?", flags, cmd)
		}
		for _, f := range flags {
			if !slices.Contains(takes, f) {
				t.Errorf("the Terraform passes %s to sluice %s, which does not take it", f, cmd)
			}
		}
	}
}

var (
	flagRE     = regexp.MustCompile(`--[a-z][a-z0-9-]+`)
	helpFlagRE = regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]+)`)
)

// execStart returns the ExecStart line of the bookie's systemd unit in the
// user data.
func execStart(t *testing.T, userData string) string {
	t.Helper()
	for line := range strings.Lines(userData) {
		if strings.HasPrefix(line, "ExecStart=") {
			return line
		}
	}
	t.Fatal("the bookie user data has no ExecStart= line")
	return ""
}

// localExpr returns the expression of local.name in m.
func localExpr(t *testing.T, m *module, name string) hclsyntax.Expression {
	t.Helper()
	for _, b := range m.find("locals") {
		if a, ok := b.Body.Attributes[name]; ok {
			return a.Expr
		}
	}
	t.Fatalf("%s: no local.%s", relPath(m.dir), name)
	return nil
}

// flagsIn returns the flags (string literals starting with --) in e and in
// the locals it refers to, recursively.
func flagsIn(m *module, e hclsyntax.Expression) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(hclsyntax.Expression)
	walk = func(e hclsyntax.Expression) {
		hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
			switch n := n.(type) {
			case *hclsyntax.LiteralValueExpr:
				if v := n.Val; v.Type().FriendlyName() == "string" && strings.HasPrefix(v.AsString(), "--") {
					out = append(out, v.AsString())
				}
			case *hclsyntax.TemplateExpr:
				if v, diags := n.Value(nil); !diags.HasErrors() && v.Type().FriendlyName() == "string" && strings.HasPrefix(v.AsString(), "--") {
					out = append(out, v.AsString())
				}
			case *hclsyntax.ScopeTraversalExpr:
				if n.Traversal.RootName() != "local" || len(n.Traversal) < 2 {
					return nil
				}
				if a, ok := n.Traversal[1].(hcl.TraverseAttr); ok && !seen[a.Name] {
					seen[a.Name] = true
					for _, b := range m.find("locals") {
						if attr, ok := b.Body.Attributes[a.Name]; ok {
							walk(attr.Expr)
						}
					}
				}
			}
			return nil
		})
	}
	walk(e)
	return out
}

// TestEnvironmentExists: every SLUICE_* environment variable the modules set
// is one the code reads: the compactor function's settings
// (services/compactor/env.go) and the Cassandra password
// (cmd/sluice/cassandra.go).
func TestEnvironmentExists(t *testing.T) {
	var files []string
	for _, dir := range []string{repoRoot + "/services/compactor", repoRoot + "/cmd/sluice"} {
		fs, _ := filepath.Glob(dir + "/*.go")
		files = append(files, slices.DeleteFunc(fs, func(f string) bool { return strings.HasSuffix(f, "_test.go") })...)
	}
	known := map[string]bool{}
	for _, v := range goStringConsts(t, files) {
		if strings.HasPrefix(v, "SLUICE_") {
			known[v] = true
		}
	}
	if !known["SLUICE_CATALOG_TABLE"] || !known["SLUICE_CASSANDRA_PASSWORD"] {
		t.Fatalf("the code's environment variables were not found (%v): has the scan gone blind?", known)
	}
	envRE := regexp.MustCompile(`\bSLUICE_[A-Z0-9_]+\b`)
	n := 0
	for _, dir := range moduleDirs(t, modulesDir) {
		m := loadModule(t, dir)
		for _, b := range m.blocks {
			// Names in expressions (map keys, "name" values), not in descriptions.
			eachAttr(b.Body, func(a *hclsyntax.Attribute) {
				if a.Name == "description" {
					return
				}
				hclsyntax.VisitAll(a.Expr, func(node hclsyntax.Node) hcl.Diagnostics {
					var s string
					switch node := node.(type) {
					case *hclsyntax.LiteralValueExpr:
						if node.Val.Type().FriendlyName() == "string" {
							s = node.Val.AsString()
						}
					case *hclsyntax.ObjectConsKeyExpr:
						s = m.source(node)
					default:
						return nil
					}
					for _, name := range envRE.FindAllString(s, -1) {
						n++
						if !known[name] {
							t.Errorf("%s: %s sets %s, which no code reads", relPath(dir), a.SrcRange, name)
						}
					}
					return nil
				})
			})
		}
	}
	if n < 3 {
		t.Fatalf("found only %d environment variables in the modules: has the scan gone blind?", n)
	}
}

// eachAttr calls f for every attribute of body and its nested blocks.
func eachAttr(body *hclsyntax.Body, f func(*hclsyntax.Attribute)) {
	for _, a := range body.Attributes {
		f(a)
	}
	for _, b := range body.Blocks {
		eachAttr(b.Body, f)
	}
}
