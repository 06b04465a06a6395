// Package bookkeeping is the contract of Sluice's consumer-side metadata:
// group membership, partition leases, committed offsets, producer ids and
// the transaction coordinator's state.
//
// It is split into six small interfaces, one per aggregate, so a caller
// depends only on what it uses: [Members], [Leases], [Offsets], [Groups],
// [Producers] and [Transactions]. Implementations live in sub-packages — cassandra (deployments)
// and embedded (Pebble on local disk, for `sluice dev` and hermetic tests) —
// and every one of them passes the conformance suite in bookkeepingtest.
//
// # Store and drivers
//
// One portable type over small drivers, as go-cloud splits its APIs: a
// backend's constructor (embedded.Open, cassandra.Open) returns a [*Store],
// which implements the six interfaces, and no backend is reachable any
// other way. Store checks every argument once (validate.go and the Validate
// methods of [Member], [Commit] and [Cursor]) and calls the backend's
// [Driver] only with arguments that passed. A driver only stores: it decides
// what depends on stored state — liveness, lease epochs and fencing, the
// offset rules, the live-member rule of standalone commits, producer epochs,
// the version of a transactional id's record — and makes each decision
// atomic with its write.
//
// # Model
//
// A consumer group has members. A member Joins with a session timeout and
// keeps itself live with Heartbeats; it stops being live when it Leaves or
// when a session timeout passes without a heartbeat. Liveness is renewed per
// member, never per partition (DESIGN.md §2.5): a member holding 500
// partitions sends one heartbeat, not 500 lease renewals.
//
// A member Joins with the topics it subscribes to ([Member.Topics]), which
// the group planner reads back with ListMembers together with
// [Member.LastHeartbeat], the time of its last Join or Heartbeat by the
// store's clock. [Groups.ListGroups] pages through every group the store has
// seen (a member Joined, or a standalone commit or Reset was made), in name
// order, for the admin API and the planner; groups are never removed.
//
// Each (group, topic, partition) has one lease record holding the owner, the
// lease epoch and the committed offset together. A lease is free when it has
// no owner or its owner is no longer live, so leases of a member that leaves
// or expires are free at once without any per-partition write. Acquire takes
// a free lease and gives it an epoch one higher than any before it, so epochs
// of one partition strictly increase with every change of owner. Release
// gives a lease up early.
//
// A member commits the offsets of all its partitions of one topic in one
// [Offsets.Commit] call. Each partition carries the epoch the member holds;
// the commit is applied only if, for every partition, the lease is still
// owned by that member at that epoch — otherwise the whole commit is rejected
// with a [*FencedError] naming the partitions. This is what makes a zombie
// (a member that lost its lease but keeps processing) unable to commit.
// Committed offsets never move backwards through Commit (a lower offset is
// rejected with an [*OffsetRegressionError]); only [Offsets.Reset] moves them
// back.
//
// # Topic incarnations
//
// A topic deleted and created again under the same name is a new
// incarnation with a new id (the catalog's TopicID; KIP-516 in Kafka), and
// it starts with no records and no group offsets. Every Commit and Reset
// names the incarnation ([Commit.TopicID], required) and every committed
// offset is stored with it ([Committed.TopicID]). The "never backwards" rule
// holds within an incarnation: a commit whose TopicID differs from the
// stored offset's replaces that offset whatever its value, because it
// belongs to a deleted incarnation. Offsets stored before ids were recorded
// have TopicID "" — an unknown incarnation, replaced the same way by the
// first commit. Leases are keyed by topic name and do not change with the
// incarnation; neither does fencing. The store only compares ids: it cannot
// tell an older incarnation from a newer one, so the reader decides what a
// stored offset of an id other than the live topic's means (as none).
//
// # Standalone commits and resets
//
// A commit with no member (Member "" and every epoch 0) is a standalone
// commit, for tools and simple consumers that do not use a group session.
// Standalone commits and Resets are accepted only while the group has no live
// members; otherwise they fail with [ErrConflict]. They also clear the owner
// of every partition they touch (those owners are not live anyway), so a
// member that expired and later comes back must Acquire again and gets a new
// epoch: it cannot commit over offsets an operator just set.
//
// A member whose session expired but whose leases nobody took yet may still
// commit with its epoch: no other owner has existed since, so the commit is
// not a zombie commit. The same holds for a member that left and Joins again
// under the same id before anyone took its leases — member ids should
// therefore be unique per process incarnation (for example include a random
// suffix).
//
// # Transactional ids
//
// A transactional id has ONE record, [Txn]: the producer session
// (ProducerID, Epoch) that [Producers.InitProducer] hands out and the
// transaction coordinator's state (Status, Timeout, Deadline, Partitions,
// Groups, BumpedByCoordinator), so the two can never disagree. It changes
// only by compare-and-set on its Version: the coordinator loads it
// ([Transactions.GetTxn]), steps its pure machine (services/ingest/txn) and
// stores the result with [Transactions.PutTxn], which fails with
// ErrConflict when another writer moved the version in between.
// InitProducer is such a writer too: it bumps the epoch at the next version
// and leaves the record idle, and refuses (ErrConflict, nothing written)
// while a transaction is open or ending, which only the coordinator may end.
// [Transactions.ListTxns] pages through every record for the sweeper, in the
// backend's order (id order embedded, (bucket, id) order on Cassandra). The store
// keeps Timeout and Deadline to the millisecond; it checks the fields'
// bounds, not the coordinator's rules.
//
// # Consistency model
//
// Linearizable (compare-and-set on the lease record; Cassandra lightweight
// transactions at SERIAL/LOCAL_SERIAL, the embedded store under one mutex):
//   - Acquire and Release;
//   - Commit (all partitions of the call in one conditional write), standalone
//     commits and Reset;
//   - producer id allocation and InitProducer epoch bumps;
//   - GetTxn, PutTxn and InitProducer on a transactional id's record (a
//     serial read and LWTs on Cassandra).
//
// Read-your-acknowledged-writes (quorum reads on Cassandra): FetchOffset,
// ListOffsets, ListLeases, ListGroups and ListTxns see every write
// acknowledged before they started; a write still in flight may or may not
// be visible. A member's topics and LastHeartbeat are read like its
// liveness (below).
//
// Eventually consistent — membership liveness. A member's expiry is decided by
// time (a TTL on Cassandra, the store's clock embedded), so whether a member
// whose session timeout is just running out counts as live can differ between
// observers for a short while (TTL granularity, clock skew between nodes), and
// a Heartbeat racing its own expiry may revive the member. This is safe
// because liveness only decides who MAY take a lease; correctness never rests
// on it. Every change of owner goes through the linearizable lease record and
// bumps the epoch, and every commit is checked against that epoch, so a
// member wrongly thought dead loses its lease cleanly (its later commits are
// fenced) and a member wrongly thought alive only delays a takeover. A member
// is live for at least its session timeout after its last successful Join or
// Heartbeat; backends may keep it live a little longer (Cassandra: up to
// about two seconds, because TTLs count whole seconds).
//
// # Errors
//
// Methods return [ErrNotFound], [ErrLeaseHeld], [ErrConflict], a
// [*FencedError] (errors.Is(err, ErrFenced)), an [*OffsetRegressionError]
// (errors.Is(err, ErrConflict)) or a [*ValidationError] for bad input, wrapped
// with context. Anything else is an operating error of the backend (a
// timeout, a lost connection) whose outcome may be unknown; the calls are
// safe to retry with the same arguments: a repeated Acquire returns the lease
// the first one took, a repeated Commit of the same offsets is accepted. A
// PutTxn is not (its version has moved if the first one applied, and the
// retry fails with ErrConflict): re-read with GetTxn and decide again — the
// record either is what was written or is at the version read.
//
// # Limits
//
// Every input is bounded (see limits.go) and validated by [Store] before any
// I/O, so callers get the same [*ValidationError] from every backend,
// unwrapped.
package bookkeeping
