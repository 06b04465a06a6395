package partlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
)

// Defaults for zero Config fields.
const (
	DefaultCacheBytes      = 64 << 20
	DefaultTailIdle        = 30 * time.Second
	DefaultTailCheck       = time.Second
	DefaultBusyTailCheck   = 25 * time.Millisecond
	DefaultChainTTL        = 30 * time.Second
	DefaultMaxLogs         = 100_000
	DefaultMaxEntryBounds  = 4096
	DefaultMaxCursorHints  = 64
	DefaultOpenLedgerLimit = 4

	DefaultIndexCacheBytes = 32 << 20
	DefaultMaxIndexes      = 1024
	DefaultObjectReadBytes = 1 << 20
	DefaultObjectTimeout   = 10 * time.Second
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
	// before the watcher looks for a roll-over to a new ledger (re-reading
	// the chain once it is watchChainAge old). Roll-overs announce
	// themselves (the closed ledger's bookies answer the long-poll
	// "fenced"), so this bounds only a missed announcement's delay; each
	// round of a quiet tail costs a long-poll (1 s rather than 250 ms: 1,024
	// quiet partitions cost 4,000 ReadLac calls a second at 250 ms). Zero
	// means the default.
	TailCheck time.Duration
	// BusyTailCheck is the shortest pause after which a busy tail (one that
	// moved within the last second) is checked for a roll-over: the watcher
	// waits 4 × the partition's usual gap between advances, clamped to
	// [BusyTailCheck, TailCheck]. A pause in a busy partition is most likely
	// a roll-over, so it is checked for sooner; each check costs one catalog
	// read. Zero means the default.
	BusyTailCheck time.Duration
	// ChainTTL is how long a partition's ledger chain is cached for reads
	// of old data. Staleness is safe (see Log.chainCached): it only bounds
	// how long a trim stays unnoticed and what a partition costs in catalog
	// reads (one per ChainTTL while read or followed; 1,024 partitions at
	// 10 s still took half the emulated catalog's capacity). Zero means
	// the default.
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
	// Objects is the object store offloaded ledgers are read from (segment
	// objects, pkg/segment; the ledger's catalog Location is the key); nil
	// when there is none, and then offloaded ledgers are read from the
	// bookies for as long as they still hold them.
	Objects *blob.Bucket
	// Segments bounds reads of offloaded ledgers.
	Segments SegmentConfig
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
	c.Segments = c.Segments.withDefaults()
	return c
}

// SegmentConfig bounds reads of offloaded ledgers (objects.go). Zero fields
// take the defaults.
type SegmentConfig struct {
	// IndexCacheBytes bounds the memory of the cached segment indexes (the
	// footer, offset index and time index of each object read, LRU over
	// all partitions). An index larger than the whole cache is used for
	// its read and not kept. Zero means DefaultIndexCacheBytes (32 MiB:
	// the indexes of ~100 segments of 512 MiB at the default interval).
	IndexCacheBytes int64
	// MaxIndexes bounds the number of cached indexes. Zero means
	// DefaultMaxIndexes.
	MaxIndexes int
	// ReadBytes bounds one ranged GET of batches: a read takes the index
	// intervals from the one holding the offset on while they fit in it
	// (always at least that one interval). Zero means
	// DefaultObjectReadBytes (1 MiB).
	ReadBytes int
	// Timeout bounds one request to the object store (the HEAD and tail
	// GET of an index open, one ranged GET of batches), which otherwise
	// only the reader's context bounds — a session's lives as long as the
	// session — while it holds a slot of the read budget. Zero means
	// DefaultObjectTimeout.
	Timeout time.Duration
	// Reader bounds what opening a segment accepts and allocates
	// (MaxSegmentBytes, MaxIndexEntries, TailReadBytes); zero fields take
	// pkg/segment's defaults.
	Reader segment.ReaderOptions
}

func (c SegmentConfig) withDefaults() SegmentConfig {
	if c.IndexCacheBytes == 0 {
		c.IndexCacheBytes = DefaultIndexCacheBytes
	}
	if c.MaxIndexes == 0 {
		c.MaxIndexes = DefaultMaxIndexes
	}
	if c.ReadBytes == 0 {
		c.ReadBytes = DefaultObjectReadBytes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultObjectTimeout
	}
	return c
}

func (c SegmentConfig) validate(bad func(field, format string, args ...any)) {
	if c.IndexCacheBytes < 0 || c.IndexCacheBytes > 16<<30 {
		bad("Segments.IndexCacheBytes", "%d is outside [0, 16 GiB]", c.IndexCacheBytes)
	}
	if c.MaxIndexes < 0 || c.MaxIndexes > 1_000_000 {
		bad("Segments.MaxIndexes", "%d is outside [0, 1,000,000]", c.MaxIndexes)
	}
	if c.ReadBytes < 0 || c.ReadBytes > 64<<20 {
		bad("Segments.ReadBytes", "%d is outside [0, 64 MiB]", c.ReadBytes)
	}
	if c.Timeout != 0 && (c.Timeout < time.Millisecond || c.Timeout > 5*time.Minute) {
		bad("Segments.Timeout", "%v is outside [1ms, 5m]", c.Timeout)
	}
	if err := c.Reader.Validate(); err != nil {
		bad("Segments.Reader", "%v", err)
	}
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
	c.Segments.validate(bad)
	return errors.Join(errs...)
}
