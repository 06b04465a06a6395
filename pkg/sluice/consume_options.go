package sluice

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"
)

// Reader and Consumer defaults and bounds. NewReader and NewConsumer check
// every option at once and name each one out of bounds.
const (
	// DefaultFetchMaxRecords, DefaultFetchMaxBytes and DefaultFetchMaxWait
	// shape a Reader's Fetch calls. The wait is a long poll at the end of
	// the partition: Poll returns no records after it.
	DefaultFetchMaxRecords = 500
	DefaultFetchMaxBytes   = 1 << 20
	DefaultFetchMaxWait    = time.Second
	// MaxFetchRecords, MaxFetchBytes and MaxFetchWait are the server's
	// limits (sluice.v1.FetchRequest).
	MaxFetchRecords = 10_000
	MaxFetchBytes   = 16 << 20
	MaxFetchWait    = 30 * time.Second

	// DefaultReadRetryTimeout bounds how long a Reader's Poll (or a
	// Consumer without a session) retries UNAVAILABLE, RESOURCE_EXHAUSTED
	// and broken connections before it gives up with ErrRetriesExhausted.
	DefaultReadRetryTimeout = time.Minute
	// MinReadRetryTimeout and MaxReadRetryTimeout bound WithReadRetryTimeout.
	MinReadRetryTimeout = 10 * time.Millisecond
	MaxReadRetryTimeout = 24 * time.Hour

	// DefaultCreditRecords and DefaultCreditBytes are a Consumer's credit
	// window: at most this many records and record bytes (key + value +
	// headers) are buffered in the Consumer or granted to the server and
	// not yet delivered. The byte window must hold the largest record (a
	// value of the topic's max.message.bytes, 1 MiB by default, plus key
	// and headers): the server never sends a record beyond the credits.
	DefaultCreditRecords = 1000
	DefaultCreditBytes   = 8 << 20
	// MinCreditBytes, MaxCreditRecords and MaxCreditBytes bound
	// WithCreditWindow.
	MinCreditBytes   = 64 << 10
	MaxCreditRecords = 1_000_000
	MaxCreditBytes   = 1 << 30

	// DefaultMaxPollRecords bounds the records one Poll returns.
	DefaultMaxPollRecords = 500
	// MaxMaxPollRecords bounds WithMaxPollRecords.
	MaxMaxPollRecords = 100_000

	// DefaultAutoCommitInterval is how often a Consumer commits processed
	// offsets in the background (Kafka's auto.commit.interval.ms).
	DefaultAutoCommitInterval = 5 * time.Second
	// MinAutoCommitInterval and MaxAutoCommitInterval bound WithAutoCommit.
	MinAutoCommitInterval = 10 * time.Millisecond
	MaxAutoCommitInterval = time.Hour

	// MinSessionTimeout and MaxSessionTimeout bound WithSessionTimeout (the
	// server's limits); 0 takes the server's default (10 s).
	MinSessionTimeout = time.Second
	MaxSessionTimeout = 300 * time.Second

	// MaxClientInfoBytes bounds WithClientInfo (the server's limit).
	MaxClientInfoBytes = 1024
	// MaxSubscribeTopics bounds the topics of one Consumer (the server's
	// limit).
	MaxSubscribeTopics = 100
)

// ReaderOption configures a Reader; ConsumerOption a Consumer. Options that
// suit both (StartAt, WithReadBackoff, WithReadRetryTimeout) are
// ReadOptions and may be given to either. Options only record values;
// NewReader and NewConsumer validate them together. (Interfaces rather
// than ProducerOption's function type: Go has no overloading, and one
// StartAt serving both reads better than two names.)
type ReaderOption interface{ applyReader(*readerConfig) }

// ConsumerOption configures a Consumer; see ReaderOption.
type ConsumerOption interface{ applyConsumer(*consumerConfig) }

// ReadOption configures a Reader or a Consumer.
type ReadOption interface {
	ReaderOption
	ConsumerOption
}

type readOpt func(*readConfig)

func (o readOpt) applyReader(c *readerConfig)     { o(&c.readConfig) }
func (o readOpt) applyConsumer(c *consumerConfig) { o(&c.readConfig) }

type readerOpt func(*readerConfig)

func (o readerOpt) applyReader(c *readerConfig) { o(c) }

type consumerOpt func(*consumerConfig)

func (o consumerOpt) applyConsumer(c *consumerConfig) { o(c) }

// StartAt sets where reading starts (default Earliest). For a Reader: any
// Position. For a Consumer: Earliest or Latest only, and only for
// partitions the group has no committed offset for (a group's offsets move
// with 'sluice group reset' / Client.ResetGroupOffsets while it has no
// live members; sluice.v1.SubscribeRequest has no start offset or time).
func StartAt(p Position) ReadOption {
	return readOpt(func(c *readConfig) { c.start = p })
}

// WithRecordBatches chooses how records travel from the server (default
// true): as the stored record batches, which the SDK decodes (no protobuf
// message per record on either side, and compressed batches stay
// compressed on the wire), or, with false, one message per record, as
// browsers and JSON clients get them. Both give the same records.
func WithRecordBatches(on bool) ReadOption {
	return readOpt(func(c *readConfig) { c.perRecord = !on })
}

// WithReadCommitted reads only records written outside transactions and
// those of committed transactions (Kafka's isolation.level
// read_committed): reading stops at the partition's last stable offset
// while a transaction is open there, and aborted transactions' records
// are skipped. Default false: every stored record (read_uncommitted).
func WithReadCommitted(on bool) ReadOption {
	return readOpt(func(c *readConfig) { c.readCommitted = on })
}

// WithReadBackoff sets the first and the largest delay between retries of
// a failed Fetch or Commit and between group session reconnects (defaults
// DefaultRetryBackoff and DefaultMaxRetryBackoff; both within
// [MinRetryBackoff, MaxRetryBackoff], initial ≤ max). A server's RetryInfo
// delay takes precedence when longer.
func WithReadBackoff(initial, maxBackoff time.Duration) ReadOption {
	return readOpt(func(c *readConfig) { c.backoffInitial, c.backoffMax = initial, maxBackoff })
}

// WithReadRetryTimeout bounds retrying (default DefaultReadRetryTimeout,
// within [MinReadRetryTimeout, MaxReadRetryTimeout]): a Reader's Poll, a
// Consumer's Commit, and a Consumer that cannot open a session give up
// with ErrRetriesExhausted after failing retriably for this long. A
// Consumer that gave up is failed: Poll returns the error; Close it.
func WithReadRetryTimeout(d time.Duration) ReadOption {
	return readOpt(func(c *readConfig) { c.retryTimeout = d })
}

// WithFetchMaxRecords bounds the records one Fetch returns (default
// DefaultFetchMaxRecords; within [1, MaxFetchRecords]).
func WithFetchMaxRecords(n int) ReaderOption {
	return readerOpt(func(c *readerConfig) { c.maxRecords = n })
}

// WithFetchMaxBytes bounds the record bytes one Fetch returns (default
// DefaultFetchMaxBytes; within [1, MaxFetchBytes]). A record larger than it
// is still returned, alone.
func WithFetchMaxBytes(n int) ReaderOption {
	return readerOpt(func(c *readerConfig) { c.maxBytes = n })
}

// WithFetchMaxWait sets how long a Fetch waits at the end of the partition
// for new records (default DefaultFetchMaxWait; within [0, MaxFetchWait];
// millisecond precision). Poll returns no records when it passes.
func WithFetchMaxWait(d time.Duration) ReaderOption {
	return readerOpt(func(c *readerConfig) { c.maxWait = d })
}

// WithCreditWindow bounds the records and record bytes (key + value +
// headers) a Consumer has buffered or granted to the server and not yet
// received (defaults DefaultCreditRecords, DefaultCreditBytes; records
// within [1, MaxCreditRecords], bytes within [MinCreditBytes,
// MaxCreditBytes]). The Consumer grants more as Poll hands records out,
// once half a window is free, so its memory stays bounded by about the
// window. The byte window must hold the largest record of the topics.
func WithCreditWindow(records int, bytes int64) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.windowRecords, c.windowBytes = int64(records), bytes })
}

// WithMaxPollRecords bounds the records one Poll returns (default
// DefaultMaxPollRecords; within [1, MaxMaxPollRecords]).
func WithMaxPollRecords(n int) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.maxPollRecords = n })
}

// WithAutoCommit sets the interval at which the Consumer commits processed
// offsets in the background (default DefaultAutoCommitInterval; within
// [MinAutoCommitInterval, MaxAutoCommitInterval]), or turns auto-commit off
// with 0: then only Commit and CommitOffsets commit, and Close does not.
// See the package doc for what counts as processed.
func WithAutoCommit(interval time.Duration) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.autoCommit = interval })
}

// WithCommitOnRevoke turns commit-on-revoke on or off (default on). On:
// when a partition is revoked (not lost), the Consumer commits its
// processed offset at once, which also releases the lease to its next
// member. Off: nothing is committed for it, and the server releases the
// lease when its revoke timeout passes.
func WithCommitOnRevoke(on bool) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.commitOnRevoke = on })
}

// WithSessionTimeout sets how long the group waits for a silent member
// before its leases are free (default 0: the server's, 10 s; else within
// [MinSessionTimeout, MaxSessionTimeout]). The Consumer heartbeats at the
// interval the server asks for, from its own goroutine, whether or not the
// application polls.
func WithSessionTimeout(d time.Duration) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.sessionTimeout = d })
}

// WithClientInfo sets the description DescribeGroup shows for this member
// (default "sluice-go host=<hostname> pid=<pid>"; at most
// MaxClientInfoBytes).
func WithClientInfo(s string) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.clientInfo = s })
}

// OnAssigned sets a callback for partitions leased to this member. It runs
// inside Poll, on Poll's goroutine and with Poll's context, before any
// record of those partitions is returned. It must not call Poll.
func OnAssigned(f func(ctx context.Context, partitions []TopicPartition)) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.onAssigned = f })
}

// OnRevoked sets a callback for partitions taken from this member. It runs
// inside Poll like OnAssigned; by then Poll returns no more records of
// those partitions. lost=false: a rebalance; with commit-on-revoke the
// processed offsets have already been committed (in the background, right
// when the revocation arrived, because the lease is held only for the
// server's revoke timeout). lost=true: the lease is already gone (session
// ended, commit fenced); nothing was committed for them. It must not call
// Poll.
func OnRevoked(f func(ctx context.Context, partitions []TopicPartition, lost bool)) ConsumerOption {
	return consumerOpt(func(c *consumerConfig) { c.onRevoked = f })
}

// readConfig is what Readers and Consumers share.
type readConfig struct {
	start          Position
	backoffInitial time.Duration
	backoffMax     time.Duration
	retryTimeout   time.Duration
	// perRecord asks the server for one message per record (what browsers
	// and JSON clients get) instead of the stored record batches
	// (WithRecordBatches(false)).
	perRecord bool
	// readCommitted: WithReadCommitted.
	readCommitted bool
}

func defaultReadConfig() readConfig {
	return readConfig{start: Earliest(), backoffInitial: DefaultRetryBackoff, backoffMax: DefaultMaxRetryBackoff, retryTimeout: DefaultReadRetryTimeout}
}

func (c readConfig) validate(bad func(option, format string, args ...any)) {
	if err := c.start.check(); err != nil {
		bad("StartAt", "%v", err)
	}
	if c.backoffInitial < MinRetryBackoff || c.backoffInitial > MaxRetryBackoff {
		bad("WithReadBackoff", "initial %v outside [%v, %v]", c.backoffInitial, MinRetryBackoff, MaxRetryBackoff)
	}
	if c.backoffMax < c.backoffInitial || c.backoffMax > MaxRetryBackoff {
		bad("WithReadBackoff", "max %v outside [initial %v, %v]", c.backoffMax, c.backoffInitial, MaxRetryBackoff)
	}
	if c.retryTimeout < MinReadRetryTimeout || c.retryTimeout > MaxReadRetryTimeout {
		bad("WithReadRetryTimeout", "%v outside [%v, %v]", c.retryTimeout, MinReadRetryTimeout, MaxReadRetryTimeout)
	}
}

func (c readConfig) backoff(n int) time.Duration {
	return backoffDelay(c.backoffInitial, c.backoffMax, n)
}

// invalid collects option errors; each wraps ErrInvalidOption and names the
// option.
type invalid []error

func (v *invalid) bad(option, format string, args ...any) {
	*v = append(*v, fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...)))
}

// readerConfig is a Reader's configuration, defaults filled in.
type readerConfig struct {
	readConfig
	maxRecords int
	maxBytes   int
	maxWait    time.Duration
}

// newReaderConfig applies opts to the defaults and validates the result:
// the one place a Reader's options are checked.
func newReaderConfig(topic string, partition int32, opts []ReaderOption) (readerConfig, error) {
	c := readerConfig{readConfig: defaultReadConfig(), maxRecords: DefaultFetchMaxRecords, maxBytes: DefaultFetchMaxBytes, maxWait: DefaultFetchMaxWait}
	for _, o := range opts {
		if o != nil {
			o.applyReader(&c)
		}
	}
	var errs invalid
	if topic == "" {
		errs.bad("topic", "empty")
	}
	if partition < 0 {
		errs.bad("partition", "%d is negative", partition)
	}
	c.readConfig.validate(errs.bad)
	if c.maxRecords < 1 || c.maxRecords > MaxFetchRecords {
		errs.bad("WithFetchMaxRecords", "%d outside [1, %d]", c.maxRecords, MaxFetchRecords)
	}
	if c.maxBytes < 1 || c.maxBytes > MaxFetchBytes {
		errs.bad("WithFetchMaxBytes", "%d outside [1, %d]", c.maxBytes, MaxFetchBytes)
	}
	if c.maxWait < 0 || c.maxWait > MaxFetchWait {
		errs.bad("WithFetchMaxWait", "%v outside [0, %v]", c.maxWait, MaxFetchWait)
	}
	return c, errors.Join(errs...)
}

// consumerConfig is a Consumer's configuration, defaults filled in.
type consumerConfig struct {
	readConfig
	windowRecords  int64
	windowBytes    int64
	maxPollRecords int
	autoCommit     time.Duration
	commitOnRevoke bool
	sessionTimeout time.Duration
	clientInfo     string
	onAssigned     func(context.Context, []TopicPartition)
	onRevoked      func(context.Context, []TopicPartition, bool)
}

// groupName is the server's rule for group names.
var groupName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,255}$`)

// newConsumerConfig applies opts to the defaults and validates the result
// (and the group and topics): the one place a Consumer's options are
// checked.
func newConsumerConfig(group string, topics []string, opts []ConsumerOption) (consumerConfig, error) {
	c := consumerConfig{
		readConfig:    defaultReadConfig(),
		windowRecords: DefaultCreditRecords, windowBytes: DefaultCreditBytes,
		maxPollRecords: DefaultMaxPollRecords, autoCommit: DefaultAutoCommitInterval,
		commitOnRevoke: true, clientInfo: defaultClientInfo(),
	}
	for _, o := range opts {
		if o != nil {
			o.applyConsumer(&c)
		}
	}
	var errs invalid
	if !groupName.MatchString(group) {
		errs.bad("group", "%q is not 1..255 bytes of [a-zA-Z0-9._-]", group)
	}
	if len(topics) < 1 || len(topics) > MaxSubscribeTopics {
		errs.bad("topics", "%d topics outside [1, %d]", len(topics), MaxSubscribeTopics)
	}
	seen := make(map[string]bool, len(topics))
	for _, t := range topics {
		if t == "" || seen[t] {
			errs.bad("topics", "empty or repeated topic %q", t)
		}
		seen[t] = true
	}
	c.readConfig.validate(errs.bad)
	if c.start.kind != posEarliest && c.start.kind != posLatest && c.start.check() == nil {
		errs.bad("StartAt", "a Consumer starts at Earliest or Latest (got %v); move a group's offsets with Client.ResetGroupOffsets", c.start)
	}
	if c.windowRecords < 1 || c.windowRecords > MaxCreditRecords {
		errs.bad("WithCreditWindow", "records %d outside [1, %d]", c.windowRecords, MaxCreditRecords)
	}
	if c.windowBytes < MinCreditBytes || c.windowBytes > MaxCreditBytes {
		errs.bad("WithCreditWindow", "bytes %d outside [%d, %d]", c.windowBytes, MinCreditBytes, MaxCreditBytes)
	}
	if c.maxPollRecords < 1 || c.maxPollRecords > MaxMaxPollRecords {
		errs.bad("WithMaxPollRecords", "%d outside [1, %d]", c.maxPollRecords, MaxMaxPollRecords)
	}
	if c.autoCommit != 0 && (c.autoCommit < MinAutoCommitInterval || c.autoCommit > MaxAutoCommitInterval) {
		errs.bad("WithAutoCommit", "%v outside [%v, %v] (0 turns it off)", c.autoCommit, MinAutoCommitInterval, MaxAutoCommitInterval)
	}
	if c.sessionTimeout != 0 && (c.sessionTimeout < MinSessionTimeout || c.sessionTimeout > MaxSessionTimeout) {
		errs.bad("WithSessionTimeout", "%v outside [%v, %v] (0 takes the server's default)", c.sessionTimeout, MinSessionTimeout, MaxSessionTimeout)
	}
	if len(c.clientInfo) > MaxClientInfoBytes {
		errs.bad("WithClientInfo", "%d bytes, more than %d", len(c.clientInfo), MaxClientInfoBytes)
	}
	return c, errors.Join(errs...)
}

func defaultClientInfo() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("sluice-go host=%s pid=%d", host, os.Getpid())
}
