// Package embedded is the single-process bookkeeping store: Pebble on a local
// directory, for `sluice dev` and hermetic tests. It passes the same
// conformance suite (bookkeepingtest) as the Cassandra store.
//
// # Consistency and durability
//
// One mutex serializes every read-modify-write (readers share it), so each
// compare-and-set — Acquire, Release, Commit, Reset, producer ids — decides
// and writes atomically, and everything is linearizable. Every write is
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
//	"m" group 0x00 member                     member record
//	"p" group 0x00 topic 0x00 partition(BE32) partition record (lease + offset)
//	"n"                                       next producer id
//	"t" transactional-id                      transactional producer record
//
// Every value is framed and checksummed:
//
//	+------+---------+--------------------------+--------------------------+
//	| kind | version | fields                   | CRC-32C (little-endian)  |
//	| 1 B  | 1 B     | varints and strings      | of kind+version+fields   |
//	+------+---------+--------------------------+--------------------------+
//
// kind names the record type ('F', 'M', 'P', 'N', 'T'); version is the
// record's format version (1). Integers are zig-zag varints, strings a uvarint
// length then bytes. A value that fails its checksum, has an unknown kind or
// version, a bad length or trailing bytes is reported as ErrCorrupt and never
// used. Formats change forward only: a new version gets a new decoder and the
// old one stays.
package embedded
