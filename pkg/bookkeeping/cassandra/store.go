package cassandra

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// store is the Cassandra bookkeeping's driver, on one keyspace. Open wraps
// it in a *bookkeeping.Store, which checks every argument before a method
// here runs; these methods only read, decide on what they read, and write.
// It is safe for concurrent use; any number of stores, in any number of
// processes, may share a keyspace.
type store struct {
	session *gocql.Session
	cons    gocql.Consistency // regular reads and writes, LWT commit phase
	serial  gocql.Consistency // LWTs and serial reads
	ids     *idBlocks
	now     func() time.Time // heartbeat_at of members
	// txnBuckets is the keyspace's txn_buckets setting (schema v8), read
	// at open: every record's bucket is txnBucket(id, txnBuckets).
	txnBuckets int
	batches    *txnBatcher         // every write of a transactional id's record
	metrics    metric.Registration // nil without Config.MeterProvider
}

var _ bookkeeping.Driver = (*store)(nil)

// Open connects, creates the keyspace if needed and allowed, brings the schema
// up to date (or checks it is, with NoMigrate) and returns the store. Close
// it when done.
func Open(ctx context.Context, cfg Config) (*bookkeeping.Store, error) {
	s, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return bookkeeping.New(s), nil
}

// open opens the driver alone; Open is what callers get.
func open(ctx context.Context, cfg Config) (*store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ms, err := loadMigrations(schemaFiles)
	if err != nil {
		return nil, fmt.Errorf("cassandra bookkeeping: embedded schema: %w", err)
	}
	if !cfg.NoKeyspaceCreation {
		if err := createKeyspace(ctx, cfg); err != nil {
			return nil, err
		}
	}
	session, err := cfg.clusterConfig(cfg.Keyspace).CreateSession()
	if err != nil {
		return nil, fmt.Errorf("cassandra bookkeeping: connect to keyspace %s: %w", cfg.Keyspace, err)
	}
	s := &store{
		session: session,
		cons:    regularLevels[cfg.Consistency],
		serial:  serialLevels[cfg.SerialConsistency],
		now:     cfg.Now,
	}
	s.ids = &idBlocks{store: s, size: cfg.ProducerIDBlock}
	s.batches = &txnBatcher{s: s, queues: map[int]*txnQueue{}}
	if err := s.ensureSchema(ctx, cfg, ms); err != nil {
		session.Close()
		return nil, err
	}
	if s.txnBuckets, err = readTxnBuckets(ctx, s.session, s.cons); err != nil {
		session.Close()
		return nil, fmt.Errorf("cassandra bookkeeping: keyspace %s: %w", cfg.Keyspace, err)
	}
	if s.metrics, err = s.batches.register(cfg.MeterProvider); err != nil {
		session.Close()
		return nil, fmt.Errorf("cassandra bookkeeping: metrics: %w", err)
	}
	if cfg.TxnBuckets != 0 && cfg.TxnBuckets != s.txnBuckets {
		cfg.Logger.Warn("cassandra bookkeeping: the keyspace's transaction buckets were set when it was migrated to schema v8; the configured number is not used",
			"keyspace", cfg.Keyspace, "stored", s.txnBuckets, "configured", cfg.TxnBuckets)
	}
	return s, nil
}

func (s *store) ensureSchema(ctx context.Context, cfg Config, ms []migration) error {
	latest := ms[len(ms)-1].version
	if cfg.NoMigrate {
		v, err := schemaVersion(ctx, s.session, s.cons)
		if err != nil {
			return fmt.Errorf("cassandra bookkeeping: %w", err)
		}
		if v != latest {
			return fmt.Errorf("cassandra bookkeeping: keyspace %s has schema v%d, this binary needs v%d (NoMigrate is set: run the migrations first)", cfg.Keyspace, v, latest)
		}
		return nil
	}
	env := migrationEnv{cons: s.cons, serial: s.serial, txnBuckets: cfg.withTxnBuckets()}
	if _, err := migrate(ctx, s.session, env, ms, latest); err != nil {
		return fmt.Errorf("cassandra bookkeeping: keyspace %s: %w", cfg.Keyspace, err)
	}
	return nil
}

// createKeyspace creates cfg.Keyspace if it does not exist, from a short-lived
// session without a keyspace (the main session needs the keyspace to exist).
func createKeyspace(ctx context.Context, cfg Config) error {
	session, err := cfg.clusterConfig("").CreateSession()
	if err != nil {
		return fmt.Errorf("cassandra bookkeeping: connect: %w", err)
	}
	defer session.Close()
	// Keyspace and replication are validated identifiers and numbers, so
	// formatting them into the statement is safe.
	stmt := fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s", cfg.Keyspace, cfg.Replication.cql())
	if err := session.Query(stmt).ExecContext(ctx); err != nil {
		return fmt.Errorf("cassandra bookkeeping: create keyspace %s: %w", cfg.Keyspace, err)
	}
	return nil
}

// Close closes the session.
func (s *store) Close() error {
	s.session.Close()
	if s.metrics != nil {
		return s.metrics.Unregister()
	}
	return nil
}

// write is a plain (non-LWT) statement at the regular consistency.
func (s *store) write(stmt string, args ...any) *gocql.Query {
	return s.session.Query(stmt, args...).Consistency(s.cons)
}

// read is a read at the regular consistency. Reads are idempotent, so the
// driver may retry them.
func (s *store) read(stmt string, args ...any) *gocql.Query {
	return s.session.Query(stmt, args...).Consistency(s.cons).Idempotent(true)
}

// serialRead is a linearizable read: it runs at the serial consistency, which
// also completes any Paxos round in flight on the partition, so what it
// returns is the settled outcome of every earlier LWT.
func (s *store) serialRead(stmt string, args ...any) *gocql.Query {
	return s.session.Query(stmt, args...).Consistency(s.serial).Idempotent(true)
}

// lwt is a conditional statement: Paxos at the serial consistency, commit at
// the regular one.
func (s *store) lwt(stmt string, args ...any) *gocql.Query {
	return s.session.Query(stmt, args...).Consistency(s.cons).SerialConsistency(s.serial)
}

// lwtBatch is a conditional batch. All its statements must be on one
// partition key; Cassandra then runs it as one Paxos round.
func (s *store) lwtBatch() *gocql.Batch {
	return s.session.Batch(gocql.LoggedBatch).Consistency(s.cons).SerialConsistency(s.serial)
}

// unknownOutcome reports whether an LWT failed in a way that may or may not
// have applied it (a timeout after the proposal went out).
func unknownOutcome(err error) bool {
	var (
		wt *gocql.RequestErrWriteTimeout
		rt *gocql.RequestErrReadTimeout
		cu *gocql.RequestErrCASWriteUnknown
	)
	return errors.As(err, &wt) || errors.As(err, &rt) || errors.As(err, &cu) || errors.Is(err, gocql.ErrTimeoutNoResponse)
}

// maxCASAttempts bounds the read-decide-CAS loops. Each failed attempt means
// another caller's CAS succeeded, so with up to this many racers every caller
// finishes.
const maxCASAttempts = 32
