//go:build integration

package cassandra

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig returns a Config for a fresh keyspace (RF 1: one node; LWTs work
// with RF 1) on the stack's Cassandra, dropped when t ends.
func testConfig(t *testing.T) Config {
	t.Helper()
	host, portStr, err := net.SplitHostPort(testenv.Cassandra(t))
	if err != nil {
		t.Fatalf("%s: %v", testenv.EnvCassandra, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("%s: port: %v", testenv.EnvCassandra, err)
	}
	cfg := Config{
		Hosts:       []string{host},
		Port:        port,
		Keyspace:    fmt.Sprintf("bk_test_%s_%04x", strconv.FormatInt(time.Now().UnixNano(), 36), rand.N(1<<16)),
		Replication: Replication{Class: simpleStrategy, Factor: 1},
		// Schema changes on a busy 2-core node can be slow.
		Timeout:        20 * time.Second,
		ConnectTimeout: 20 * time.Second,
	}
	t.Cleanup(func() { dropKeyspace(t, cfg) })
	return cfg
}

func dropKeyspace(t *testing.T, cfg Config) {
	session, err := cfg.withDefaults().clusterConfig("").CreateSession()
	if err != nil {
		t.Errorf("drop keyspace %s: connect: %v", cfg.Keyspace, err)
		return
	}
	defer session.Close()
	if err := session.Query("DROP KEYSPACE IF EXISTS " + cfg.Keyspace).Exec(); err != nil {
		t.Errorf("drop keyspace %s: %v", cfg.Keyspace, err)
	}
}

// openStore opens cfg as callers do (the *bookkeeping.Store) and closes
// the store when t ends.
func openStore(t *testing.T, cfg Config) *bookkeeping.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openDriver is openStore for the tests that reach into the driver.
func openDriver(t *testing.T, cfg Config) *store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := open(ctx, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
