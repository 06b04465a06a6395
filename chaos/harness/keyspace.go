package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	bkcassandra "github.com/sluicemq/sluice/pkg/bookkeeping/cassandra"
)

const syscallSIGCONT = syscall.SIGCONT

// createKeyspace creates and migrates a fresh keyspace with replication
// factor 1 (the stack's Cassandra is one node; `sluice fetch` would create
// it with factor 3, on which one node answers no quorum), dropped when t
// ends.
func createKeyspace(ctx context.Context, t testing.TB, cassandra string) string {
	t.Helper()
	keyspace := fmt.Sprintf("chaos_%s_%04x", strconv.FormatInt(time.Now().UnixNano(), 36), rand.N(1<<16))
	t.Cleanup(func() {
		cl := gocql.NewCluster(cassandra)
		cl.Timeout, cl.ConnectTimeout = 30*time.Second, 20*time.Second
		s, err := cl.CreateSession()
		if err != nil {
			t.Errorf("drop keyspace %s: %v", keyspace, err)
			return
		}
		defer s.Close()
		if err := s.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); err != nil {
			t.Errorf("drop keyspace %s: %v", keyspace, err)
		}
	})
	st, err := bkcassandra.Open(ctx, bkcassandra.Config{Hosts: []string{cassandra}, Keyspace: keyspace,
		Replication: bkcassandra.Replication{Class: "SimpleStrategy", Factor: 1},
		Timeout:     20 * time.Second, ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("create keyspace %s: %v", keyspace, err)
	}
	st.Close()
	return keyspace
}
