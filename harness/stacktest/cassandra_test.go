//go:build integration

package stacktest

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/harness/testenv"
)

func cassandraSession(t *testing.T, keyspace string) *gocql.Session {
	t.Helper()
	host, portStr, err := net.SplitHostPort(testenv.Cassandra(t))
	if err != nil {
		t.Fatalf("%s: %v", testenv.EnvCassandra, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("%s: port: %v", testenv.EnvCassandra, err)
	}
	cluster := gocql.NewCluster(host)
	cluster.Port = port
	cluster.Keyspace = keyspace
	cluster.Timeout = 20 * time.Second
	cluster.ConnectTimeout = 20 * time.Second
	cluster.Consistency = gocql.One
	s, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("connect to Cassandra at %s:%d: %v", host, port, err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestIntegrationCassandraLWTAndTTL(t *testing.T) {
	admin := cassandraSession(t, "")
	ks := fmt.Sprintf("smoke_%d", time.Now().UnixNano())
	if err := admin.Query(`CREATE KEYSPACE ` + ks + ` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`).Exec(); err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
	t.Cleanup(func() { _ = admin.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec() })

	s := cassandraSession(t, ks)
	if err := s.Query(`CREATE TABLE leases (grp text, part int, owner text, epoch bigint, PRIMARY KEY (grp, part))`).Exec(); err != nil {
		t.Fatalf("create table: %v", err)
	}

	// LWT insert: the first applies, the second sees the first's row.
	insert := `INSERT INTO leases (grp, part, owner, epoch) VALUES (?, ?, ?, ?) IF NOT EXISTS`
	prev := map[string]any{}
	applied, err := s.Query(insert, "g", 0, "member-a", 1).SerialConsistency(gocql.Serial).MapScanCAS(prev)
	if err != nil || !applied {
		t.Fatalf("first IF NOT EXISTS: applied=%v err=%v, want applied", applied, err)
	}
	prev = map[string]any{}
	applied, err = s.Query(insert, "g", 0, "member-b", 1).SerialConsistency(gocql.Serial).MapScanCAS(prev)
	if err != nil || applied {
		t.Fatalf("second IF NOT EXISTS: applied=%v err=%v, want rejected", applied, err)
	}
	if prev["owner"] != "member-a" {
		t.Fatalf("rejected LWT returned owner %v, want member-a", prev["owner"])
	}

	// Conditional update fenced on the epoch: a stale epoch is rejected.
	update := `UPDATE leases SET owner = ?, epoch = ? WHERE grp = ? AND part = ? IF epoch = ?`
	if applied, err := s.Query(update, "member-b", 2, "g", 0, 1).SerialConsistency(gocql.Serial).MapScanCAS(map[string]any{}); err != nil || !applied {
		t.Fatalf("CAS with current epoch: applied=%v err=%v", applied, err)
	}
	if applied, err := s.Query(update, "member-c", 2, "g", 0, 1).SerialConsistency(gocql.Serial).MapScanCAS(map[string]any{}); err != nil || applied {
		t.Fatalf("CAS with stale epoch: applied=%v err=%v, want rejected", applied, err)
	}

	// TTL: a row written with a 1 s TTL disappears. TTLs past 2038 need
	// storage_compatibility_mode NONE, so check a long TTL is accepted too.
	if err := s.Query(`INSERT INTO leases (grp, part, owner, epoch) VALUES ('ttl', 0, 'x', 1) USING TTL 1`).Exec(); err != nil {
		t.Fatalf("insert with TTL: %v", err)
	}
	if err := s.Query(`INSERT INTO leases (grp, part, owner, epoch) VALUES ('ttl', 1, 'y', 1) USING TTL 630720000`).Exec(); err != nil {
		t.Fatalf("insert with a 20-year TTL (needs storage_compatibility_mode NONE): %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := s.Query(`SELECT count(*) FROM leases WHERE grp = 'ttl' AND part = 0`).Scan(&n); err != nil {
			t.Fatalf("count: %v", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("row with TTL 1 s still there after 10 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
