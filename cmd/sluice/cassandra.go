package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	bkcassandra "github.com/sluicemq/sluice/pkg/bookkeeping/cassandra"
)

// cassandraFlags choose the Cassandra bookkeeping store (groups, leases,
// offsets, producer ids): `sluice fetch` needs it, `sluice ingest` may use
// it for producer ids.
type cassandraFlags struct {
	cassandra string
	keyspace  string
	rf        int

	hosts []string // from cassandra, by check
}

func (f *cassandraFlags) register(cmd *cobra.Command, usage string) {
	fs := cmd.Flags()
	fs.StringVar(&f.cassandra, "cassandra", "", "comma-separated Cassandra contact points host[:port] "+usage)
	fs.StringVar(&f.keyspace, "keyspace", "sluice", "Cassandra keyspace (created and migrated at start-up)")
	fs.IntVar(&f.rf, "replication-factor", 3, "replication factor of the keyspace when this process creates it (per data center; 1 for a single-node Cassandra)")
}

// check checks the flags into c; required says whether --cassandra must be
// set.
func (f *cassandraFlags) check(c *flagCheck, required bool) {
	if required {
		c.required("cassandra", f.cassandra)
	}
	f.hosts = nil
	if f.cassandra != "" {
		f.hosts = splitList(f.cassandra)
		for _, h := range f.hosts {
			if h == "" || strings.ContainsAny(h, " \t") {
				c.badf("--cassandra %q: want host[:port],host[:port],...", f.cassandra)
				break
			}
		}
	}
	// The bookkeeping's own rules, one field at a time.
	c.required("keyspace", f.keyspace)
	if err := (bkcassandra.Config{Hosts: []string{"h"}, Keyspace: f.keyspace}).Validate(); err != nil {
		c.badf("--keyspace %q: %v", f.keyspace, err)
	}
	if f.rf == 0 { // the config's zero is its default
		c.badf("--replication-factor 0: want 1 or more")
	} else if err := (bkcassandra.Config{Hosts: []string{"h"}, Replication: bkcassandra.Replication{Factor: f.rf}}).Validate(); err != nil {
		c.badf("--replication-factor %d: %v", f.rf, err)
	}
}

// open opens the store (nil, nil without --cassandra).
func (f *cassandraFlags) open(ctx context.Context, log *slog.Logger) (*bookkeeping.Store, error) {
	if f.cassandra == "" {
		return nil, nil
	}
	bk, err := bkcassandra.Open(ctx, bkcassandra.Config{Hosts: f.hosts, Keyspace: f.keyspace,
		Replication: bkcassandra.Replication{Factor: f.rf}, Logger: log, Now: wallNow})
	if err != nil {
		return nil, fmt.Errorf("open Cassandra bookkeeping at %s: %w (is Cassandra up? localstack/stack.sh up cassandra)", f.cassandra, err)
	}
	return bk, nil
}
