package segment

import (
	"errors"
	"fmt"
)

// Defaults for zero option fields, and the hard limits no option may exceed.
const (
	// DefaultIndexIntervalBytes: an offset index entry closes an interval
	// once it holds this many data bytes. 64 KiB keeps a ranged GET for one
	// offset small while a 512 MiB ledger (ingest's default roll size)
	// needs 8192 entries (~290 KiB of index with the time index).
	DefaultIndexIntervalBytes = 64 << 10
	// MaxIndexIntervalBytes bounds IndexIntervalBytes.
	MaxIndexIntervalBytes = 64 << 20

	// DefaultMaxSegmentBytes bounds a segment object's size.
	DefaultMaxSegmentBytes = 4 << 30
	// MaxSegmentBytesLimit bounds MaxSegmentBytes (S3 allows 5 TiB; a
	// ledger is far smaller).
	MaxSegmentBytesLimit = 256 << 30

	// DefaultMaxIndexEntries bounds the entries of each index: 262,144
	// entries are ~9 MiB of memory for both indexes, and cover 16 GiB at
	// the default interval.
	DefaultMaxIndexEntries = 1 << 18
	// MaxIndexEntriesLimit bounds MaxIndexEntries.
	MaxIndexEntriesLimit = 1 << 22

	// DefaultTailReadBytes is how much Open reads at the end of the object
	// in its first read: the footer, and the indexes when they fit (a
	// 512 MiB segment at the default interval has ~290 KiB of index), so
	// Open usually costs one ranged GET.
	DefaultTailReadBytes = 512 << 10
	// MinTailReadBytes is the smallest tail read: trailer plus the
	// largest footer, rounded up.
	MinTailReadBytes = 4 << 10
	// MaxTailReadBytes bounds TailReadBytes.
	MaxTailReadBytes = 64 << 20
)

// WriterOptions describe the segment a Writer builds and bound it. The
// identity fields are copied to the footer; zero bounds take the defaults.
type WriterOptions struct {
	// LedgerID is the ledger whose batches the segment holds (≥ 0).
	LedgerID int64
	// TopicID is the topic incarnation, 1..MaxTopicIDBytes bytes.
	TopicID string
	// Partition is the partition index (≥ 0).
	Partition int32

	// IndexIntervalBytes: see DefaultIndexIntervalBytes. A batch larger
	// than the interval gets an interval of its own.
	IndexIntervalBytes int
	// MaxSegmentBytes bounds the whole object; Append refuses (ErrLimit)
	// a batch that would take the finished segment past it.
	MaxSegmentBytes int64
	// MaxIndexEntries bounds each index. It must hold the entries
	// MaxSegmentBytes can need: MaxSegmentBytes/max(IndexIntervalBytes,
	// 61) + 1 (61 bytes: the smallest batch).
	MaxIndexEntries int
}

func (o WriterOptions) withDefaults() WriterOptions {
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.MaxSegmentBytes == 0 {
		o.MaxSegmentBytes = DefaultMaxSegmentBytes
	}
	if o.MaxIndexEntries == 0 {
		o.MaxIndexEntries = DefaultMaxIndexEntries
	}
	return o
}

// Validate reports every problem with o (after defaults), joined; each
// wraps ErrInvalid.
func (o WriterOptions) Validate() error {
	o = o.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: segment writer options: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	if o.LedgerID < 0 {
		bad("LedgerID", "%d is negative", o.LedgerID)
	}
	if n := len(o.TopicID); n < 1 || n > MaxTopicIDBytes {
		bad("TopicID", "%d bytes, want 1..%d", n, MaxTopicIDBytes)
	}
	if o.Partition < 0 {
		bad("Partition", "%d is negative", o.Partition)
	}
	if o.IndexIntervalBytes < 1 || o.IndexIntervalBytes > MaxIndexIntervalBytes {
		bad("IndexIntervalBytes", "%d outside [1, %d]", o.IndexIntervalBytes, MaxIndexIntervalBytes)
	}
	if o.MaxSegmentBytes < minObjectSize || o.MaxSegmentBytes > MaxSegmentBytesLimit {
		bad("MaxSegmentBytes", "%d outside [%d, %d]", o.MaxSegmentBytes, minObjectSize, int64(MaxSegmentBytesLimit))
	}
	if o.MaxIndexEntries < 1 || o.MaxIndexEntries > MaxIndexEntriesLimit {
		bad("MaxIndexEntries", "%d outside [1, %d]", o.MaxIndexEntries, MaxIndexEntriesLimit)
	} else if o.IndexIntervalBytes >= 1 && o.MaxSegmentBytes >= minObjectSize {
		// Every interval but the last holds ≥ IndexIntervalBytes and at
		// least one batch, so this many entries always suffice and the
		// index never overflows.
		if need := o.MaxSegmentBytes/int64(max(o.IndexIntervalBytes, minBatchSize)) + 1; need > int64(o.MaxIndexEntries) {
			bad("MaxIndexEntries", "%d cannot index %d bytes at %d bytes per entry (need %d)", o.MaxIndexEntries, o.MaxSegmentBytes, o.IndexIntervalBytes, need)
		}
	}
	return errors.Join(errs...)
}

// ReaderOptions bound what Open accepts and allocates; zero fields take the
// defaults.
type ReaderOptions struct {
	// MaxSegmentBytes: Open refuses a larger object (ErrLimit).
	MaxSegmentBytes int64
	// MaxIndexEntries: Open refuses a segment whose offset or time index
	// has more entries (ErrLimit). It bounds the Reader's memory.
	MaxIndexEntries int
	// TailReadBytes: see DefaultTailReadBytes.
	TailReadBytes int
}

func (o ReaderOptions) withDefaults() ReaderOptions {
	if o.MaxSegmentBytes == 0 {
		o.MaxSegmentBytes = DefaultMaxSegmentBytes
	}
	if o.MaxIndexEntries == 0 {
		o.MaxIndexEntries = DefaultMaxIndexEntries
	}
	if o.TailReadBytes == 0 {
		o.TailReadBytes = DefaultTailReadBytes
	}
	return o
}

// Validate reports every problem with o (after defaults), joined; each
// wraps ErrInvalid.
func (o ReaderOptions) Validate() error {
	o = o.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: segment reader options: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	if o.MaxSegmentBytes < minObjectSize || o.MaxSegmentBytes > MaxSegmentBytesLimit {
		bad("MaxSegmentBytes", "%d outside [%d, %d]", o.MaxSegmentBytes, minObjectSize, int64(MaxSegmentBytesLimit))
	}
	if o.MaxIndexEntries < 1 || o.MaxIndexEntries > MaxIndexEntriesLimit {
		bad("MaxIndexEntries", "%d outside [1, %d]", o.MaxIndexEntries, MaxIndexEntriesLimit)
	}
	if o.TailReadBytes < MinTailReadBytes || o.TailReadBytes > MaxTailReadBytes {
		bad("TailReadBytes", "%d outside [%d, %d]", o.TailReadBytes, MinTailReadBytes, MaxTailReadBytes)
	}
	return errors.Join(errs...)
}
