package tfcheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Paths from this package's directory.
const (
	repoRoot     = "../../.."
	terraformDir = ".."
	modulesDir   = "../modules"
	envsDir      = "../envs"
)

// module is the parsed .tf files of one Terraform directory.
type module struct {
	dir   string
	files map[string]*hcl.File // by path
	// blocks of every file, in file then source order
	blocks []*hclsyntax.Block
}

// loadModule parses every .tf file of dir, failing the test on any error.
func loadModule(t *testing.T, dir string) *module {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("%s: no .tf files (%v)", dir, err)
	}
	slices.Sort(paths)
	p := hclparse.NewParser()
	m := &module{dir: dir, files: map[string]*hcl.File{}}
	for _, path := range paths {
		f, diags := p.ParseHCLFile(path)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", path, diags.Error())
		}
		m.files[path] = f
		m.blocks = append(m.blocks, f.Body.(*hclsyntax.Body).Blocks...)
	}
	return m
}

// moduleDirs lists the directories under dir (modules or envs).
func moduleDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(dir, e.Name()))
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no directories under %s", dir)
	}
	return dirs
}

// find returns the top-level blocks of type typ whose labels start with labels.
func (m *module) find(typ string, labels ...string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range m.blocks {
		if b.Type == typ && len(b.Labels) >= len(labels) && slices.Equal(b.Labels[:len(labels)], labels) {
			out = append(out, b)
		}
	}
	return out
}

// one returns the single top-level block typ with exactly labels.
func (m *module) one(t *testing.T, typ string, labels ...string) *hclsyntax.Block {
	t.Helper()
	bs := m.find(typ, labels...)
	if len(bs) != 1 {
		t.Fatalf("%s: want one %s %q, found %d", m.dir, typ, labels, len(bs))
	}
	return bs[0]
}

// nested returns the blocks of type typ directly inside b.
func nested(b *hclsyntax.Block, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, c := range b.Body.Blocks {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// literal evaluates attribute name of b without any variables: it must be a
// literal (a string, a list, an object of literals).
func literal(t *testing.T, b *hclsyntax.Block, name string) cty.Value {
	t.Helper()
	a, ok := b.Body.Attributes[name]
	if !ok {
		t.Fatalf("%s %q at %s: no attribute %s", b.Type, b.Labels, b.DefRange(), name)
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("%s: %s must be a literal: %s", a.SrcRange, name, diags.Error())
	}
	return v
}

// strings returns the list or set of strings v.
func stringList(t *testing.T, v cty.Value) []string {
	t.Helper()
	if v.IsNull() {
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.Type() != cty.String {
			t.Fatalf("want a list of strings, found an element of type %s", e.Type().FriendlyName())
		}
		out = append(out, e.AsString())
	}
	return out
}

// source returns the text of expression e as written.
func (m *module) source(e hclsyntax.Expression) string {
	r := e.Range()
	f := m.files[r.Filename]
	if f == nil {
		return ""
	}
	return string(r.SliceBytes(f.Bytes))
}

// varRefs returns the names of the input variables (var.NAME) referenced in
// body, recursively (nested and dynamic blocks included).
func varRefs(body *hclsyntax.Body) map[string]bool {
	refs := map[string]bool{}
	var walk func(*hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, a := range b.Attributes {
			for _, tr := range a.Expr.Variables() {
				if tr.RootName() != "var" || len(tr) < 2 {
					continue
				}
				if attr, ok := tr[1].(hcl.TraverseAttr); ok {
					refs[attr.Name] = true
				}
			}
		}
		for _, c := range b.Blocks {
			walk(c.Body)
		}
	}
	walk(body)
	return refs
}

// relPath shortens a path under this package for messages.
func relPath(p string) string {
	return strings.TrimPrefix(filepath.ToSlash(p), "../")
}
