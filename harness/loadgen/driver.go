package loadgen

import (
	"context"
	"time"
)

// Driver connects the load generator to one messaging system. One Driver
// serves one run; the runner calls it from one goroutine except where noted.
// The seam is small on purpose: what the OpenMessaging Benchmark's drivers
// need (topics, async producers, consumers in subscriptions), nothing more,
// so the same workloads and measurements apply to Kafka and Sluice alike.
type Driver interface {
	// Name identifies the driver in results: "kafka", "sluice", "mem".
	Name() string
	// CreateTopic creates topic with the given partitions, with the driver's
	// durability settings, and returns once producers can write to every
	// partition.
	CreateTopic(ctx context.Context, topic string, partitions int) error
	// DeleteTopic deletes a topic CreateTopic made.
	DeleteTopic(ctx context.Context, topic string) error
	// Describe returns the settings in force for topic that a reader needs to
	// compare runs: client settings (acks, idempotence, batching) and the
	// topic's server-side configuration (replication, flush policy).
	Describe(ctx context.Context, topic string) (map[string]string, error)
	// NewProducer returns a producer for topic.
	NewProducer(ctx context.Context, topic string) (Producer, error)
	// NewConsumer subscribes a consumer to topic in subscription (a consumer
	// group: each subscription receives every message once, shared among its
	// consumers), reading from the start of the topic. deliver is called for
	// every message, from any goroutine, possibly concurrently; payload is
	// valid only during the call.
	NewConsumer(ctx context.Context, topic, subscription string, deliver func(payload []byte)) (Consumer, error)
	// Close releases the driver's own resources (admin connections).
	Close() error
}

// TransactionalDriver is a Driver that runs workloads with transactions
// (Workload.TransactionSize, ReadCommitted). The runner calls
// SetTransactions before creating any producer or consumer; a driver that
// does not implement it refuses such workloads.
type TransactionalDriver interface {
	Driver
	// SetTransactions makes the producers commit a transaction every size
	// messages (0: none) — Send's done is called once the message's
	// transaction committed — and the consumers read committed data only
	// when readCommitted.
	SetTransactions(size int, readCommitted bool) error
}

// Producer sends messages to one topic. Send is called from one goroutine
// (its producer's); done callbacks come from any goroutine.
type Producer interface {
	// Send queues one message for sending and returns; it may block while
	// the driver's buffer is full (that wait is part of the measured
	// latency). done is called exactly once, when the message is durably
	// acknowledged (nil) or has failed, possibly before Send returns. The
	// driver owns payload and key until done is called.
	Send(ctx context.Context, key, payload []byte, done func(error))
	// Flush waits until every message sent so far has had its done call.
	Flush(ctx context.Context) error
	// Close stops the producer; messages not yet acknowledged fail.
	Close() error
}

// CommitWaiter is a Producer of a transactional workload whose Send waits
// on the sending goroutine for its transaction's commit, as a Kafka
// producer's commitTransaction does (TxnBatcher). CommittingSince returns
// when the commit in progress started (ok false when none is); it is
// called from another goroutine than Send. The rate search counts what a
// producer was behind when its commit began, not the commit's own wait:
// that wait is in the publish latency, and a producer whose commits
// outlast its transactions' schedule still falls behind by more at each
// commit's start.
type CommitWaiter interface {
	Producer
	CommittingSince() (start time.Time, ok bool)
}

// Consumer is one member of a subscription. Close stops delivery: no
// deliver call starts after Close returns.
type Consumer interface {
	Close() error
}

// AssignmentCounter is a Consumer that can tell how many partitions it
// holds now (Kafka's assignment, Sluice's leases). When every consumer of a
// run is one, the run waits until each subscription's members hold all the
// partitions before its clock starts, as it waits for the topics' writers:
// otherwise a rate search judges its first step by a group that is still
// forming, and drops to its floor.
type AssignmentCounter interface {
	Assigned() int
}
