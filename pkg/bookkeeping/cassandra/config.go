package cassandra

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"go.opentelemetry.io/otel/metric"
)

// Config configures Open. The zero value of every field but Hosts is a safe
// default, documented on the field.
type Config struct {
	// Hosts are the contact points, "host" or "host:port". Required.
	Hosts []string
	// Port is the CQL port for hosts without one. Default 9042.
	Port int
	// Keyspace holds every table. Default "sluice". Lower-case letters,
	// digits and "_", starting with a letter, at most 48 characters.
	Keyspace string
	// Replication is used when Open creates the keyspace.
	Replication Replication
	// NoKeyspaceCreation stops Open from creating the keyspace (when
	// operators manage it); Open then fails if it does not exist.
	NoKeyspaceCreation bool
	// NoMigrate stops Open from applying schema migrations (when a deploy
	// step runs them); Open then fails unless the schema is current.
	NoMigrate bool
	// Consistency of regular reads and writes, and of the commit phase of
	// LWTs: LOCAL_QUORUM (default), QUORUM, EACH_QUORUM or ALL. Weaker
	// levels are refused: offsets and leases must be read back as written.
	Consistency string
	// SerialConsistency of LWTs and serial reads: LOCAL_SERIAL (default) or
	// SERIAL (Paxos across data centers).
	SerialConsistency string
	// Timeout of one request. Default 5 s — above Cassandra's default write
	// (2 s) and CAS contention (1 s) timeouts, so the server answers first.
	Timeout time.Duration
	// ConnectTimeout of the initial connection. Default 10 s.
	ConnectTimeout time.Duration
	// ProducerIDBlock is how many producer ids one LWT reserves, in
	// [1, 1_000_000]. Default 1000. Unused ids of a block are lost when the
	// process stops.
	ProducerIDBlock int64
	// TxnBuckets is the number of partitions (buckets) of the
	// transactions table, written to the keyspace when Open migrates it to
	// schema v8 and fixed from then on: the stored number is what every
	// binary uses, and a different one here is logged and ignored. The
	// writes of one bucket's records from one process go to Cassandra
	// together, one Paxos round per batch (txnbatch.go): fewer buckets
	// batch more, more buckets spread the records and the processes'
	// rounds over more partitions. In [1, 4096]; 0 means the default, 1.
	TxnBuckets int
	// MeterProvider receives the store's metrics (txnbatch.go:
	// sluice_bookkeeping_txn_rounds_total and _writes_total). Default:
	// none.
	MeterProvider metric.MeterProvider
	// Logger receives the driver's messages. Default: discarded.
	Logger *slog.Logger
	// Now is the clock of members' heartbeat_at. Default time.Now. (The
	// driver's write timestamps come from the real clock regardless.)
	Now func() time.Time
	// Configure, if set, is called on the driver config just before
	// connecting, for what Config does not cover (TLS, authentication,
	// observers). Keyspace and consistencies stay Config's: the store sets
	// them itself.
	Configure func(*gocql.ClusterConfig)
}

// Replication is the replication of a keyspace Open creates.
type Replication struct {
	// Class is "NetworkTopologyStrategy" (default) or "SimpleStrategy".
	Class string
	// Factor is the replication factor (in every data center for
	// NetworkTopologyStrategy), in [1, 10]. Default 3: quorum operations
	// survive the loss of one replica.
	Factor int
	// DataCenters sets the factor per data center
	// (NetworkTopologyStrategy only); when set, Factor is not used.
	DataCenters map[string]int
}

const (
	defaultKeyspace        = "sluice"
	defaultPort            = 9042
	defaultTimeout         = 5 * time.Second
	defaultConnectTimeout  = 10 * time.Second
	defaultProducerIDBlock = 1000
	maxProducerIDBlock     = 1_000_000
	defaultTxnBuckets      = 1
	maxReplicationFactor   = 10
	maxTimeout             = 5 * time.Minute
	networkTopology        = "NetworkTopologyStrategy"
	simpleStrategy         = "SimpleStrategy"
)

var (
	keyspaceRE   = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
	dataCenterRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

	// Only levels that make reads see acknowledged writes.
	regularLevels = map[string]gocql.Consistency{
		"LOCAL_QUORUM": gocql.LocalQuorum, "QUORUM": gocql.Quorum, "EACH_QUORUM": gocql.EachQuorum, "ALL": gocql.All,
	}
	serialLevels = map[string]gocql.Consistency{"LOCAL_SERIAL": gocql.LocalSerial, "SERIAL": gocql.Serial}
)

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Port == 0 {
		c.Port = defaultPort
	}
	if c.Keyspace == "" {
		c.Keyspace = defaultKeyspace
	}
	if c.Replication.Class == "" {
		c.Replication.Class = networkTopology
	}
	if c.Replication.Factor == 0 && len(c.Replication.DataCenters) == 0 {
		c.Replication.Factor = 3
	}
	if c.Consistency == "" {
		c.Consistency = "LOCAL_QUORUM"
	}
	if c.SerialConsistency == "" {
		c.SerialConsistency = "LOCAL_SERIAL"
	}
	c.Consistency, c.SerialConsistency = strings.ToUpper(c.Consistency), strings.ToUpper(c.SerialConsistency)
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = defaultConnectTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ProducerIDBlock == 0 {
		c.ProducerIDBlock = defaultProducerIDBlock
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// MaxTxnBuckets bounds Config.TxnBuckets.
const MaxTxnBuckets = 4096

// withTxnBuckets is the number of buckets a migration to schema v8 writes.
func (c Config) withTxnBuckets() int {
	if c.TxnBuckets == 0 {
		return defaultTxnBuckets
	}
	return c.TxnBuckets
}

// Validate reports every problem of c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("cassandra config: "+format, args...))
	}
	if len(c.Hosts) == 0 {
		bad("Hosts: at least one contact point is required")
	}
	for i, h := range c.Hosts {
		if strings.TrimSpace(h) == "" {
			bad("Hosts[%d]: empty", i)
		}
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("Port %d: outside [1, 65535]", c.Port)
	}
	if !keyspaceRE.MatchString(c.Keyspace) {
		bad("Keyspace %q: want %s", c.Keyspace, keyspaceRE)
	}
	if _, ok := regularLevels[c.Consistency]; !ok {
		bad("Consistency %q: want one of %v", c.Consistency, slices.Sorted(maps.Keys(regularLevels)))
	}
	if _, ok := serialLevels[c.SerialConsistency]; !ok {
		bad("SerialConsistency %q: want one of %v", c.SerialConsistency, slices.Sorted(maps.Keys(serialLevels)))
	}
	if c.Timeout < 0 || c.Timeout > maxTimeout {
		bad("Timeout %v: outside (0, %v]", c.Timeout, maxTimeout)
	}
	if c.ConnectTimeout < 0 || c.ConnectTimeout > maxTimeout {
		bad("ConnectTimeout %v: outside (0, %v]", c.ConnectTimeout, maxTimeout)
	}
	if c.ProducerIDBlock < 1 || c.ProducerIDBlock > maxProducerIDBlock {
		bad("ProducerIDBlock %d: outside [1, %d]", c.ProducerIDBlock, maxProducerIDBlock)
	}
	if c.TxnBuckets < 0 || c.TxnBuckets > MaxTxnBuckets {
		bad("TxnBuckets %d: outside [1, %d] (0 for the default, %d)", c.TxnBuckets, MaxTxnBuckets, defaultTxnBuckets)
	}
	errs = append(errs, c.Replication.validate()...)
	return errors.Join(errs...)
}

func (r Replication) validate() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("cassandra config: Replication."+format, args...))
	}
	switch r.Class {
	case networkTopology:
	case simpleStrategy:
		if len(r.DataCenters) > 0 {
			bad("DataCenters: only for %s", networkTopology)
		}
	default:
		bad("Class %q: want %s or %s", r.Class, networkTopology, simpleStrategy)
	}
	if len(r.DataCenters) == 0 && (r.Factor < 1 || r.Factor > maxReplicationFactor) {
		bad("Factor %d: outside [1, %d]", r.Factor, maxReplicationFactor)
	}
	for _, dc := range slices.Sorted(maps.Keys(r.DataCenters)) {
		if !dataCenterRE.MatchString(dc) {
			bad("DataCenters[%q]: want %s", dc, dataCenterRE)
		}
		if f := r.DataCenters[dc]; f < 1 || f > maxReplicationFactor {
			bad("DataCenters[%q] = %d: outside [1, %d]", dc, f, maxReplicationFactor)
		}
	}
	return errs
}

// cql renders r as the replication map of CREATE KEYSPACE. r is validated,
// so the names need no quoting beyond the single quotes.
func (r Replication) cql() string {
	parts := []string{fmt.Sprintf("'class': '%s'", r.Class)}
	if len(r.DataCenters) == 0 {
		parts = append(parts, fmt.Sprintf("'replication_factor': %d", r.Factor))
	}
	for _, dc := range slices.Sorted(maps.Keys(r.DataCenters)) {
		parts = append(parts, fmt.Sprintf("'%s': %d", dc, r.DataCenters[dc]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// clusterConfig builds the driver config for a validated c; keyspace "" is
// for the bootstrap session that creates the keyspace.
func (c Config) clusterConfig(keyspace string) *gocql.ClusterConfig {
	cc := gocql.NewCluster(c.Hosts...)
	cc.Port = c.Port
	cc.Keyspace = keyspace
	cc.Consistency = regularLevels[c.Consistency]
	cc.SerialConsistency = serialLevels[c.SerialConsistency]
	cc.Timeout = c.Timeout
	cc.ConnectTimeout = c.ConnectTimeout
	cc.Logger = slogLogger{c.Logger}
	// Only statements marked idempotent (reads) are retried; LWTs never are
	// — their outcome after a timeout is settled by a serial read instead.
	cc.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 2}
	if c.Configure != nil {
		c.Configure(cc)
		cc.Keyspace = keyspace // not the hook's to change
	}
	return cc
}
