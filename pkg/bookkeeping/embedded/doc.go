// Package embedded is the single-process bookkeeping store: Pebble on a local
// directory, for `sluice dev` and hermetic tests. It passes the same
// conformance suite (bookkeepingtest) as the Cassandra store.
//
// It is a bookkeeping.Driver: Open returns the *bookkeeping.Store over it,
// which checks every argument before this package sees it. Here are only
// storage and the decisions that depend on what is stored (liveness,
// fencing, the offset rules, producer epochs).
//
// # Consistency and durability
//
// One mutex serializes every read-modify-write (readers share it), so each
// compare-and-set — Acquire, Release, Commit, Reset, producer ids,
// InitProducer and PutTxn on a transactional id's record — decides and
// writes atomically, and everything is linearizable. Every write is
// committed with Sync before the call returns: an acknowledged call survives
// a crash or power loss. A commit of many partitions is one Pebble batch, so
// it lands entirely or not at all.
//
// Member liveness is judged by an injectable clock (WithClock): a member is
// live while clock < its last Join/Heartbeat + session timeout, exactly.
// Expired members are deleted lazily (by Join, Heartbeat, Leave).
//
// # On-disk format
//
// Keys (names never contain NUL — the contract forbids control characters —
// so NUL separates key parts, and byte order equals (name, number) order):
//
//	"f"                                       format record
//	"g" group                                 group record (ListGroups)
//	"m" group 0x00 member                     member record
//	"p" group 0x00 topic 0x00 partition(BE32) partition record (lease + offset)
//	"n"                                       next producer id
//	"t" transactional-id                      transactional id record (producer + transaction)
//
// Every value is framed and checksummed:
//
//	+------+---------+--------------------------+--------------------------+
//	| kind | version | fields                   | CRC-32C (little-endian)  |
//	| 1 B  | 1 B     | varints and strings      | of kind+version+fields   |
//	+------+---------+--------------------------+--------------------------+
//
// kind names the record type ('F', 'G', 'M', 'P', 'N', 'T'); version is the
// record's format version: 1, except member records, written as version 2
// (version 1 plus a topic count and the topics) and read as 1 or 2,
// partition records and transactional id records, written as version 2 and
// read as 1 or 2:
//
//	partition v1: owner(str) epoch(int) offset(int) metadata(str) commit-epoch(int)
//	partition v2: v1 fields, then topic-id(str)
//	txn v1:       producer-id(int) epoch(int)
//	txn v2:       v1 fields, then status(int) timeout-ms(int) deadline-ms(int)
//	              bumped(int) version(int) partition-count(int)
//	              {topic-id(str) partition(int)}… group-count(int) {group(str)}…
//
// topic-id is the topic incarnation of the committed offset ("" when nothing
// is committed); a version 1 record reads as an offset without one. A txn
// record is the transactional id's one record (bookkeeping.Txn): the
// producer InitProducer hands out and the coordinator's transaction state;
// deadline-ms is Unix milliseconds, 0 for none, bumped 0 or 1, version the
// compare-and-set Version (≥ 1). A version 1 txn record, written by
// InitProducer of an older binary, reads as an idle record (TxnEmpty, no
// timeout) at Version 1, and is written as version 2 when next written.
// Integers are zig-zag varints, strings a uvarint length then bytes. A value that fails its checksum, has an unknown kind or
// version, a bad length or trailing bytes is reported as ErrCorrupt and never
// used. Formats change forward only: a new version gets a new decoder and the
// old one stays.
//
// The format record holds the store format, 4. Open upgrades a format-1
// store (no group records) by writing a group record for every group with a
// member or partition record, with the new format record, in one synced
// batch. Format 3 allows version 2 partition records and format 4 version 2
// txn records; Open upgrades a format-2 or format-3 store by writing the new
// format record alone (its older records are read as they are, and
// rewritten in the new version when next written). A binary refuses a store of a format newer than its own, so an
// older binary never reads a newer record as corrupt.
//
// A member's LastHeartbeat is not stored: Join and Heartbeat set expiresAt to
// now + session timeout from one clock reading, so it is expiresAt − session
// timeout, exactly (for version-1 records too). A group record has no fields;
// Join writes it in the member's batch, a standalone Commit or Reset in the
// offsets' batch.
package embedded
