package dedup

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for zero Config fields, and the bounds Validate enforces.
const (
	// DefaultWindowBatches is Kafka's: a client keeps at most 5 batches in
	// flight per partition with idempotence on.
	DefaultWindowBatches = 5
	MaxWindowBatches     = 1024

	DefaultMaxProducers = 4096
	MaxMaxProducers     = 1 << 20

	// DefaultProducerExpiry is Kafka's producer.id.expiration.ms default.
	DefaultProducerExpiry = 24 * time.Hour
	MinProducerExpiry     = time.Second
	MaxProducerExpiry     = 30 * 24 * time.Hour
)

// Config bounds one partition's producer state. Zero fields take the
// documented defaults; Validate reports every violation at once.
type Config struct {
	// WindowBatches is how many of each producer's latest batches are kept
	// for dedup, and how many it may have in flight (pending) at once.
	// Zero means DefaultWindowBatches; at most MaxWindowBatches.
	WindowBatches int
	// MaxProducers bounds the producer ids tracked; at the bound the one
	// idle longest is evicted for a new one. Zero means DefaultMaxProducers;
	// at most MaxMaxProducers.
	MaxProducers int
	// ProducerExpiry: a producer idle this long, with nothing in flight, is
	// forgotten. Zero means DefaultProducerExpiry; within
	// [MinProducerExpiry, MaxProducerExpiry].
	ProducerExpiry time.Duration
}

func (c Config) withDefaults() Config {
	if c.WindowBatches == 0 {
		c.WindowBatches = DefaultWindowBatches
	}
	if c.MaxProducers == 0 {
		c.MaxProducers = DefaultMaxProducers
	}
	if c.ProducerExpiry == 0 {
		c.ProducerExpiry = DefaultProducerExpiry
	}
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("dedup config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.WindowBatches < 1 || c.WindowBatches > MaxWindowBatches {
		bad("WindowBatches", "%d outside [1, %d]", c.WindowBatches, MaxWindowBatches)
	}
	if c.MaxProducers < 1 || c.MaxProducers > MaxMaxProducers {
		bad("MaxProducers", "%d outside [1, %d]", c.MaxProducers, MaxMaxProducers)
	}
	if c.ProducerExpiry < MinProducerExpiry || c.ProducerExpiry > MaxProducerExpiry {
		bad("ProducerExpiry", "%v outside [%v, %v]", c.ProducerExpiry, MinProducerExpiry, MaxProducerExpiry)
	}
	return errors.Join(errs...)
}
