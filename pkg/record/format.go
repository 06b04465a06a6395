package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Magic is the only batch format version this package reads or writes.
const Magic = 2

// HeaderSize is the size of the batch header; records start here.
const HeaderSize = 61

// Field offsets in the batch header (see the package doc).
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// batchLength counts the bytes after itself.
	lengthFieldEnd = offBatchLength + 4
	// minBatchLength is the batchLength of a batch with an empty records section.
	minBatchLength = HeaderSize - lengthFieldEnd
	// crcStart is where the CRC-covered bytes begin.
	crcStart = offAttributes
	// minRecordSize is the smallest encoded record: a one-byte varint for
	// each of length, timestampDelta, offsetDelta, keyLength, valueLength,
	// headerCount, plus the attributes byte.
	minRecordSize = 7
)

// NoProducerID, NoProducerEpoch and NoSequence fill the producer fields of a
// batch from a producer that is not idempotent, as in Kafka.
const (
	NoProducerID    = -1
	NoProducerEpoch = -1
	NoSequence      = -1
)

// NoPartitionLeaderEpoch is what clients put in partitionLeaderEpoch.
const NoPartitionLeaderEpoch = -1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec is a batch compression codec (attributes bits 0-2).
type Codec int8

// The codecs of Kafka's RecordBatch v2.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

func (c Codec) valid() bool { return c >= CodecNone && c <= CodecZstd }

// Attributes is the batch attributes field.
type Attributes int16

// Attribute bits.
const (
	attrCodecMask                = 0x07
	AttrLogAppendTime Attributes = 1 << 3
	AttrTransactional Attributes = 1 << 4
	AttrControl       Attributes = 1 << 5
	AttrDeleteHorizon Attributes = 1 << 6
	// attrKnown is every bit this package understands.
	attrKnown = attrCodecMask | AttrLogAppendTime | AttrTransactional | AttrControl | AttrDeleteHorizon
)

// Codec returns the compression codec bits.
func (a Attributes) Codec() Codec { return Codec(a & attrCodecMask) }

// LogAppendTime reports whether record timestamps are the broker's append
// time (maxTimestamp) rather than the producer's create time.
func (a Attributes) LogAppendTime() bool { return a&AttrLogAppendTime != 0 }

// Transactional reports whether the batch is part of a transaction.
func (a Attributes) Transactional() bool { return a&AttrTransactional != 0 }

// Control reports whether the batch holds control records (commit/abort markers).
func (a Attributes) Control() bool { return a&AttrControl != 0 }

// Batch is one encoded record batch. Its methods read header fields straight
// from the bytes, without decoding records, so the read path can use them on
// every fetch. They assume len(b) >= HeaderSize — which Verify, Validate and
// Split establish — and panic otherwise (a programmer error).
type Batch []byte

// BaseOffset is the offset of the first record.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// LastOffset is BaseOffset + LastOffsetDelta: the offset of the last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is the offset the batch after this one starts at.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// BatchLength is the batchLength field: the size of the batch minus 12.
func (b Batch) BatchLength() int32 { return int32(binary.BigEndian.Uint32(b[offBatchLength:])) }

// PartitionLeaderEpoch is the epoch of the writer that appended the batch.
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
}

// Magic is the format version byte.
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC is the stored CRC-32C.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }

// Attributes is the attributes field.
func (b Batch) Attributes() Attributes {
	return Attributes(binary.BigEndian.Uint16(b[offAttributes:]))
}

// Codec is the compression codec of the records section.
func (b Batch) Codec() Codec { return b.Attributes().Codec() }

// LastOffsetDelta is the offset delta of the last record.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}

// BaseTimestamp is the timestamp of the first record, in ms.
func (b Batch) BaseTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])) }

// MaxTimestamp is the largest record timestamp, in ms.
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }

// ProducerID is the idempotent producer id, or NoProducerID.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }

// ProducerEpoch is the producer epoch.
func (b Batch) ProducerEpoch() int16 { return int16(binary.BigEndian.Uint16(b[offProducerEpoch:])) }

// BaseSequence is the sequence number of the first record.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }

// RecordCount is the recordCount field.
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }

// RawRecords is the records section as stored (compressed if Codec is set).
func (b Batch) RawRecords() []byte { return b[HeaderSize:] }

// SetBaseOffset assigns the batch's offsets in place: record i gets
// base + its offset delta. BaseOffset lies outside the CRC, so the batch
// stays valid and no record is re-encoded. Panics if len(batch) < HeaderSize.
func SetBaseOffset(batch []byte, base int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:HeaderSize], uint64(base))
}

// SetPartitionLeaderEpoch stamps the writer's epoch in place; like the base
// offset it lies outside the CRC. Panics if len(batch) < HeaderSize.
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:HeaderSize], uint32(epoch))
}

// computeCRC is the CRC-32C of the covered bytes of a framed batch.
func computeCRC(b []byte) uint32 { return crc32.Checksum(b[crcStart:], castagnoli) }

// Verify is the cheap integrity check for a batch read back from storage or
// the network: the length field frames exactly b, the magic is 2, and the
// CRC matches. It decodes no records.
func Verify(b []byte) error {
	if err := checkFraming(b, true); err != nil {
		return err
	}
	if got, want := computeCRC(b), Batch(b).CRC(); got != want {
		return &FormatError{Field: "crc", Reason: fmt.Sprintf("stored %#08x, computed %#08x", want, got), Err: ErrCorrupt}
	}
	return nil
}

// Split cuts the first batch off buf, which may hold several batches back to
// back (as a ledger entry or fetch response may). It checks the framing and
// magic of that batch, not its CRC: call Verify on it.
func Split(buf []byte) (batch Batch, rest []byte, err error) {
	if err := checkFraming(buf, false); err != nil {
		return nil, buf, err
	}
	n := lengthFieldEnd + int(Batch(buf).BatchLength())
	return Batch(buf[:n:n]), buf[n:], nil
}

// SetProducer writes a producer id, epoch and base sequence into the
// encoded batch b, in place, and recomputes its CRC: an idempotent producer
// numbers a batch when it first sends it, so a batch that is never sent
// (it expired in its queue) leaves no hole in the sequence. b must frame
// exactly one batch.
func SetProducer(b []byte, id int64, epoch int16, baseSequence int32) error {
	if err := checkFraming(b, true); err != nil {
		return err
	}
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(id))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(b[offCRC:], computeCRC(b))
	return nil
}

// EntryLastOffset returns the last offset of a ledger entry (an optional
// entry header, then batches back to back; see EntryBatches): the last
// offset of its last batch. An entry with no batch, or whose framing is
// broken, is an error wrapping ErrInvalid.
func EntryLastOffset(entry []byte) (int64, error) {
	_, batches, err := EntryBatches(entry)
	if err != nil {
		return 0, err
	}
	return batchesLastOffset(batches)
}

func batchesLastOffset(batches []byte) (int64, error) {
	last := int64(-1)
	for rest := batches; len(rest) > 0; {
		b, r, err := Split(rest)
		if err != nil {
			return 0, err
		}
		last, rest = b.LastOffset(), r
	}
	if last < 0 {
		return 0, fmt.Errorf("%w: entry holds no batch", ErrInvalid)
	}
	return last, nil
}

// checkFraming checks that b starts with a batch header of magic 2 whose
// length field fits b (exactly, if exact).
func checkFraming(b []byte, exact bool) error {
	if len(b) < HeaderSize {
		return invalid("batchLength", "batch is %d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	// The magic decides how everything after it is read, so it comes first.
	if m := b[offMagic]; m != Magic {
		return invalid("magic", "%d, only magic %d (RecordBatch v2) is supported", int8(m), Magic)
	}
	n := int64(Batch(b).BatchLength())
	switch have := int64(len(b) - lengthFieldEnd); {
	case n < minBatchLength:
		return invalid("batchLength", "%d is shorter than the header (%d)", n, minBatchLength)
	case n > have:
		return invalid("batchLength", "%d, but only %d bytes follow (truncated)", n, have)
	case exact && n < have:
		return invalid("batchLength", "%d, but %d bytes follow (trailing data)", n, have)
	}
	return nil
}
