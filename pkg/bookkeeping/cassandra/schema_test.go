package cassandra

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestEmbeddedSchema(t *testing.T) {
	ms, err := loadMigrations(schemaFiles)
	if err != nil {
		t.Fatalf("embedded schema: %v", err)
	}
	if len(ms) != 9 {
		t.Fatalf("%d schema versions, want 9", len(ms))
	}
	tables := map[string]bool{}
	columns := map[string]bool{} // table.column, of ALTER TABLE … ADD IF NOT EXISTS
	for _, m := range ms {
		for _, stmt := range m.statements {
			// Re-running a migration interrupted half-way must be harmless.
			if !strings.Contains(stmt, "IF NOT EXISTS") {
				t.Errorf("v%d: statement is not idempotent: %s", m.version, stmt)
			}
			if f := strings.Fields(stmt); len(f) > 5 && f[0] == "CREATE" && f[1] == "TABLE" {
				tables[f[5]] = true
			}
			if f := strings.Fields(stmt); len(f) > 8 && f[0] == "ALTER" && f[1] == "TABLE" && f[3] == "ADD" {
				columns[f[2]+"."+f[7]] = true
			}
		}
	}
	for _, want := range []string{"group_members", "consumer_partitions", "group_topics", "producer_id_blocks", "transactional_producers", "consumer_groups", "transactions", "keyspace_settings"} {
		if !tables[want] {
			t.Errorf("no migration creates table %s (have %v)", want, tables)
		}
	}
	for _, want := range []string{"group_members.topics", "group_members.heartbeat_at", "consumer_partitions.committed_topic_id",
		"transactional_producers.version", "transactional_producers.status", "transactional_producers.timeout_ms",
		"transactional_producers.deadline", "transactional_producers.bumped_by_coordinator",
		"transactional_producers.partitions", "transactional_producers.groups",
		"transactions.next_partitions", "transactions.ended", "transactions.timed_out"} {
		if !columns[want] {
			t.Errorf("no migration adds column %s (have %v)", want, columns)
		}
	}
}

func TestLoadMigrationsRejectsBadLayouts(t *testing.T) {
	cql := &fstest.MapFile{Data: []byte("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY);\n")}
	cases := map[string]fstest.MapFS{
		"gap":          {"schema/v1/a.cql": cql, "schema/v3/a.cql": cql},
		"bad dir":      {"schema/one/a.cql": cql},
		"v0":           {"schema/v0/a.cql": cql},
		"empty":        {"schema/v1/a.cql": &fstest.MapFile{Data: []byte("-- nothing\n")}},
		"unterminated": {"schema/v1/a.cql": &fstest.MapFile{Data: []byte("CREATE TABLE t (k int PRIMARY KEY)\n")}},
	}
	for name, fsys := range cases {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations accepted it", name)
		}
	}
	ms, err := loadMigrations(fstest.MapFS{"schema/v2/b.cql": cql, "schema/v1/b.cql": cql, "schema/v1/a.cql": cql})
	if err != nil || len(ms) != 2 || ms[0].version != 1 || strings.Join(ms[0].files, ",") != "a.cql,b.cql" {
		t.Fatalf("loadMigrations = %+v, %v; want v1 (a.cql, b.cql) then v2", ms, err)
	}
}

func TestSplitCQL(t *testing.T) {
	src := `-- a comment
CREATE TABLE a (
    k int PRIMARY KEY  -- not a terminator
);

  -- indented comment
CREATE TABLE b (k int PRIMARY KEY);
`
	got, err := splitCQL(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CREATE TABLE a (\nk int PRIMARY KEY  -- not a terminator\n)", "CREATE TABLE b (k int PRIMARY KEY)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("splitCQL = %q, want %q", got, want)
	}
	if _, err := splitCQL("SELECT 1; SELECT 2;\n"); err == nil {
		t.Fatal("splitCQL accepted two statements on one line")
	}
}
