package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Catalog is what the compactor needs of the catalog.
type Catalog interface {
	ListTopics(ctx context.Context, pageToken string, limit int) (catalog.Page[catalog.Topic], error)
	catalog.Partitions
	catalog.LedgerTrimmer
	catalog.Ledgers
	catalog.LedgerLister
	catalog.DeletedTopics
	// ListLiveBookies is the bookie registry (re-replication).
	ListLiveBookies(ctx context.Context) ([]catalog.Bookie, error)
}

// Deps are the compactor's collaborators.
type Deps struct {
	// Catalog holds topics, partition chains and ledger metadata (required).
	Catalog Catalog
	// Ledgers reads ledgers from the bookies and deletes them there
	// (required).
	Ledgers *client.Client
	// Objects is where segments go (pkg/objstore; required).
	Objects *blob.Bucket
	// Meters is the meter provider; nil records nothing.
	Meters metric.MeterProvider
	// Hooks are test seams; leave them zero.
	Hooks Hooks
}

// Compactor moves sealed ledgers to object storage and enforces retention.
// One Compactor runs one pass at a time (Pass and Run serialize).
type Compactor struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *meters
	mu   sync.Mutex // held for a whole pass: passes never overlap
	// Where the listings that span passes go on (guarded by mu): the
	// orphan sweep, CLOSED ledgers, DELETED ledgers, pending markers.
	sweep, offloadCursor, purgeCursor, pendingCursor cursor
	// compacted holds when each partition ("topicID/index") was last
	// compacted (guarded by mu; bounded by maxCompactedPartitions).
	compacted map[string]time.Time
	// leftovers: when each partition was last checked for ledgers left
	// below its head by a crashed trim (guarded by mu, bounded).
	leftovers map[string]time.Time
	// sealed caches sealed ledgers' metadata for retention (guarded by mu,
	// bounded by maxCachedLedgers).
	sealed map[catalog.LedgerID]catalog.LedgerMetadata
	// Re-replication (rereplicate.go; guarded by mu): where its scan of
	// CLOSED ledgers goes on, and the registry as read at the start of
	// the pass's bookie steps (nil when that read failed); read-only
	// while the steps' workers run.
	rereplicateCursor cursor
	live              map[string]catalog.Bookie
	// lostMu (a leaf, taken under mu by the pass's workers) guards since
	// when each bookie named by a ledger has been missing from the
	// registry, as this process saw it, and which missing bookies were
	// named during the CLOSED scan's current cycle.
	lostMu      sync.Mutex
	missing     map[string]time.Time
	missingSeen map[string]bool
	// auditBacklog holds the copies the audit found lost on a live bookie
	// that a pass could not take on (its ledger had another move, or the
	// pass was full): ledger → bookie, taken first by the next pass. Used
	// by passes only, which never run at once.
	auditBacklog map[catalog.LedgerID]string
	pace         *pacer
}

// New checks cfg and deps and returns a compactor.
func New(cfg Config, deps Deps) (*Compactor, error) {
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if deps.Catalog == nil {
		errs = append(errs, errors.New("compactor: Deps.Catalog is required"))
	}
	if deps.Ledgers == nil {
		errs = append(errs, errors.New("compactor: Deps.Ledgers is required"))
	}
	if deps.Objects == nil {
		errs = append(errs, errors.New("compactor: Deps.Objects is required"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	m, err := newMeters(deps.Meters)
	if err != nil {
		return nil, fmt.Errorf("compactor: meters: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Compactor{cfg: cfg, deps: deps, log: cfg.Logger, m: m,
		sweep: cursor{key: sweepCursorKey}, offloadCursor: cursor{key: offloadCursorKey},
		purgeCursor: cursor{key: purgeCursorKey}, pendingCursor: cursor{key: pendingCursorKey},
		compacted: map[string]time.Time{}, leftovers: map[string]time.Time{}, sealed: map[catalog.LedgerID]catalog.LedgerMetadata{},
		rereplicateCursor: cursor{key: rereplicateCursorKey}, missing: map[string]time.Time{}, missingSeen: map[string]bool{},
		auditBacklog: map[catalog.LedgerID]string{},
		pace:         newPacer(cfg.RereplicateBytesPerSec, time.Now)}, nil
}

// Report counts what one pass did.
type Report struct {
	Offloaded     int   `json:"offloaded"`     // ledgers now OFFLOADED
	OffloadBytes  int64 `json:"offloadBytes"`  // bytes of the segments written
	BookieDeletes int   `json:"bookieDeletes"` // offloaded ledgers dropped from their bookies
	Trimmed       int   `json:"trimmed"`       // ledgers trimmed by retention or of deleted topics (now DELETED)
	Purged        int   `json:"purged"`        // DELETED ledgers fully removed
	Compacted     int   `json:"compacted"`     // ledgers rewritten by key compaction
	TopicsPurged  int   `json:"topicsPurged"`  // deleted topics fully removed
	Orphans       int   `json:"orphans"`       // unreferenced objects deleted
	// UnderReplicated counts the CLOSED ledgers this pass's scan reached
	// with a copy on a bookie missing from the registry (lost or not yet).
	UnderReplicated   int           `json:"underReplicated"`
	Rereplicated      int           `json:"rereplicated"`      // CLOSED ledgers whose lost copies were rebuilt
	RereplicatedBytes int64         `json:"rereplicatedBytes"` // payload bytes copied for them
	Errors            int           `json:"errors"`            // failed steps; a later pass retries them
	Duration          time.Duration `json:"duration"`
}

// tally accumulates a pass's report from several workers.
type tally struct {
	mu   sync.Mutex
	r    Report
	errs []error
}

// maxReportedErrors bounds the errors a pass returns (all are logged).
const maxReportedErrors = 16

func (t *tally) add(f func(r *Report)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.r)
}

func (t *tally) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.Errors++
	if len(t.errs) < maxReportedErrors {
		t.errs = append(t.errs, err)
	}
}

// Pass runs one bounded pass: retention (trim chains, mark DELETED) or key
// compaction (cleanup.policy=compact topics), then deleted topics' ledgers
// to DELETED (and their records purged once empty), then
// offload of old enough CLOSED ledgers, then the pending bookie deletes
// whose grace is over, then the removal of DELETED ledgers, then one page
// of the orphan sweep. Each step's failures are counted, logged and
// returned joined; the other steps still run, and the next pass retries.
func (c *Compactor) Pass(ctx context.Context) (Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.PassTimeout)
	defer cancel()
	start := c.cfg.Now()
	t := &tally{}
	c.retention(ctx, t)
	c.deletedTopics(ctx, t)
	c.offloadAll(ctx, t)
	c.readRegistry(ctx, t)
	c.pendingAll(ctx, t)
	c.rereplicateAll(ctx, t)
	c.purgeAll(ctx, t)
	c.sweepPage(ctx, t)
	t.r.Duration = c.cfg.Now().Sub(start)
	c.m.pass.Record(ctx, t.r.Duration.Seconds())
	if t.r.Errors > 0 {
		c.m.errors.Add(ctx, int64(t.r.Errors))
	}
	c.log.Info("compactor pass",
		slog.Int("offloaded", t.r.Offloaded), slog.Int64("offloadBytes", t.r.OffloadBytes),
		slog.Int("bookieDeletes", t.r.BookieDeletes), slog.Int("trimmed", t.r.Trimmed),
		slog.Int("purged", t.r.Purged), slog.Int("compacted", t.r.Compacted), slog.Int("orphans", t.r.Orphans),
		slog.Int("topicsPurged", t.r.TopicsPurged), slog.Int("underReplicated", t.r.UnderReplicated),
		slog.Int("rereplicated", t.r.Rereplicated), slog.Int64("rereplicatedBytes", t.r.RereplicatedBytes),
		slog.Int("errors", t.r.Errors), slog.Duration("took", t.r.Duration))
	return t.r, errors.Join(t.errs...)
}

// Run runs a pass every Interval until ctx ends. A failed pass is logged
// and the next one retries; Run returns nil when ctx ends.
func (c *Compactor) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		begin := time.Now()
		if _, err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("compactor pass failed; the next pass retries", slog.Any("err", err))
		}
		timer.Reset(max(c.cfg.Interval-time.Since(begin), 0))
	}
}

// each runs f on every item with at most Workers at once and waits for
// all of them: the pass owns these goroutines.
func each[T any](ctx context.Context, workers int, items []T, f func(context.Context, T)) {
	ch := make(chan T)
	var wg sync.WaitGroup
	for range min(workers, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				f(ctx, it)
			}
		}()
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		ch <- it
	}
	close(ch)
	wg.Wait()
}

// age is how long ago t was, on the compactor's clock.
func (c *Compactor) age(t time.Time) time.Duration { return c.cfg.Now().Sub(t) }
