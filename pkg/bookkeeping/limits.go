package bookkeeping

import (
	"math"
	"time"
)

// Limits on every input. They are part of the contract — every backend
// rejects the same inputs with the same *ValidationError — and they keep each
// call's work and each stored row bounded.
const (
	// MaxNameBytes bounds group names, topic names, topic ids, member ids
	// and transactional ids (UTF-8 bytes). Kafka allows 249 for topics and has no
	// stated bound for group ids; 255 covers both.
	MaxNameBytes = 255

	// MaxClientInfoBytes bounds the free-form client description a member
	// joins with (host, version, …).
	MaxClientInfoBytes = 1024

	// MaxMemberTopics bounds the topics one member subscribes to. With
	// MaxNameBytes it keeps a member's record under 26 KiB, which matters
	// because Cassandra rewrites the whole record on every Heartbeat.
	MaxMemberTopics = 100

	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout. One second is the finest granularity Cassandra TTLs offer;
	// 30 minutes matches Kafka's group.max.session.timeout.ms.
	MinSessionTimeout = time.Second
	MaxSessionTimeout = 30 * time.Minute

	// MaxPartitions bounds partition numbers: valid partitions are
	// 0 ≤ p < MaxPartitions. It also bounds the rows one ListLeases returns.
	MaxPartitions = 1 << 16

	// MaxCommitPartitions bounds the partitions of one Commit or Reset. The
	// commit is one conditional batch on Cassandra; with MaxMetadataBytes it
	// stays around 1 MiB, far below Cassandra's 16 MiB mutation limit.
	MaxCommitPartitions = 1024

	// MaxMetadataBytes bounds the metadata string committed with an offset.
	MaxMetadataBytes = 1024

	// MaxGroupMembers bounds the live members of one group. Join enforces it;
	// on Cassandra concurrent joins may overshoot by the number of joins
	// racing (the count is read, not compare-and-set), and ListMembers never
	// returns more than twice this.
	MaxGroupMembers = 4096

	// MaxListLimit bounds one page of ListOffsets and of ListGroups.
	MaxListLimit = 10_000

	// MaxProducerEpoch is the highest producer epoch (Kafka's record batch
	// stores it as an int16). InitProducer of a transactional id whose epoch
	// reached it allocates a new producer id with epoch 0, as KIP-360 does.
	MaxProducerEpoch = math.MaxInt16

	// MaxOffset is the highest offset that may be committed.
	MaxOffset = math.MaxInt64 - 1

	// MaxTxnPartitions bounds the partitions of one transaction (a Txn's
	// Partitions). The list is one value of the transactional id's record,
	// rewritten whole by every PutTxn (one frozen cell on Cassandra) and
	// read by every GetTxn, and every one of them gets a marker when the
	// transaction ends. 10,000 covers a consume-transform-produce over a
	// 10,000-partition topic; at the limit the list is about 0.5 MB with
	// the catalog's 32-character topic ids and 2.7 MB with ids of
	// MaxNameBytes — far below Cassandra's mutation limit (half the
	// 32 MiB commit log segment), and a transaction that large already
	// spends its time on markers, not on this write.
	MaxTxnPartitions = 10_000

	// MaxTxnGroups bounds the consumer groups one transaction commits
	// offsets for (a Txn's Groups). A consume-transform-produce loop adds
	// the one group it reads with; 1,000 leaves room for fan-in jobs and
	// keeps the list ≤ 260 KB at MaxNameBytes a name.
	MaxTxnGroups = 1_000

	// MaxTxnOffsets bounds the consumer offsets one transaction commits (a
	// Txn's Offsets): as many as MaxTxnPartitions, the partitions a
	// consume-transform-produce over one large topic reads. Each is about
	// 300 bytes at most with MaxNameBytes names, so the list stays within
	// a few MB, like the partitions'.
	MaxTxnOffsets = 10_000

	// MaxTxnTimeout bounds a transaction's timeout (a Txn's Timeout).
	// Kafka's brokers cap it at 15 minutes by default
	// (transaction.max.timeout.ms); the coordinator applies its own cap,
	// and this bound, a day, only keeps deadlines sane in storage.
	MaxTxnTimeout = 24 * time.Hour

	// MaxTxnListLimit bounds one page of ListTxns. Smaller than
	// MaxListLimit because a record can be large (MaxTxnPartitions
	// partitions); a sweeper pages through every record, and short pages
	// keep each read bounded.
	MaxTxnListLimit = 1_000
)
