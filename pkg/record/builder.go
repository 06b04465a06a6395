package record

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Producer identifies an idempotent producer's batch: Kafka's producer id,
// epoch and the sequence number of the batch's first record.
type Producer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// BuilderOptions configure a Builder.
type BuilderOptions struct {
	// Codec compresses the records section. Build stores the batch
	// uncompressed instead when compression does not make it smaller.
	Codec Codec
	// Level is the codec's compression level; 0 is its default. gzip 1-9,
	// lz4 1-9, zstd 1-22 (zstd's CLI scale, as Kafka's
	// compression.zstd.level); must be 0 for none and snappy.
	Level int
	// Producer marks the batch idempotent; nil writes the NoProducer* values.
	Producer *Producer
	// Transactional sets the transactional attribute; needs Producer.
	Transactional bool
	// Control sets the control attribute (commit/abort markers); needs
	// Transactional. Validate rejects control batches from clients.
	Control bool
	// Limits bound the batch: MaxRecords, MaxBatchBytes (measured before
	// compression), MaxDecompressedBytes, and every per-record limit, which
	// Append checks. A batch built under some Limits passes Validate under
	// the same Limits. Zero fields take their defaults.
	Limits Limits
}

func (o *BuilderOptions) check() error {
	var errs []error
	if !o.Codec.valid() {
		errs = append(errs, fmt.Errorf("record: unknown codec %d", int8(o.Codec)))
	} else if err := checkLevel(o.Codec, o.Level); err != nil {
		errs = append(errs, err)
	}
	// A control batch (a transaction marker) carries no sequence.
	if p := o.Producer; p != nil && (p.ID < 0 || p.Epoch < 0 || p.BaseSequence < 0 && !(o.Control && p.BaseSequence == NoSequence)) {
		errs = append(errs, fmt.Errorf("record: producer id %d, epoch %d, base sequence %d: all must be ≥ 0", p.ID, p.Epoch, p.BaseSequence))
	}
	if o.Transactional && o.Producer == nil {
		errs = append(errs, errors.New("record: a transactional batch needs a Producer"))
	}
	if o.Control && !o.Transactional {
		errs = append(errs, errors.New("record: a control batch must be transactional"))
	}
	errs = append(errs, o.Limits.Check())
	return errors.Join(errs...)
}

// Builder encodes records into one batch. Records are encoded as they are
// appended; Build adds the header and compresses. Not safe for concurrent
// use.
type Builder struct {
	opts    BuilderOptions
	lim     Limits
	buf     []byte // HeaderSize reserved bytes, then the encoded records
	n       int    // records appended
	firstTs int64
	maxTs   int64
	zbuf    []byte // compression output, reused
	last    int    // size of the last uncompressed batch handed over
}

// NewBuilder returns a Builder for batches with the given options.
func NewBuilder(opts BuilderOptions) (*Builder, error) {
	b := new(Builder)
	if err := b.Reset(opts); err != nil {
		return nil, err
	}
	return b, nil
}

// Reset discards the records appended so far and starts a new batch with
// opts (e.g. the producer's next base sequence), keeping buffers.
func (b *Builder) Reset(opts BuilderOptions) error {
	if err := opts.check(); err != nil {
		return err
	}
	b.opts, b.lim = opts, opts.Limits.WithDefaults()
	b.clear()
	return nil
}

func (b *Builder) clear() {
	if b.buf == nil {
		// The last buffer was handed over by Build; size the next one
		// like it rather than growing from nothing.
		b.buf = make([]byte, 0, max(b.last, 4<<10))
	}
	b.buf = append(b.buf[:0], make([]byte, HeaderSize)...)
	b.n, b.firstTs, b.maxTs = 0, 0, 0
}

// Len is the number of records appended.
func (b *Builder) Len() int { return b.n }

// Size is the batch size so far before compression, header included.
func (b *Builder) Size() int { return len(b.buf) }

// Append adds r (its Offset is ignored). It returns ErrBatchFull, adding
// nothing, when r would push the batch past MaxRecords, MaxBatchBytes or
// MaxDecompressedBytes — build the batch and append r to the next one — and
// a *FormatError (ErrLimit or ErrInvalid) when r breaks a per-record limit or
// could never fit a batch on its own.
func (b *Builder) Append(r *Record) error {
	if err := checkRecord(r, b.n, &b.lim); err != nil {
		return err
	}
	if b.n == b.lim.MaxRecords {
		return ErrBatchFull
	}
	firstTs := r.Timestamp
	if b.n > 0 {
		firstTs = b.firstTs
	}
	tsDelta := r.Timestamp - firstTs // both ≥ 0: cannot overflow
	body := recordBodySize(r, tsDelta, int32(b.n))
	size := varintLen(int64(body)) + body
	recs := len(b.buf) - HeaderSize
	if recs+size > b.lim.MaxDecompressedBytes || len(b.buf)+size > b.lim.MaxBatchBytes {
		if b.n == 0 || size > b.lim.MaxDecompressedBytes || HeaderSize+size > b.lim.MaxBatchBytes {
			fe := &FormatError{Field: recordField(b.n, -1, "length"), Reason: fmt.Sprintf("a %d-byte record cannot fit in a batch (MaxBatchBytes %d, MaxDecompressedBytes %d)", size, b.lim.MaxBatchBytes, b.lim.MaxDecompressedBytes), Err: ErrLimit,
				Limit: "MaxBatchBytes", Got: HeaderSize + size, Max: b.lim.MaxBatchBytes}
			if size > b.lim.MaxDecompressedBytes && HeaderSize+size <= b.lim.MaxBatchBytes {
				fe.Limit, fe.Got, fe.Max = "MaxDecompressedBytes", size, b.lim.MaxDecompressedBytes
			}
			return fe
		}
		return ErrBatchFull
	}
	b.buf = appendRecord(b.buf, r, tsDelta, int32(b.n), body)
	if b.n == 0 {
		b.firstTs, b.maxTs = r.Timestamp, r.Timestamp
	}
	b.maxTs = max(b.maxTs, r.Timestamp)
	b.n++
	return nil
}

// BatchSize is the size of an uncompressed batch holding r alone, header
// included: what a record must fit in MaxBatchBytes. A record later in a
// batch may take a few bytes more (its timestamp and offset deltas).
func BatchSize(r *Record) int {
	body := recordBodySize(r, 0, 0)
	return HeaderSize + varintLen(int64(body)) + body
}

// Build returns the encoded batch, which the caller owns, with baseOffset 0
// and partitionLeaderEpoch -1, and empties the Builder for the next batch
// (same options).
func (b *Builder) Build() ([]byte, error) {
	if b.n == 0 {
		return nil, ErrEmptyBatch
	}
	codec := b.opts.Codec
	records := b.buf[HeaderSize:]
	if codec != CodecNone {
		var err error
		b.zbuf, err = compress(b.zbuf[:0], codec, b.opts.Level, records)
		if err != nil {
			return nil, fmt.Errorf("record: compress with %v: %w", codec, err)
		}
		if len(b.zbuf) >= len(records) {
			codec = CodecNone // keeps the batch within MaxBatchBytes
		} else {
			records = b.zbuf
		}
	}
	attrs := Attributes(codec)
	if b.opts.Transactional {
		attrs |= AttrTransactional
	}
	if b.opts.Control {
		attrs |= AttrControl
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		Length:               int32(HeaderSize - lengthFieldEnd + len(records)),
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		Magic:                Magic,
		Attributes:           int16(attrs),
		LastOffsetDelta:      int32(b.n - 1),
		FirstTimestamp:       b.firstTs,
		MaxTimestamp:         b.maxTs,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		FirstSequence:        NoSequence,
		NumRecords:           int32(b.n),
	}
	if p := b.opts.Producer; p != nil {
		rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = p.ID, p.Epoch, p.BaseSequence
	}
	var out []byte
	if codec == CodecNone {
		// Fill the reserved header in place and hand the buffer over.
		out = rb.AppendTo(b.buf[:0])[:len(b.buf)]
		b.buf, b.last = nil, len(out)
	} else {
		out = rb.AppendTo(make([]byte, 0, HeaderSize+len(records)))
		out = append(out, records...)
	}
	if len(out) != HeaderSize+len(records) {
		panic("record: header encoding is not HeaderSize bytes")
	}
	crc := computeCRC(out)
	out[offCRC], out[offCRC+1], out[offCRC+2], out[offCRC+3] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	b.clear()
	return out, nil
}
