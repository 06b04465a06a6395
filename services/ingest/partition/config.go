package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/services/ingest/dedup"
	"github.com/sluicemq/sluice/services/ingest/partition/machine"
)

// Defaults for zero Config fields.
const (
	DefaultMaxEntryBytes      = 1 << 20
	DefaultMaxInFlightEntries = 32
	DefaultMaxBufferedBytes   = 16 << 20
	DefaultQueueWait          = 100 * time.Millisecond
	DefaultRollBytes          = 512 << 20
	DefaultRollAge            = time.Hour
	DefaultRebuildEntries     = 1024
	DefaultCloseTimeout       = 10 * time.Second
	// MaxEntryBytesLimit is the bookie protocol's entry bound.
	MaxEntryBytesLimit = machine.MaxEntryBytesLimit
)

// Config bounds one partition writer. Zero fields take the documented
// defaults; Validate reports every violation at once.
type Config struct {
	// MaxEntryBytes: batches are packed into one ledger entry up to this
	// size (a single larger batch gets an entry of its own, up to
	// MaxEntryBytesLimit). Zero means DefaultMaxEntryBytes.
	MaxEntryBytes int
	// Linger is how long a partly filled entry waits for more batches when
	// the ledger has room in flight. Zero (the default) sends at once:
	// batching then comes from load alone — while MaxInFlightEntries are
	// unacknowledged, new batches pile up in the next entry — so latency is
	// lowest when idle and entries grow under load.
	Linger time.Duration
	// MaxInFlightEntries bounds the entries sent to the ledger and not yet
	// acknowledged. Zero means DefaultMaxInFlightEntries.
	MaxInFlightEntries int
	// MaxBufferedBytes bounds the batch bytes accepted and not yet
	// acknowledged. An append beyond it waits up to QueueWait, then fails
	// with ErrBusy (the service answers RESOURCE_EXHAUSTED with a retry
	// delay). Zero means DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// QueueWait: see MaxBufferedBytes. Zero means DefaultQueueWait.
	QueueWait time.Duration
	// RollBytes and RollAge: once the current ledger holds this many bytes
	// or is this old, the writer closes it and continues in a new one.
	// Zero means the defaults.
	RollBytes int64
	RollAge   time.Duration
	// RebuildEntries bounds how many entries at the tail of the previous
	// ledger a new writer reads to rebuild the idempotent producers' state.
	// Zero means DefaultRebuildEntries.
	RebuildEntries int
	// CloseTimeout bounds a graceful Close. Zero means DefaultCloseTimeout.
	CloseTimeout time.Duration
	// Dedup bounds the idempotent producers' state (window, producers
	// tracked, expiry); see services/ingest/dedup.
	Dedup dedup.Config
	// Logger receives the writer's events; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxInFlightEntries == 0 {
		c.MaxInFlightEntries = DefaultMaxInFlightEntries
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.QueueWait == 0 {
		c.QueueWait = DefaultQueueWait
	}
	if c.RollBytes == 0 {
		c.RollBytes = DefaultRollBytes
	}
	if c.RollAge == 0 {
		c.RollAge = DefaultRollAge
	}
	if c.RebuildEntries == 0 {
		c.RebuildEntries = DefaultRebuildEntries
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("partition writer config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.MaxEntryBytes < 1 || c.MaxEntryBytes > MaxEntryBytesLimit {
		bad("MaxEntryBytes", "%d outside [1, %d]", c.MaxEntryBytes, MaxEntryBytesLimit)
	}
	if c.Linger < 0 || c.Linger > time.Second {
		bad("Linger", "%v outside [0, 1s]", c.Linger)
	}
	if c.MaxInFlightEntries < 1 || c.MaxInFlightEntries > 1024 {
		bad("MaxInFlightEntries", "%d outside [1, 1024]", c.MaxInFlightEntries)
	}
	if c.MaxBufferedBytes < MaxEntryBytesLimit {
		bad("MaxBufferedBytes", "%d below the largest entry (%d)", c.MaxBufferedBytes, MaxEntryBytesLimit)
	}
	if c.QueueWait < 0 || c.QueueWait > time.Minute {
		bad("QueueWait", "%v outside [0, 1m]", c.QueueWait)
	}
	if c.RollBytes < int64(c.MaxEntryBytes) {
		bad("RollBytes", "%d below MaxEntryBytes", c.RollBytes)
	}
	if c.RollAge < time.Second {
		bad("RollAge", "%v below 1s", c.RollAge)
	}
	if c.RebuildEntries < 1 || c.RebuildEntries > 1<<20 {
		bad("RebuildEntries", "%d outside [1, 1048576]", c.RebuildEntries)
	}
	if c.CloseTimeout < 0 {
		bad("CloseTimeout", "%v is negative", c.CloseTimeout)
	}
	if err := c.Dedup.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
