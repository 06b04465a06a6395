package catalog

import "time"

// Fixed bounds. Every list the catalog stores or returns is bounded by one of
// these, so no record outgrows a DynamoDB item (400 KB) and no call returns
// unbounded data. Changing one is a compatibility decision: a stored record
// beyond a lowered bound would no longer validate.
const (
	// MaxTopicNameLength is Kafka's limit (249), so names round-trip with Kafka tools.
	MaxTopicNameLength = 249

	// MaxPartitions bounds a topic's partition count.
	MaxPartitions = 10_000

	// MaxIDLength bounds owner ids, bookie ids and ledger writer ids.
	MaxIDLength = 128

	// MaxAddressLength bounds owner and bookie network addresses.
	MaxAddressLength = 256

	// MaxSchemaSubjectLength bounds the schema.subject topic config.
	MaxSchemaSubjectLength = 255

	// MaxLedgersPerPartition bounds a partition's ledger list. At ~40 bytes a
	// reference this keeps a partition record near 160 KB; with ledgers rolled
	// every 10 minutes it holds 28 days. Retention trims the front.
	MaxLedgersPerPartition = 4096

	// MaxEnsembleSize bounds E (and so Qw and Qa).
	MaxEnsembleSize = 16

	// MaxEnsembleSegments bounds the ensemble changes one ledger records.
	// A writer that needs more should roll to a new ledger.
	MaxEnsembleSegments = 64

	// MaxObjectLocationLength bounds a ledger's object-store location.
	MaxObjectLocationLength = 1024

	// MaxMaxMessageBytes bounds the max.message.bytes topic config (64 MiB).
	MaxMaxMessageBytes = 64 << 20

	// DefaultPageSize is used when a List call passes limit 0.
	DefaultPageSize = 100

	// MaxPageSize bounds the limit of every List call.
	MaxPageSize = 1000

	// MaxPageTokenLength bounds the page tokens callers hand back.
	MaxPageTokenLength = 1024

	// MaxOwners and MaxBookies bound the heartbeat registries (live and
	// expired records together), so ListLiveOwners/ListLiveBookies stay
	// bounded without paging. Exceeding them is ErrLimitExceeded.
	MaxOwners  = 4096
	MaxBookies = 4096

	// MaxTriggerNameLength bounds trigger names.
	MaxTriggerNameLength = 128

	// MaxTriggerFunctionLength is Lambda's bound on Invoke's FunctionName
	// (a full ARN with a qualifier).
	MaxTriggerFunctionLength = 140

	// MaxTriggerBatchSize is Lambda's bound on a Kafka or Kinesis event
	// source mapping's batch size.
	MaxTriggerBatchSize = 10_000

	// MaxTriggerBatchBytes is Lambda's synchronous invoke payload limit
	// (6 MB), which bounds a batch's event.
	MaxTriggerBatchBytes = 6 << 20

	// MaxTriggerBatchWindowMs is Lambda's bound on a batching window (300 s).
	MaxTriggerBatchWindowMs = 300_000

	// MaxTriggerParallelization is Lambda's bound on a Kinesis mapping's
	// parallelization factor: concurrent batches per partition.
	MaxTriggerParallelization = 10

	// MaxTriggerRetries is Lambda's bound on a mapping's retry attempts.
	MaxTriggerRetries = 10_000

	// MaxTriggerRetryBackoffMs bounds both retry backoff settings (15 min,
	// Lambda's longest function timeout).
	MaxTriggerRetryBackoffMs = 900_000

	// MinTriggerRecordAgeMs and MaxTriggerRecordAgeMs are Lambda's bounds on
	// a mapping's maximum record age (60 s to 7 days).
	MinTriggerRecordAgeMs = 60_000
	MaxTriggerRecordAgeMs = 604_800_000

	// MinHeartbeatTTL and MaxHeartbeatTTL bound owner and bookie heartbeat TTLs.
	MinHeartbeatTTL = 100 * time.Millisecond
	MaxHeartbeatTTL = 10 * time.Minute
)
