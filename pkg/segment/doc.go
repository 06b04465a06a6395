// Package segment is the format of the objects the compactor writes to
// object storage (DESIGN.md §2.9): one sealed ledger's record batches,
// byte for byte as the ledger stored them and in offset order, followed by
// a sparse offset index, a time index and a footer. It is built for ranged
// GETs: a reader fetches the footer and indexes with one read at the end
// of the object, finds the byte range holding an offset or a timestamp in
// memory, and fetches just that range. Every byte is covered by a CRC32C
// that is checked before anything read is returned, so damage is reported
// (ErrCorrupt, a *CorruptError naming the section) and never returned as
// data.
//
// # Using it
//
//	w, err := segment.NewWriter(upload, segment.WriterOptions{LedgerID: id, TopicID: tid, Partition: p})
//	for each entry of the ledger, in order {
//		err = w.Append(entry.Payload) // one or more batches, written as given
//	}
//	info, err := w.Finish() // indexes, footer; then complete the upload
//
//	r, err := segment.Open(object, size, segment.ReaderOptions{}) // io.ReaderAt + size
//	err = r.Verify(ctx)                  // after upload: read and check everything
//	rng, err := r.Find(offset)           // or r.FindTime(ts); no I/O
//	rng = r.Extend(rng, maxBytes)        // optionally: more intervals in the same GET
//	data, err := r.ReadRange(rng, buf)   // one ReadAt (ranged GET) of [rng.Start, rng.End)
//	it := r.Batches(rng, data)
//	for it.Next() { b := it.Batch() /* a record.Batch; skip b.LastOffset() < offset */ }
//	err = it.Err()
//
// The Writer streams: each Append is one Write of the caller's bytes and
// Finish one more Write, and it keeps only the sparse indexes in memory, so
// the target can be an S3 multipart upload. The Reader is immutable after
// Open and safe for concurrent use; lookups are binary searches over the
// in-memory index (O(log n)).
//
// # Object layout (version 1; integers little-endian, except inside the
// record batches, which are Kafka's big-endian RecordBatch v2)
//
//	0          16                        D                 T              F          size-24  size
//	+----------+=========================+=================+==============+==========+--------+
//	|  header  | data: batches as stored | offset index    | time index   | footer   |trailer |
//	+----------+=========================+=================+==============+==========+--------+
//	            ^ interval 0 ^ interval 1 ^ … (sparse: one entry per interval)
//	D = 16 + data length, T = D + 20 × offset entries, F = T + 16 × time entries,
//	size = F + footer length + 24. The sections are contiguous and the
//	footer's positions must say exactly this.
//
// Header, 16 bytes:
//
//	0        8     10    12     16
//	+--------+-----+-----+------+
//	| magic  | ver | 0   | crc  |
//	+--------+-----+-----+------+
//	magic "SLCSEGM\x00"; ver u16 = 1; reserved u16 = 0; crc CRC32C of bytes [0,12)
//
// Data: the batches back to back, each a Kafka RecordBatch v2 (pkg/record)
// exactly as given to the Writer. Base offsets strictly increase past the
// previous batch's last offset; gaps are allowed (a compacted segment has
// them). The data is cut into index intervals at batch boundaries: an
// interval closes at the first batch end at or past IndexIntervalBytes
// (default 64 KiB) from its start, and the last interval at the data's end.
//
// Offset index: one 20-byte entry per interval, in order:
//
//	0              8              16     20
//	+--------------+--------------+------+
//	| last offset  | end          | crc  |
//	+--------------+--------------+------+
//	last offset  i64: the last offset of the interval's last batch
//	end          u64: object position one past the interval; the interval
//	             starts at the previous entry's end (entry 0: at 16)
//	crc          CRC32C of the interval's bytes
//
// An entry is a split point: every offset ≤ last offset lies before end,
// every greater one at or after it. Keyed by the last offset rather than
// Kafka's base offset, so Find is exact even for an offset in a gap: the
// first batch whose last offset is ≥ the target lies in the interval of the
// first entry whose last offset is ≥ it.
//
// Time index: 16-byte entries, in order:
//
//	0              8              16
//	+--------------+--------------+
//	| timestamp    | offset       |
//	+--------------+--------------+
//	timestamp  i64: the running max of the batches' maxTimestamp up to offset
//	offset     i64: the last offset of an offset index entry
//
// Kafka's time index semantics: a record with a timestamp above an entry's
// lies after its offset. There is an entry at the first interval boundary
// and at each later boundary where the running max grew (so timestamps
// strictly increase), and none elsewhere; the last entry's timestamp is the
// segment's max timestamp. That makes FindTime exact to one interval (the
// proof is on Reader.FindTime).
//
// Footer, 108 bytes + topic id:
//
//	  0 ledger id       i64        56 data pos          u64 (= 16)
//	  8 partition       i32        64 data length       u64
//	 12 topic id length u16        72 offset index pos  u64
//	 14 reserved        u16 = 0    80 time index pos    u64
//	 16 first offset    i64        88 offset entries    u32
//	 24 last offset     i64        92 time entries      u32
//	 32 record count    i64        96 data crc          u32  CRC32C of the data section
//	 40 batch count     i64       100 offset index crc  u32  CRC32C of the offset index
//	 48 max timestamp   i64       104 time index crc    u32  CRC32C of the time index
//	108 topic id (1..255 bytes)
//
// first offset is the first batch's base offset and last offset the last
// batch's last offset; record count sums the batches' recordCount; max
// timestamp is the largest batch maxTimestamp.
//
// Trailer, the last 24 bytes; this layout is the same in every version:
//
//	0          4     6     8            12           16        24
//	+----------+-----+-----+------------+------------+---------+
//	| footer   | ver | 0   | footer crc | trailer    | magic   |
//	| length   |     |     |            | crc        |         |
//	+----------+-----+-----+------------+------------+---------+
//	footer length u32; ver u16 = 1; reserved u16 = 0; footer crc CRC32C of
//	the footer; trailer crc CRC32C of bytes [0,12); magic "SLCSEGE\x00"
//
// # Checksums
//
// Each section has its own CRC32C (Castagnoli): header and trailer their
// own, footer in the trailer, indexes and data in the footer, and each
// interval in its index entry. The interval CRCs are what lets a ranged
// read be checked on its own: a batch's Kafka CRC does not cover its base
// offset, length, leader epoch or magic, so it cannot prove a batch read
// alone is the one written. The data CRC lets Verify check the whole
// object in one pass. Open checks the trailer, footer and indexes (and the
// header when its tail read covers the object); an Iterator checks each
// interval before returning any batch of it, then every batch's framing,
// magic and CRC and its offsets against the index; Verify checks all of
// it plus the header, the data CRC and the footer's totals.
//
// # Reads
//
// Open: one read of the last ReaderOptions.TailReadBytes (default 512 KiB),
// which holds the indexes of a 512 MiB segment at the default interval; a
// second read only when the indexes are larger. Find, FindTime, Next and
// Extend: no I/O. A range: one read. A fetch for offset o reads one
// interval (≈ IndexIntervalBytes, or one larger batch), or Extend's run of
// intervals up to a byte budget.
//
// # Limits
//
// Every length and count read from an object is checked against the
// object's size and the ReaderOptions before anything is allocated:
// MaxSegmentBytes (default 4 GiB, at most 256 GiB), MaxIndexEntries per
// index (default 262,144, at most 4 Mi: the Reader's memory), footer length
// at most 363 bytes, an interval at most MaxIndexIntervalBytes plus the
// largest batch pkg/record allows (320 MiB). The Writer refuses a batch
// that would take the finished object past MaxSegmentBytes, and its
// options must give MaxIndexEntries ≥ MaxSegmentBytes/max(IndexIntervalBytes, 61)+1,
// so the index can never overflow. Batches are not decompressed here:
// decoding records (and its decompression-bomb guard) is pkg/record's
// Iterator, under the caller's record.Limits.
//
// # Versions
//
// The trailer's layout is frozen; everything else belongs to a version. A
// reader checks the trailer's magic and CRC first and then its version,
// so a damaged version reads as ErrCorrupt and an intact unknown one as
// ErrUnsupportedVersion (written by a newer build: refused, never
// guessed). Versions only move forward, and a new version needs code that
// reads every older one. Readers must learn a version one release before
// writers start writing it, so a rolling upgrade never has a reader meet a
// segment it cannot read. Reserved fields must be zero. testdata/golden.hex
// pins the bytes of a tiny segment (regenerate with go test -run Golden
// -update, only together with a version bump).
//
// # Invariants of a valid segment
//
//  1. Batches pass record.Verify, their offsets increase strictly across
//     the segment, the first starts at first offset and the last ends at
//     last offset.
//  2. Interval i holds whole batches; its last batch ends at offset
//     index[i].last; ends and last offsets strictly increase; the last
//     entry ends the data.
//  3. Time entries are exactly those the running max timestamp makes at
//     interval boundaries (first boundary, then growth only).
//  4. The footer's totals are those of the batches, and every CRC matches.
//
// # Files of this package
//
//	doc.go      this overview and the format
//	format.go   sizes, magics, encode/decode of header, entries, footer, trailer
//	options.go  WriterOptions, ReaderOptions: defaults, limits, Validate
//	errors.go   the error taxonomy and CorruptError
//	writer.go   Writer
//	reader.go   Open, Info, Range, Find, FindTime, Next, Extend, ReadRange
//	iter.go     Iterator: checked batches of a range
//	verify.go   Verify: the whole-object check
package segment
