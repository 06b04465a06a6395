// Package record is Sluice's record-batch format: Kafka's RecordBatch v2
// (magic 2), byte for byte, so that a future Kafka-protocol gateway can serve
// stored bytes without re-encoding (DESIGN.md §2.4).
//
// # Batch layout
//
// All integers are big-endian. Offsets are from the start of the batch.
//
//	offset size  field                 notes
//	     0    8  baseOffset            first offset; assigned by the partition writer
//	     8    4  batchLength           bytes after this field (= len(batch) - 12)
//	    12    4  partitionLeaderEpoch  writer epoch; -1 from clients
//	    16    1  magic                 format version, always 2
//	    17    4  crc                   CRC-32C (Castagnoli) of bytes [21, end)
//	    21    2  attributes            see below                        ─┐
//	    23    4  lastOffsetDelta       offset delta of the last record   │
//	    27    8  baseTimestamp         timestamp of the first record (ms)│
//	    35    8  maxTimestamp          largest record timestamp (ms)     │ covered
//	    43    8  producerId            -1 = not idempotent               │ by the
//	    51    2  producerEpoch                                           │ crc
//	    53    4  baseSequence          sequence of the first record      │
//	    57    4  recordCount                                             │
//	    61    …  records               compressed as a whole per codec  ─┘
//
// Attributes (int16): bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4,
// 4 zstd — the numbers of sluice.v1.Compression), bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional,
// bit 5 control, bit 6 delete horizon (KIP-534). Other bits must be zero.
//
// # Record layout
//
// Records follow the header back to back (inside the compressed stream when
// a codec is set). Varints are zig-zag encoded, as in Kafka and protobuf's
// sint32/sint64; "varint" is at most 5 bytes, "varlong" at most 10.
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused, 0
//	timestampDelta  varlong  timestamp - baseTimestamp
//	offsetDelta     varint   offset - baseOffset
//	keyLength       varint   -1 = null key
//	key             bytes
//	valueLength     varint   -1 = null value (tombstone)
//	value           bytes
//	headerCount     varint
//	headers         headerCount × {keyLength varint (≥ 0), key UTF-8,
//	                               valueLength varint (-1 = null), value}
//
// # Versions and the CRC
//
// The magic byte is the version. A reader checks it before interpreting any
// field after it and accepts only 2; the layout is never changed in place —
// a new layout would take a new magic. The CRC covers attributes through the
// end of the records, and deliberately not baseOffset, batchLength,
// partitionLeaderEpoch or magic: the partition writer sets the base offset
// and leader epoch of a client's batch in place ([SetBaseOffset],
// [SetPartitionLeaderEpoch]) without re-encoding or re-checksumming it (the
// "opaque batch" path).
//
// # What this package offers
//
//   - [Builder] encodes records into a batch, bounded by [Limits].
//   - [Validate] and [Parse] check a batch from a client: framing, magic,
//     CRC, attributes, producer fields, record count, timestamps, and every
//     record against [Limits], decompressing under a size limit (a
//     decompression-bomb guard). Errors are [*FormatError]s naming the field.
//   - [Verify] is the cheap check (framing, magic, CRC) for data read back
//     from storage; [Split] cuts concatenated batches apart.
//   - [Batch] reads header fields straight from the bytes, without decoding
//     records, for the read path.
//   - [Iterator] decodes records (decompressing as needed) for fetch.
//   - [BuildMarker] and [ParseMarker] write and read transaction markers:
//     Kafka's control batches (ABORT or COMMIT, with franz-go's kmsg
//     encodings of the control key and the marker value).
//
// Codecs: gzip; snappy as a raw block (written; what franz-go and librdkafka
// write) or xerial-framed (read; what the Java client writes); lz4 frames;
// zstd frames with a window of at most 8 MiB (zstd levels up to 19; the
// "ultra" levels 20-22 are refused). The Builder stores a batch uncompressed
// when compression would not make it smaller.
//
// Subpackage partition chooses partitions (Kafka-compatible murmur2, sticky
// partitioning for records without a key).
package record
