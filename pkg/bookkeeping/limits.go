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
)
