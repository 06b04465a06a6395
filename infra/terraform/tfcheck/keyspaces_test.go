package tfcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// The Cassandra bookkeeping: its migrations and the Go file holding its
// statements.
const (
	cassandraPkg = repoRoot + "/pkg/bookkeeping/cassandra"
	schemaDir    = cassandraPkg + "/schema"
)

// cqlTable is a table as the migrations leave it.
type cqlTable struct {
	columns    map[string]string // name -> type, normalized
	partition  []string
	clustering []string
}

// TestKeyspacesTablesMatchMigrations: the tables of sluice-metadata are the
// schema the migrations build, applied in order (CREATE TABLE, ALTER TABLE
// ADD), plus the migrator's schema_version table; and TTL and client-side
// timestamps, which Keyspaces refuses unless the table enables them, are on
// exactly the tables whose statements use them.
func TestKeyspacesTablesMatchMigrations(t *testing.T) {
	want := migratedSchema(t)
	got := terraformKeyspacesTables(t)

	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("table %s: built by the migrations, missing from sluice-metadata's local.tables", name)
			continue
		}
		for col, typ := range w.columns {
			switch gt, ok := g.columns[col]; {
			case !ok:
				t.Errorf("table %s: column %s %s is missing from Terraform", name, col, typ)
			case gt != typ:
				t.Errorf("table %s: column %s: Terraform %s, migrations %s", name, col, gt, typ)
			}
		}
		for col := range g.columns {
			if _, ok := w.columns[col]; !ok {
				t.Errorf("table %s: Terraform has column %s, which no migration creates", name, col)
			}
		}
		if !slices.Equal(g.partition, w.partition) {
			t.Errorf("table %s: partition key: Terraform %v, migrations %v", name, g.partition, w.partition)
		}
		if !slices.Equal(g.clustering, w.clustering) {
			t.Errorf("table %s: clustering key: Terraform %v, migrations %v", name, g.clustering, w.clustering)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("table %s: in Terraform, but no migration creates it", name)
		}
	}

	ttl, ts := statementNeeds(t)
	if len(ttl) == 0 || len(ts) == 0 {
		t.Fatalf("found no statement with USING TTL (%v) or client timestamps (%v): has the scan gone blind?", ttl, ts)
	}
	for name, g := range got {
		if g.ttl != ttl[name] {
			t.Errorf("table %s: Terraform ttl = %v, but statements with USING TTL on it: %v", name, g.ttl, ttl[name])
		}
		if g.timestamps != ts[name] {
			t.Errorf("table %s: Terraform client_side_timestamps = %v, but statements with USING TIMESTAMP or WRITETIME on it: %v", name, g.timestamps, ts[name])
		}
	}
}

// tfTable is a table of sluice-metadata's local.tables.
type tfTable struct {
	cqlTable
	ttl, timestamps bool
}

func terraformKeyspacesTables(t *testing.T) map[string]tfTable {
	t.Helper()
	m := loadModule(t, modulesDir+"/sluice-metadata")
	var tables cty.Value
	for _, b := range m.find("locals") {
		if _, ok := b.Body.Attributes["tables"]; ok {
			tables = literal(t, b, "tables")
		}
	}
	if tables == cty.NilVal {
		t.Fatal("sluice-metadata: no local.tables")
	}
	// The resource must be driven by local.tables (and so create them all).
	res := m.one(t, "resource", "aws_keyspaces_table", "this")
	if fe, ok := res.Body.Attributes["for_each"]; !ok || !strings.Contains(m.source(fe.Expr), "local.tables") {
		t.Fatal("sluice-metadata: aws_keyspaces_table.this is not for_each over local.tables")
	}
	out := map[string]tfTable{}
	for it := tables.ElementIterator(); it.Next(); {
		k, v := it.Element()
		tt := tfTable{cqlTable: cqlTable{columns: map[string]string{}}}
		for ci := v.GetAttr("columns").ElementIterator(); ci.Next(); {
			ck, cv := ci.Element()
			tt.columns[ck.AsString()] = normType(cv.AsString())
		}
		tt.partition = stringList(t, v.GetAttr("partition_key"))
		tt.clustering = stringList(t, v.GetAttr("clustering_key"))
		tt.ttl = v.GetAttr("ttl").True()
		tt.timestamps = v.GetAttr("client_side_timestamps").True()
		out[k.AsString()] = tt
	}
	return out
}

// migratedSchema applies the migrations' statements in version order.
func migratedSchema(t *testing.T) map[string]*cqlTable {
	t.Helper()
	dirs, err := filepath.Glob(schemaDir + "/v*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no schema versions under %s (%v)", schemaDir, err)
	}
	version := func(d string) int {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "v"))
		if err != nil {
			t.Fatalf("%s: not v<N>", d)
		}
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })

	tables := map[string]*cqlTable{}
	// The migrator's own table, created before any version runs.
	apply(t, tables, "schema.go createSchemaVersion", goStringConst(t, cassandraPkg+"/schema.go", "createSchemaVersion"))
	for _, d := range dirs {
		files, _ := filepath.Glob(d + "/*.cql")
		slices.Sort(files)
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, stmt := range splitStatements(string(src)) {
				apply(t, tables, relPath(f), stmt)
			}
		}
	}
	if len(tables) < 2 {
		t.Fatalf("the migrations built only %d tables", len(tables))
	}
	return tables
}

// splitStatements splits a .cql file as the migrator does (schema.go
// splitCQL): "--" lines dropped, a statement ends with ";" at a line's end.
func splitStatements(src string) []string {
	var stmts []string
	var cur strings.Builder
	for line := range strings.Lines(src) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		cur.WriteString(line + "\n")
		if strings.HasSuffix(line, ";") {
			stmts = append(stmts, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	return stmts
}

var (
	createRE = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\((.*)\)\s*(?:WITH\s+.*)?$`)
	alterRE  = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(\w+)\s+ADD\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+(.+)$`)
	pkRE     = regexp.MustCompile(`(?is)^PRIMARY\s+KEY\s*\((.*)\)$`)
)

// apply changes tables by one statement. A statement it does not know fails
// the test: teach it, and the module, the new kind of change.
func apply(t *testing.T, tables map[string]*cqlTable, where, stmt string) {
	t.Helper()
	stmt = strings.TrimSpace(stmt)
	if m := createRE.FindStringSubmatch(stmt); m != nil {
		name := strings.ToLower(m[1])
		if _, ok := tables[name]; ok {
			return // IF NOT EXISTS
		}
		tb := &cqlTable{columns: map[string]string{}}
		for _, part := range splitTop(m[2]) {
			if pk := pkRE.FindStringSubmatch(part); pk != nil {
				keys := splitTop(pk[1])
				first := strings.TrimSpace(keys[0])
				if strings.HasPrefix(first, "(") {
					tb.partition = splitTop(strings.Trim(first, "()"))
				} else {
					tb.partition = []string{first}
				}
				tb.clustering = keys[1:]
				continue
			}
			fields := strings.Fields(part)
			if len(fields) < 2 {
				t.Fatalf("%s: column definition %q", where, part)
			}
			col, rest := strings.ToLower(fields[0]), strings.Join(fields[1:], " ")
			if typ, ok := strings.CutSuffix(strings.ToUpper(rest), " PRIMARY KEY"); ok {
				rest = rest[:len(typ)]
				tb.partition = []string{col}
			}
			tb.columns[col] = normType(rest)
		}
		if len(tb.partition) == 0 {
			t.Fatalf("%s: table %s has no primary key", where, name)
		}
		tables[name] = tb
		return
	}
	if m := alterRE.FindStringSubmatch(stmt); m != nil {
		tb := tables[strings.ToLower(m[1])]
		if tb == nil {
			t.Fatalf("%s: ALTER TABLE %s before it was created", where, m[1])
		}
		col := strings.ToLower(m[2])
		if _, ok := tb.columns[col]; !ok {
			tb.columns[col] = normType(m[3])
		}
		return
	}
	t.Fatalf("%s: statement %q is neither CREATE TABLE nor ALTER TABLE ... ADD: teach TestKeyspacesTablesMatchMigrations (and sluice-metadata) what it does", where, stmt)
}

// splitTop splits s at commas outside parentheses and angle brackets, and
// trims the parts.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(', '<':
			depth++
		case ')', '>':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" {
		parts = append(parts, last)
	}
	return parts
}

// normType writes a CQL type one way: lower case, no spaces.
func normType(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), ""))
}

// goStringConst returns the value of the string constant name in file.
func goStringConst(t *testing.T, file, name string) string {
	t.Helper()
	consts := goStringConsts(t, []string{file})
	v, ok := consts[name]
	if !ok {
		t.Fatalf("%s: no string constant %s", file, name)
	}
	return v
}

// goStringConsts evaluates the string constants of files: literals and
// concatenations of literals and other constants of the same files.
func goStringConsts(t *testing.T, files []string) map[string]string {
	t.Helper()
	exprs := map[string]ast.Expr{}
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						exprs[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	out := map[string]string{}
	var eval func(ast.Expr, int) (string, bool)
	eval = func(e ast.Expr, depth int) (string, bool) {
		if depth > 20 {
			return "", false
		}
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.Ident:
			if x, ok := exprs[e.Name]; ok {
				return eval(x, depth+1)
			}
		case *ast.ParenExpr:
			return eval(e.X, depth+1)
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				a, ok1 := eval(e.X, depth+1)
				b, ok2 := eval(e.Y, depth+1)
				return a + b, ok1 && ok2
			}
		}
		return "", false
	}
	for n, e := range exprs {
		if s, ok := eval(e, 0); ok {
			out[n] = s
		}
	}
	return out
}

var (
	stmtTableRE = regexp.MustCompile(`(?i)\b(?:INSERT\s+INTO|UPDATE|FROM)\s+(\w+)`)
	usingTTLRE  = regexp.MustCompile(`\b(?:USING|AND)\s+TTL\b`)
	timestampRE = regexp.MustCompile(`\b(?:USING|AND)\s+TIMESTAMP\b|\bWRITETIME\s*\(`)
)

// statementNeeds reads the CQL statements (string constants) of the
// bookkeeping's Go files and returns the tables written with a TTL, and
// those written with a client timestamp or read with WRITETIME.
func statementNeeds(t *testing.T) (ttl, timestamps map[string]bool) {
	t.Helper()
	files, _ := filepath.Glob(cassandraPkg + "/*.go")
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	ttl, timestamps = map[string]bool{}, map[string]bool{}
	for _, s := range goStringConsts(t, files) {
		m := stmtTableRE.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		table := strings.ToLower(m[1])
		if usingTTLRE.MatchString(s) {
			ttl[table] = true
		}
		if timestampRE.MatchString(s) {
			timestamps[table] = true
		}
	}
	t.Logf("tables written with a TTL: %v; with client timestamps or read with WRITETIME: %v", ttl, timestamps)
	return ttl, timestamps
}
