//go:build integration

package cassandra

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// session connects to cfg's keyspace (created if needed) outside any Store.
func session(t *testing.T, cfg Config) *gocql.Session {
	t.Helper()
	cfg = cfg.withDefaults()
	if err := createKeyspace(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	s, err := cfg.clusterConfig(cfg.Keyspace).CreateSession()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

type versionRow struct {
	description string
	appliedAt   time.Time
}

func appliedVersions(t *testing.T, s *gocql.Session) map[int]versionRow {
	t.Helper()
	got := map[int]versionRow{}
	iter := s.Query(`SELECT version, description, applied_at FROM schema_version`).Iter()
	var (
		v int
		r versionRow
	)
	for iter.Scan(&v, &r.description, &r.appliedAt) {
		got[v] = r
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("read schema_version: %v", err)
	}
	return got
}

// TestIntegrationCassandraMigratesFromV1: a keyspace left at schema v1 by an
// older binary, with data in it, is brought to the current version by Open;
// the data survives, the groups it names are listed, and the v2 and v3
// features work; opening again changes nothing.
func TestIntegrationCassandraMigratesFromV1(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	raw := session(t, cfg)
	migrateTo(t, raw, 1)
	// What a v1 binary would have stored: a group's committed offset, and
	// a live member of another group (written a second ago).
	written := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	for _, stmt := range []string{
		`INSERT INTO group_topics (group_id, topic) VALUES ('old-group', 'orders')`,
		`INSERT INTO consumer_partitions (group_id, topic, partition_id, owner, epoch, committed_offset, metadata, commit_epoch) VALUES ('old-group', 'orders', 3, '', 5, 42, 'from v1', 5)`,
		fmt.Sprintf(`INSERT INTO group_members (group_id, member_id, client_info, session_timeout_ms) VALUES ('old-members', 'm', 'v1 client', 60000) USING TTL 600 AND TIMESTAMP %d`, written.UnixMicro()),
	} {
		if err := raw.Query(stmt).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := raw.Query(`SELECT next_id FROM producer_id_blocks`).Exec(); err == nil {
		t.Fatal("producer_id_blocks exists at schema v1; the test would prove nothing")
	}

	s := openStore(t, cfg)
	got := appliedVersions(t, raw)
	if len(got) != 9 || got[1].description != "001_consumer_groups.cql" || got[2].description != "001_producer_ids.cql" ||
		got[3].description != "001_groups_and_member_topics.cql" || got[4].description != "001_committed_topic_id.cql" ||
		got[5].description != "001_transaction_state.cql" || got[6].description != "001_transaction_offsets.cql" ||
		got[7].description != "001_replaced_producer_id.cql" || got[8].description != "001_transaction_buckets.cql" ||
		got[9].description != "001_next_transaction.cql" {
		t.Fatalf("schema_version after Open = %+v, want v1 to v9 with their files", got)
	}
	// v3 listed the groups v1 stored, and reads v1 members.
	if gs, more, err := s.ListGroups(ctx, "", 10); err != nil || more || !slices.Equal(gs, []string{"old-group", "old-members"}) {
		t.Fatalf("ListGroups after migrating to v3 = %q (more %v), %v; want [old-group old-members]", gs, more, err)
	}
	members, err := s.ListMembers(ctx, "old-members")
	if err != nil || len(members) != 1 || members[0].ID != "m" || members[0].ClientInfo != "v1 client" || members[0].Topics != nil || !members[0].LastHeartbeat.Equal(written) {
		t.Fatalf("ListMembers of a v1 member = %+v, %v; want m without topics, last heartbeat %v (its write time)", members, err, written)
	}
	if err := s.Heartbeat(ctx, "old-members", "m"); err != nil {
		t.Fatalf("Heartbeat of a v1 member: %v", err)
	}
	if members, err := s.ListMembers(ctx, "old-members"); err != nil || len(members) != 1 || !members[0].LastHeartbeat.After(written) {
		t.Fatalf("ListMembers after a Heartbeat of a v1 member = %+v, %v; want a last heartbeat after %v", members, err, written)
	}
	c, err := s.FetchOffset(ctx, "old-group", "orders", 3)
	if err != nil || c != (bookkeeping.Committed{Offset: 42, Metadata: "from v1", Epoch: 5}) {
		t.Fatalf("FetchOffset of v1 data = %+v, %v", c, err)
	}
	if p, err := s.InitProducer(ctx, "txn"); err != nil || p.Epoch != 0 {
		t.Fatalf("InitProducer after migrating to v2 = %+v, %v", p, err)
	}

	// Idempotent: opening again applies nothing.
	openStore(t, cfg)
	again := appliedVersions(t, raw)
	for v, r := range got {
		if !again[v].appliedAt.Equal(r.appliedAt) {
			t.Fatalf("schema v%d re-applied by a second Open (%v, then %v)", v, r.appliedAt, again[v].appliedAt)
		}
	}
	// NoMigrate accepts a current schema.
	noMigrate := cfg
	noMigrate.NoMigrate = true
	openStore(t, noMigrate)
}

// TestIntegrationCassandraMigratesFromV3: offsets committed by a v3 binary
// (no committed_topic_id) read after the migration to v4 as offsets of an
// unknown incarnation (TopicID ""), and the first commit with a topic id
// replaces them even below their offset; from then on the regression check
// holds within that id.
func TestIntegrationCassandraMigratesFromV3(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	raw := session(t, cfg)
	migrateTo(t, raw, 3)
	for _, stmt := range []string{
		`INSERT INTO group_topics (group_id, topic) VALUES ('g', 'orders')`,
		`INSERT INTO consumer_partitions (group_id, topic, partition_id, owner, epoch, committed_offset, metadata, commit_epoch) VALUES ('g', 'orders', 0, 'm', 1, 500, 'from v3', 1)`,
		`INSERT INTO consumer_partitions (group_id, topic, partition_id, owner, epoch, committed_offset, metadata, commit_epoch) VALUES ('g', 'orders', 1, 'm', 1, 500, 'from v3', 1)`,
	} {
		if err := raw.Query(stmt).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	s := openStore(t, cfg)
	if got := appliedVersions(t, raw); len(got) != 9 || got[4].description != "001_committed_topic_id.cql" {
		t.Fatalf("schema_version after Open = %+v, want v1 to v9", got)
	}
	want := bookkeeping.Committed{Offset: 500, Metadata: "from v3", Epoch: 1}
	if c, err := s.FetchOffset(ctx, "g", "orders", 0); err != nil || c != want {
		t.Fatalf("FetchOffset of v3 data = %+v, %v; want %+v (no topic id)", c, err, want)
	}
	if got, _, err := s.ListOffsets(ctx, "g", bookkeeping.Cursor{}, 10); err != nil || len(got) != 2 || got[1].Committed != want {
		t.Fatalf("ListOffsets of v3 data = %+v, %v; want two offsets %+v", got, err, want)
	}
	if err := s.Join(ctx, "g", bookkeeping.Member{ID: "m", SessionTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// Partition 0 goes below the unknown incarnation's offset, partition 1
	// above it: both are replaced, in one commit.
	c := bookkeeping.Commit{Group: "g", Topic: "orders", TopicID: "id", Member: "m", Offsets: []bookkeeping.PartitionOffset{
		{Partition: 0, Offset: 10, Epoch: 1}, {Partition: 1, Offset: 600, Epoch: 1},
	}}
	if err := s.Commit(ctx, c); err != nil {
		t.Fatalf("Commit with a topic id over v3 offsets: %v", err)
	}
	for p, off := range map[int32]int64{0: 10, 1: 600} {
		if got, err := s.FetchOffset(ctx, "g", "orders", p); err != nil || got != (bookkeeping.Committed{Offset: off, Epoch: 1, TopicID: "id"}) {
			t.Fatalf("FetchOffset(%d) after the commit = %+v, %v; want offset %d of topic id \"id\"", p, got, err, off)
		}
	}
	c.Offsets = c.Offsets[:1]
	c.Offsets[0].Offset = 9
	var re *bookkeeping.OffsetRegressionError
	if err := s.Commit(ctx, c); !errors.As(err, &re) {
		t.Fatalf("Commit below the offset of the same topic id: %v, want an *OffsetRegressionError", err)
	}
}

// TestIntegrationCassandraMigratesFromV4: transactional ids registered by a
// v4 binary (producer id and epoch, no transaction state) read after the
// migration to v5 as idle records at version 1; InitProducer bumps them at
// version 2, a PutTxn at version 1 replaces them and one at version 0
// conflicts; a v4 binary's bump (which does not move the version) is never
// undone by a later InitProducer. The migration to v8 carries them over.
func TestIntegrationCassandraMigratesFromV4(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	raw := session(t, cfg)
	migrateTo(t, raw, 4)
	for _, stmt := range []string{
		`INSERT INTO transactional_producers (transactional_id, producer_id, epoch) VALUES ('a', 7, 3)`,
		`INSERT INTO transactional_producers (transactional_id, producer_id, epoch) VALUES ('b', 8, 0)`,
	} {
		if err := raw.Query(stmt).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	// A v4 binary bumps the epoch without moving the version (here beside
	// v7 ones: binaries before v8 must not run beside a v8 keyspace); the
	// migration to v8 copies the row as it is.
	migrateTo(t, raw, 7)
	if err := raw.Query(`UPDATE transactional_producers SET epoch = 9 WHERE transactional_id = 'a' IF producer_id = 7 AND epoch = 3`).Exec(); err != nil {
		t.Fatal(err)
	}

	s := openDriver(t, cfg) // the conformance suite covers the Store; this is the rows
	if got := appliedVersions(t, raw); len(got) != 9 || got[5].description != "001_transaction_state.cql" || got[8].description != "001_transaction_buckets.cql" {
		t.Fatalf("schema_version after Open = %+v, want v1 to v9", got)
	}
	a := bookkeeping.Txn{TransactionalID: "a", ProducerID: 7, Epoch: 9, Status: bookkeeping.TxnEmpty, Version: 1}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GetTxn of a v4 row = %+v, %v; want %+v", got, err, a)
	}
	if txns, more, err := s.ListTxns(ctx, "", 10); err != nil || more || len(txns) != 2 {
		t.Fatalf("ListTxns of v4 rows = %+v (more %v), %v; want both", txns, more, err)
	}
	if p, err := s.InitProducer(ctx, "a"); err != nil || p != (bookkeeping.Producer{ID: 7, Epoch: 10}) {
		t.Fatalf("InitProducer over a v4 row = %+v, %v; want id 7 epoch 10", p, err)
	}
	a.Epoch, a.BumpedByCoordinator, a.Version = 10, true, 2
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GetTxn after InitProducer = %+v, %v; want %+v", got, err, a)
	}

	b := bookkeeping.Txn{TransactionalID: "b", ProducerID: 8, Epoch: 1, Status: bookkeeping.TxnOngoing, Timeout: time.Minute,
		Deadline: time.UnixMilli(1_800_000_000_123).UTC(), Partitions: []bookkeeping.TxnPartition{{TopicID: "t", Partition: 1}}, Groups: []string{"g"}}
	if _, err := s.PutTxn(ctx, b); !errors.Is(err, bookkeeping.ErrConflict) {
		t.Fatalf("PutTxn at version 0 over a v4 row: %v, want ErrConflict", err)
	}
	b.Version = 1
	put, err := s.PutTxn(ctx, b)
	if err != nil || put.Version != 2 {
		t.Fatalf("PutTxn at version 1 over a v4 row = %+v, %v; want version 2", put, err)
	}
	if got, err := s.GetTxn(ctx, "b"); err != nil || !reflect.DeepEqual(got, put) {
		t.Fatalf("GetTxn after PutTxn = %+v, %v; want %+v", got, err, put)
	}
	if _, err := s.PutTxn(ctx, b); !errors.Is(err, bookkeeping.ErrConflict) {
		t.Fatalf("PutTxn at version 1 again: %v, want ErrConflict", err)
	}
	// Version 1 never creates a row that does not exist.
	c := b
	c.TransactionalID = "c"
	if _, err := s.PutTxn(ctx, c); !errors.Is(err, bookkeeping.ErrConflict) {
		t.Fatalf("PutTxn at version 1 of an id never stored: %v, want ErrConflict", err)
	}
	if _, err := s.GetTxn(ctx, "c"); !errors.Is(err, bookkeeping.ErrNotFound) {
		t.Fatalf("GetTxn of an id a failed PutTxn named: %v, want ErrNotFound", err)
	}
}

func TestIntegrationCassandraNoMigrateNeedsCurrentSchema(t *testing.T) {
	cfg := testConfig(t)
	raw := session(t, cfg)
	ms, err := loadMigrations(schemaFiles)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate(t.Context(), raw, testMigrationEnv, ms, 1); err != nil {
		t.Fatal(err)
	}
	cfg.NoMigrate = true
	s, err := Open(t.Context(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open with NoMigrate accepted a v1 keyspace")
	}
	latest := ms[len(ms)-1].version
	if !strings.Contains(err.Error(), fmt.Sprintf("needs v%d", latest)) {
		t.Fatalf("Open with NoMigrate on v1: %v, want it to say the binary needs v%d", err, latest)
	}
	if got := appliedVersions(t, raw); len(got) != 1 {
		t.Fatalf("Open with NoMigrate applied a migration: %+v", got)
	}
}

func TestIntegrationCassandraRefusesNewerSchema(t *testing.T) {
	cfg := testConfig(t)
	openStore(t, cfg)
	raw := session(t, cfg)
	if err := raw.Query(insertSchemaVersion, 99, "from the future", time.Now()).Exec(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a keyspace with a newer schema")
	}
	if !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("Open on a newer schema: %v", err)
	}
	var ve *bookkeeping.ValidationError
	if errors.As(err, &ve) {
		t.Fatalf("a newer schema is not a validation error: %v", err)
	}
}

// TestIntegrationCassandraMigratesFromV5: a transaction state a v5 binary
// stored (no offsets column) reads after the migration to v6 with no
// offsets, and a PutTxn with offsets over it stores them.
func TestIntegrationCassandraMigratesFromV5(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	raw := session(t, cfg)
	migrateTo(t, raw, 5)
	stmt := `INSERT INTO transactional_producers (transactional_id, producer_id, epoch, status, timeout_ms, partitions, groups, bumped_by_coordinator, version) ` +
		`VALUES ('a', 7, 3, 2, 60000, [('t1', 0)], ['g'], false, 4)`
	if err := raw.Query(stmt).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	s := openDriver(t, cfg)
	if got := appliedVersions(t, raw); len(got) != 9 || got[6].description != "001_transaction_offsets.cql" {
		t.Fatalf("schema_version after Open = %+v, want v1 to v9", got)
	}
	a := bookkeeping.Txn{TransactionalID: "a", ProducerID: 7, Epoch: 3, Status: bookkeeping.TxnOngoing, Timeout: time.Minute,
		Partitions: []bookkeeping.TxnPartition{{TopicID: "t1", Partition: 0}}, Groups: []string{"g"}, Version: 4}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GetTxn of a v5 row = %+v, %v; want %+v", got, err, a)
	}
	a.Offsets = []bookkeeping.TxnOffset{{Group: "g", Topic: "in", TopicID: "t0", Partition: 1, Offset: 9}}
	put, err := s.PutTxn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, put) || len(got.Offsets) != 1 {
		t.Fatalf("GetTxn after a PutTxn with offsets = %+v, %v; want %+v", got, err, put)
	}
}

// TestIntegrationCassandraMigratesFromV6: a transaction state a v6 binary
// stored (no prev_producer_id column) reads after the migration to v7 with
// no replaced producer id, and a PutTxn with one over it stores it.
func TestIntegrationCassandraMigratesFromV6(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	raw := session(t, cfg)
	migrateTo(t, raw, 6)
	stmt := `INSERT INTO transactional_producers (transactional_id, producer_id, epoch, status, timeout_ms, partitions, groups, bumped_by_coordinator, version, offsets) ` +
		`VALUES ('a', 7, 32766, 5, 60000, [], [], false, 4, [])`
	if err := raw.Query(stmt).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	s := openDriver(t, cfg)
	if got := appliedVersions(t, raw); len(got) != 9 || got[7].description != "001_replaced_producer_id.cql" {
		t.Fatalf("schema_version after Open = %+v, want v1 to v9", got)
	}
	a := bookkeeping.Txn{TransactionalID: "a", ProducerID: 7, Epoch: 32766, Status: bookkeeping.TxnCompleteCommit, Timeout: time.Minute, Version: 4}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GetTxn of a v6 row = %+v, %v; want %+v", got, err, a)
	}
	a.ProducerID, a.Epoch, a.PrevProducerID = 8, 0, 7
	put, err := s.PutTxn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, put) || got.PrevProducerID != 7 {
		t.Fatalf("GetTxn after a PutTxn with a replaced producer id = %+v, %v; want %+v", got, err, put)
	}
}

// TestIntegrationCassandraMigratesFromV8: a transaction state a v8 binary
// stored (no next_partitions, ended or timed_out columns) reads after the
// migration to v9 with none of them, and a PutTxn with them stores them.
func TestIntegrationCassandraMigratesFromV8(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	raw := session(t, cfg)
	migrateTo(t, raw, 8)
	stmt := `INSERT INTO transactions (bucket, transactional_id, producer_id, epoch, status, timeout_ms, partitions, groups, bumped_by_coordinator, version, offsets, prev_producer_id) ` +
		`VALUES (0, 'a', 7, 3, 3, 60000, [('t1', 0)], [], false, 4, [], 0)`
	if err := raw.Query(stmt).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	s := openDriver(t, cfg)
	if got := appliedVersions(t, raw); len(got) != 9 || got[9].description != "001_next_transaction.cql" {
		t.Fatalf("schema_version after Open = %+v, want v1 to v9", got)
	}
	a := bookkeeping.Txn{TransactionalID: "a", ProducerID: 7, Epoch: 3, Status: bookkeeping.TxnPrepareCommit, Timeout: time.Minute,
		Partitions: []bookkeeping.TxnPartition{{TopicID: "t1", Partition: 0}}, Version: 4}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GetTxn of a v8 row = %+v, %v; want %+v", got, err, a)
	}
	a.Next, a.Ended, a.TimedOut = []bookkeeping.TxnPartition{{TopicID: "t1", Partition: 2}}, bookkeeping.TxnCompleteCommit, true
	put, err := s.PutTxn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTxn(ctx, "a"); err != nil || !reflect.DeepEqual(got, put) || len(got.Next) != 1 || !got.TimedOut || got.Ended != bookkeeping.TxnCompleteCommit {
		t.Fatalf("GetTxn after a PutTxn with the v9 fields = %+v, %v; want %+v", got, err, put)
	}
}

// testMigrationEnv is what the tests migrate with (Open's defaults on a
// one-node Cassandra).
var testMigrationEnv = migrationEnv{cons: gocql.LocalQuorum, serial: gocql.LocalSerial, txnBuckets: defaultTxnBuckets}

// migrateTo leaves the keyspace of raw at schema version v, as a binary of
// that version would.
func migrateTo(t *testing.T, raw *gocql.Session, v int) {
	t.Helper()
	ms, err := loadMigrations(schemaFiles)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := migrate(t.Context(), raw, testMigrationEnv, ms, v); err != nil || got != v {
		t.Fatalf("migrate to v%d: version %d, %v", v, got, err)
	}
}
