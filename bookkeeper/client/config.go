package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1/bookiev1connect"
)

// Defaults for zero Config fields.
const (
	DefaultAddTimeout              = 5 * time.Second
	DefaultReadTimeout             = 5 * time.Second
	DefaultFenceTimeout            = 5 * time.Second
	DefaultCatalogTimeout          = 10 * time.Second
	DefaultSpeculativeReadTimeout  = 100 * time.Millisecond
	DefaultSpeculativeLacTimeout   = 20 * time.Millisecond
	DefaultTickInterval            = 5 * time.Millisecond
	DefaultSlowAdd                 = 100 * time.Millisecond
	DefaultLacPollTimeout          = 2 * time.Second
	DefaultMetadataRefreshInterval = 15 * time.Second
	DefaultRegistryRefreshInterval = time.Second
	DefaultRetryBackoff            = 50 * time.Millisecond
	DefaultDamageConfirmDelay      = 5 * time.Second
	DefaultCASRetries              = 8
	DefaultRecoveryAttempts        = 3
	DefaultReadAhead               = 128
	DefaultMaxReadBytes            = 4 << 20
	DefaultMaxAddBatch             = 64
	DefaultMaxAddBatchBytes        = 1 << 20

	// MaxMaxAddBatch bounds MaxAddBatch: the bookies' default in-flight
	// bound per stream, which also bounds the adds of one message (a
	// bookie refuses a message with more adds than its bound).
	MaxMaxAddBatch = 1024

	// maxBackoffFactor caps every backoff at RetryBackoff times this.
	maxBackoffFactor = 40
	// maxTimeout bounds every timeout setting.
	maxTimeout = 10 * time.Minute
	// maxLacPoll is the bookie protocol's longest ReadLac wait.
	maxLacPoll = 30 * time.Second
	// rpcOverhead is what an RPC message may carry besides a payload
	// (ids, master key, framing): the bookie's default
	// (bookie.DefaultAddMessageOverhead). An AddEntries message of
	// MaxMaxAddBatch adds carries at most ~45 bytes of ids, checksum and
	// framing per add besides the payloads, and the payloads of a message
	// are at most MaxEntryBytes (MaxAddBatchBytes, or one larger entry).
	rpcOverhead = 64 << 10
)

// Config configures a Client. Zero fields take the documented defaults;
// Validate reports every violation at once.
type Config struct {
	// Ledgers is the catalog's ledger metadata store (required).
	Ledgers catalog.Ledgers
	// Bookies is the catalog's bookie registry (required): ensembles are
	// picked from its live, writable records, and bookie ids resolve to
	// addresses through it.
	Bookies catalog.Bookies
	// Logger receives the client's events; nil discards them.
	Logger *slog.Logger
	// MeterProvider receives the client's metrics (package doc, "Metrics
	// and traces"); nil records none.
	MeterProvider metric.MeterProvider
	// TracerProvider makes the client's spans: one per append made with a
	// traced context (AppendAsyncContext, Append), one per traced Recover.
	// Nil, or a no-op provider, makes none.
	TracerProvider trace.TracerProvider
	// Now is read for add deadlines (checked every TickInterval) and for
	// the registry and metadata refresh intervals; nil means time.Now.
	// Tests move it to time adds out without waiting. (Timers — ticks,
	// speculative reads, backoffs — run on the real clock.)
	Now func() time.Time

	// HTTPClient carries the RPCs to bookies; nil means a client of its own
	// speaking HTTP/2 only, which AddEntries needs (a bidi stream):
	// cleartext (h2c), or over TLS with TLS. Ignored when Dial is set.
	HTTPClient connect.HTTPClient
	// TLS, when set, reaches bookies over HTTPS: the default HTTP client
	// uses it (its roots check the bookies' certificates; its client
	// certificate is what bookies with mTLS ask for). A caller's
	// HTTPClient must be configured for TLS itself. Ignored when Dial is
	// set.
	TLS *tls.Config
	// Dial returns the BookieService client for a bookie address
	// ("host:port"); nil means the gRPC protocol over HTTPClient. Called
	// once per address; the result is cached. Tests wrap it to inject
	// faults.
	Dial func(address string) bookiev1connect.BookieServiceClient

	// AddTimeout bounds how long an add may stay unanswered before its
	// bookie counts as failed (AddFailed{FailUnavailable}; the writer then
	// replaces it). Zero means
	// DefaultAddTimeout.
	AddTimeout time.Duration
	// ReadTimeout bounds one ReadEntries or immediate ReadLac call. Zero
	// means DefaultReadTimeout.
	ReadTimeout time.Duration
	// FenceTimeout bounds one Fence call (and the GetStatus identity check
	// made on a bookie's first use). Zero means DefaultFenceTimeout.
	FenceTimeout time.Duration
	// CatalogTimeout bounds one catalog call. Zero means
	// DefaultCatalogTimeout.
	CatalogTimeout time.Duration
	// DisableDamageReports stops readers from marking the copies of
	// CLOSED ledgers they find bad in the catalog (damage.go); for tools
	// that must not write the catalog.
	DisableDamageReports bool
	// DamageConfirmDelay is how long after a bad read the bookie is asked
	// for the entry again before its copy is marked damaged. Zero means
	// DefaultDamageConfirmDelay.
	DamageConfirmDelay time.Duration
	// SpeculativeReadTimeout is how long a read waits for a replica before
	// also asking the next one. Zero means DefaultSpeculativeReadTimeout.
	SpeculativeReadTimeout time.Duration
	// SpeculativeLacTimeout: WaitLAC long-polls one bookie of the ensemble
	// (the one that answered first last time) and asks the next one only
	// when this long passed without a new LAC (longer on a tail that
	// advances seldom: twice its usual gap, see Reader.lacSpeculation), or
	// at once when a poll fails. A busy tail advances more often than
	// this, so each advance costs one ReadLac instead of one per bookie; a
	// stalled bookie costs this much latency, once. Zero means
	// DefaultSpeculativeLacTimeout.
	SpeculativeLacTimeout time.Duration
	// TickInterval is the writer's timer: an interval without adds pushes
	// the LAC to the bookies (on the add stream), so tail readers see the last
	// entries within about one interval; add deadlines are checked at each
	// tick. Zero means DefaultTickInterval; within [100µs, 1s].
	TickInterval time.Duration
	// SlowAdd: an append acknowledged this long after the writer took it
	// is logged (at most once a second per client, with a count of the
	// others) with the time each bookie of its write set took to answer,
	// so a tail can be traced to a bookie, or to waiting for an earlier
	// entry. Zero means DefaultSlowAdd; within [1ms, 1h].
	SlowAdd time.Duration
	// LacPollTimeout is one WaitLAC long-poll round (ReadLac's wait on the
	// bookies); at most 30 s. Zero means DefaultLacPollTimeout.
	LacPollTimeout time.Duration
	// MetadataRefreshInterval: a WaitLAC that saw no progress re-reads the
	// ledger's metadata from the catalog at most this often (to learn of a
	// close or an ensemble change). A fallback: a close fences the bookies
	// and a fenced or failing poll re-reads at once; every quiet tail pays
	// one catalog read per interval (1,024 tails at 5 s: 200 reads a
	// second). Zero means DefaultMetadataRefreshInterval.
	MetadataRefreshInterval time.Duration
	// RegistryRefreshInterval: an unknown bookie id re-reads the bookie
	// registry at most this often. Zero means
	// DefaultRegistryRefreshInterval.
	RegistryRefreshInterval time.Duration
	// RetryBackoff is the first delay before retrying a failed ensemble
	// change or recovery; it doubles per consecutive failure, up to 40
	// times itself. Zero means DefaultRetryBackoff.
	RetryBackoff time.Duration

	// CASRetries bounds the re-reads after a lost compare-and-set
	// (catalog.ErrVersionConflict) within one ensemble change, seal or
	// recovery. Zero means DefaultCASRetries; at most 1000.
	CASRetries int
	// RecoveryAttempts bounds the runs of one Recover that end in
	// ledger.ErrRecoveryFailed. Zero means DefaultRecoveryAttempts; at
	// most 100.
	RecoveryAttempts int

	// The state machines' limits (bookkeeper/ledger.Config); zero means
	// the ledger package's defaults and bounds apply.
	MaxInFlight        int // unacknowledged appends per writer
	MaxEntryBytes      int // one payload
	MaxEnsembleChanges int // per writer, failed attempts included
	RecoveryReadWindow int // entries a recovery reads in parallel

	// MaxAddBatch bounds the adds one AddEntries message carries. A
	// stream's sender puts everything queued for its bookie when it is
	// free to send into as few messages as this and MaxAddBatchBytes
	// allow; it never waits for a message to fill. Zero means
	// DefaultMaxAddBatch; within [1, MaxMaxAddBatch] and at most the
	// bookies' MaxInFlightAdds.
	MaxAddBatch int
	// MaxAddBatchBytes bounds the payload bytes of one AddEntries message;
	// an entry larger than this goes alone. Zero means
	// DefaultMaxAddBatchBytes or MaxEntryBytes, whichever is smaller; at
	// most MaxEntryBytes, so every message fits the bookies' message
	// limit (MaxEntryBytes + 64 KiB by default).
	MaxAddBatchBytes int

	// ReadAhead is how many entries one Read has asked for at once (runs
	// of them of one bookie go as one range read). Zero means
	// DefaultReadAhead; at most ledger.MaxMaxOutstanding.
	ReadAhead int
	// MaxReadBytes bounds the payload bytes one Read returns (it returns
	// at least one entry). Zero means DefaultMaxReadBytes; at most 256 MiB.
	MaxReadBytes int
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defD(&c.AddTimeout, DefaultAddTimeout)
	defD(&c.ReadTimeout, DefaultReadTimeout)
	defD(&c.FenceTimeout, DefaultFenceTimeout)
	defD(&c.CatalogTimeout, DefaultCatalogTimeout)
	defD(&c.SpeculativeReadTimeout, DefaultSpeculativeReadTimeout)
	defD(&c.SpeculativeLacTimeout, DefaultSpeculativeLacTimeout)
	defD(&c.TickInterval, DefaultTickInterval)
	defD(&c.SlowAdd, DefaultSlowAdd)
	defD(&c.LacPollTimeout, DefaultLacPollTimeout)
	defD(&c.MetadataRefreshInterval, DefaultMetadataRefreshInterval)
	defD(&c.RegistryRefreshInterval, DefaultRegistryRefreshInterval)
	defD(&c.RetryBackoff, DefaultRetryBackoff)
	defD(&c.DamageConfirmDelay, DefaultDamageConfirmDelay)
	defI := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defI(&c.CASRetries, DefaultCASRetries)
	defI(&c.RecoveryAttempts, DefaultRecoveryAttempts)
	defI(&c.MaxInFlight, ledger.DefaultMaxInFlight)
	defI(&c.MaxEntryBytes, ledger.DefaultMaxEntryBytes)
	defI(&c.MaxEnsembleChanges, ledger.DefaultMaxEnsembleChanges)
	defI(&c.RecoveryReadWindow, ledger.DefaultRecoveryReadWindow)
	defI(&c.ReadAhead, DefaultReadAhead)
	defI(&c.MaxAddBatch, DefaultMaxAddBatch)
	defI(&c.MaxAddBatchBytes, min(DefaultMaxAddBatchBytes, c.MaxEntryBytes))
	defI(&c.MaxReadBytes, DefaultMaxReadBytes)
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("ledger client config %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Ledgers == nil {
		bad("Ledgers", "required")
	}
	if c.Bookies == nil {
		bad("Bookies", "required")
	}
	for _, d := range []struct {
		name     string
		v        time.Duration
		min, max time.Duration
	}{
		{"AddTimeout", c.AddTimeout, time.Millisecond, maxTimeout},
		{"ReadTimeout", c.ReadTimeout, time.Millisecond, maxTimeout},
		{"FenceTimeout", c.FenceTimeout, time.Millisecond, maxTimeout},
		{"CatalogTimeout", c.CatalogTimeout, time.Millisecond, maxTimeout},
		{"SpeculativeReadTimeout", c.SpeculativeReadTimeout, time.Microsecond, maxTimeout},
		{"SpeculativeLacTimeout", c.SpeculativeLacTimeout, time.Microsecond, maxTimeout},
		{"TickInterval", c.TickInterval, 100 * time.Microsecond, time.Second},
		{"SlowAdd", c.SlowAdd, time.Millisecond, time.Hour},
		{"LacPollTimeout", c.LacPollTimeout, time.Millisecond, maxLacPoll},
		{"MetadataRefreshInterval", c.MetadataRefreshInterval, time.Millisecond, maxTimeout},
		{"RegistryRefreshInterval", c.RegistryRefreshInterval, time.Microsecond, maxTimeout},
		{"RetryBackoff", c.RetryBackoff, time.Microsecond, time.Minute},
		{"DamageConfirmDelay", c.DamageConfirmDelay, time.Millisecond, time.Hour},
	} {
		if d.v < d.min || d.v > d.max {
			bad(d.name, "%v is outside [%v, %v]", d.v, d.min, d.max)
		}
	}
	if c.CASRetries < 1 || c.CASRetries > 1000 {
		bad("CASRetries", "%d is outside [1, 1000]", c.CASRetries)
	}
	if c.RecoveryAttempts < 1 || c.RecoveryAttempts > 100 {
		bad("RecoveryAttempts", "%d is outside [1, 100]", c.RecoveryAttempts)
	}
	if c.ReadAhead < 1 || c.ReadAhead > ledger.MaxMaxOutstanding {
		bad("ReadAhead", "%d is outside [1, %d]", c.ReadAhead, ledger.MaxMaxOutstanding)
	}
	if c.MaxAddBatch < 1 || c.MaxAddBatch > MaxMaxAddBatch {
		bad("MaxAddBatch", "%d is outside [1, %d]", c.MaxAddBatch, MaxMaxAddBatch)
	}
	if c.MaxAddBatchBytes < 1 || c.MaxAddBatchBytes > c.MaxEntryBytes {
		bad("MaxAddBatchBytes", "%d is outside [1, MaxEntryBytes %d]", c.MaxAddBatchBytes, c.MaxEntryBytes)
	}
	if c.MaxReadBytes < 1 || c.MaxReadBytes > 256<<20 {
		bad("MaxReadBytes", "%d is outside [1, %d]", c.MaxReadBytes, 256<<20)
	}
	// The machines' own limits, checked by their own rules (any valid
	// replication will do here).
	lc := c.ledgerConfig(catalog.DefaultReplication)
	if err := lc.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ledgerConfig is the state machines' config for a ledger replicated r.
func (c Config) ledgerConfig(r catalog.Replication) ledger.Config {
	return ledger.Config{
		Replication:         r,
		MaxInFlight:         c.MaxInFlight,
		MaxEntryBytes:       c.MaxEntryBytes,
		MaxEnsembleChanges:  c.MaxEnsembleChanges,
		RecoveryReadWindow:  c.RecoveryReadWindow,
		MaxOutstandingReads: c.ReadAhead,
		EagerLac:            true,
	}
}

// backoff is the delay before retry n (0-based).
func (c Config) backoff(n int) time.Duration {
	d := c.RetryBackoff
	for range min(n, 16) {
		d *= 2
	}
	return min(d, c.RetryBackoff*maxBackoffFactor)
}
