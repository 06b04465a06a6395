// Package layers holds the test that keeps Sluice's imports pointing down
// the layers (docs/DESIGN.md, "Layers"): the ledger tier knows nothing of
// the services, the ledger client nothing of the bookie's storage, a
// service nothing of another service, the public packages nothing of
// internal/, and the test-support tree harness/ (process and stack
// harnesses, the load generator, the benchmarks) is imported only by
// tests, cmd/, bench/, chaos/ and harness/ itself — never by pkg/,
// services/, bookkeeper/ or internal/. It lists every package's imports
// with `go list` and fails on an arrow that runs the wrong way, naming it.
//
// `go list` reports a package's non-test imports, so _test.go files (and
// the test-only processtest packages) may import anything.
package layers

import (
	"bufio"
	"bytes"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluicemq/sluice/"

// rule forbids packages under from importing packages under to, except
// the listed exceptions (each with its reason).
type rule struct {
	from, to string
	why      string
	except   func(from, to string) bool
}

// services are the service trees: none imports another.
var services = []string{"services/admin", "services/compactor", "services/fetch", "services/ingest", "services/registry"}

// harnesses is the test-support tree: what starts processes, stacks and
// functions for tests, the load generator and the benchmarks.
const harnesses = "harness/"

// mayUseHarnesses are the trees whose non-test code may import harness/:
// cmd/ (`sluice bench` runs the load generator and the ledger benchmark),
// bench/, chaos/ and the tree itself. internal/ is not one; its leaves are
// below the harnesses.
var mayUseHarnesses = []string{"cmd/", "bench/", "chaos/", harnesses}

func rules() []rule {
	rs := []rule{
		{from: "bookkeeper/", to: "services/", why: "the ledger tier is below the services"},
		{from: "bookkeeper/", to: "pkg/sluice", why: "the ledger tier is below the SDK"},
		{from: "bookkeeper/client", to: "bookkeeper/storage", why: "the client agrees with bookies through bookkeeper/wire and the protocol, not their storage"},
		{from: "bookkeeper/client", to: "bookkeeper/journal", why: "the client agrees with bookies through bookkeeper/wire and the protocol, not their journal"},
		{from: "bookkeeper/client", to: "bookkeeper/bookie", why: "the client talks to bookies over the protocol"},
		{from: "pkg/", to: "internal/", why: "public packages cannot rest on internal ones"},
		{from: "pkg/", to: "services/", why: "public packages are below the services"},
		{from: "internal/", to: "services/", why: "internal leaves are below the services",
			except: func(from, _ string) bool {
				// The in-process cluster composes the services for sluice
				// dev and end-to-end tests: it is above them.
				return strings.HasPrefix(from, "internal/cluster")
			}},
		{from: "internal/", to: harnesses, why: "internal leaves are below the test harnesses"},
		{from: "", to: harnesses, why: "the test harnesses are for tests, cmd/, bench/ and chaos/",
			except: func(from, _ string) bool {
				// internal/ has its own rule, with its own reason.
				for _, ok := range append([]string{"internal/"}, mayUseHarnesses...) {
					if under(from, ok) {
						return true
					}
				}
				return false
			}},
	}
	for _, s := range services {
		for _, o := range services {
			if s != o {
				rs = append(rs, rule{from: s, to: o, why: "a service does not import another service; share code through a package below both"})
			}
		}
	}
	return rs
}

func under(pkg, tree string) bool {
	return tree == "" || pkg == strings.TrimSuffix(tree, "/") || strings.HasPrefix(pkg, strings.TrimSuffix(tree, "/")+"/")
}

// imports lists every package of the module with its non-test imports
// inside the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(f[0], module)
		m[pkg] = nil
		for _, i := range f[1:] {
			if strings.HasPrefix(i, module) {
				m[pkg] = append(m[pkg], strings.TrimPrefix(i, module))
			}
		}
	}
	if len(m) < 50 {
		t.Fatalf("go list found %d packages; expected the whole module", len(m))
	}
	return m
}

func TestImportsRunDownTheLayers(t *testing.T) {
	m := imports(t)
	// The harness rules must guard a tree that exists: were harness/
	// renamed, they would hold for nothing.
	if !slices.ContainsFunc(slices.Collect(maps.Keys(m)), func(pkg string) bool { return under(pkg, harnesses) }) {
		t.Errorf("go list found no package under %s: the harness rules guard nothing", harnesses)
	}
	for pkg, imps := range m {
		for _, imp := range imps {
			for _, r := range rules() {
				if under(pkg, r.from) && under(imp, r.to) && (r.except == nil || !r.except(pkg, imp)) {
					t.Errorf("%s imports %s: %s", pkg, imp, r.why)
				}
			}
		}
	}
}

// The rules catch what they are for: a made-up import of each kind fails.
func TestRulesCatchWrongArrows(t *testing.T) {
	for _, c := range [][2]string{
		{"bookkeeper/client", "bookkeeper/storage"},
		{"bookkeeper/storage", "services/ingest"},
		{"services/fetch", "services/ingest/quota"},
		{"pkg/catalog/embedded", "internal/pebblelog"},
		{"services/ingest", "harness/testenv"},
		{"services/ingest", "harness/loadgen"},
		{"services/fetch", "harness/lambdatest"},
		{"bookkeeper/client", "harness/ledgerbench"},
		{"pkg/sluice", "harness/loadgen/sluicedriver"},
		{"pkg/catalog/embedded", "harness/benchclients"},
		{"internal/quota", "harness/testenv"},
		{"internal/cluster", "harness/bookieproc"},
		{"internal/lambdapool", "harness/lambdatest"},
	} {
		caught := false
		for _, r := range rules() {
			if under(c[0], r.from) && under(c[1], r.to) && (r.except == nil || !r.except(c[0], c[1])) {
				caught = true
			}
		}
		if !caught {
			t.Errorf("%s importing %s is not caught", c[0], c[1])
		}
	}
}
