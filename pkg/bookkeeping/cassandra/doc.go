// Package cassandra is the bookkeeping store on Apache Cassandra (4.1+, for
// ALTER TABLE … ADD IF NOT EXISTS in schema v3; tested on 5.0), for deployments. It passes the conformance suite in
// bookkeepingtest against a real node.
//
// It is a bookkeeping.Driver: Open returns the *bookkeeping.Store over it,
// which checks every argument before this package sees it. Here are only
// storage and the decisions that depend on what is stored.
//
// # Layout (DESIGN.md §2.5)
//
//	group_members        ((group_id), member_id)             TTL = session timeout; topics, heartbeat_at
//	consumer_partitions  ((group_id, topic), partition_id)   lease + committed offset and its topic id (v4)
//	group_topics         ((group_id), topic)                  topics of a group, for listing
//	consumer_groups      ((bucket), group_id)                 every group, for ListGroups (bucket 0)
//	producer_id_blocks   ((name))                             next unreserved producer id
//	transactions         ((bucket), transactional_id)         producer id + epoch; transaction state (v8)
//	keyspace_settings    ((name))                             txn_buckets, fixed at v8
//	transactional_producers ((transactional_id))              before v8; copied to transactions, unused
//	schema_version       ((version))                          applied migrations
//
// The lease (owner, epoch) and the committed offset of a partition live in
// the same row, and every partition of one (group, topic) lives in the same
// Cassandra partition. So a member's Commit of all its partitions of a topic
// is ONE conditional batch — one `UPDATE … IF owner = ? AND epoch = ? AND
// committed_topic_id IN (?, null) AND committed_offset <= ?` per partition,
// all on one partition key — which Cassandra runs as one Paxos round, however
// many partitions it carries. Only the first commit after the topic was
// re-created (stored offsets of another topic id, which the rule replaces
// without the regression check — an OR that CQL conditions cannot say) takes
// a second batch, pinned to the rows the first one read (offsets.go Commit,
// ../DESIGN.md).
// Nothing is per partition per unit of time: liveness is one TTL'd row per
// member, rewritten by its Heartbeat.
//
// # Lightweight transactions
//
// LWTs (at the serial consistency, LOCAL_SERIAL by default) are used only
// where a decision must be atomic: lease Acquire and Release, fenced commits
// (and standalone commits/Reset, which are conditioned on the lease state they
// read), producer id/epoch allocation, and every write of a transactional
// id's record (InitProducer, PutTxn). Membership writes, group_topics and
// every read except the serial reads of Acquire, standalone commits,
// producer allocation and GetTxn are plain statements at the regular
// consistency (LOCAL_QUORUM by default). A "renew" is never needed: a lease does not
// expire by itself; its owner's membership row does.
//
// Invariants kept by the statements (never by the schema, which cannot):
// every consumer_partitions row has non-null owner ("" = free), epoch and
// committed_offset (-1 = nothing committed). Rows are created only by
// INSERT … IF NOT EXISTS with those columns set, and never deleted. That is
// what lets the commit condition `committed_offset <= ?` work (a comparison
// with null is false in CQL). committed_topic_id is null until the first
// commit (Acquire does not set it) and on offsets of schema v3 and older,
// and never the empty string (Commit and Reset require an id), so a null
// read as "" is unambiguous, and conditions match it with a null bind value
// or `IN (?, null)`.
//
// The writes of transactional ids' records are group-committed per bucket
// (txnbatch.go): the writes of one bucket that arrive while its round is in
// flight go as the next conditional batch, one Paxos round for all.
//
// An LWT that times out has an unknown outcome. Acquire, the producer id
// calls and PutTxn settle it by a serial read (which completes any in-flight
// Paxos round) and decide again (PutTxn: the record as it wrote it is
// success, the version it expected is a retry, anything else ErrConflict); Commit and Release return the error — repeating
// them is safe (an equal offset is accepted; a repeated Release reports
// *FencedError once the first one applied).
//
// # Membership and TTL
//
// A member row is written with TTL = ceil(session timeout) + 1 s. Cassandra
// counts TTLs in whole seconds from the write's second, so a row can expire
// up to a second early; the extra second guarantees a member is live for at
// least its session timeout, and it expires at most ~2 s after it. Liveness
// is therefore eventually consistent, which is safe because it only decides
// who may take a lease (see the bookkeeping package doc). Heartbeat reads the
// row and rewrites it (every cell needs the new TTL, topics included); a
// heartbeat racing its own expiry may revive the member, which is equally
// safe. The rewrite is written at the read row's write timestamp + 1 µs
// (USING TIMESTAMP), so it supersedes only what it read: a Join or Leave
// issued after the read wins over it (clocks permitting, as every
// last-write-wins write does).
//
// LastHeartbeat is the heartbeat_at column: the time of the process that
// wrote the row (Join or Heartbeat), in milliseconds — not WRITETIME, which
// Heartbeat pins as above. Rows written before schema v3 have none; their
// WRITETIME stands in.
//
// # Groups
//
// consumer_groups holds one row per group in a single partition, written
// (plain idempotent INSERT) by Join and by standalone Commit and Reset before
// the member or offsets, so ListGroups is one ordered single-partition read of
// limit+1 rows. Rows are never deleted; the partition grows with the number
// of groups ever used — fine to a few hundred thousand groups (DESIGN.md), past
// that spread it over more buckets. Schema v3 fills it from group_members
// and group_topics when it is applied.
//
// Join counts the group's members before writing (a read, not a CAS), so
// concurrent joins can overshoot MaxGroupMembers by the number racing;
// ListMembers reads at most 2×MaxGroupMembers rows.
//
// # Producer ids
//
// Ids are reserved in blocks (Config.ProducerIDBlock, default 1000) from the
// counter row producer_id_blocks['producer'] with `UPDATE … SET next_id = n+B
// IF next_id = n` after a serial read of n. Proof of uniqueness: the LWT
// is linearizable and next_id only ever grows by a successful CAS from the
// value it replaces, so the blocks [n, n+B) won by successful CASes are
// disjoint, and a store hands out only ids of blocks it won. A block whose
// CAS outcome is unknown is never used (a gap, not a duplicate); ids unused
// at shutdown are lost, so ids are unique but not dense. No clock or
// timeuuid is involved.
//
// InitProducer of a transactional id bumps the epoch with `UPDATE … SET
// epoch = e+1, …, version = v+1 IF version = v AND producer_id = p AND epoch
// = e` after a serial read, so concurrent calls each get a distinct epoch.
//
// # Transactions
//
// The transaction coordinator's state of a transactional id (schema v5:
// status, timeout_ms, deadline, partitions, groups, bumped_by_coordinator,
// version) is in the same row as its producer id and epoch: one record, as
// bookkeeping.Txn is. Every write is one LWT conditioned on version — PutTxn
// `UPDATE … IF version = ?` (`INSERT … IF NOT EXISTS` at version 0), and
// InitProducer above — so a writer that read an older version loses with
// ErrConflict and nothing of it is written. Rows of binaries before v5 have
// a null version and read as version 1: the conditions for version 1 are
// `IF version IN (1, null)`, with `AND producer_id > 0` on PutTxn's so that
// it never creates a missing row (whose columns compare as null).
// InitProducer's condition names the producer id and epoch too, so a v4
// binary's bump during a rolling upgrade (which leaves version alone) is
// never undone; PutTxn's does not (it does not know what it replaces), so
// the coordinator must not run while binaries older than v5 serve
// InitProducer. GetTxn is a serial read (linearizable); ListTxns pages the
// table in (bucket, id) order: a page after id reads the rest of id's
// bucket (`transactional_id > ?`), then the following buckets in turn, at
// the regular consistency (schema v8; token order before). Timeouts and deadlines are
// stored in milliseconds (the timestamp type's precision). Schema v6 adds
// the transaction's consumer offsets (offsets, a frozen list of tuples);
// null on older rows, read as none. Schema v7 adds prev_producer_id, the
// producer id an EndTxn replaced when its epochs were spent; null on older
// rows, read as 0. Schema v8 moves every record to the bucketed table
// transactions (same columns; the data step copies them) and records the
// number of buckets in keyspace_settings; binaries before v8 must not run
// beside it (they would write the old table). Schema v9 adds
// next_partitions, ended and timed_out (a prepared transaction's next one,
// how the transaction that opened the current one ended, and KIP-588's
// resumable session); null on older rows, read as none, 0 and false. A
// binary before v9 must not run beside it: its writes would leave these
// columns as they were.
//
// CommitTxnOffsets applies a committed transaction's offsets per (group,
// topic): a serial read of the partitions' rows, then one conditional batch
// pinned to the state read (owner, epoch, offset, topic id — leaving owner
// and epoch as they are), which a concurrent commit or lease move fails;
// the round then runs again on the new state. An offset below the stored
// one of the same incarnation is skipped, so applying again is harmless.
//
// # Schema and migrations
//
// The schema is versioned CQL embedded in the binary: schema/v<N>/*.cql,
// applied in version order and file-name order (v1 groups, v2 producer ids,
// v3 member topics and the group list, v4 committed topic ids, v5 the
// transaction state, v6 a transaction's consumer offsets, v7 the replaced
// producer id, v8 the bucketed transactions table, v9 the next
// transaction's partitions and the timed-out flag). Open applies the versions the
// keyspace lacks and records each in schema_version; every statement is
// idempotent (IF NOT EXISTS), so a migration interrupted half-way is simply
// applied again. A version may also have a data step in Go (dataMigration:
// v3 backfills consumer_groups), run after its statements and before it is
// recorded, and idempotent too. Migrations are forward-only; Open refuses a keyspace whose
// schema is newer than the binary. Several processes may start at once, but
// on a fresh multi-node cluster run migrations from one of them first
// (Config.NoMigrate on the rest): concurrent CREATE TABLEs on different
// coordinators can disagree on schema before Cassandra 5.1.
package cassandra
