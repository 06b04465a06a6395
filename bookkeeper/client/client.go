package client

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Client is the ledger client of one process: it creates ledgers and their
// Writers, recovers ledgers, and opens Readers, over the bookies' RPCs and
// the catalog. Safe for concurrent use. Close it when done.
type Client struct {
	cfg Config
	log *slog.Logger

	// ctx ends when Close is called (cause ErrClientClosed); every writer's
	// lifetime and every call's context derive from it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// wg counts writer loops (each waits for its own goroutines before it
	// exits) and public calls in progress.
	wg sync.WaitGroup

	// ownHTTP is the HTTP client New made (internal/rpcclient's, as every
	// Sluice process uses to reach its peers), its idle connections closed
	// by Close; nil when the caller supplied HTTPClient or Dial.
	ownHTTP *http.Client

	bookies *registry

	// damage queues the copies readers found bad (damage.go); its
	// goroutine is counted in wg.
	damage *damageReporter

	// mu guards closed. Leaf lock: never held while calling anything.
	mu     sync.Mutex
	closed bool

	// muxMu guards muxes and lacMuxes: the shared AddEntries stream
	// (mux.go) and WatchLac stream (lacwatch.go) per bookie id. Leaf lock.
	muxMu    sync.Mutex
	muxes    map[string]*addMux
	lacMuxes map[string]*lacMux

	stats  clientStats
	slow   slowAdds
	meters *meters
}

// New returns a client. It starts no goroutine: writers start theirs.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg, log: cfg.Logger, muxes: map[string]*addMux{}, lacMuxes: map[string]*lacMux{}}
	ms, err := newMeters(cfg, &c.stats)
	if err != nil {
		return nil, fmt.Errorf("ledger client metrics: %w", err)
	}
	c.meters = ms
	dial := cfg.Dial
	if dial == nil {
		hc := cfg.HTTPClient
		if hc == nil {
			peers := rpcclient.New(cfg.TLS)
			c.ownHTTP = peers.HTTP
			hc = peers.HTTP
		}
		dial = grpcDialer(hc, cfg.TLS != nil, cfg.MaxEntryBytes+rpcOverhead)
	}
	c.bookies = newRegistry(cfg, dial, &c.stats)
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.damage = newDamageReporter()
	c.wg.Add(1)
	go c.reportDamage()
	return c, nil
}

// Close aborts every writer that is still open (their pending appends fail
// with ErrClientClosed; the ledgers stay OPEN for recovery), waits for the
// calls in progress to return and for every goroutine to exit, and closes
// idle connections. Later calls fail with ErrClientClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel(ErrClientClosed)
	c.wg.Wait()
	if c.ownHTTP != nil {
		c.ownHTTP.CloseIdleConnections()
	}
	if r := c.meters.collecting; r != nil {
		return r.Unregister()
	}
	return nil
}

// enter registers a public call: it returns a context that also ends when
// the client closes, and the function to call when the call returns.
func (c *Client) enter(ctx context.Context) (context.Context, func(), error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil, ErrClientClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.ctx, func() { cancel(ErrClientClosed) })
	return cctx, func() {
		stop()
		cancel(nil)
		c.wg.Done()
	}, nil
}

// ctxErr is ctx's error, naming ErrClientClosed when that is the cause.
func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w (%w)", cause, ctx.Err())
	}
	return ctx.Err()
}

// getLedger reads a ledger's metadata within CatalogTimeout.
func (c *Client) getLedger(ctx context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CatalogTimeout)
	defer cancel()
	m, err := c.cfg.Ledgers.GetLedger(ctx, id)
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("read ledger %d metadata: %w", id, err)
	}
	return m, nil
}

// updateLedger stores m with compare-and-set within CatalogTimeout.
func (c *Client) updateLedger(ctx context.Context, m catalog.LedgerMetadata) (catalog.LedgerMetadata, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CatalogTimeout)
	defer cancel()
	out, err := c.cfg.Ledgers.UpdateLedger(ctx, m)
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("update ledger %d (%v, version %d): %w", m.ID, m.State, m.Version, err)
	}
	return out, nil
}

// Stats are the client's counters since New.
type Stats struct {
	AddsSent        int64 // adds queued to bookies (one per entry per bookie)
	AddMessagesSent int64 // AddEntries request messages sent (each carries one or more adds)
	AddResponses    int64 // AddEntries response messages received (each answers one or more adds)
	AddFailures     int64 // adds answered with a failure or timed out
	StreamsOpened   int64 // AddEntries streams opened
	EnsembleChanges int64 // ensemble changes stored in the catalog
	// EnsembleChangeFailures counts ensemble changes that could not be
	// made (no spare bookie, a catalog error) and were retried.
	EnsembleChangeFailures int64
	LedgersCreated         int64
	LedgersClosed          int64 // sealed by their writer
	LedgersRecovered       int64 // sealed by a recovery of this client
	ReadsSent              int64 // ReadEntries calls (regular and recovery)
	SpeculativeReads       int64 // speculative timeouts that asked another replica
	ChecksumFailures       int64 // entries read that failed verification
	RegistryRefreshes      int64 // bookie registry reads
	LacWatches             int64 // LAC long-polls registered on WatchLac streams
	WatchStreamsOpened     int64 // WatchLac streams opened
	DamageReports          int64 // damaged copies marked in the catalog (damage.go)
	DamageReportsDropped   int64 // reports dropped on a full queue
}

type clientStats struct {
	addsSent, addMessagesSent, addResponses, addFailures, streamsOpened, ensembleChanges, ensembleChangeFailures, ledgersCreated, ledgersClosed,
	ledgersRecovered, readsSent, speculativeReads, checksumFailures, registryRefreshes, lacWatches, watchStreamsOpened,
	damageReports, damageReportsDropped atomic.Int64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		AddsSent: s.addsSent.Load(), AddMessagesSent: s.addMessagesSent.Load(), AddResponses: s.addResponses.Load(),
		AddFailures: s.addFailures.Load(), StreamsOpened: s.streamsOpened.Load(),
		EnsembleChanges: s.ensembleChanges.Load(), EnsembleChangeFailures: s.ensembleChangeFailures.Load(), LedgersCreated: s.ledgersCreated.Load(),
		LedgersClosed: s.ledgersClosed.Load(), LedgersRecovered: s.ledgersRecovered.Load(),
		ReadsSent: s.readsSent.Load(), SpeculativeReads: s.speculativeReads.Load(),
		ChecksumFailures: s.checksumFailures.Load(), RegistryRefreshes: s.registryRefreshes.Load(),
		LacWatches: s.lacWatches.Load(), WatchStreamsOpened: s.watchStreamsOpened.Load(),
		DamageReports: s.damageReports.Load(), DamageReportsDropped: s.damageReportsDropped.Load(),
	}
}
