// Package storage is a bookie's ledger storage below the journal: an entry
// log (entries of many ledgers interleaved in rotated append-only files),
// an index in Pebble ((ledger, entry) → location, and per-ledger metadata:
// master key, fenced flag, LAC), identity cookies, and a garbage collector
// that compacts entry logs once ledgers are deleted. It mirrors Apache
// BookKeeper's DbLedgerStorage (write cache flushed at checkpoints,
// RocksDB index, entry logger, GarbageCollectorThread) and Cookie.java. It
// is a library: no RPC, no journal; the bookie server composes it with
// bookkeeper/journal. All files live behind pebble's vfs.FS, so tests crash
// it (vfs.NewCrashableMem + CrashClone keep only synced bytes) and inject
// I/O errors (vfs/errorfs).
//
// # Using it
//
//	s, err := storage.Open(storage.Options{Dir: d, BookieID: id, InstanceID: inst})
//	err = s.AddEntry(ctx, storage.AddRequest{Ledger: l, Entry: e, LAC: lac,
//		Payload: p, Checksum: wire.EntryChecksum(l, e, lac, p), MasterKey: k})
//	ent, err := s.ReadEntry(l, e)          // checksum verified
//	info, err := s.Fence(l, k)             // durable when it returns
//	err = s.Checkpoint()                   // everything added before is durable
//	err = s.DeleteLedger(l); res, err := s.GC(ctx)
//
// # Durability: the contract with the journal
//
// An entry is durable in the bookie once its journal record is synced;
// this storage is written lazily (BookKeeper's DbLedgerStorage): AddEntry
// puts the entry in a write buffer, where reads see it at once, and a
// flush later writes the buffer to the entry log and index. The bookie's
// write path and checkpoint must therefore be:
//
//  1. add: s.AddEntry (fence and master key checked, entry visible), then
//     journal.Append of the same entry; acknowledge when the journal
//     reports the record synced. Adding to the storage first is what makes
//     an entry visible before it is acknowledged, and what lets Fence
//     count every add that will ever be acknowledged (below).
//  2. checkpoint (periodically, e.g. every few seconds or 64 MiB): read
//     mark := journal.Durable(), then s.Checkpoint(), then
//     journal.Checkpoint(mark). Every record ≤ mark was synced in the
//     journal before Checkpoint was called, so by step 1 its AddEntry had
//     returned before, so Checkpoint made it durable here: the journal may
//     forget it.
//  3. start: storage.Open, then journal.Open replaying every record after
//     its checkpoint into s.AddEntry with Replay set. Replay adds pass the
//     fence (they were accepted before it), are dropped for deleted
//     ledgers, and may re-add entries already flushed (harmless: the
//     index points at the newest copy).
//
// Precisely: when Checkpoint returns nil, every entry whose AddEntry
// returned nil before Checkpoint was called is in the entry log (synced)
// and the index (synced commit), together with the master keys and LACs
// set so far. Entries added during a Checkpoint may or may not be
// included. The write buffer also flushes on its own when half full; that
// makes data durable earlier but promises nothing to the journal. While
// adds keep arriving, a flush paces its entry log writes
// (Options.MaxFlushSpread) so that a shared disk still serves the
// journal's fsyncs meanwhile.
//
// LACs are persisted only by flushes, so after a crash a ledger's LAC may
// be lower than before: the replayed adds (which piggyback LACs) and the
// writer's next WriteLAC raise it again. A lower LAC is safe — readers see
// less, never more. A bookie that wants explicit LACs to survive a crash
// exactly journals them (as BookKeeper does) and replays them into
// WriteLAC.
//
// # Fencing
//
// Fence does not go through the journal: it writes the ledger's metadata
// row with a synced Pebble commit before returning. Going through the
// journal would also work (BookKeeper journals a fence record) but ties a
// correctness-critical flag to replay order and to the journal being
// replayed before any request is served; a synced index write makes the
// fence durable the moment it is answered, at the price of one fsync per
// fence — fences are rare (one per ledger recovery). The in-memory flag is
// set before the write, under the same lock as AddEntry's fence check and
// insertion, so once Fence returns no normal add can be accepted, and the
// LastEntry it returns counts every add accepted before it (each of which
// the journal may still be syncing; recovery treats those as possibly
// acknowledged). A metadata lock keeps a concurrent flush from overwriting
// the fenced row with an older one. Deletions are durable the same way.
//
// # Files
//
//	Dir/COOKIE                         ledger dir cookie (written last at format)
//	Dir/LOCK                           held while open
//	Dir/entrylog-<16 hex>.log          entry log files, by id
//	Dir/*.tmp                          atomic creations in progress; Open deletes them
//	IndexDir/COOKIE                    index dir cookie (default IndexDir: Dir/index)
//	IndexDir/pebble/                   the index
//	IndexDir/pebble.tmp/               an index being created; Open deletes it
//
// # Entry log format (version 1; header integers little-endian)
//
// An entry log file is a 40-byte header and frames back to back. It is
// created as *.tmp with its header, synced, renamed and the directory
// synced, so a file under its final name always has a valid header. Ids
// come from a counter persisted in the index before use, so they are never
// reused.
//
//	0        8     10    12        20                    36     40
//	+--------+-----+-----+---------+---------------------+------+
//	| magic  | ver | 0   | file id | storage id          | crc  |
//	+--------+-----+-----+---------+---------------------+------+
//	magic "SLCELOG\x00"; ver u16 = 1; reserved u16 = 0; file id u64 (as
//	in the name); storage id 16 bytes (as in the cookies: a file copied
//	in from another storage is refused); crc CRC32C of bytes [0,36)
//
// A frame is a 32-byte header and the payload:
//
//	0        4        8           16          24          32
//	+--------+--------+-----------+-----------+-----------+===========+
//	| length | crc    | ledger id | entry id  | lac       | payload   |
//	+--------+--------+-----------+-----------+-----------+===========+
//	length  u32 LE; payload bytes, at most MaxEntrySizeLimit (64 MiB)
//	crc     u32 LE; CRC32C of bytes [8, 32+length) = wire.EntryChecksum
//	ids     i64 big-endian: ledger ≥ 0, entry ≥ 0, lac ≥ -1
//
// The ids are big-endian because bytes [8, 32+length) are exactly the
// layout wire.EntryChecksum is defined over (BookKeeper's entry header order):
// the stored checksum is the writer's checksum, verified when the add
// arrives, before every write (flush, GC copy), after every read, and sent
// to readers, who verify it again. Nothing recomputes it over another
// layout. Frames carry no sync markers: the log is never scanned, only
// read at locations the index gives, and a read checks that the frame
// there decodes, passes its checksum and names the entry asked for. A
// flush writes each ledger's entries together, so ReadRange finds runs of
// frames back to back and reads each run with one read (then checks every
// frame in it the same way).
//
// # Index format (version 1, in Pebble; keys big-endian so they sort)
//
//	key                          value
//	"!format"                    version u32 | storage id [16] | crc u32
//	"!nextfile"                  next entry log id u64 | crc u32
//	'e' ledger u64 entry u64     file u64 | offset u64 | length u32 | crc u32
//	'm' ledger u64               ver u8 | flags u8 | keylen u16 | lac i64 |
//	                             master key [keylen] | crc u32
//	'u' file u64 ledger u64      bytes u64 | crc u32
//
// Values are little-endian. Every crc is CRC32C of the key followed by the
// value's bytes before it, so a value found under the wrong key does not
// verify. 'e' rows locate frames (offset of the frame, length of the
// payload). 'm' rows: flags bit 0 fenced, bit 1 deleted (a deletion mark:
// the ledger id is never used again); a ledger's last entry is not stored
// but read as its last 'e' key, so it cannot disagree with the index. 'u'
// rows ("usage") count the frame bytes each ledger has in each entry log
// file; GC plans with them. The format record is checked at every Open;
// the version only moves forward: a build refuses a version it does not
// know (ErrCorrupt names it), and a new version needs code that reads the
// old ones.
//
// # Invariants
//
//  1. An 'e' row is committed only after the frame it points at was
//     synced: a flush appends and fdatasyncs (a rotated file is fully
//     synced before its successor is created), then commits its rows in
//     one synced batch. The index never points at bytes a crash can lose.
//  2. Every 'e' row pointing into file F has a 'u' row (F, ledger): they
//     are committed in the same batch, and 'u' rows of F are deleted only
//     by GC, after no 'e' row points into F any more.
//  3. Each entry is always in a write buffer or in the index: a flush
//     drops its buffer only after its index commit.
//  4. A ledger with buffered entries or unpersisted metadata stays in the
//     metadata cache; only clean ledgers are evicted (and reloaded from
//     their row).
//  5. A fenced or deleted ledger never becomes unfenced or undeleted.
//
// # Garbage collection
//
// DeleteLedger removes the ledger's 'e' rows (a range deletion) and writes
// its deletion mark in one synced commit; its frames become garbage. GC
// takes each entry log file older than the current one (read under the
// flush lock, so every such file is sealed and its 'u' rows committed;
// a file a flush rotates to meanwhile is never planned), estimates its
// live ratio from its 'u' rows (bytes of ledgers that still exist / file
// bytes) and, below Options.GCThreshold, compacts it:
//
//  1. For each live ledger with a 'u' row in F, scan its 'e' rows for
//     locations in F, in chunks of Options.GCChunkBytes.
//  2. For each chunk, under the flush lock: re-check that each 'e' row
//     still points where the scan saw it (a flush may have re-added the
//     entry, DeleteLedger may have removed it), read and verify each frame
//     (ErrCorrupt stops GC before anything is written), append the frames
//     to the current log, fdatasync, then repoint the 'e' rows and write
//     the current file's 'u' rows in one synced commit.
//  3. Delete F's 'u' rows (synced commit), then remove F and sync the
//     directory. Readers hold a shared lock from their index lookup to
//     their frame read; removal takes it exclusively, so no read follows
//     an old location into a removed file.
//
// A crash at any point is safe:
//
//   - before a step's commit: the copies appended to the current log are
//     referenced by nothing (garbage, counted as dead in that file's
//     ratio); the index still points into F, which still exists.
//   - after a step's commit, before F's removal: F holds stale duplicates
//     that nothing points at; F still has 'u' rows, so the next GC plans
//     it again, finds nothing to move, and removes it.
//   - after F's 'u' rows are gone, before or during the removal: F exists
//     with no 'u' row. By invariant 2 nothing points into it, so Open
//     removes every entry log without 'u' rows (which also covers files a
//     crashed flush left unreferenced).
//
// The crash test (crash_test.go) takes crash images at random operations
// of a random workload (adds, re-adds, LACs, fences, deletes, checkpoints,
// GCs) and checks after each reopen, and again after a GC finishes on the
// image, that every checkpointed entry is intact, fences and deletions
// hold, nothing else is returned but correct data or "no such entry", and
// Verify finds every 'e' row pointing at a valid frame of that entry.
//
// Filesystem assumption: this package syncs every file and directory it
// depends on, and its own correctness does not depend on the order in
// which unsynced directory entries reach the disk. Pebble's does while it
// opens (a new manifest and its marker are created before one directory
// sync), as RocksDB's does: directory entries must become durable in
// creation order, which journaling filesystems (ext4, xfs) provide. The
// crash tests therefore take partial-unsynced images only after Open, as
// Pebble's own crash tests do.
//
// # Cookies and identity
//
// Each directory holds a COOKIE (text, one field a line, CRC32C last):
//
//	sluice-bookie-cookie
//	version=1
//	bookie_id=<id>
//	instance_id=<cluster instance>
//	storage_id=<32 hex digits, random at format>
//	role=ledgers|index
//	ledger_dir=<path at format>
//	index_dir=<path at format>
//	crc32c=<8 lowercase hex digits, CRC32C of all bytes before this line>
//
// Formatting writes the index dir's cookie, then the index — created
// whole: a Pebble store made under IndexDir/pebble.tmp gets its format
// record (with the storage id, synced), is closed, synced and renamed into
// place, so an index exists only complete — and last the ledger dir's
// cookie. Open never lets Pebble create an index implicitly, so a missing
// index is told apart from an empty one. Open refuses, telling the
// operator what happened:
//
//   - a cookie naming another bookie or instance, the other role, or
//     another storage than its sibling, the index or RequireStorageID:
//     ErrCookieMismatch (a disk swapped or mounted at the wrong path);
//   - the ledger dir's cookie present but the index dir's missing, or
//     entry logs present without a cookie, or no ledger dir cookie while
//     the index holds data: ErrCookieMissing (a disk wiped or replaced);
//   - cookies present but the index gone, or an entry log the index
//     refers to missing: ErrDataLoss.
//
// Without the ledger dir's cookie and with no data anywhere, formatting
// was never completed, and Open completes it (keeping the storage id if
// one was chosen). Both directories wiped whole look like a new bookie;
// only the cluster can tell, so a bookie passes the storage id it recorded
// in the bookie registry as Options.RequireStorageID, and Open then
// refuses instead of formatting. Hence an open Storage answers
// ErrNoSuchEntry only for entries it never had.
//
// # Locks
//
// gcMu → flushMu → metaMu → filesMu → mu (a goroutine holding one takes
// only later ones). gcMu: one GC or Verify. flushMu: entry log writers
// (flush, GC step, DeleteLedger). metaMu: from encoding metadata rows to
// their commit. filesMu: readers shared, file removal and Close
// exclusive. mu: buffers, metadata cache, file set; short, but it covers
// the index reads that load a ledger's metadata on a cache miss.
// One goroutine, the background flusher, is started by Open and stopped
// and waited for by Close.
//
// # Files of this package
//
//	doc.go       this overview
//	options.go   Options (limits, defaults, Validate), Hooks, Stats
//	errors.go    the error taxonomy
//	format.go    frame, log header and index encodings (the entry checksum is bookkeeper/wire's)
//	cookie.go    Cookie encoding, ReadCookie, WriteCookie
//	identity.go  Open's cookie and format checks
//	files.go     file names, atomic creation, directory syncs
//	storage.go   Storage, Open, Close, the flusher
//	ledgers.go   ledger metadata; AddEntry, Fence, WriteLAC, DeleteLedger
//	buffer.go    the write buffer
//	entrylog.go  the entry log writer and the read-side file cache
//	flush.go     Checkpoint and flushes
//	read.go      ReadEntry, ReadRange
//	gc.go        garbage collection
//	verify.go    Verify (scrub)
package storage
