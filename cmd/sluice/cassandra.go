package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicemq/sluice/internal/tlsconf"
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
	buckets   int
	tlsCA     string
	tlsCert   string
	tlsKey    string
	username  string
	pwFile    string

	hosts []string // from cassandra, by check
	// bucketsSet: --cassandra-txn-buckets was given (the default is not
	// compared with a keyspace's stored number, so it is not warned of).
	bucketsSet func() bool
}

// cassandraPasswordEnv names the environment variable holding the
// Cassandra password (a flag would show it in ps).
const cassandraPasswordEnv = "SLUICE_CASSANDRA_PASSWORD"

func (f *cassandraFlags) register(cmd *cobra.Command, usage string) {
	fs := cmd.Flags()
	f.bucketsSet = func() bool { return fs.Changed("cassandra-txn-buckets") }
	fs.StringVar(&f.cassandra, "cassandra", "", "comma-separated Cassandra contact points host[:port] "+usage)
	fs.StringVar(&f.keyspace, "keyspace", "sluice", "Cassandra keyspace (created and migrated at start-up)")
	fs.IntVar(&f.rf, "replication-factor", 3, "replication factor of the keyspace when this process creates it (per data center; 1 for a single-node Cassandra)")
	fs.IntVar(&f.buckets, "cassandra-txn-buckets", 1, "Cassandra partitions (buckets) of the transactions table, set when this process migrates the keyspace to schema v8 and fixed after: one batches more compare-and-sets per Paxos round; more spread many ingest copies or transactional ids")
	fs.StringVar(&f.tlsCA, "cassandra-tls-ca", "", "CA certificates (PEM) of Cassandra's certificates: connect over TLS, checking the nodes' host names")
	fs.StringVar(&f.tlsCert, "cassandra-tls-cert", "", "client certificate (PEM) for Cassandra nodes that require one, with --cassandra-tls-key")
	fs.StringVar(&f.tlsKey, "cassandra-tls-key", "", "the key of --cassandra-tls-cert (PEM)")
	fs.StringVar(&f.username, "cassandra-username", "", "authenticate to Cassandra as this user (PasswordAuthenticator); the password from $"+cassandraPasswordEnv+" or --cassandra-password-file")
	fs.StringVar(&f.pwFile, "cassandra-password-file", "", "file holding the Cassandra password (instead of $"+cassandraPasswordEnv+")")
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
	f.security(c)
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
	if f.buckets < 1 || f.buckets > bkcassandra.MaxTxnBuckets {
		c.badf("--cassandra-txn-buckets %d: want 1..%d", f.buckets, bkcassandra.MaxTxnBuckets)
	}
}

// security checks the TLS and authentication flags into c.
func (f *cassandraFlags) security(c *flagCheck) {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		c.badf("--cassandra-tls-cert and --cassandra-tls-key go together")
	}
	if f.tlsCert != "" && f.tlsCA == "" {
		c.badf("--cassandra-tls-cert needs --cassandra-tls-ca (the client certificate goes with TLS)")
	}
	if f.pwFile != "" && f.username == "" {
		c.badf("--cassandra-password-file needs --cassandra-username")
	}
}

// configure is the driver hook for TLS and authentication (nil when
// neither is set).
func (f *cassandraFlags) configure() (func(*gocql.ClusterConfig), error) {
	if f.tlsCA == "" && f.username == "" {
		return nil, nil
	}
	var ssl *gocql.SslOptions
	if f.tlsCA != "" {
		cfg, err := tlsconf.Client{CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey}.Config()
		if err != nil {
			return nil, fmt.Errorf("--cassandra-tls-ca/cert/key: %w", err)
		}
		ssl = &gocql.SslOptions{Config: cfg, EnableHostVerification: true}
	}
	var authn gocql.Authenticator
	if f.username != "" {
		pw := os.Getenv(cassandraPasswordEnv)
		if f.pwFile != "" {
			b, err := os.ReadFile(f.pwFile)
			if err != nil {
				return nil, fmt.Errorf("--cassandra-password-file: %w", err)
			}
			pw = strings.TrimRight(string(b), "\r\n")
		}
		if pw == "" {
			return nil, fmt.Errorf("--cassandra-username %s: no password (set $%s or --cassandra-password-file)", f.username, cassandraPasswordEnv)
		}
		authn = gocql.PasswordAuthenticator{Username: f.username, Password: pw}
	}
	return func(cc *gocql.ClusterConfig) {
		if ssl != nil {
			cc.SslOpts = ssl
		}
		if authn != nil {
			cc.Authenticator = authn
		}
	}, nil
}

// open opens the store (nil, nil without --cassandra).
func (f *cassandraFlags) open(ctx context.Context, log *slog.Logger, mp metric.MeterProvider) (*bookkeeping.Store, error) {
	if f.cassandra == "" {
		return nil, nil
	}
	configure, err := f.configure()
	if err != nil {
		return nil, err
	}
	buckets := 0 // the store's default
	if f.bucketsSet != nil && f.bucketsSet() {
		buckets = f.buckets
	}
	bk, err := bkcassandra.Open(ctx, bkcassandra.Config{Hosts: f.hosts, Keyspace: f.keyspace,
		Replication: bkcassandra.Replication{Factor: f.rf}, TxnBuckets: buckets, MeterProvider: mp, Logger: log, Now: wallNow, Configure: configure})
	if err != nil {
		return nil, fmt.Errorf("open Cassandra bookkeeping at %s: %w (is Cassandra up? localstack/stack.sh up cassandra)", f.cassandra, err)
	}
	return bk, nil
}
