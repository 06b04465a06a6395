// Package quota enforces byte-rate quotas per client id, the way Kafka's
// produce quotas do (docs/DESIGN.md §2.8): the request is accepted and counted, and
// the answer says how long the client must hold off — the throttle time —
// which the service reports and applies as a delay.
//
// Each key (a client id or principal) has a token bucket of Burst bytes,
// refilled at BytesPerSecond. A request of n bytes always takes n tokens,
// and the bucket may go into debt; the throttle time is the debt divided by
// the rate: exactly how long until the client is back within its quota
// (Kafka KIP-599's token bucket: throttle = -tokens / rate). A client that
// waits out each throttle before sending again gets BytesPerSecond on
// average after its first Burst. Debt is capped at MaxThrottle worth of
// bytes, so a client that ignores throttling is not punished without end and
// the throttle returned never exceeds MaxThrottle.
//
// The bucket is kept as one instant, when it will be full again, so the
// arithmetic is exact integer nanoseconds (a request's cost is rounded up to
// the next nanosecond).
//
// Quotas come from a default and per-key overrides; a zero rate means
// unlimited, and unlimited keys are not tracked at all. At most MaxKeys
// buckets are kept: buckets that have refilled completely are dropped
// (losslessly — a full bucket is the same as a new one), and when a new key
// needs room at the bound the bucket unused longest is evicted, forgiving
// whatever debt it had.
//
// Pure: no I/O, no goroutines, no clock — time is an argument. A Limiter is
// safe for concurrent use. Keys are stored as given: the caller bounds their
// length (the service validates client ids).
package quota

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults for zero Config fields, and the bounds Validate enforces.
const (
	DefaultMaxKeys     = 10000
	MaxMaxKeys         = 1 << 20
	DefaultMaxThrottle = 10 * time.Second
	MaxMaxThrottle     = time.Hour
	// MaxBytesPerSecond and MaxBurst bound a quota; above that, use
	// unlimited.
	MaxBytesPerSecond = 1 << 40
	MaxBurst          = 1 << 40
	// MaxBurstWindow bounds Burst/BytesPerSecond, the time a full bucket
	// lasts at zero refill.
	MaxBurstWindow = 24 * time.Hour
	MaxOverrides   = 1 << 16
)

// Quota is one key's byte-rate limit.
type Quota struct {
	// BytesPerSecond is the sustained rate; zero means unlimited.
	BytesPerSecond int64
	// Burst is the bucket size: how many bytes a client that was idle may
	// send at once without being throttled. Zero means one second's worth
	// (BytesPerSecond).
	Burst int64
}

func (q Quota) withDefaults() Quota {
	if q.Burst == 0 {
		q.Burst = q.BytesPerSecond
	}
	return q
}

func (q Quota) validate(bad func(field, format string, args ...any), field string) {
	q = q.withDefaults()
	switch {
	case q.BytesPerSecond < 0 || q.BytesPerSecond > MaxBytesPerSecond:
		bad(field+".BytesPerSecond", "%d outside [0, %d]", q.BytesPerSecond, int64(MaxBytesPerSecond))
	case q.Burst < 0 || q.Burst > MaxBurst:
		bad(field+".Burst", "%d outside [0, %d]", q.Burst, int64(MaxBurst))
	case q.BytesPerSecond == 0 && q.Burst != 0:
		bad(field+".Burst", "%d with an unlimited rate", q.Burst)
	case q.BytesPerSecond > 0 && cost(q.Burst, q.BytesPerSecond) > MaxBurstWindow:
		bad(field+".Burst", "%d lasts more than %v at %d bytes/s", q.Burst, MaxBurstWindow, q.BytesPerSecond)
	}
}

// Config sets the quotas and bounds of a Limiter. Zero fields take the
// documented defaults; Validate reports every violation at once.
type Config struct {
	// Default applies to every key without an override. The zero Quota is
	// unlimited.
	Default Quota
	// Overrides are per-key quotas (at most MaxOverrides); New copies them.
	Overrides map[string]Quota
	// MaxKeys bounds the buckets kept. Zero means DefaultMaxKeys; at most
	// MaxMaxKeys.
	MaxKeys int
	// MaxThrottle caps a bucket's debt, hence the throttle time. Zero means
	// DefaultMaxThrottle; at most MaxMaxThrottle.
	MaxThrottle time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	if c.MaxThrottle == 0 {
		c.MaxThrottle = DefaultMaxThrottle
	}
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("quota config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	c.Default.validate(bad, "Default")
	if len(c.Overrides) > MaxOverrides {
		bad("Overrides", "%d entries, more than %d", len(c.Overrides), MaxOverrides)
	} else {
		keys := make([]string, 0, len(c.Overrides))
		for k := range c.Overrides {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			c.Overrides[k].validate(bad, fmt.Sprintf("Overrides[%q]", k))
		}
	}
	if c.MaxKeys < 1 || c.MaxKeys > MaxMaxKeys {
		bad("MaxKeys", "%d outside [1, %d]", c.MaxKeys, MaxMaxKeys)
	}
	if c.MaxThrottle < time.Millisecond || c.MaxThrottle > MaxMaxThrottle {
		bad("MaxThrottle", "%v outside [1ms, %v]", c.MaxThrottle, MaxMaxThrottle)
	}
	return errors.Join(errs...)
}

// limit is a Quota ready for use.
type limit struct {
	rate  int64         // bytes per second, > 0
	burst time.Duration // the time to refill a whole Burst
}

func makeLimit(q Quota) limit {
	q = q.withDefaults()
	return limit{rate: q.BytesPerSecond, burst: cost(q.Burst, q.BytesPerSecond)}
}

// cost is how long rate takes to refill n bytes, rounded up to the
// nanosecond and saturated at math.MaxInt64.
func cost(n, rate int64) time.Duration {
	hi, lo := bits.Mul64(uint64(n), uint64(time.Second))
	if hi >= uint64(rate) {
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, uint64(rate))
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// bucket is one key's token bucket, kept as the instant it is full again.
type bucket struct {
	key string
	lim limit
	// full: the bucket holds Burst - (full-now)*rate tokens at now, Burst
	// once full is not after now.
	full       time.Time
	prev, next *bucket // recency list
}

// Limiter tracks byte rates per key. Create it with New.
type Limiter struct {
	maxKeys     int
	maxThrottle time.Duration
	def         limit // rate 0: unlimited
	overrides   map[string]limit

	mu    sync.Mutex
	byKey map[string]*bucket
	// lru is the recency list's sentinel: lru.next is the bucket used last,
	// lru.prev the one unused longest.
	lru bucket
}

// New returns a Limiter for cfg.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Limiter{
		maxKeys:     cfg.MaxKeys,
		maxThrottle: cfg.MaxThrottle,
		def:         makeLimit(cfg.Default),
		overrides:   make(map[string]limit, len(cfg.Overrides)),
		byKey:       make(map[string]*bucket),
	}
	for k, q := range cfg.Overrides {
		l.overrides[k] = makeLimit(q)
	}
	l.lru.next, l.lru.prev = &l.lru, &l.lru
	return l, nil
}

// Record counts n bytes sent by key at now and returns how long the client
// should be delayed to bring it back within its quota: zero while it is
// within quota, at most MaxThrottle. n must not be negative.
func (l *Limiter) Record(key string, n int, now time.Time) time.Duration {
	if n < 0 {
		panic(fmt.Sprintf("quota: Record of %d bytes", n))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b := l.byKey[key]
	if b == nil {
		lim, ok := l.overrides[key]
		if !ok {
			lim = l.def
		}
		if lim.rate == 0 {
			return 0
		}
		if len(l.byKey) >= l.maxKeys {
			l.remove(l.lru.prev)
		}
		b = &bucket{key: strings.Clone(key), lim: lim, full: now}
		l.byKey[b.key] = b
	} else {
		l.unlink(b)
	}
	l.pushFront(b)

	base := b.full
	if base.Before(now) {
		base = now
	}
	// Debt is capped at maxThrottle: full never goes beyond now + burst +
	// maxThrottle.
	ceiling := b.lim.burst + l.maxThrottle
	full := base.Add(min(cost(int64(n), b.lim.rate), ceiling))
	if most := now.Add(ceiling); full.After(most) {
		full = most
	}
	b.full = full
	return max(0, full.Sub(now)-b.lim.burst)
}

// Len is the number of buckets kept: keys that have not refilled since
// their last Record, bar those not yet swept.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byKey)
}

// sweep drops full buckets from the end of the recency list.
func (l *Limiter) sweep(now time.Time) {
	for b := l.lru.prev; b != &l.lru && !b.full.After(now); b = l.lru.prev {
		l.remove(b)
	}
}

func (l *Limiter) remove(b *bucket) {
	l.unlink(b)
	delete(l.byKey, b.key)
}

func (l *Limiter) pushFront(b *bucket) {
	b.prev, b.next = &l.lru, l.lru.next
	l.lru.next.prev = b
	l.lru.next = b
}

func (l *Limiter) unlink(b *bucket) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
}
