package tfcheck

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// TestEveryFileParses parses every .tf and .tfvars file under
// infra/terraform and checks it is laid out as terraform fmt lays it out.
func TestEveryFileParses(t *testing.T) {
	p := hclparse.NewParser()
	n := 0
	err := filepath.WalkDir(terraformDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".terraform" || d.Name() == "tfcheck") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); ext == ".tf" || ext == ".tfvars" {
			n++
			if _, diags := p.ParseHCLFile(path); diags.HasErrors() {
				t.Errorf("%s", diags.Error())
				return nil
			}
			// terraform fmt's layout is hclwrite's: a file it would
			// change is not formatted (and this holds without the
			// terraform binary).
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !bytes.Equal(hclwrite.Format(src), src) {
				t.Errorf("%s is not formatted: run terraform fmt -recursive infra/terraform", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("parsed only %d files: is %s the Terraform tree?", n, terraformDir)
	}
}

// TestTemplates parses every templatefile() template and checks that it uses
// exactly the variables the call passes: a template variable not passed
// fails at plan time, a passed one not used is a leftover.
func TestTemplates(t *testing.T) {
	calls := 0
	for _, dir := range moduleDirs(t, modulesDir) {
		m := loadModule(t, dir)
		for _, f := range m.files {
			hclsyntax.VisitAll(f.Body.(*hclsyntax.Body), func(n hclsyntax.Node) hcl.Diagnostics {
				call, ok := n.(*hclsyntax.FunctionCallExpr)
				if !ok || call.Name != "templatefile" {
					return nil
				}
				calls++
				checkTemplateCall(t, m, call)
				return nil
			})
		}
	}
	if calls == 0 {
		t.Fatal("no templatefile() call found (the bookies' user data is one)")
	}
}

func checkTemplateCall(t *testing.T, m *module, call *hclsyntax.FunctionCallExpr) {
	t.Helper()
	if len(call.Args) != 2 {
		t.Errorf("%s: templatefile takes 2 arguments", call.Range())
		return
	}
	// The path is "${path.module}/NAME".
	path := strings.Trim(m.source(call.Args[0]), `"`)
	name, ok := strings.CutPrefix(path, "${path.module}/")
	if !ok {
		t.Errorf("%s: template path %s is not under ${path.module}", call.Range(), path)
		return
	}
	src, err := os.ReadFile(filepath.Join(m.dir, name))
	if err != nil {
		t.Errorf("%s: %v", call.Range(), err)
		return
	}
	tmpl, diags := hclsyntax.ParseTemplate(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		t.Errorf("%s: %s", name, diags.Error())
		return
	}
	used := map[string]bool{}
	for _, tr := range tmpl.Variables() {
		used[tr.RootName()] = true
	}
	obj, ok := call.Args[1].(*hclsyntax.ObjectConsExpr)
	if !ok {
		t.Errorf("%s: the template variables must be an object literal", call.Args[1].Range())
		return
	}
	passed := map[string]bool{}
	for _, item := range obj.Items {
		k, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() {
			t.Errorf("%s: %s", item.KeyExpr.Range(), diags.Error())
			continue
		}
		passed[k.AsString()] = true
	}
	for v := range used {
		if !passed[v] {
			t.Errorf("%s/%s uses ${%s}, which the templatefile call at %s does not pass", relPath(m.dir), name, v, call.Range())
		}
	}
	for v := range passed {
		if !used[v] {
			t.Errorf("the templatefile call at %s passes %s, which %s/%s does not use", call.Range(), v, relPath(m.dir), name)
		}
	}
}

// TestVariablesAndOutputs: in every module and environment, every variable
// and output has a description, and every variable is used.
func TestVariablesAndOutputs(t *testing.T) {
	dirs := append(moduleDirs(t, modulesDir), moduleDirs(t, envsDir)...)
	for _, dir := range dirs {
		m := loadModule(t, dir)
		used := map[string]bool{}
		for _, b := range m.blocks {
			for name := range varRefs(b.Body) {
				used[name] = true
			}
		}
		for _, v := range m.find("variable") {
			name := v.Labels[0]
			if d, ok := v.Body.Attributes["description"]; !ok || strings.TrimSpace(m.source(d.Expr)) == `""` {
				t.Errorf("%s: variable %q has no description", relPath(dir), name)
			}
			if !used[name] {
				t.Errorf("%s: variable %q is never used", relPath(dir), name)
			}
		}
		for _, o := range m.find("output") {
			if _, ok := o.Body.Attributes["description"]; !ok {
				t.Errorf("%s: output %q has no description", relPath(dir), o.Labels[0])
			}
		}
	}
}

// moduleMeta are the arguments of a module block that are not its variables.
var moduleMeta = []string{"source", "version", "providers", "depends_on", "count", "for_each"}

// TestModuleCalls: every argument a module call passes is a variable of the
// module, every variable without a default is passed, and every output a
// caller reads exists.
func TestModuleCalls(t *testing.T) {
	dirs := append(moduleDirs(t, modulesDir), moduleDirs(t, envsDir)...)
	calls := 0
	for _, dir := range dirs {
		m := loadModule(t, dir)
		for _, call := range m.find("module") {
			calls++
			name := call.Labels[0]
			src := literal(t, call, "source").AsString()
			target := filepath.Join(dir, src)
			callee := loadModule(t, target)
			vars := map[string]*hclsyntax.Block{}
			for _, v := range callee.find("variable") {
				vars[v.Labels[0]] = v
			}
			for arg := range call.Body.Attributes {
				if slices.Contains(moduleMeta, arg) {
					continue
				}
				if vars[arg] == nil {
					t.Errorf("%s: module %q passes %s, which %s has no variable for", relPath(dir), name, arg, relPath(target))
				}
			}
			for v, b := range vars {
				if _, hasDefault := b.Body.Attributes["default"]; !hasDefault {
					if _, passed := call.Body.Attributes[v]; !passed {
						t.Errorf("%s: module %q does not pass %s, which %s requires (no default)", relPath(dir), name, v, relPath(target))
					}
				}
			}
			outputs := map[string]bool{}
			for _, o := range callee.find("output") {
				outputs[o.Labels[0]] = true
			}
			for _, out := range moduleOutputRefs(m, name) {
				if !outputs[out] {
					t.Errorf("%s: module.%s.%s: %s has no such output", relPath(dir), name, out, relPath(target))
				}
			}
		}
	}
	if calls == 0 {
		t.Fatal("no module calls found in the environments")
	}
}

// moduleOutputRefs returns the outputs of module name that m reads
// (module.NAME.OUTPUT).
func moduleOutputRefs(m *module, name string) []string {
	var out []string
	for _, f := range m.files {
		hclsyntax.VisitAll(f.Body.(*hclsyntax.Body), func(n hclsyntax.Node) hcl.Diagnostics {
			e, ok := n.(*hclsyntax.ScopeTraversalExpr)
			if !ok || e.Traversal.RootName() != "module" || len(e.Traversal) < 3 {
				return nil
			}
			if a, ok := e.Traversal[1].(hcl.TraverseAttr); ok && a.Name == name {
				if o, ok := e.Traversal[2].(hcl.TraverseAttr); ok {
					out = append(out, o.Name)
				}
			}
			return nil
		})
	}
	return out
}

// TestExampleVariables: envs/aws/example.tfvars sets only variables of
// envs/aws, and every one it requires.
func TestExampleVariables(t *testing.T) {
	const env = envsDir + "/aws"
	f, diags := hclparse.NewParser().ParseHCLFile(env + "/example.tfvars")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	set := f.Body.(*hclsyntax.Body).Attributes
	m := loadModule(t, env)
	vars := map[string]bool{}
	for _, v := range m.find("variable") {
		vars[v.Labels[0]] = true
		if _, hasDefault := v.Body.Attributes["default"]; !hasDefault {
			if _, ok := set[v.Labels[0]]; !ok {
				t.Errorf("example.tfvars does not set %s, which envs/aws requires", v.Labels[0])
			}
		}
	}
	for name := range set {
		if !vars[name] {
			t.Errorf("example.tfvars sets %s, which is not a variable of envs/aws", name)
		}
	}
}
