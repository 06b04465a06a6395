package partlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
)

// Defaults for zero Config fields.
const (
	DefaultCacheBytes      = 64 << 20
	DefaultTailIdle        = 30 * time.Second
	DefaultTailCheck       = 250 * time.Millisecond
	DefaultBusyTailCheck   = 25 * time.Millisecond
	DefaultChainTTL        = time.Second
	DefaultMaxLogs         = 100_000
	DefaultMaxEntryBounds  = 4096
	DefaultMaxCursorHints  = 64
	DefaultOpenLedgerLimit = 4
)

// Config bounds the partition logs of one fetch copy.
type Config struct {
	// CacheBytes bounds the entry cache shared by all partitions (read-ahead
	// of tails and recently read entries). Zero means DefaultCacheBytes.
	CacheBytes int64
	// TailIdle: a partition's tail watcher (one LAC long-poll per open tail
	// ledger, shared by every waiting fetch) stops after this long without
	// a reader. Zero means the default.
	TailIdle time.Duration
	// TailCheck is how long one LAC long-poll round of a tail watcher lasts
	// before the watcher re-reads the partition's ledger chain (to learn of
	// a roll-over to a new ledger). It bounds the extra delay a roll-over
	// adds to tail reads. Zero means the default.
	TailCheck time.Duration
	// BusyTailCheck is the shortest pause after which a busy tail (one that
	// moved within the last second) is checked for a roll-over: the watcher
	// waits 4 × the partition's usual gap between advances, clamped to
	// [BusyTailCheck, TailCheck]. A pause in a busy partition is most likely
	// a roll-over, so it is checked for sooner; each check costs one catalog
	// read. Zero means the default.
	BusyTailCheck time.Duration
	// ChainTTL is how long a partition's ledger chain is cached for reads
	// of old data. Zero means the default.
	ChainTTL time.Duration
	// MaxLogs bounds the partitions with state in memory; the least recently
	// used are dropped beyond it. Zero means the default.
	MaxLogs int
	// Limits bound the record batches decoded (decompression guard). Zero
	// fields take pkg/record's defaults.
	Limits record.Limits
	// ReadGate, if set, is called before every read that goes to the
	// bookies on behalf of a reader (a cache miss: catch-up reads), and its
	// release after it. The tail watchers' reads skip it, so tail readers,
	// served from the cache the watchers fill, never wait behind catch-up
	// reads. An error fails the read.
	ReadGate func(ctx context.Context) (release func(), err error)
	// Logger receives events; nil discards them.
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.TailIdle == 0 {
		c.TailIdle = DefaultTailIdle
	}
	if c.TailCheck == 0 {
		c.TailCheck = DefaultTailCheck
	}
	if c.BusyTailCheck == 0 {
		c.BusyTailCheck = min(DefaultBusyTailCheck, c.TailCheck)
	}
	if c.ChainTTL == 0 {
		c.ChainTTL = DefaultChainTTL
	}
	if c.MaxLogs == 0 {
		c.MaxLogs = DefaultMaxLogs
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Limits = c.Limits.WithDefaults()
	return c
}

// Validate reports every field out of range.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("partlog config: %s %s", field, fmt.Sprintf(format, args...)))
	}
	if c.CacheBytes < 0 || c.CacheBytes > 64<<30 {
		bad("CacheBytes", "%d is outside [0, 64 GiB]", c.CacheBytes)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		lo   time.Duration
		hi   time.Duration
	}{
		{"TailIdle", c.TailIdle, time.Millisecond, time.Hour},
		{"TailCheck", c.TailCheck, time.Millisecond, time.Minute},
		{"BusyTailCheck", c.BusyTailCheck, time.Millisecond, time.Minute},
		{"ChainTTL", c.ChainTTL, time.Millisecond, time.Minute},
	} {
		if d.v != 0 && (d.v < d.lo || d.v > d.hi) {
			bad(d.name, "%v is outside [%v, %v]", d.v, d.lo, d.hi)
		}
	}
	if c.MaxLogs < 0 || c.MaxLogs > 10_000_000 {
		bad("MaxLogs", "%d is outside [0, 10,000,000]", c.MaxLogs)
	}
	return errors.Join(errs...)
}
