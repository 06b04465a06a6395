package compactor

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/pkg/segment"
)

// Defaults for zero Config fields, and the bounds Validate enforces.
const (
	DefaultInterval          = 30 * time.Second
	DefaultWorkers           = 4
	MaxWorkers               = 64
	DefaultMaxLedgersPerPass = 100
	MaxMaxLedgersPerPass     = 10_000
	DefaultMaxScanPerPass    = 10_000
	MaxMaxScanPerPass        = 1_000_000
	DefaultOffloadAge        = 5 * time.Minute
	DefaultBookieDeleteGrace = 10 * time.Minute
	DefaultDeleteGrace       = time.Minute
	DefaultOrphanGrace       = time.Hour
	DefaultMaxSweepPerPass   = 1000
	DefaultMaxPendingPerPass = 1000
	DefaultUploadPartBytes   = 16 << 20
	MinUploadPartBytes       = 5 << 20 // S3's smallest multipart part
	MaxUploadPartBytes       = 512 << 20
	DefaultPassTimeout       = 10 * time.Minute
	DefaultCompactInterval   = 10 * time.Minute
	DefaultTombstoneDelay    = 24 * time.Hour
	DefaultMaxCompactKeys    = 1_000_000
	// DefaultRereplicateGrace: a bookie gone from the registry this long
	// is taken as lost and its closed ledgers' copies are rebuilt.
	DefaultRereplicateGrace = 2 * time.Minute
	// DefaultRereplicateBytesPerSec throttles re-replication (payload
	// bytes read from survivors and written to the new bookie).
	DefaultRereplicateBytesPerSec = 32 << 20
	MaxMaxCompactKeys             = 100_000_000
	// MaxMaxObjectBytes keeps a segment's index within the segment
	// package's entry limit at the default index interval.
	MaxMaxObjectBytes = 64 << 30
	maxDuration       = 30 * 24 * time.Hour
)

// Config configures a compactor. Zero fields take the defaults; Validate
// reports every field out of range at once. Every loop of a pass and every
// buffer is bounded by one of these.
type Config struct {
	// Interval is the time between the starts of two passes in Run.
	Interval time.Duration
	// PassTimeout bounds one pass (Run and Pass alike).
	PassTimeout time.Duration
	// Workers is how many ledgers a pass offloads or cleans up at once.
	Workers int
	// MaxLedgersPerPass bounds the ledgers one pass offloads, and
	// separately the DELETED ledgers it cleans up.
	MaxLedgersPerPass int
	// MaxScanPerPass bounds the catalog records one pass reads while
	// looking for work (CLOSED and DELETED ledgers, partitions).
	MaxScanPerPass int
	// OffloadAge: a CLOSED ledger is offloaded once it was sealed this long
	// ago, so the hot tail is served from bookies and never waits on S3.
	// Zero means DefaultOffloadAge; negative means at once.
	OffloadAge time.Duration
	// BookieDeleteGrace: bookies keep an OFFLOADED ledger's copy this long
	// after the catalog points at the object, so a reader that opened the
	// ledger on the bookies before the switch finishes without error.
	// Zero means DefaultBookieDeleteGrace; negative means no grace.
	BookieDeleteGrace time.Duration
	// DeleteGrace: a DELETED ledger's object and bookie copies stay this
	// long after the transition (Kafka's file.delete.delay.ms), for reads
	// already in flight. Zero means DefaultDeleteGrace; negative no grace.
	DeleteGrace time.Duration
	// OrphanGrace: a segment object no ledger points at is deleted by the
	// sweep once it is this old (by its modification time), so an upload
	// whose catalog update is still on its way is never swept.
	OrphanGrace time.Duration
	// MaxSweepPerPass bounds the objects one pass's orphan sweep looks at;
	// the sweep continues where the previous one stopped.
	MaxSweepPerPass int
	// MaxPendingPerPass bounds the pending markers (bookie deletes waiting
	// for their grace) one pass looks at.
	MaxPendingPerPass int
	// MaxObjectBytes bounds one segment object; a larger ledger is not
	// offloaded (reported, left on the bookies).
	MaxObjectBytes int64
	// UploadPartBytes is the object writer's buffer: the multipart part
	// size on S3 (at least 5 MiB there).
	UploadPartBytes int
	// CompactInterval: a partition of a cleanup.policy=compact topic is
	// compacted at most this often (by this process).
	CompactInterval time.Duration
	// TombstoneDelay: a tombstone (a record with a null value) is dropped
	// by key compaction once its ledger was sealed this long ago (Kafka's
	// delete.retention.ms), so consumers have that long to see it.
	// Negative means at once.
	TombstoneDelay time.Duration
	// MaxCompactKeys bounds the distinct keys of one partition's offloaded
	// data that compaction holds in memory; a partition with more is not
	// compacted (reported).
	MaxCompactKeys int
	// RereplicateGrace: a bookie missing from the registry this long (as
	// this process has seen it) is lost, and every CLOSED ledger with a
	// copy on it gets that copy rebuilt on another bookie. A restart of
	// the bookie within the grace costs nothing. Zero means
	// DefaultRereplicateGrace; negative means at once.
	RereplicateGrace time.Duration
	// RereplicateBytesPerSec bounds the payload bytes re-replication moves
	// per second across all workers, so it does not starve the write
	// path. Zero means DefaultRereplicateBytesPerSec.
	RereplicateBytesPerSec int64
	// Prefix is put in front of every object key ("" or ending in "/").
	Prefix string
	// Logger receives the compactor's events; nil discards them.
	Logger *slog.Logger
	// Now is the compactor's clock (ages, graces, marker times); nil means
	// time.Now. Tests move it.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	setd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	seti := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setd(&c.Interval, DefaultInterval)
	setd(&c.PassTimeout, DefaultPassTimeout)
	setd(&c.OffloadAge, DefaultOffloadAge)
	setd(&c.BookieDeleteGrace, DefaultBookieDeleteGrace)
	setd(&c.DeleteGrace, DefaultDeleteGrace)
	setd(&c.OrphanGrace, DefaultOrphanGrace)
	setd(&c.CompactInterval, DefaultCompactInterval)
	setd(&c.TombstoneDelay, DefaultTombstoneDelay)
	seti(&c.MaxCompactKeys, DefaultMaxCompactKeys)
	setd(&c.RereplicateGrace, DefaultRereplicateGrace)
	c.RereplicateGrace = max(c.RereplicateGrace, 0)
	if c.RereplicateBytesPerSec == 0 {
		c.RereplicateBytesPerSec = DefaultRereplicateBytesPerSec
	}
	seti(&c.Workers, DefaultWorkers)
	seti(&c.MaxLedgersPerPass, DefaultMaxLedgersPerPass)
	seti(&c.MaxScanPerPass, DefaultMaxScanPerPass)
	seti(&c.MaxSweepPerPass, DefaultMaxSweepPerPass)
	seti(&c.MaxPendingPerPass, DefaultMaxPendingPerPass)
	seti(&c.UploadPartBytes, DefaultUploadPartBytes)
	if c.MaxObjectBytes == 0 {
		c.MaxObjectBytes = segment.DefaultMaxSegmentBytes
	}
	// Negative graces mean "none"; the code compares ages against them.
	c.BookieDeleteGrace = max(c.BookieDeleteGrace, 0)
	c.DeleteGrace = max(c.DeleteGrace, 0)
	c.OffloadAge = max(c.OffloadAge, 0)
	c.TombstoneDelay = max(c.TombstoneDelay, 0)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every field out of range, joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("compactor config: %s %s", field, fmt.Sprintf(format, args...)))
	}
	ints := func(name string, v, lo, hi int) {
		if v != 0 && (v < lo || v > hi) {
			bad(name, "%d is outside [%d, %d]", v, lo, hi)
		}
	}
	ints("Workers", c.Workers, 1, MaxWorkers)
	ints("MaxLedgersPerPass", c.MaxLedgersPerPass, 1, MaxMaxLedgersPerPass)
	ints("MaxScanPerPass", c.MaxScanPerPass, 1, MaxMaxScanPerPass)
	ints("MaxSweepPerPass", c.MaxSweepPerPass, 1, MaxMaxScanPerPass)
	ints("MaxPendingPerPass", c.MaxPendingPerPass, 1, MaxMaxScanPerPass)
	ints("MaxCompactKeys", c.MaxCompactKeys, 1, MaxMaxCompactKeys)
	ints("UploadPartBytes", c.UploadPartBytes, MinUploadPartBytes, MaxUploadPartBytes)
	durs := func(name string, v, lo time.Duration, negOK bool) {
		switch {
		case v < 0 && negOK:
		case v != 0 && (v < lo || v > maxDuration):
			bad(name, "%v is outside [%v, %v]", v, lo, maxDuration)
		}
	}
	durs("Interval", c.Interval, time.Millisecond, false)
	durs("PassTimeout", c.PassTimeout, time.Second, false)
	durs("OffloadAge", c.OffloadAge, time.Nanosecond, true)
	durs("BookieDeleteGrace", c.BookieDeleteGrace, time.Nanosecond, true)
	durs("DeleteGrace", c.DeleteGrace, time.Nanosecond, true)
	durs("OrphanGrace", c.OrphanGrace, time.Second, false)
	durs("CompactInterval", c.CompactInterval, time.Millisecond, false)
	durs("TombstoneDelay", c.TombstoneDelay, time.Nanosecond, true)
	durs("RereplicateGrace", c.RereplicateGrace, time.Nanosecond, true)
	if c.RereplicateBytesPerSec != 0 && (c.RereplicateBytesPerSec < 1<<10 || c.RereplicateBytesPerSec > 10<<30) {
		bad("RereplicateBytesPerSec", "%d is outside [%d, %d]", c.RereplicateBytesPerSec, 1<<10, int64(10<<30))
	}
	if c.MaxObjectBytes != 0 && (c.MaxObjectBytes < 1<<10 || c.MaxObjectBytes > MaxMaxObjectBytes) {
		bad("MaxObjectBytes", "%d is outside [%d, %d]", c.MaxObjectBytes, 1<<10, int64(MaxMaxObjectBytes))
	}
	if c.Prefix != "" && (c.Prefix[len(c.Prefix)-1] != '/' || len(c.Prefix) > 256) {
		bad("Prefix", "%q must end in '/' and be at most 256 bytes", c.Prefix)
	}
	return errors.Join(errs...)
}
