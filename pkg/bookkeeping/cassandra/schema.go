package cassandra

import (
	"bufio"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// schemaFiles holds the versioned schema: schema/v<N>/<name>.cql.
//
//go:embed schema
var schemaFiles embed.FS

// migration is one schema version: its statements in file order.
type migration struct {
	version    int
	files      []string
	statements []string
}

// loadMigrations reads schema/v<N>/*.cql from fsys. Versions must run 1, 2, …
// without gaps; each holds at least one statement.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	dirs, err := fs.ReadDir(fsys, "schema")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, d := range dirs {
		v, err := strconv.Atoi(strings.TrimPrefix(d.Name(), "v"))
		if !d.IsDir() || !strings.HasPrefix(d.Name(), "v") || err != nil || v < 1 {
			return nil, fmt.Errorf("schema/%s: not a version directory v<N>", d.Name())
		}
		m := migration{version: v}
		files, err := fs.Glob(fsys, path.Join("schema", d.Name(), "*.cql"))
		if err != nil {
			return nil, err
		}
		slices.Sort(files)
		for _, f := range files {
			b, err := fs.ReadFile(fsys, f)
			if err != nil {
				return nil, err
			}
			stmts, err := splitCQL(string(b))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			m.files = append(m.files, path.Base(f))
			m.statements = append(m.statements, stmts...)
		}
		if len(m.statements) == 0 {
			return nil, fmt.Errorf("schema/%s: no statements", d.Name())
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("schema versions must be 1..N without gaps; found v%d at position %d", m.version, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no schema versions")
	}
	return ms, nil
}

// splitCQL splits a .cql file into statements: "--" comment lines and blank
// lines are dropped, and a statement ends with ";" at the end of a line.
func splitCQL(src string) ([]string, error) {
	var stmts []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(line, ";") {
			stmt := strings.TrimSpace(strings.TrimSuffix(cur.String(), ";"))
			if strings.Contains(stmt, ";") {
				return nil, fmt.Errorf("statement %q: a ';' must end a line", stmt)
			}
			stmts = append(stmts, stmt)
			cur.Reset()
			continue
		}
		cur.WriteByte('\n') // not ' ': an inline "--" comment must end here
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		return nil, fmt.Errorf("statement %q does not end with ';'", rest)
	}
	return stmts, nil
}

const (
	createSchemaVersion = `CREATE TABLE IF NOT EXISTS schema_version (version int PRIMARY KEY, description text, applied_at timestamp)`
	selectSchemaVersion = `SELECT version FROM schema_version`
	insertSchemaVersion = `INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)`
)

// schemaVersion returns the highest applied version, 0 for none.
func schemaVersion(ctx context.Context, s *gocql.Session, cons gocql.Consistency) (int, error) {
	if err := s.Query(createSchemaVersion).ExecContext(ctx); err != nil {
		return 0, fmt.Errorf("create schema_version: %w", err)
	}
	iter := s.Query(selectSchemaVersion).Consistency(cons).IterContext(ctx)
	current, v := 0, 0
	for iter.Scan(&v) {
		current = max(current, v)
	}
	if err := iter.Close(); err != nil {
		return 0, fmt.Errorf("read schema_version: %w", err)
	}
	return current, nil
}

// migrationEnv is what migrations run with: the consistency levels and
// the settings they write into the keyspace.
type migrationEnv struct {
	cons, serial gocql.Consistency
	txnBuckets   int // the txn_buckets setting v8 writes
}

// dataMigration returns the step in Go that a schema version runs after its
// statements and before it is recorded as applied, or nil. Like the
// statements, a step must be idempotent: it runs again when interrupted.
func dataMigration(version int) func(ctx context.Context, s *gocql.Session, env migrationEnv) error {
	switch version {
	case 3:
		return func(ctx context.Context, s *gocql.Session, env migrationEnv) error {
			return backfillGroups(ctx, s, env.cons)
		}
	case 8:
		return moveTxnsToBuckets
	}
	return nil
}

// migrate applies the versions after the keyspace's current one, up to and
// including upTo, and returns the version the keyspace is at afterwards.
func migrate(ctx context.Context, s *gocql.Session, env migrationEnv, ms []migration, upTo int) (int, error) {
	cons := env.cons
	current, err := schemaVersion(ctx, s, cons)
	if err != nil {
		return 0, err
	}
	latest := ms[len(ms)-1].version
	if current > latest {
		return current, fmt.Errorf("keyspace schema is v%d, newer than this binary's v%d: run a newer binary", current, latest)
	}
	for _, m := range ms {
		if m.version <= current || m.version > upTo {
			continue
		}
		for _, stmt := range m.statements {
			if err := s.Query(stmt).ExecContext(ctx); err != nil {
				return current, fmt.Errorf("migrate to schema v%d: %q: %w", m.version, stmt, err)
			}
		}
		if step := dataMigration(m.version); step != nil {
			if err := step(ctx, s, env); err != nil {
				return current, fmt.Errorf("migrate to schema v%d: %w", m.version, err)
			}
		}
		err := s.Query(insertSchemaVersion, m.version, strings.Join(m.files, ","), time.Now()).Consistency(cons).ExecContext(ctx)
		if err != nil {
			return current, fmt.Errorf("record schema v%d: %w", m.version, err)
		}
		current = m.version
	}
	return current, nil
}
