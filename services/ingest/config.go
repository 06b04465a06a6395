package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/internal/quota"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/gen/sluice/peer/v1/peerv1connect"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/balance"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

// Defaults for zero Config fields.
const (
	DefaultOwnerTTL          = 10 * time.Second
	DefaultHeartbeatInterval = 3 * time.Second
	DefaultMaxRecords        = 10_000
	DefaultMaxBatches        = 1_000
	DefaultMaxStreamInFlight = 64
	DefaultTopicCacheTTL     = 5 * time.Second
	DefaultOpenTimeout       = 30 * time.Second
	DefaultRetryAfter        = 100 * time.Millisecond
	DefaultMaxWriters        = 100_000
	DefaultBalanceInterval   = 5 * time.Second
	DefaultOpenParallelism   = 8
	DefaultMaxBufferedBytes  = 64 << 20
	DefaultBufferWait        = 100 * time.Millisecond
	DefaultTxnSweepInterval  = time.Second
	// MaxClientIDLength bounds the Sluice-Client-Id header.
	MaxClientIDLength = 255
)

// Config configures an ingest copy. Zero fields take the documented
// defaults; Validate reports every violation at once.
type Config struct {
	// OwnerID names this copy in the catalog's owner registry (required,
	// unique per copy; a restarted copy may reuse it — its partitions then
	// get a new epoch).
	OwnerID string
	// Address is where other copies forward produce requests to this one
	// (required; host:port).
	Address string
	// Writer bounds each partition writer (batching, buffers, roll-over).
	Writer partition.Config
	// OwnerTTL is how long the copy's heartbeat lives; a copy that stops
	// heartbeating loses its partitions after it. HeartbeatInterval must be
	// well below it. Zero means the defaults.
	OwnerTTL          time.Duration
	HeartbeatInterval time.Duration
	// MaxRecords and MaxBatches bound one produce request. Zero means the
	// defaults.
	MaxRecords int
	MaxBatches int
	// MaxStreamInFlight bounds the unanswered requests of one ProduceStream;
	// the server stops reading beyond it. Zero means the default.
	MaxStreamInFlight int
	// MaxWriters bounds the partitions this copy writes at once. Zero means
	// DefaultMaxWriters.
	MaxWriters int
	// MaxBufferedBytes bounds the batch bytes of all requests this copy has
	// accepted and not yet answered, over every partition (each partition
	// writer has its own, smaller bound too). A request beyond it waits up
	// to BufferWait, then gets RESOURCE_EXHAUSTED with a retry delay. Zero
	// means DefaultMaxBufferedBytes.
	//
	// Accepted bytes drain at the bookies' durable write rate (about
	// 50–100 MB/s on one disk), so this bound is also a bound on queueing
	// time, and it must stay well under the ledger client's AddTimeout (5 s):
	// at 256 MiB, a 2× overload queued adds past it, the client took
	// healthy bookies for failed and asked for ensemble changes that a
	// 3-bookie cluster cannot make (bench/workloads/o1.yaml).
	MaxBufferedBytes int64
	BufferWait       time.Duration
	// Limits bound record batches (sizes of keys, values, headers; records
	// per batch; the decompression guard). The topic's max.message.bytes
	// further bounds a batch. Zero fields take pkg/record's defaults.
	Limits record.Limits
	// TopicCacheTTL is how long topic metadata is cached. Zero means the
	// default.
	TopicCacheTTL time.Duration
	// OpenTimeout bounds taking over a partition (recovering its previous
	// ledger, opening a new one). Zero means the default.
	OpenTimeout time.Duration
	// RetryAfter is the delay RESOURCE_EXHAUSTED answers suggest. Zero
	// means the default.
	RetryAfter time.Duration
	// BalanceInterval is how often the copy compares its share of partition
	// leases with the other live copies' and acquires or releases (see
	// services/ingest/balance). Zero means the default; negative disables
	// balancing (partitions are then taken only on demand, by the first
	// produce a copy receives for them).
	BalanceInterval time.Duration
	// Balance bounds one balancing round.
	Balance balance.Config
	// OpenParallelism bounds the partitions a balancing round takes over
	// (or hands over) at once. Each takeover is a few catalog round trips
	// and a ledger recovery: one at a time, a copy took a minute to take
	// 256 partitions from a slow catalog. Zero means the default; at most
	// 256.
	OpenParallelism int
	// Quota sets byte-rate quotas per client id (the Sluice-Client-Id
	// request header): a client over its quota has its answers delayed by
	// the throttle time, which the answer reports (Kafka's quotas). The zero
	// value is unlimited.
	Quota quota.Config
	// TxnSweepInterval is how often the transaction sweeper passes over
	// every transactional id (aborting transactions past their deadline,
	// finishing ones a dead coordinator left half-written). Zero means
	// the default; negative turns the sweeper off (tests that step it).
	TxnSweepInterval time.Duration
	// Logger receives the service's events; nil discards them.
	Logger *slog.Logger
	// Now is the wall clock of what other processes see or judge: owner
	// liveness read from the catalog, transaction deadlines, append
	// timestamps. nil means time.Now. Chaos builds skew it.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.OwnerTTL, DefaultOwnerTTL)
	set(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	set(&c.TopicCacheTTL, DefaultTopicCacheTTL)
	set(&c.OpenTimeout, DefaultOpenTimeout)
	set(&c.RetryAfter, DefaultRetryAfter)
	set(&c.BalanceInterval, DefaultBalanceInterval)
	set(&c.BufferWait, DefaultBufferWait)
	set(&c.TxnSweepInterval, DefaultTxnSweepInterval)
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	seti := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	seti(&c.MaxRecords, DefaultMaxRecords)
	seti(&c.MaxBatches, DefaultMaxBatches)
	seti(&c.MaxStreamInFlight, DefaultMaxStreamInFlight)
	seti(&c.MaxWriters, DefaultMaxWriters)
	seti(&c.OpenParallelism, DefaultOpenParallelism)
	c.Limits = c.Limits.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Writer.Logger == nil {
		c.Writer.Logger = c.Logger
	}
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("ingest config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if err := catalog.ValidateID("OwnerID", c.OwnerID); err != nil {
		errs = append(errs, err)
	}
	if err := catalog.ValidateAddress("Address", c.Address); err != nil {
		errs = append(errs, err)
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval*2 > c.OwnerTTL {
		bad("HeartbeatInterval", "%v must be positive and at most half of OwnerTTL (%v)", c.HeartbeatInterval, c.OwnerTTL)
	}
	if err := catalog.ValidateTTL(c.OwnerTTL); err != nil {
		errs = append(errs, err)
	}
	if c.MaxRecords < 1 || c.MaxRecords > 1_000_000 {
		bad("MaxRecords", "%d outside [1, 1000000]", c.MaxRecords)
	}
	if c.MaxBatches < 1 || c.MaxBatches > 100_000 {
		bad("MaxBatches", "%d outside [1, 100000]", c.MaxBatches)
	}
	if c.MaxStreamInFlight < 1 || c.MaxStreamInFlight > 10_000 {
		bad("MaxStreamInFlight", "%d outside [1, 10000]", c.MaxStreamInFlight)
	}
	if c.MaxWriters < 1 {
		bad("MaxWriters", "%d must be positive", c.MaxWriters)
	}
	if c.OpenParallelism < 1 || c.OpenParallelism > 256 {
		bad("OpenParallelism", "%d outside [1, 256]", c.OpenParallelism)
	}
	if c.MaxBufferedBytes < int64(c.Limits.MaxBatchBytes) {
		bad("MaxBufferedBytes", "%d below the largest batch (%d)", c.MaxBufferedBytes, c.Limits.MaxBatchBytes)
	}
	if c.BufferWait < 0 || c.BufferWait > time.Minute {
		bad("BufferWait", "%v outside [0, 1m]", c.BufferWait)
	}
	if err := c.Limits.Check(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Writer.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Balance.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Quota.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Catalog is what ingest reads and changes in the catalog.
type Catalog interface {
	catalog.Topics
	catalog.Partitions
	catalog.Writers
	catalog.Owners
	catalog.Ledgers
}

// Deps are an ingest copy's dependencies.
type Deps struct {
	Catalog Catalog
	// Authorize, if set, decides each ProduceStream request for the
	// caller of ctx (internal/authz's CheckMessage): a refusal is that
	// request's answer, and the stream goes on. With it, the forwarded
	// header is believed from the cluster's own processes only.
	Authorize func(ctx context.Context, req *sluicev1.ProduceStreamRequest) error
	// Ledgers creates, recovers and reads ledgers (the ledger client).
	Ledgers partition.Ledgers
	// Forward returns a client for another copy's ProducerService at
	// address (host:port).
	Forward func(address string) sluicev1connect.ProducerServiceClient
	// Producers allocates producer ids for InitProducer and keeps the
	// transaction coordinator's state (pkg/bookkeeping); nil answers
	// UNIMPLEMENTED to InitProducer and the transaction RPCs.
	Producers ProducerStore
	// Partitions returns a client for another copy's PartitionService at
	// address (transaction markers); nil means Internal(hc) of the
	// Forward client's transport is not available, and markers for
	// partitions other copies write fail.
	Partitions func(address string) peerv1connect.PartitionServiceClient
	// Schemas is the schema registry's store, for topics with a
	// schema.subject (validation at produce, schemas.go); nil refuses
	// their records with FAILED_PRECONDITION.
	Schemas catalog.Schemas
	// Meters receives the copy's metrics (metrics.go; docs/metrics.md);
	// nil records none.
	Meters metric.MeterProvider
	// Tracer makes the copy's spans: one per produce request whose records
	// carry a trace context (tracing.go); nil makes none.
	Tracer trace.TracerProvider
}

// ProducerStore is the bookkeeping of producer sessions and transactions,
// and what the coordinator needs of the groups: the leases offsets sent
// to a transaction are checked against, and the committed offsets it
// applies.
type ProducerStore interface {
	bookkeeping.Producers
	bookkeeping.Transactions
	ListLeases(ctx context.Context, group, topic string) ([]bookkeeping.Lease, error)
	CommitTxnOffsets(ctx context.Context, offsets []bookkeeping.TxnOffset) error
}
