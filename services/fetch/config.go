package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/internal/quota"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/services/fetch/assign"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// Defaults and hard limits (the proto documents the request limits).
const (
	DefaultMaxRecords     = 500
	MaxMaxRecords         = 10_000
	DefaultMaxBytes       = 1 << 20
	MaxMaxBytes           = 16 << 20
	MaxWait               = 30 * time.Second
	DefaultSessionTimeout = 10 * time.Second
	MinSessionTimeout     = time.Second
	MaxSessionTimeout     = 300 * time.Second
	MaxTopicsPerSession   = 100
	MaxCommitOffsets      = 10_000
	MaxClientInfoBytes    = 1024

	DefaultMaxSessions      = 10_000
	DefaultBalanceInterval  = 500 * time.Millisecond
	DefaultRevokeTimeout    = 5 * time.Second
	DefaultTopicCacheTTL    = 5 * time.Second
	DefaultMaxReadsInFlight = 256
	DefaultReadWait         = 100 * time.Millisecond
	DefaultRetryAfter       = 100 * time.Millisecond
	DefaultSessionBatch     = 1000
	DefaultSessionBatchSize = 1 << 20
)

// Config configures a fetch copy. Zero fields take the defaults.
type Config struct {
	// Address is where other fetch copies reach this one (host:port). With
	// it, session and member ids name this copy, so GrantCredits and Commit
	// calls that reach another copy are forwarded here (route.go). Empty
	// for a single copy.
	Address string
	// Log bounds partition reads (cache, tail watchers) and, in
	// Log.Segments, reads of offloaded ledgers from Deps.Objects (index
	// cache, bytes per ranged GET). Its ReadGate and Objects are set by New.
	Log partlog.Config
	// MaxSessions bounds the group sessions (Subscribe streams) this copy
	// serves at once; beyond it Subscribe answers RESOURCE_EXHAUSTED.
	MaxSessions int
	// BalanceInterval is how often a session compares its leases with its
	// fair share (services/fetch/assign) and looks for expired members'
	// leases. It bounds how fast a crashed member's partitions move (after
	// its session timeout).
	BalanceInterval time.Duration
	// Assign bounds the lease moves of one balancing round.
	Assign assign.Config
	// RevokeTimeout is how long a member keeps a revoked lease so it can
	// commit what it processed (commit on revoke).
	RevokeTimeout time.Duration
	// TopicCacheTTL is how long topic metadata is cached.
	TopicCacheTTL time.Duration
	// MaxReadsInFlight is the read budget: bookie reads running at once for
	// readers of this copy (fetches and session deliveries) that missed the
	// entry cache — catch-up reads, from the bookies or, for offloaded
	// ledgers, the object store (index opens and ranged GETs). A read
	// beyond it waits up to ReadWait,
	// then Fetch answers RESOURCE_EXHAUSTED and sessions retry. Tail reads
	// are served from the cache the tail watchers fill and never take the
	// budget, so catch-up readers cannot starve them, and the bookies see
	// a bounded read load next to their write path.
	MaxReadsInFlight int
	ReadWait         time.Duration
	// RetryAfter is the delay RESOURCE_EXHAUSTED answers suggest.
	RetryAfter time.Duration
	// SessionBatchRecords and SessionBatchBytes bound one RecordsDelivered
	// message (also bounded by the session's credits).
	SessionBatchRecords int
	SessionBatchBytes   int
	// GroupQuota sets byte-rate quotas per consumer group (keyed by group
	// name; Subscribe deliveries): a group over it has its deliveries
	// delayed (Kafka's consumer quotas). The zero value is unlimited.
	GroupQuota quota.Config
	// ClientQuota sets byte-rate quotas per Sluice-Client-Id header on
	// Fetch: answers are delayed by the throttle time, which they report.
	// The zero value is unlimited.
	ClientQuota quota.Config
	// TriggerRefresh is how often the trigger runtime reads the catalog's
	// triggers (a created, changed or deleted trigger takes effect within
	// it).
	TriggerRefresh time.Duration
	// TriggerSessionTimeout is the session timeout of a trigger's group
	// member: how long after a copy dies its partitions move.
	TriggerSessionTimeout time.Duration
	// TriggerBootstrapServers is the bootstrapServers of the events a
	// trigger sends (Lambda's Kafka event names the brokers); default
	// Address.
	TriggerBootstrapServers string
	// LagInterval is how often the copy measures the lag of the groups
	// its sessions belong to, for the sluice.fetch.group.lag gauge
	// (metrics.go); default DefaultLagInterval.
	LagInterval time.Duration
	// Logger receives the service's events; nil discards them.
	Logger *slog.Logger
	// Now is the clock of group membership and sessions: the heartbeat
	// schedule, liveness, revoke deadlines and the session keepalive
	// (services/fetch/membership decides on it; the coordinator's ticker,
	// every BalanceInterval, only paces the checks). nil means time.Now.
	// Tests move it.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	seti := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	seti(&c.MaxSessions, DefaultMaxSessions)
	seti(&c.MaxReadsInFlight, DefaultMaxReadsInFlight)
	seti(&c.SessionBatchRecords, DefaultSessionBatch)
	seti(&c.SessionBatchBytes, DefaultSessionBatchSize)
	setd(&c.BalanceInterval, DefaultBalanceInterval)
	setd(&c.RevokeTimeout, DefaultRevokeTimeout)
	setd(&c.TopicCacheTTL, DefaultTopicCacheTTL)
	setd(&c.ReadWait, DefaultReadWait)
	setd(&c.RetryAfter, DefaultRetryAfter)
	setd(&c.TriggerRefresh, DefaultTriggerRefresh)
	setd(&c.TriggerSessionTimeout, DefaultTriggerSessionTimeout)
	setd(&c.LagInterval, DefaultLagInterval)
	if c.TriggerBootstrapServers == "" {
		c.TriggerBootstrapServers = c.Address
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log.Logger == nil {
		c.Log.Logger = c.Logger
	}
	return c
}

// Validate reports every field out of range.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("fetch config: %s %s", field, fmt.Sprintf(format, args...)))
	}
	if err := c.Log.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Assign.Validate(); err != nil {
		errs = append(errs, err)
	}
	rng := func(name string, v, lo, hi int) {
		if v != 0 && (v < lo || v > hi) {
			bad(name, "%d is outside [%d, %d]", v, lo, hi)
		}
	}
	rng("MaxSessions", c.MaxSessions, 1, 1_000_000)
	rng("MaxReadsInFlight", c.MaxReadsInFlight, 1, 100_000)
	rng("SessionBatchRecords", c.SessionBatchRecords, 1, MaxMaxRecords)
	rng("SessionBatchBytes", c.SessionBatchBytes, 1, MaxMaxBytes)
	dur := func(name string, v, lo, hi time.Duration) {
		if v != 0 && (v < lo || v > hi) {
			bad(name, "%v is outside [%v, %v]", v, lo, hi)
		}
	}
	dur("BalanceInterval", c.BalanceInterval, time.Millisecond, time.Minute)
	dur("RevokeTimeout", c.RevokeTimeout, time.Millisecond, 5*time.Minute)
	dur("TopicCacheTTL", c.TopicCacheTTL, time.Millisecond, time.Hour)
	dur("ReadWait", c.ReadWait, time.Millisecond, time.Minute)
	dur("RetryAfter", c.RetryAfter, time.Millisecond, time.Minute)
	dur("TriggerRefresh", c.TriggerRefresh, 10*time.Millisecond, time.Hour)
	dur("TriggerSessionTimeout", c.TriggerSessionTimeout, MinSessionTimeout, MaxSessionTimeout)
	dur("LagInterval", c.LagInterval, 10*time.Millisecond, time.Hour)
	return errors.Join(errs...)
}

// Bookkeeping is what the fetch service needs of the consumer-side
// metadata store (pkg/bookkeeping).
type Bookkeeping interface {
	bookkeeping.Members
	bookkeeping.Leases
	bookkeeping.Offsets
	// ListGroups is bookkeeping.Groups: group names in order after `after`.
	ListGroups(ctx context.Context, after string, limit int) (groups []string, more bool, err error)
}

// Catalog is what the fetch service needs of the catalog.
type Catalog interface {
	GetTopic(ctx context.Context, name string) (catalog.Topic, error)
	catalog.Partitions
}
