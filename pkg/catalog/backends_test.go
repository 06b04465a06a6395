package catalog_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// TestBackendsHandOutOnlyTheCatalog reads the source of every backend
// package (each directory below this one but catalogtest) and lists its
// exported functions that return a catalog: each must return
// *catalog.Catalog. The driver behind it must not be reachable otherwise:
// no exported type has a driver method or embeds or aliases an unexported
// type, and no exported function returns an unexported type. So the only
// way to a backend's storage is through Catalog's checks.
func TestBackendsHandOutOnlyTheCatalog(t *testing.T) {
	driverMethods := map[string]bool{}
	for m := range reflect.TypeFor[catalog.Driver]().Methods() {
		driverMethods[m.Name] = true
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	constructors := map[string]string{} // "embedded.Open" → its results
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "catalogtest" {
			continue
		}
		funcs, leaks := exportedDecls(t, e.Name())
		for _, l := range leaks {
			t.Errorf("%s: exported type %s embeds or aliases an unexported type, whose methods callers could reach", l.pos, l.name)
		}
		for _, fn := range funcs {
			switch {
			case fn.recv != "" && driverMethods[fn.name]:
				t.Errorf("%s: exported type %s has the driver method %s, so callers could reach storage without the checks; unexport the driver",
					fn.pos, fn.recv, fn.name)
			case fn.recv == "" && fn.unexportedResult:
				t.Errorf("%s: %s returns an unexported type (%s); return the *catalog.Catalog", fn.pos, fn.name, fn.results)
			case fn.recv == "" && strings.Contains(fn.results, "catalog.Catalog"):
				constructors[e.Name()+"."+fn.name] = fn.results
			}
		}
	}
	want := map[string]string{
		"embedded.Open": "*catalog.Catalog, error",
		"dynamodb.New":  "*catalog.Catalog, error",
	}
	if !maps.Equal(constructors, want) {
		t.Errorf("the backends' constructors return\n%v\nwant\n%v", constructors, want)
	}
}

// exportedFunc is an exported function or method of a package's source.
type exportedFunc struct {
	pos              token.Position
	recv             string // the receiver's type name; "" for a function
	name             string
	results          string // e.g. "*catalog.Catalog, error"
	unexportedResult bool   // a result names a type the package does not export
}

// exportedType is an exported type declaration.
type exportedType struct {
	pos  token.Position
	name string
}

// exportedDecls parses the non-test Go files of dir (all build tags) and
// returns its exported functions and the exported methods of its exported
// types, and its exported types that embed or alias an unexported type.
func exportedDecls(t *testing.T, dir string) ([]exportedFunc, []exportedType) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []exportedFunc
	var leaks []exportedType
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, sp := range gd.Specs {
					if ts := sp.(*ast.TypeSpec); ts.Name.IsExported() && leaksUnexported(ts) {
						leaks = append(leaks, exportedType{fset.Position(ts.Pos()), ts.Name.Name})
					}
				}
			}
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			fn := exportedFunc{pos: fset.Position(fd.Pos()), name: fd.Name.Name}
			if fd.Recv != nil {
				fn.recv = receiverName(fd.Recv.List[0].Type)
				if !ast.IsExported(fn.recv) {
					continue
				}
			}
			var results []string
			if fd.Type.Results != nil {
				for _, r := range fd.Type.Results.List {
					results = append(results, types.ExprString(r.Type))
					fn.unexportedResult = fn.unexportedResult || namesUnexportedType(r.Type)
				}
			}
			fn.results = strings.Join(results, ", ")
			out = append(out, fn)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no exported functions; is it a package?", dir)
	}
	return out, leaks
}

// leaksUnexported reports whether ts is an alias of an unexported type or a
// struct embedding one: either gives callers that type's methods.
func leaksUnexported(ts *ast.TypeSpec) bool {
	if ts.Assign.IsValid() {
		return namesUnexportedType(ts.Type)
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return false
	}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 && namesUnexportedType(f.Type) {
			return true
		}
	}
	return false
}

func receiverName(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			return types.ExprString(x)
		}
	}
}

// namesUnexportedType reports whether x names a type of its own package
// that is not exported (a qualified name is another package's; predeclared
// types such as error are no package's).
func namesUnexportedType(x ast.Expr) bool {
	found := false
	ast.Inspect(x, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.SelectorExpr:
			return false // pkg.Type
		case *ast.Ident:
			if !e.IsExported() && types.Universe.Lookup(e.Name) == nil {
				found = true
			}
		}
		return true
	})
	return found
}
