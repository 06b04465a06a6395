// Package journal is the bookie's write-ahead log: records (opaque bytes;
// the bookie stores ledger, entry, payload and checksum in them) are
// appended by many goroutines, written in groups with one write and one
// fdatasync per group, and acknowledged only once their group is durable.
// After a crash, Open replays every record after the last checkpoint, cuts a
// torn tail, and refuses (ErrCorrupt) anything a crash cannot explain.
//
// It mirrors Apache BookKeeper's Journal (group commit, journal replay from a
// log mark, checkpoint-driven trimming) and stores its files behind pebble's
// vfs.FS, so tests run it on a crashable in-memory filesystem
// (vfs.NewCrashableMem + CrashClone keep only synced bytes) and an
// error-injecting one (vfs/errorfs).
//
// # Using it
//
//	j, err := journal.Open(journal.Config{Dir: dir}, func(seq uint64, rec []byte) error {
//		return rebuild(seq, rec) // every record after the checkpoint, in order
//	})
//	err = j.Append(ctx, rec, func(seq uint64, err error) { /* durable, or failed */ })
//	...
//	err = j.Checkpoint(seq) // records ≤ seq are durable elsewhere
//	err = j.Close()         // drains what is queued
//
// Append is the hot path: it copies the record into the group being built
// and returns; the DoneFunc runs on the journal's completion goroutine, in
// sequence order. No goroutine or channel per record, so a bookie streaming
// thousands of adds per second from many connections pays one mutex and one
// copy per record. AppendWait is the blocking convenience on top.
//
// # Backpressure
//
// The queue of accepted, unacknowledged records is bounded by bytes and by
// count. When it is full Append blocks until room frees up or ctx ends, and
// then returns ErrQueueFull (wrapping ctx's cause); the bookie maps that to
// RESOURCE_EXHAUSTED with a retry delay. A bookie that wants "wait briefly"
// passes a short deadline; one that must never block passes a context that
// is already done (a record that finds room is still queued).
//
// # Group commit
//
// One writer goroutine takes the next group, frames it (checksums are
// computed here, off the appenders' lock), writes it and a terminator with
// one WriteAt at the end of the newest file's records, calls SyncData
// (fdatasync: data plus any size change, which is all a later read needs; a
// full fsync would also flush unrelated metadata such as mtime; in a
// recycled file there is no size change), and hands the group to the completion
// goroutine. A group is bounded by Config.GroupBytes (default 512 KiB): the
// appender whose record would overflow the group seals it and starts the
// next. A group bigger than that holds exactly one record.
//
// While an fsync runs, new records pile up in the next group, so under load
// groups grow by themselves and the number of fsyncs stays near the device's
// rate whatever the append rate: natural, self-clocking group commit (what
// BookKeeper calls journalFlushWhenQueueEmpty). Config.MaxGroupWait (zero by
// default) can make an idle writer wait, from the moment a partial group got
// its first record, for more records before writing it (BookKeeper's
// journalMaxGroupWaitMSec; GroupBytes plays journalBufferedWritesThreshold).
//
// The trade-off, measured here (2 busy cores, ext4 on a virtual disk; a bare
// 4 KiB write + fdatasync takes ~0.2 ms; BenchmarkAppend and
// BenchmarkAppendPipelined):
//
//   - When appenders wait for their acknowledgement before sending more
//     (closed loop: AppendWait, or a pipeline whose window is full), a
//     wait only delays groups whose records are all already queued. 1 KiB
//     records from 16 / 64 appenders: ~35 / ~135 MB/s with no wait (8 / 32
//     records per fsync, p50 ~0.4 ms), ~11 / ~44 MB/s with 1 ms (p50
//     ~1.5 ms). One appender: p50 0.16 ms against 1.3 ms.
//   - When records trickle in below the device's fsync rate (open loop), no
//     wait means about one fsync per record: the latency is the lowest, but
//     the journal spends IOPS that a shared disk (entry log, index) may
//     need. A wait of w trades up to w of latency for up to w's worth of
//     records per fsync.
//   - Under heavy load the wait changes nothing: groups fill to GroupBytes
//     (64 KiB records: 7 per group, 400–550 MB/s, above the ~300 MB/s of a
//     bare 256 KiB write + fdatasync loop).
//
// Hence zero by default; 1–2 ms (BookKeeper's range) suits a journal on a
// busy shared disk with sparse traffic.
//
// # Failures (no retry after a failed fsync)
//
// If a write or fsync fails, the group that hit it and every queued record
// get the error, and the journal refuses all later appends (ErrFailed). A
// failed fsync is not retryable: Linux may already have dropped the dirty
// pages and marked them clean, so a second fsync can succeed without the
// data ever reaching the disk (the 2018 "fsyncgate" found PostgreSQL
// retrying exactly this way). The bookie must Close, Open again (recovery
// re-reads what is really on disk) or stop serving. Records that failed may
// still turn up in that replay; they were never acknowledged, which is
// allowed, as for any record whose fate a crash left open.
//
// # Directory
//
//	LOCK                          held by the open Journal (vfs Lock)
//	CHECKPOINT                    the persisted checkpoint
//	journal-<16 hex digits>.log   journal files, numbered by file sequence
//	recycle-<16 hex digits>.log   obsolete journal files kept for reuse (Config.RecycleFiles)
//	*.tmp                         atomic writes in progress; deleted by Open
//
// # File format (version 2, all integers little-endian)
//
// A journal file is a 32-byte header followed by records back to back, in
// groups; each group is written together with a terminator after it, 24
// zero bytes where the next record header would go, which the next group
// overwrites. A file's records end at a terminator or where the file ends
// (a file with no group yet ends after its header). Bytes after the
// terminator are not part of the journal: a recycled file (below) keeps its
// old contents there.
//
//	0        8     10    12              20              28     32
//	+--------+-----+-----+---------------+---------------+------+
//	| magic  | ver | 0   | file seq      | first rec seq | crc  |
//	+--------+-----+-----+---------------+---------------+------+
//	magic          "SLCJRNL\x00"
//	ver            format version (u16) = 2; 1 is still read
//	0              reserved (u16), must be zero
//	file seq       u64; the file's number, consecutive from 1
//	first rec seq  u64; sequence number of the file's first record (or
//	               of the next record, if the file has none)
//	crc            CRC32C (Castagnoli) of bytes [0,28)
//
// Each record is a 24-byte header and the payload:
//
//	0        4        8                 16                24
//	+--------+--------+-----------------+-----------------+===========+
//	| length | crc    | record seq      | synced-to       | payload   |
//	+--------+--------+-----------------+-----------------+===========+
//	length     u32; payload bytes, at most MaxRecordSizeLimit (64 MiB)
//	crc        CRC32C of file seq (u64) ++ header bytes [0,4) ++ [8,24) ++
//	           payload; version 1: without the file seq
//	record seq u64; journal-wide sequence number, consecutive from 1
//	synced-to  u64; offset up to which this file had been fsynced when the
//	           record's group was written, which is the group's start offset
//
// The CHECKPOINT file is 24 bytes:
//
//	0        8     10    12              20     24
//	+--------+-----+-----+---------------+------+
//	| magic  | ver | 0   | checkpoint    | crc  |
//	+--------+-----+-----+---------------+------+
//	magic "SLCJCKPT", checkpoint u64 (records ≤ it need no replay),
//	crc CRC32C of bytes [0,20)
//
// A terminator never decodes as a record (its checksum does not match).
//
// Version 1 files have no terminators: their records end where the file
// ends, and anything after the last record of a file other than the newest
// is damage. The CHECKPOINT file is still at its version 1.
//
// Versions only move forward: a reader refuses a version it does not know
// (ErrCorrupt names it) rather than guess, and a new version needs new code
// that reads every older one. testdata/golden pins the bytes of a tiny
// journal (regenerate with go test -run Golden -update); tiny-v1.hex, the
// same journal in version 1, must still open.
//
// # Recycled files
//
// Checkpoint renames up to Config.RecycleFiles obsolete files to
// recycle-*.log (and syncs the directory) instead of deleting them; a new
// journal file, at rotation or Open, takes the oldest: its header and a
// terminator are written over the start and synced, then it is renamed to
// its journal name and the directory synced. Appends then overwrite blocks
// the file already has, within its size, so their fdatasyncs need no
// filesystem metadata commit, and no obsolete file is unlinked (both
// stalled the fsyncs of all three bookies on one ext4 disk).
//
// The old records after a reused file's terminator never decode in it:
// their checksums start from the file sequence they were written under,
// and a reused file always gets a higher one. So they are neither replayed
// nor taken as proof of an earlier fsync (see Recovery), even old records
// whose sequence numbers the journal reaches again (a group torn after the
// terminator is left in place, unacknowledged, and its sequence numbers
// are given to new records). File sequence numbers must never go back for
// this, so a journal that starts afresh (no journal files, no checkpoint)
// deletes any recycled files it finds, and Open syncs the directory before
// it reuses a recycled file it found (its recycled name must be durable
// before its header is rewritten).
//
// # Invariants
//
//  1. Record sequence numbers are consecutive across files: a file's first
//     record has its header's first rec seq, and each file's first rec seq
//     is one past its predecessor's last record.
//  2. File sequence numbers are consecutive; only the oldest files are ever
//     deleted, and the newest never.
//  3. A journal file appears under its final name only with a complete,
//     synced header (written as *.tmp, synced, renamed, directory synced;
//     or, for a recycled file, header and terminator written over its
//     start and synced before the rename, then the directory synced).
//  4. A group is written only after the previous group's fsync returned, so
//     synced-to equals the group's start offset and groups are contiguous:
//     each record's synced-to repeats its predecessor's or equals its own
//     offset.
//  5. Files are never appended to once they stop being the newest, and a
//     file stops being the newest only when all of it is synced: before
//     rotation its last group was synced, and Open syncs (or truncates and
//     syncs) the newest file before starting a new one. Open always starts
//     a new file.
//  6. An append is acknowledged only after its group's fsync returned, and
//     acknowledgements run in sequence order.
//  7. The checkpoint never exceeds Durable() and never moves back; it is
//     persisted before any file is deleted because of it.
//
// # Recovery
//
// Open reads the checkpoint, checks that file numbers are consecutive and
// headers valid, deletes files wholly at or before the checkpoint, then
// scans the rest in order. A record is valid where it is if it decodes with
// a matching checksum, carries the expected sequence number and its
// synced-to obeys invariant 4. Records after the checkpoint go to the replay
// function.
//
// By invariant 5, every byte of a file other than the newest was synced, so
// an invalid record in such a file, or bytes after its last record other
// than a terminator (version 2), is ErrCorrupt. So is anything breaking invariants 1–3, a checkpoint beyond
// the last record, and records missing between the checkpoint and the
// oldest file.
//
// In the newest file, the first invalid record at offset x is a torn tail
// unless the file proves otherwise: if any later position holds a record
// with a valid checksum, a sequence number at least the one expected at x,
// and a synced-to beyond x, then that record was written after an fsync
// that covered x, so x's bytes had been durable and are now damaged:
// ErrCorrupt. Without such proof the file is cut at x (the prefix is copied
// to a temporary file, synced and renamed over it: vfs has no truncate) and
// appends continue after the last valid record, in a new file. Valid records
// after x with synced-to at or before x are not proof: the kernel may write
// back unsynced pages out of order, and records never synced were never
// acknowledged. The sequence-number condition keeps stale bytes of a
// deleted file, which a filesystem may expose in an unsynced tail, from
// being taken as proof; the old records of a recycled file do not even
// decode.
//
// A terminator at x in the newest file is checked for proof the same way
// (zeros can be damage too); without proof the file's records end there and
// nothing is cut: what follows is a recycled file's old contents or a group
// whose write a crash tore, never acknowledged. The file is synced like any
// newest file, and a new one started; its bytes after x are never read as
// records again.
//
// Limitation: damage inside the last group(s) synced before a crash leaves
// no later record to prove it and is cut as a torn tail, though those
// records may have been acknowledged. Pebble's WAL and RocksDB's
// point-in-time recovery share this; BookKeeper's replication (an entry is
// on Qw bookies) is what covers it.
//
// # Files of this package
//
//	journal.go     Journal, Open, Append, Close; the queue (lock order on Journal)
//	writer.go      writer goroutine: grouping, write + fdatasync, rotation, failure; completer
//	recover.go     Open's recovery: validation, obsolete files, replay, torn-tail truncation
//	scan.go        per-file record scan and the "proves synced" check
//	reader.go      bounded sliding-window file reader
//	checkpoint.go  Checkpoint, recycling obsolete files
//	format.go      byte layouts, encode/decode, checksums
//	files.go       names, atomic file creation, directory syncs
//	config.go      Config, defaults, Validate
//	stats.go       Hooks, GroupInfo, Stats
//	errors.go      exported errors
package journal
