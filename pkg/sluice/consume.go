package sluice

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return tp.Topic + "/" + strconv.Itoa(int(tp.Partition)) }

// compareTP orders partitions by topic, then number.
func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// ConsumedRecord is a record read from a partition (by a Reader or a
// Consumer). Key, Value and Headers are the caller's; the SDK keeps no
// reference to them once returned.
type ConsumedRecord struct {
	Topic     string
	Partition int32
	// Offset of the record in its partition. Offsets are dense (compacted
	// topics may have gaps) and increase within a partition.
	Offset int64
	// Key as produced; nil when the record had none.
	Key []byte
	// Value as produced; nil for a tombstone.
	Value   []byte
	Headers []Header
	// Timestamp is the producer's creation time or the append time
	// (millisecond precision).
	Timestamp time.Time
}

// consumedRecord converts a record of the API.
func consumedRecord(topic string, partition int32, r *sluicev1.ConsumedRecord) ConsumedRecord {
	out := ConsumedRecord{
		Topic: topic, Partition: partition, Offset: r.GetOffset(),
		Key: r.GetKey(), Value: r.GetValue(), Timestamp: time.UnixMilli(r.GetTimestamp()),
	}
	if len(out.Key) == 0 {
		out.Key = nil
	}
	if hs := r.GetHeaders(); len(hs) > 0 {
		out.Headers = make([]Header, len(hs))
		for i, h := range hs {
			out.Headers[i] = Header{Key: h.GetKey(), Value: h.GetValue()}
		}
	}
	return out
}

// batchDecoder turns delivered record batches (record_batches) into
// ConsumedRecords. The server checked every batch against its limits when
// it was produced and verifies its CRC before sending it, so the decoder
// holds batches to the format's outer bounds (record.MaxLimits) only.
// Records of uncompressed batches alias the batch bytes (the received
// message's own memory); those of a compressed batch alias a buffer
// decompressed for that batch alone. Not safe for concurrent use.
type batchDecoder struct {
	it *record.Iterator
}

func newBatchDecoder() *batchDecoder {
	return &batchDecoder{it: record.NewIterator(record.MaxLimits())}
}

// decode appends to out the records at or after offset from of runs (each
// one or more whole batches back to back), in offset order. Control
// batches (transaction markers) hold no records. An error names what does
// not decode: the batches did not arrive as stored.
func (d *batchDecoder) decode(out []ConsumedRecord, tp TopicPartition, runs [][]byte, from int64) ([]ConsumedRecord, error) {
	for _, run := range runs {
		for rest := run; len(rest) > 0; {
			bt, r, err := record.Split(rest)
			if err != nil {
				return out, err
			}
			rest = r
			if bt.LastOffset() < from || bt.Attributes().Control() {
				continue
			}
			if bt.Codec() != record.CodecNone {
				recs, err := record.Decode(bt, record.MaxLimits())
				if err != nil {
					return out, err
				}
				for i := range recs {
					if recs[i].Offset >= from {
						out = append(out, fromStored(tp, &recs[i]))
					}
				}
				continue
			}
			if err := d.it.Reset(bt); err != nil {
				return out, err
			}
			for d.it.Next() {
				if rec := d.it.Record(); rec.Offset >= from {
					out = append(out, fromStored(tp, rec))
				}
			}
			if err := d.it.Err(); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// fromStored converts a decoded record. Its slices are clipped, so that
// appending to one never writes over the next record.
func fromStored(tp TopicPartition, r *record.Record) ConsumedRecord {
	out := ConsumedRecord{
		Topic: tp.Topic, Partition: tp.Partition, Offset: r.Offset,
		Key: slices.Clip(r.Key), Value: slices.Clip(r.Value), Timestamp: time.UnixMilli(r.Timestamp),
	}
	if len(out.Key) == 0 {
		out.Key = nil // as the per-record API delivers it
	}
	if len(r.Headers) > 0 {
		out.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = Header{Key: h.Key, Value: slices.Clip(h.Value)}
		}
	}
	return out
}

// creditBytes is what a record counts against a session's byte credits, as
// the server counts it: key + value + header keys and values.
func creditBytes(r *sluicev1.ConsumedRecord) int64 {
	n := int64(len(r.GetKey()) + len(r.GetValue()))
	for _, h := range r.GetHeaders() {
		n += int64(len(h.GetKey()) + len(h.GetValue()))
	}
	return n
}

// Position is where reading starts: Earliest, Latest, AtOffset or AtTime.
// The zero Position is not valid.
type Position struct {
	kind   positionKind
	offset int64
	time   time.Time
}

type positionKind uint8

const (
	posEarliest positionKind = iota + 1
	posLatest
	posOffset
	posTime
)

// Earliest is the oldest record still stored.
func Earliest() Position { return Position{kind: posEarliest} }

// Latest is the end of the partition: only records produced afterwards.
func Latest() Position { return Position{kind: posLatest} }

// AtOffset is an explicit offset (at least 0).
func AtOffset(offset int64) Position { return Position{kind: posOffset, offset: offset} }

// AtTime is the first record whose timestamp is at or after t (millisecond
// precision; not before the Unix epoch).
func AtTime(t time.Time) Position { return Position{kind: posTime, time: t} }

// ParsePosition parses "earliest", "latest", an offset ("42") or an RFC 3339
// time ("2026-12-01T10:00:00Z").
func ParsePosition(s string) (Position, error) {
	switch strings.ToLower(s) {
	case "earliest":
		return Earliest(), nil
	case "latest":
		return Latest(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return Position{}, fmt.Errorf("position %q: offsets are at least 0", s)
		}
		return AtOffset(n), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return AtTime(t), nil
	}
	return Position{}, fmt.Errorf("position %q: want earliest, latest, an offset or an RFC 3339 time (2006-01-02T15:04:05Z)", s)
}

func (p Position) String() string {
	switch p.kind {
	case posEarliest:
		return "earliest"
	case posLatest:
		return "latest"
	case posOffset:
		return strconv.FormatInt(p.offset, 10)
	case posTime:
		return p.time.UTC().Format(time.RFC3339Nano)
	}
	return "invalid"
}

// check reports what is wrong with p, or nil.
func (p Position) check() error {
	switch p.kind {
	case posEarliest, posLatest:
	case posOffset:
		if p.offset < 0 {
			return fmt.Errorf("offset %d is negative", p.offset)
		}
	case posTime:
		if p.time.UnixMilli() < 0 {
			return fmt.Errorf("time %v is before the Unix epoch", p.time)
		}
	default:
		return errors.New("zero Position; use Earliest(), Latest(), AtOffset or AtTime")
	}
	return nil
}

// proto returns the API's start position, offset and timestamp for p.
func (p Position) proto() (sluicev1.StartPosition, int64, int64) {
	switch p.kind {
	case posEarliest:
		return sluicev1.StartPosition_START_POSITION_EARLIEST, 0, 0
	case posLatest:
		return sluicev1.StartPosition_START_POSITION_LATEST, 0, 0
	case posTime:
		return sluicev1.StartPosition_START_POSITION_TIMESTAMP, 0, p.time.UnixMilli()
	}
	return sluicev1.StartPosition_START_POSITION_UNSPECIFIED, p.offset, 0
}

// Errors of consuming.
var (
	// ErrOffsetOutOfRange: a Reader asked for an offset outside the
	// partition's valid range (below the log start after retention, or
	// past the end). The error is an *OffsetOutOfRangeError with the range.
	ErrOffsetOutOfRange = errors.New("sluice: offset out of range")
	// ErrFenced: a group commit named a lease that has moved to another
	// member (or whose session ended). The error is a *FencedError naming
	// the partitions; the Consumer has dropped them.
	ErrFenced = errors.New("sluice: partition lease fenced")
	// ErrNotAssigned: CommitOffsets named partitions not leased to this
	// member; the error names them. The other offsets were committed.
	ErrNotAssigned = errors.New("sluice: partition not assigned to this member")
	// ErrRetriesExhausted: retriable failures (UNAVAILABLE,
	// RESOURCE_EXHAUSTED, broken connections) went on longer than
	// WithReadRetryTimeout. The error also wraps the last failure.
	ErrRetriesExhausted = errors.New("sluice: gave up retrying")
)

// OffsetOutOfRangeError is an OUT_OF_RANGE answer to a Fetch. It wraps
// ErrOffsetOutOfRange and the server's *connect.Error.
type OffsetOutOfRangeError struct {
	TopicPartition
	// Offset that was asked for (-1 for a symbolic start).
	Offset int64
	// LogStartOffset and HighWatermark bound the valid offsets
	// [LogStartOffset, HighWatermark]; -1 when the server did not say (it
	// says in a google.rpc.ErrorInfo detail, reason OFFSET_OUT_OF_RANGE).
	LogStartOffset int64
	HighWatermark  int64
	Err            error
}

func (e *OffsetOutOfRangeError) Error() string {
	rng := "unknown range"
	if e.LogStartOffset >= 0 && e.HighWatermark >= 0 {
		rng = fmt.Sprintf("valid offsets %d..%d", e.LogStartOffset, e.HighWatermark)
	}
	return fmt.Sprintf("sluice: %s: offset %d out of range (%s): %v", e.TopicPartition, e.Offset, rng, e.Err)
}

func (e *OffsetOutOfRangeError) Unwrap() []error { return []error{ErrOffsetOutOfRange, e.Err} }

// The google.rpc.ErrorInfo the server attaches to OUT_OF_RANGE answers
// (services/fetch: ReasonOutOfRange, ErrorDomain; not imported, see the
// layering test).
const (
	reasonOutOfRange  = "OFFSET_OUT_OF_RANGE"
	errorDomain       = "sluice.dev"
	metaLogStart      = "log_start_offset"
	metaHighWatermark = "high_watermark"
)

// outOfRange builds an *OffsetOutOfRangeError from an OUT_OF_RANGE error,
// reading the range from its ErrorInfo detail when present.
func outOfRange(tp TopicPartition, offset int64, ce *connect.Error) *OffsetOutOfRangeError {
	e := &OffsetOutOfRangeError{TopicPartition: tp, Offset: offset, LogStartOffset: -1, HighWatermark: -1, Err: ce}
	for _, d := range ce.Details() {
		msg, err := d.Value()
		if err != nil {
			continue
		}
		info, ok := msg.(*errdetails.ErrorInfo)
		if !ok || info.GetReason() != reasonOutOfRange || (info.GetDomain() != "" && info.GetDomain() != errorDomain) {
			continue
		}
		if v, err := strconv.ParseInt(info.GetMetadata()[metaLogStart], 10, 64); err == nil {
			e.LogStartOffset = v
		}
		if v, err := strconv.ParseInt(info.GetMetadata()[metaHighWatermark], 10, 64); err == nil {
			e.HighWatermark = v
		}
	}
	return e
}

// FencedError is a group commit refused because the leases of Partitions
// moved (FAILED_PRECONDITION). It wraps ErrFenced and the server's error.
type FencedError struct {
	Group      string
	Partitions []TopicPartition
	Err        error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("sluice: group %q: leases of %s moved to another member; their records will be consumed there (offsets not committed): %v",
		e.Group, tpList(e.Partitions), e.Err)
}

func (e *FencedError) Unwrap() []error { return []error{ErrFenced, e.Err} }

// backoffDelay is the delay before the n-th retry in a row (n ≥ 1):
// doubling from initial up to maxDelay, with ±20% jitter (as the
// producer's).
func backoffDelay(initial, maxDelay time.Duration, n int) time.Duration {
	d := initial
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// sleepCtx waits d or until ctx ends (then its cause).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// sortTPs sorts partitions in place and returns them.
func sortTPs(tps []TopicPartition) []TopicPartition {
	slices.SortFunc(tps, compareTP)
	return tps
}
