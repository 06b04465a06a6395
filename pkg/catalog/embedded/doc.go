// Package embedded is the catalog on local disk, in one process: Pebble
// under a mutex. `sluice dev` and hermetic tests use it; it passes the same
// conformance suite (catalogtest) as the DynamoDB catalog.
//
// It is a catalog.Driver: Open returns the *catalog.Catalog over it, which
// checks every argument before this package sees it. Here are only storage
// and the catalog's rules applied to what was read (catalog.CanAcquire,
// catalog.NextLedger, ...), plus the page tokens, whose format is this
// package's.
//
// # Atomicity and durability
//
// One sync.RWMutex serializes every write (reads share it), so each
// operation's read-check-write is atomic, and each write is one Pebble batch
// committed with Sync: when a method returns, its change is on disk and
// survives a crash (kill -9, power loss); when it fails, nothing of it was
// applied. Everything here is therefore linearizable — stronger than the
// contract needs. Several processes must not open the same directory
// (Pebble's LOCK file refuses a second opener).
//
// # Key layout
//
// Keys are byte strings; names and ids cannot contain '/' (catalog
// validation), so '/' separates fields. Integers are big-endian so keys sort
// numerically.
//
//	format                                  store format record (formatVersion)
//	c/ledger                                ledger id counter: the last id allocated
//	t/<topic name>                          live topic
//	d/<topic id>                            deleted topic, until purged
//	p/<topic id>/<partition u32>            partition (absent until first written)
//	o/<owner id>                            owner heartbeat
//	b/<bookie id>                           bookie heartbeat
//	l/<ledger id u64>                       ledger metadata
//	tr/<trigger name>                       trigger
//	acl/<ACL's six fields, 0x1f between>    ACL (catalog.ACLKey; no field holds 0x1f)
//	lp/<topic id>/<partition u32><id u64>   index: ledgers by partition (empty value)
//	ls/<state u8><id u64>                   index: ledgers by state (empty value)
//	sr/...                                  the schema registry (schemas.go has its layout;
//	                                        a subject, printable but free of the '/' rule,
//	                                        is ended by 0x00 where a key goes on after it)
//
// Index entries change in the same batch as the ledger record.
//
// # Value encoding
//
//	+---------+----------------------+---------------------------+
//	| version | CRC-32C(payload) BE  | payload: JSON of a *Rec    |
//	| 1 byte  | 4 bytes              | type in records.go         |
//	+---------+----------------------+---------------------------+
//
// version is valueVersion (1). A reader rejects any other version, a
// checksum mismatch, unknown JSON fields or a record that fails the
// catalog's validation with ErrCorrupt: corrupt metadata is never used.
// Pebble checksums its own blocks too; this one also covers bugs and
// tampering above Pebble, and makes the format explicit. A new format gets a
// new version byte; readers keep reading old ones (forward-only).
package embedded
