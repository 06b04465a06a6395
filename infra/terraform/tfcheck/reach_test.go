package tfcheck

import (
	"go/ast"
	"go/types"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

// refinedPkgs are the packages whose AWS calls are counted per function, by
// whether a role's code reaches the function, rather than per package: the
// catalog, which every process opens but each uses a different part of (a
// bookie registers and reads ledgers; it never creates topics). Elsewhere a
// package's calls are all its importers'.
var refinedPkgs = []string{modulePath + "/pkg/catalog", modulePath + "/pkg/catalog/dynamodb"}

// A refGraph is the references between the functions of refinedPkgs, the
// references into them from everywhere else, and the calls each makes.
//
// A node is "pkg/catalog/dynamodb.(*store).get"; a package's variable
// initializers are its "<package scope>" node, reached whenever the package
// is. A reference to an interface method X (the roles' code holds the
// catalog as catalog.Ledgers and the like, and *catalog.Catalog holds its
// backend as a catalog.Driver) reaches every method named X of the refined
// packages: what the call may dispatch to. Any use counts, not only calls,
// so method values and function values are followed too.
type refGraph struct {
	methods map[string][]string            // method name -> nodes of methods so named
	refs    map[string]map[string]bool     // node -> nodes it references
	calls   map[string]map[string][]string // node -> call -> where
	// entries are the references from outside refinedPkgs: by package path,
	// and by cmd/sluice file name.
	entries    map[string]map[string]bool
	cmdEntries map[string]map[string]bool
}

func newRefGraph(pkgs []*packages.Package) *refGraph {
	g := &refGraph{methods: map[string][]string{}, refs: map[string]map[string]bool{}, calls: map[string]map[string][]string{},
		entries: map[string]map[string]bool{}, cmdEntries: map[string]map[string]bool{}}
	for _, p := range pkgs {
		if !slices.Contains(refinedPkgs, p.PkgPath) {
			continue
		}
		rel := strings.TrimPrefix(p.PkgPath, modulePath+"/")
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
					g.methods[fd.Name.Name] = append(g.methods[fd.Name.Name], rel+"."+funcName(fd))
				}
			}
		}
	}
	return g
}

// declNode names the node of a top-level declaration of package rel.
func declNode(rel string, d ast.Decl) string {
	if fd, ok := d.(*ast.FuncDecl); ok {
		return rel + "." + funcName(fd)
	}
	return rel + ".<package scope>"
}

// addFile records the references of one file and, for a refined package,
// its calls by function.
func (g *refGraph) addFile(p *packages.Package, f *ast.File, calls map[string]map[string][]string) {
	rel := strings.TrimPrefix(p.PkgPath, modulePath+"/")
	refined := slices.Contains(refinedPkgs, p.PkgPath)
	var into map[string]bool
	switch {
	case refined:
	case p.PkgPath == modulePath+"/cmd/sluice":
		name := filepath.Base(p.Fset.Position(f.Pos()).Filename)
		if g.cmdEntries[name] == nil {
			g.cmdEntries[name] = map[string]bool{}
		}
		into = g.cmdEntries[name]
	default:
		if g.entries[p.PkgPath] == nil {
			g.entries[p.PkgPath] = map[string]bool{}
		}
		into = g.entries[p.PkgPath]
	}
	for _, d := range f.Decls {
		from := declNode(rel, d)
		if refined {
			if g.refs[from] == nil {
				g.refs[from] = map[string]bool{}
			}
			into = g.refs[from]
			for c, where := range calls[from] {
				if g.calls[from] == nil {
					g.calls[from] = map[string][]string{}
				}
				g.calls[from][c] = append(g.calls[from][c], where...)
			}
		}
		ast.Inspect(d, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				for _, to := range g.nodesOf(p.TypesInfo.Uses[id]) {
					into[to] = true
				}
			}
			return true
		})
	}
}

// nodesOf returns the nodes a use of obj reaches.
func (g *refGraph) nodesOf(obj types.Object) []string {
	fn, ok := obj.(*types.Func)
	if !ok || fn.Pkg() == nil {
		return nil
	}
	sig := fn.Type().(*types.Signature)
	if sig.Recv() != nil {
		if _, isIface := sig.Recv().Type().Underlying().(*types.Interface); isIface {
			// Dispatch: every method of that name in the refined packages.
			// (An interface of another package, the SDK's, reaches nothing
			// here unless its method shares a name; the calls it makes are
			// found by their inputs.)
			return g.methods[fn.Name()]
		}
	}
	if !slices.Contains(refinedPkgs, fn.Pkg().Path()) {
		return nil
	}
	rel := strings.TrimPrefix(fn.Pkg().Path(), modulePath+"/")
	if sig.Recv() == nil {
		return []string{rel + "." + fn.Name()}
	}
	recv, ptr := sig.Recv().Type(), ""
	if pt, ok := recv.(*types.Pointer); ok {
		recv, ptr = pt.Elem(), "*"
	}
	named := namedOf(recv)
	if named == nil {
		return nil
	}
	return []string{rel + ".(" + ptr + named.Obj().Name() + ")." + fn.Name()}
}

// reachedCalls returns the calls of the refined packages' functions that the
// code of the packages in closure and of cmdFiles reaches.
func (g *refGraph) reachedCalls(closure map[string]bool, cmdFiles []string) map[string][]string {
	var queue []string
	seen := map[string]bool{}
	push := func(n string) {
		if !seen[n] {
			seen[n] = true
			queue = append(queue, n)
		}
	}
	for path := range closure {
		if slices.Contains(refinedPkgs, path) {
			push(strings.TrimPrefix(path, modulePath+"/") + ".<package scope>")
			continue
		}
		for n := range g.entries[path] {
			push(n)
		}
	}
	for _, f := range cmdFiles {
		for n := range g.cmdEntries[f] {
			push(n)
		}
	}
	out := map[string][]string{}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for c, where := range g.calls[n] {
			out[c] = append(out[c], where...)
		}
		for to := range g.refs[n] {
			push(to)
		}
	}
	return out
}
