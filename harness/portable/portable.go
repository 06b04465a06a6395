// Package portable checks, from source, that a contract's backends hand
// out only its portable type (catalog.Catalog, bookkeeping.Store): the
// driver behind it — the storage without the portable type's argument
// checks — must not be reachable from outside the backend. Test support:
// only tests import it.
package portable

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
)

// Contract describes one contract's backends.
type Contract struct {
	// Dir holds the backend packages, one directory each.
	Dir string
	// Skip is a directory under Dir that is not a backend (the
	// conformance suite).
	Skip string
	// Driver is the driver interface; its methods must not be exported
	// by a backend.
	Driver reflect.Type
	// Portable is the portable type as the backends name it, e.g.
	// "catalog.Catalog".
	Portable string
	// Constructors are every exported function that returns the portable
	// type, with its results, e.g. "embedded.Open": "*catalog.Catalog, error".
	Constructors map[string]string
}

// CheckBackends reads the source of every backend package of c and lists
// its exported functions that return the portable type: they must be
// exactly c.Constructors. The driver must not be reachable otherwise: no
// exported type has a driver method or embeds or aliases an unexported
// type, and no exported function returns an unexported type.
func CheckBackends(t *testing.T, c Contract) {
	t.Helper()
	driverMethods := map[string]bool{}
	for m := range c.Driver.Methods() {
		driverMethods[m.Name] = true
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	constructors := map[string]string{} // "embedded.Open" → its results
	for _, e := range entries {
		if !e.IsDir() || e.Name() == c.Skip {
			continue
		}
		funcs, leaks := exportedDecls(t, filepath.Join(c.Dir, e.Name()))
		for _, l := range leaks {
			t.Errorf("%s: exported type %s embeds or aliases an unexported type, whose methods callers could reach", l.pos, l.name)
		}
		for _, fn := range funcs {
			switch {
			case fn.recv != "" && driverMethods[fn.name]:
				t.Errorf("%s: exported type %s has the driver method %s, so callers could reach storage without the checks; unexport the driver",
					fn.pos, fn.recv, fn.name)
			case fn.recv == "" && fn.unexportedResult:
				t.Errorf("%s: %s returns an unexported type (%s); return the *%s", fn.pos, fn.name, fn.results, c.Portable)
			case fn.recv == "" && strings.Contains(fn.results, c.Portable):
				constructors[e.Name()+"."+fn.name] = fn.results
			}
		}
	}
	if !maps.Equal(constructors, c.Constructors) {
		t.Errorf("the backends' constructors return\n%v\nwant\n%v", constructors, c.Constructors)
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
