package tfcheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The module path, and what of it the scanner follows.
const modulePath = "github.com/sluicemq/sluice"

// A role is one IAM role and the process whose code runs under it.
type role struct {
	name string
	// cmdFiles are the files of cmd/sluice that make up the process's command
	// (its flags, how it opens the catalog and Cassandra): they are scanned,
	// and the packages they import are its roots.
	cmdFiles []string
	// mainPkg is the process's main package when it is not cmd/sluice.
	mainPkg string
	// policies are the policy documents (module, data source name) the role
	// gets for its code: their actions together must be exactly those its
	// calls need.
	policies [][2]string
	// calls is what the code calls on AWS, as the scanner names it (see
	// opActions). The test fails when the code's calls differ from it: a new
	// call must be added here, and granted.
	calls []string
}

// cmdNoRole are the files of cmd/sluice that call AWS for commands no
// deployed role runs.
var cmdNoRole = []string{}

// catalogCalls are the DynamoDB catalog's calls (pkg/catalog/dynamodb) that
// ingest and fetch make: between them they use all of the catalog. The
// scanner attributes the catalog's calls per function (reach_test.go), so a
// process that uses less of it gets less.
var catalogCalls = []string{
	"dynamodb:BatchGetItem",
	"dynamodb:BatchWriteItem",
	"dynamodb:DeleteItem",
	"dynamodb:GetItem",
	"dynamodb:PutItem",
	"dynamodb:Query",
	"dynamodb:TransactWriteItems",
	"dynamodb:TransactWriteItems.ConditionCheck",
	"dynamodb:TransactWriteItems.Delete",
	"dynamodb:TransactWriteItems.Put",
	"dynamodb:UpdateItem",
}

// commonCmdFiles are the cmd/sluice files every server command uses.
var commonCmdFiles = []string{"catalog.go", "serve.go", "clock.go", "tlsflags.go"}

var roles = []role{
	{
		name:     "ingest",
		cmdFiles: append([]string{"ingest.go", "cassandra.go", "authflags.go", "quotaflags.go"}, commonCmdFiles...),
		policies: [][2]string{{"sluice-services", "ingest_code"}},
		calls:    catalogCalls,
	},
	{
		name:     "fetch",
		cmdFiles: append([]string{"fetch.go", "lambda.go", "cassandra.go", "authflags.go", "quotaflags.go"}, commonCmdFiles...),
		policies: [][2]string{{"sluice-services", "fetch_code"}, {"sluice-triggers", "fetch_code"}},
		calls: append([]string{
			"blob:Attributes",     // services/fetch/partlog: a segment's size
			"blob:NewRangeReader", // services/fetch/partlog: ranged reads of segments
			"lambda:Invoke",       // services/fetch/trigger: trigger invocations
		}, catalogCalls...),
	},
	{
		name:     "bookie",
		cmdFiles: append([]string{"bookie.go", "bookiefs_default.go"}, commonCmdFiles...),
		policies: [][2]string{{"sluice-bookies", "bookie_code"}},
		// Its registration (HeartbeatBookie) and the catalog GC's reads of
		// ledger metadata (GetLedger).
		calls: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"},
	},
	{
		name:     "compactor",
		mainPkg:  modulePath + "/services/compactor/lambda",
		policies: [][2]string{{"sluice-compactor", "compactor_code"}},
		calls: append([]string{
			"blob:Attributes",
			"blob:Delete",
			"blob:List",
			"blob:ListPage",
			"blob:NewRangeReader",
			"blob:NewReader",
			"blob:NewWriter",
			"blob:ReadAll",
			"blob:WriteAll",
		}, slices.DeleteFunc(slices.Clone(catalogCalls), func(c string) bool {
			return c == "dynamodb:TransactWriteItems.ConditionCheck" // no conditional transaction of its own
		})...),
	},
}

// opActions maps each call the scanner can find to the IAM actions AWS
// authorizes it with. A call missing here fails the test: add it.
var opActions = map[string][]string{
	// DynamoDB: the API's operations are their own IAM actions, except a
	// transaction, which is authorized per member (PutItem for a Put, ...).
	"dynamodb:BatchGetItem":                      {"dynamodb:BatchGetItem"},
	"dynamodb:BatchWriteItem":                    {"dynamodb:BatchWriteItem"},
	"dynamodb:DeleteItem":                        {"dynamodb:DeleteItem"},
	"dynamodb:GetItem":                           {"dynamodb:GetItem"},
	"dynamodb:PutItem":                           {"dynamodb:PutItem"},
	"dynamodb:Query":                             {"dynamodb:Query"},
	"dynamodb:Scan":                              {"dynamodb:Scan"},
	"dynamodb:UpdateItem":                        {"dynamodb:UpdateItem"},
	"dynamodb:CreateTable":                       {"dynamodb:CreateTable"},
	"dynamodb:DescribeTable":                     {"dynamodb:DescribeTable"},
	"dynamodb:TransactWriteItems":                nil,
	"dynamodb:TransactGetItems":                  nil,
	"dynamodb:TransactWriteItems.ConditionCheck": {"dynamodb:ConditionCheckItem"},
	"dynamodb:TransactWriteItems.Delete":         {"dynamodb:DeleteItem"},
	"dynamodb:TransactWriteItems.Put":            {"dynamodb:PutItem"},
	"dynamodb:TransactWriteItems.Update":         {"dynamodb:UpdateItem"},
	"dynamodb:TransactGetItems.Get":              {"dynamodb:GetItem"},

	// Lambda: Invoke is authorized as InvokeFunction.
	"lambda:Invoke": {"lambda:InvokeFunction"},

	// gocloud.dev/blob over its S3 driver (gocloud.dev/blob/s3blob). Reads
	// and HEADs also get s3:ListBucket: without it S3 answers a missing key
	// with 403 instead of 404, and the code tells the two apart
	// (objstore.IsNotFound). Writes go through the S3 transfer manager, which
	// aborts a failed multipart upload. Delete HEADs the key first.
	"blob:Attributes":     {"s3:GetObject", "s3:ListBucket"},
	"blob:Exists":         {"s3:GetObject", "s3:ListBucket"},
	"blob:NewReader":      {"s3:GetObject", "s3:ListBucket"},
	"blob:NewRangeReader": {"s3:GetObject", "s3:ListBucket"},
	"blob:ReadAll":        {"s3:GetObject", "s3:ListBucket"},
	"blob:Download":       {"s3:GetObject", "s3:ListBucket"},
	"blob:NewWriter":      {"s3:PutObject", "s3:AbortMultipartUpload"},
	"blob:WriteAll":       {"s3:PutObject", "s3:AbortMultipartUpload"},
	"blob:Upload":         {"s3:PutObject", "s3:AbortMultipartUpload"},
	"blob:Delete":         {"s3:GetObject", "s3:ListBucket", "s3:DeleteObject"},
	"blob:List":           {"s3:ListBucket"},
	"blob:ListPage":       {"s3:ListBucket"},
	"blob:Copy":           {"s3:GetObject", "s3:PutObject"},
}

// noRequest are the methods of *blob.Bucket that send no request to S3.
var noRequest = []string{"As", "Close", "ErrorAs", "ErrorCode"}

// notDeployed are calls the code makes only on paths a deployment does not
// take, by the functions allowed to make them. Found anywhere else, they
// count as calls.
var notDeployed = map[string]struct {
	funcs []string
	why   string
}{
	"dynamodb:CreateTable": {
		// TableDefinition builds the input, ensureTable sends it.
		funcs: []string{"pkg/catalog/dynamodb.TableDefinition", "pkg/catalog/dynamodb.(*store).ensureTable"},
		why:   "EnsureTable runs only with ingest's --create-table (development); Terraform creates the table",
	},
	"dynamodb:DescribeTable": {
		funcs: []string{"pkg/catalog/dynamodb.(*store).ensureTable"},
		why:   "as CreateTable: EnsureTable's check and wait",
	},
}

// TestIAMGrantsMatchCode: for every role, the AWS calls its code makes are
// the role's calls table, and the role's code policies grant exactly the
// IAM actions those calls need, on the resources they touch.
func TestIAMGrantsMatchCode(t *testing.T) {
	found := scanRoles(t)
	for call, nd := range notDeployed {
		t.Logf("not granted: %s, made only in %v: %s", call, nd.funcs, nd.why)
	}
	for _, r := range roles {
		t.Run(r.name, func(t *testing.T) {
			code := found[r.name]
			// The table against the code.
			want := slices.Sorted(slices.Values(r.calls))
			got := slices.Sorted(maps.Keys(code))
			for _, c := range got {
				if !slices.Contains(want, c) {
					t.Errorf("the %s code calls %s (%s), which the roles table does not list: add it to the table and grant it in %v", r.name, c, strings.Join(code[c], ", "), r.policies)
				}
			}
			for _, c := range want {
				if _, ok := code[c]; !ok {
					t.Errorf("the roles table lists %s for %s, but its code no longer calls it: remove it (and its grant)", c, r.name)
				}
			}

			// The calls against the policies.
			need := map[string]string{} // action -> a call needing it
			for _, c := range want {
				actions, ok := opActions[c]
				if !ok {
					t.Errorf("%s: no IAM actions known for %s: add it to opActions", r.name, c)
				}
				for _, a := range actions {
					need[a] = c
				}
			}
			granted := map[string]string{} // action -> policy
			for _, p := range r.policies {
				for _, st := range policyStatements(t, p[0], p[1]) {
					for _, a := range st.actions {
						granted[a] = p[0] + " " + p[1]
						checkResources(t, p, a, st.resources)
					}
				}
			}
			for a, c := range need {
				if _, ok := granted[a]; !ok {
					t.Errorf("%s calls %s, which needs %s: no policy of the role grants it (%v)", r.name, c, a, r.policies)
				}
			}
			for a, p := range granted {
				if _, ok := need[a]; !ok {
					t.Errorf("%s grants %s, which no call of the %s code needs (least privilege): remove it", p, a, r.name)
				}
			}
		})
	}
}

// statement is one statement of an aws_iam_policy_document.
type statement struct {
	actions   []string
	resources []string // as written
}

func policyStatements(t *testing.T, moduleName, doc string) []statement {
	t.Helper()
	m := loadModule(t, filepath.Join(modulesDir, moduleName))
	b := m.one(t, "data", "aws_iam_policy_document", doc)
	var out []statement
	for _, st := range nested(b, "statement") {
		if e, ok := st.Body.Attributes["effect"]; ok && strings.Trim(m.source(e.Expr), `"`) != "Allow" {
			t.Fatalf("%s %s: only Allow statements are understood here", moduleName, doc)
		}
		s := statement{actions: stringList(t, literal(t, st, "actions"))}
		if r, ok := st.Body.Attributes["resources"]; ok {
			s.resources = []string{m.source(r.Expr)}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatalf("%s %s has no statements", moduleName, doc)
	}
	return out
}

// checkResources checks that an action is granted on the resources its
// calls touch, not on "*": S3 object actions on the bucket's objects,
// ListBucket on the bucket, DynamoDB on the catalog table, Lambda on the
// triggers' functions.
func checkResources(t *testing.T, p [2]string, action string, resources []string) {
	t.Helper()
	src := strings.Join(resources, " ")
	ok := false
	switch {
	case action == "s3:ListBucket":
		ok = strings.Contains(src, "var.bucket_arn") && !strings.Contains(src, "/*")
	case strings.HasPrefix(action, "s3:"):
		ok = strings.Contains(src, "${var.bucket_arn}/*")
	case strings.HasPrefix(action, "dynamodb:"):
		ok = strings.Contains(src, "var.catalog_table_arn")
	case strings.HasPrefix(action, "lambda:"):
		ok = strings.Contains(src, "function_resources")
	}
	if !ok || strings.Contains(src, `"*"`) {
		t.Errorf("%s %s grants %s on %s: not the resources its calls touch", p[0], p[1], action, src)
	}
}

var (
	scanOnce  sync.Once
	scanFound map[string]map[string][]string
	scanErr   error
)

// scanRoles type-checks every role's code and returns, by role, the calls
// found and where.
func scanRoles(t *testing.T) map[string]map[string][]string {
	t.Helper()
	scanOnce.Do(func() { scanFound, scanErr = scan() })
	if scanErr != nil {
		t.Fatal(scanErr)
	}
	return scanFound
}

func scan() (map[string]map[string][]string, error) {
	absRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, err
	}
	// Each role's roots: the imports of its cmd files, or its main package.
	roots := map[string][]string{}
	var all []string
	for _, r := range roles {
		if r.mainPkg != "" {
			roots[r.name] = []string{r.mainPkg}
		}
		for _, f := range r.cmdFiles {
			imps, err := moduleImports(filepath.Join(absRoot, "cmd/sluice", f))
			if err != nil {
				return nil, err
			}
			roots[r.name] = append(roots[r.name], imps...)
		}
		all = append(all, roots[r.name]...)
	}
	all = append(all, modulePath+"/cmd/sluice")

	// The import graph, cheaply (no type-checking), for the closures.
	graph, err := packages.Load(&packages.Config{Dir: absRoot, Mode: packages.NeedName | packages.NeedImports | packages.NeedDeps}, all...)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*packages.Package{}
	packages.Visit(graph, nil, func(p *packages.Package) { byPath[p.PkgPath] = p })
	closure := func(from []string) map[string]bool {
		seen := map[string]bool{}
		var walk func(string)
		walk = func(path string) {
			if seen[path] || !strings.HasPrefix(path, modulePath+"/") {
				return
			}
			seen[path] = true
			if p := byPath[path]; p != nil {
				for imp := range p.Imports {
					walk(imp)
				}
			}
		}
		for _, r := range from {
			walk(r)
		}
		return seen
	}
	closures := map[string]map[string]bool{}
	need := map[string]bool{modulePath + "/cmd/sluice": true}
	for _, r := range roles {
		closures[r.name] = closure(roots[r.name])
		maps.Copy(need, closures[r.name])
	}

	// Type-check the module's packages in the closures (dependencies from
	// export data), and find the calls in each.
	pkgs, err := packages.Load(&packages.Config{Dir: absRoot, Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo},
		slices.Sorted(maps.Keys(need))...)
	if err != nil {
		return nil, err
	}
	var errs []string
	callsIn := map[string]map[string][]string{}  // package -> call -> where
	cmdCalls := map[string]map[string][]string{} // cmd/sluice file -> call -> where
	g := newRefGraph(pkgs)
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		if p.TypesInfo == nil {
			continue
		}
		for _, f := range p.Syntax {
			file := p.Fset.Position(f.Pos()).Filename
			byFunc := findCalls(p, f, absRoot)
			g.addFile(p, f, byFunc)
			calls := map[string][]string{}
			for _, fc := range byFunc {
				for c, where := range fc {
					calls[c] = append(calls[c], where...)
				}
			}
			switch {
			case p.PkgPath == modulePath+"/cmd/sluice":
				cmdCalls[filepath.Base(file)] = calls
			case slices.Contains(refinedPkgs, p.PkgPath):
				// attributed per function below
			default:
				if callsIn[p.PkgPath] == nil {
					callsIn[p.PkgPath] = map[string][]string{}
				}
				for c, where := range calls {
					callsIn[p.PkgPath][c] = append(callsIn[p.PkgPath][c], where...)
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading the code: %s", strings.Join(errs, "\n"))
	}

	// A file of cmd/sluice that calls AWS must belong to a role's command (or
	// be a command no role runs): otherwise a server's call there would go
	// unseen.
	covered := map[string]bool{}
	for _, r := range roles {
		for _, f := range r.cmdFiles {
			covered[f] = true
		}
	}
	for f, calls := range cmdCalls {
		if len(calls) > 0 && !covered[f] && !slices.Contains(cmdNoRole, f) {
			return nil, fmt.Errorf("cmd/sluice/%s calls AWS (%v) but is in no role's cmdFiles nor in cmdNoRole: say which process runs it", f, slices.Sorted(maps.Keys(calls)))
		}
	}

	out := map[string]map[string][]string{}
	for _, r := range roles {
		calls := map[string][]string{}
		for path := range closures[r.name] {
			for c, where := range callsIn[path] {
				calls[c] = append(calls[c], where...)
			}
		}
		for _, f := range r.cmdFiles {
			for c, where := range cmdCalls[f] {
				calls[c] = append(calls[c], where...)
			}
		}
		// The catalog's calls: those of the functions the role's code reaches.
		for c, where := range g.reachedCalls(closures[r.name], r.cmdFiles) {
			calls[c] = append(calls[c], where...)
		}
		out[r.name] = calls
	}
	return out, nil
}

// moduleImports returns the module's packages that file imports.
func moduleImports(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		if strings.HasPrefix(path, modulePath+"/") {
			out = append(out, path)
		}
	}
	return out, nil
}

const (
	sdkServicePrefix = "github.com/aws/aws-sdk-go-v2/service/"
	dynamoTypes      = "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	blobPkg          = "gocloud.dev/blob"
)

// findCalls returns the AWS calls of one file, each with the functions it is
// made in:
//
//   - a composite literal of an SDK v2 operation's input type,
//     svc.OpInput{...} where *svc.Client has a method Op: "svc:Op" (every
//     call of an operation builds its input, so this finds calls through
//     interfaces, decorators and paginators alike);
//   - a DynamoDB transaction member, types.Put{...} in a TransactWriteItem:
//     "dynamodb:TransactWriteItems.Put", since IAM authorizes each member;
//   - a method call on *blob.Bucket: "blob:Method".
//
// Calls listed in notDeployed are left out when made in their functions.
func findCalls(p *packages.Package, f *ast.File, root string) map[string]map[string][]string {
	out := map[string]map[string][]string{} // function -> call -> where
	relPkg := strings.TrimPrefix(p.PkgPath, modulePath+"/")
	for _, d := range f.Decls {
		fn := declNode(relPkg, d)
		add := func(call string, pos token.Pos) {
			if nd, ok := notDeployed[call]; ok && slices.Contains(nd.funcs, fn) {
				return
			}
			where := p.Fset.Position(pos)
			rel, _ := filepath.Rel(root, where.Filename)
			if out[fn] == nil {
				out[fn] = map[string][]string{}
			}
			out[fn][call] = append(out[fn][call], fmt.Sprintf("%s:%d %s", rel, where.Line, fn))
		}
		ast.Inspect(d, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				named := namedOf(p.TypesInfo.TypeOf(n))
				if named == nil || named.Obj().Pkg() == nil {
					return true
				}
				pkg, name := named.Obj().Pkg(), named.Obj().Name()
				switch {
				case pkg.Path() == dynamoTypes && slices.Contains([]string{"Put", "Update", "Delete", "ConditionCheck"}, name):
					add("dynamodb:TransactWriteItems."+name, n.Pos())
				case pkg.Path() == dynamoTypes && name == "Get":
					add("dynamodb:TransactGetItems.Get", n.Pos())
				case strings.HasPrefix(pkg.Path(), sdkServicePrefix) && strings.HasSuffix(name, "Input"):
					svc := strings.TrimPrefix(pkg.Path(), sdkServicePrefix)
					if strings.Contains(svc, "/") {
						return true
					}
					op := strings.TrimSuffix(name, "Input")
					if isClientMethod(pkg, op) {
						add(svc+":"+op, n.Pos())
					}
				}
			case *ast.SelectorExpr:
				sel := p.TypesInfo.Selections[n]
				if sel == nil || sel.Kind() != types.MethodVal {
					return true
				}
				if named := namedOf(sel.Recv()); named != nil && named.Obj().Pkg() != nil &&
					named.Obj().Pkg().Path() == blobPkg && named.Obj().Name() == "Bucket" && !slices.Contains(noRequest, n.Sel.Name) {
					add("blob:"+n.Sel.Name, n.Pos())
				}
			}
			return true
		})
	}
	return out
}

// isClientMethod reports whether *Client of the SDK service package pkg has
// a method op.
func isClientMethod(pkg *types.Package, op string) bool {
	obj := pkg.Scope().Lookup("Client")
	if obj == nil {
		return false
	}
	ms := types.NewMethodSet(types.NewPointer(obj.Type()))
	return ms.Lookup(pkg, op) != nil
}

// namedOf returns the named type of t, through one pointer.
func namedOf(t types.Type) *types.Named {
	if t == nil {
		return nil
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := types.Unalias(t).(*types.Named)
	return n
}

// funcName is "Name" or "(*Recv).Name".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	recv := fd.Recv.List[0].Type
	if idx, ok := recv.(*ast.IndexExpr); ok { // generic receiver
		recv = idx.X
	}
	switch r := recv.(type) {
	case *ast.StarExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return "(*" + id.Name + ")." + fd.Name.Name
		}
		if idx, ok := r.X.(*ast.IndexExpr); ok {
			if id, ok := idx.X.(*ast.Ident); ok {
				return "(*" + id.Name + ")." + fd.Name.Name
			}
		}
	case *ast.Ident:
		return "(" + r.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}
