//go:build integration

package cassandra

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/bookkeeping/bookkeepingtest"
)

// TestIntegrationCassandraConformance runs the whole bookkeeping suite against
// a real Cassandra node. All tests share one fresh keyspace (the suite keeps
// them apart by name). Expiry is real: members of the expiry tests use the
// minimum 1 s session timeout, and TTLs count whole seconds, so a member may
// be seen live up to ~2 s past it; 3 s of grace covers that.
func TestIntegrationCassandraConformance(t *testing.T) {
	s := openStore(t, testConfig(t))
	bookkeepingtest.Run(t, bookkeepingtest.HarnessFunc(func(t *testing.T) bookkeepingtest.Store {
		return bookkeepingtest.Store{
			Members: s, Leases: s, Offsets: s, Groups: s, Producers: s, Transactions: s,
			Timing: bookkeepingtest.WallClock(time.Second, 3*time.Second),
		}
	}))
}
