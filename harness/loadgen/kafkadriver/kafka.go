// Package kafkadriver is the loadgen.Driver for Apache Kafka, over
// github.com/twmb/franz-go.
//
// Client settings, the same for every run and recorded in each result
// (Describe):
//
//   - acks=all and idempotence on (franz-go's defaults, set explicitly): an
//     acknowledged message is on every in-sync replica, at least
//     min.insync.replicas of them, with no duplicates on retry;
//   - linger 5 ms (Kafka 4's Java client default), no compression (payloads
//     are random; compressing would only burn CPU), a 32 MiB send buffer
//     (Java's buffer.memory): when it is full Send blocks, and that wait
//     counts in the publish latency;
//   - one client per producer and per consumer, as the OpenMessaging
//     Benchmark does; consumers join a consumer group per subscription and
//     read from the start of their (new) topic.
//
// Topics get replication factor Config.ReplicationFactor (3) and any topic
// configs given (e.g. flush.messages=1 for fsync before acknowledgement).
// min.insync.replicas comes from the brokers (localstack/kafka.sh sets 2).
package kafkadriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/harness/loadgen"
)

// Defaults of Config.
const (
	DefaultReplicationFactor = 3
	DefaultLinger            = 5 * time.Millisecond
	DefaultMaxBufferedBytes  = 32 << 20
	// TopicReadyTimeout bounds the wait for a new topic's partitions to
	// have leaders with full in-sync replica sets.
	TopicReadyTimeout = time.Minute
)

// Config configures the Kafka driver. Zero values take the defaults above.
type Config struct {
	Brokers           []string          // bootstrap host:port list (required)
	ReplicationFactor int               // of the topics the benchmark creates
	TopicConfigs      map[string]string // extra topic configs, e.g. {"flush.messages": "1"}
	// TxnSize and ReadCommitted are set by SetTransactions (the
	// workload's transactionSize and readCommitted).
	TxnSize          int
	ReadCommitted    bool
	Linger           time.Duration // producer linger
	MaxBufferedBytes int           // producer buffer; Send blocks when full
	Compression      string        // none (default), gzip, snappy, lz4, zstd
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one host:port is required"))
	}
	for _, b := range c.Brokers {
		if _, _, ok := strings.Cut(b, ":"); !ok || strings.TrimSpace(b) != b || b == "" {
			errs = append(errs, fmt.Errorf("brokers: %q is not host:port", b))
		}
	}
	if c.ReplicationFactor < 0 || c.ReplicationFactor > 16 {
		errs = append(errs, fmt.Errorf("replication factor: must be between 1 and 16, got %d", c.ReplicationFactor))
	}
	if c.Linger < 0 || c.Linger > time.Second {
		errs = append(errs, fmt.Errorf("linger: must be between 0 and 1s, got %v", c.Linger))
	}
	if c.MaxBufferedBytes < 0 {
		errs = append(errs, fmt.Errorf("max buffered bytes: must not be negative, got %d", c.MaxBufferedBytes))
	}
	if _, err := codec(c.Compression); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Config) fill() {
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression: must be none, gzip, snappy, lz4 or zstd, got %q", name)
}

// Driver is the Kafka driver: an admin client plus a client per producer
// and consumer it hands out.
type Driver struct {
	cfg   Config
	admin *kgo.Client
}

var (
	_ loadgen.Driver       = (*Driver)(nil)
	_ loadgen.CommitWaiter = (*txnProducer)(nil)
)

// New validates cfg and connects an admin client; it fails when no broker
// answers within ctx.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	admin, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return nil, fmt.Errorf("kafka admin client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := admin.Ping(pctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("kafka: no broker of %s answers: %w", strings.Join(cfg.Brokers, ","), err)
	}
	return &Driver{cfg: cfg, admin: admin}, nil
}

// Name implements loadgen.Driver.
func (d *Driver) Name() string { return "kafka" }

// Close implements loadgen.Driver.
func (d *Driver) Close() error {
	d.admin.Close()
	return nil
}

// CreateTopic implements loadgen.Driver: it creates the topic and waits
// until every partition has a leader and all its replicas in sync.
func (d *Driver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions = int32(partitions)
	t.ReplicationFactor = int16(d.cfg.ReplicationFactor)
	for _, k := range slices.Sorted(maps.Keys(d.cfg.TopicConfigs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		v := d.cfg.TopicConfigs[k]
		c.Value = &v
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, d.admin)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			msg := ""
			if rt.ErrorMessage != nil {
				msg = ": " + *rt.ErrorMessage
			}
			return fmt.Errorf("%w%s", err, msg)
		}
	}
	return d.waitReady(ctx, topic, partitions)
}

// waitReady polls metadata until every partition of topic has a leader and
// a full in-sync replica set, so the run does not start against a topic
// still being placed.
func (d *Driver) waitReady(ctx context.Context, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, TopicReadyTimeout)
	defer cancel()
	var last string
	for {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = &topic
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(ctx, d.admin)
		if err == nil {
			last = readiness(resp, topic, partitions, d.cfg.ReplicationFactor)
			if last == "" {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready after %v: %s", topic, TopicReadyTimeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readiness returns why topic is not ready yet, or "" when it is.
func readiness(resp *kmsg.MetadataResponse, topic string, partitions, rf int) string {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return err.Error()
		}
		if len(t.Partitions) != partitions {
			return fmt.Sprintf("%d of %d partitions in metadata", len(t.Partitions), partitions)
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || kerr.ErrorForCode(p.ErrorCode) != nil {
				return fmt.Sprintf("partition %d has no leader", p.Partition)
			}
			if len(p.ISR) < rf {
				return fmt.Sprintf("partition %d has %d of %d replicas in sync", p.Partition, len(p.ISR), rf)
			}
		}
		return ""
	}
	return "topic not in metadata yet"
}

// DeleteTopic implements loadgen.Driver.
func (d *Driver) DeleteTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 30_000
	req.TopicNames = []string{topic}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = &topic
	req.Topics = append(req.Topics, dt)
	resp, err := req.RequestWith(ctx, d.admin)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

// describedConfigs are the topic configs Describe reports: those that decide
// durability and what an acknowledgement means.
var describedConfigs = []string{
	"min.insync.replicas", "flush.messages", "flush.ms", "unclean.leader.election.enable",
	"segment.bytes", "message.timestamp.type",
}

// Describe implements loadgen.Driver: the client settings and the topic's
// effective durability configs as the brokers report them.
func (d *Driver) Describe(ctx context.Context, topic string) (map[string]string, error) {
	out := map[string]string{
		"client":                    "franz-go",
		"client.acks":               "all",
		"client.idempotence":        "true",
		"client.linger":             d.cfg.Linger.String(),
		"client.compression":        d.cfg.Compression,
		"client.maxBufferedBytes":   strconv.Itoa(d.cfg.MaxBufferedBytes),
		"topic.replicationFactor":   strconv.Itoa(d.cfg.ReplicationFactor),
		"client.producersPerClient": "1",
	}
	if d.cfg.TxnSize > 0 {
		out["client.transactions"] = fmt.Sprintf("a transaction every %d messages (Flush, EndTransaction(TryCommit))", d.cfg.TxnSize)
	}
	if d.cfg.ReadCommitted {
		out["consumer.isolation"] = "read_committed"
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeTopic
	res.ResourceName = topic
	res.ConfigNames = describedConfigs
	req.Resources = append(req.Resources, res)
	// A topic just created may not have reached the broker asked yet
	// (UNKNOWN_TOPIC_OR_PARTITION, retriable): retry for a bounded time.
	var resp *kmsg.DescribeConfigsResponse
	for attempt := 0; ; attempt++ {
		var err error
		resp, err = req.RequestWith(ctx, d.admin)
		if err != nil {
			return nil, err
		}
		var rerr error
		for _, r := range resp.Resources {
			if rerr = kerr.ErrorForCode(r.ErrorCode); rerr != nil {
				break
			}
		}
		if rerr == nil {
			break
		}
		if !kerr.IsRetriable(rerr) || attempt >= 50 {
			return nil, rerr
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, r := range resp.Resources {
		for _, c := range r.Configs {
			v := "null"
			if c.Value != nil {
				v = *c.Value
			}
			out["topic."+c.Name] = v
		}
	}
	return out, nil
}

// SetTransactions implements loadgen.TransactionalDriver.
func (d *Driver) SetTransactions(size int, readCommitted bool) error {
	d.cfg.TxnSize, d.cfg.ReadCommitted = size, readCommitted
	return nil
}

// DebugLogEnv names a file the producers' franz-go clients append their
// debug log to (unset: no log). The file is never closed: a diagnostics
// run's.
const DebugLogEnv = "SLUICE_BENCH_KGO_DEBUG_LOG"

// txnIDs numbers the benchmark's transactional ids within the process.
var txnIDs atomic.Int64

// NewProducer implements loadgen.Driver.
func (d *Driver) NewProducer(ctx context.Context, topic string) (loadgen.Producer, error) {
	comp, _ := codec(d.cfg.Compression) // validated in New
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.cfg.Brokers...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(d.cfg.Linger),
		kgo.ProducerBatchCompression(comp),
		kgo.MaxBufferedBytes(d.cfg.MaxBufferedBytes),
	}
	if d.cfg.TxnSize > 0 {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), txnIDs.Add(1))),
			kgo.TransactionTimeout(time.Minute),
			// Kafka 4 brokers verify a transactional produce against the
			// coordinator and answer CONCURRENT_TRANSACTIONS while the
			// previous transaction's markers are being written; franz-go
			// retries such a batch only after a metadata refresh, which
			// MetadataMinAge (default 5 s) holds back: one batch per
			// transaction then stalled ~5 s (seen in its debug log, see
			// DebugLogEnv). The Java client retries after
			// retry.backoff.ms (100 ms); so does this one now.
			kgo.MetadataMinAge(100*time.Millisecond))
	}
	if path := os.Getenv(DebugLogEnv); path != "" {
		// Diagnostics: franz-go's debug log (every request, every
		// CONCURRENT_TRANSACTIONS retry) for a look at where time goes.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", DebugLogEnv, err)
		}
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelDebug, func() string { return time.Now().UTC().Format("15:04:05.000000 ") })))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka producer client: %w", err)
	}
	if d.cfg.TxnSize > 0 {
		return newTxnProducer(cl, d.cfg.TxnSize), nil
	}
	return &producer{cl: cl}, nil
}

// txnProducer is franz-go's transactional client under
// loadgen.TxnBatcher (a transaction every size messages, committed on the
// sending goroutine: Flush, then EndTransaction), as sluicedriver's.
type txnProducer struct {
	cl *kgo.Client
	b  loadgen.TxnBatcher
}

func newTxnProducer(cl *kgo.Client, size int) *txnProducer {
	return &txnProducer{cl: cl, b: loadgen.TxnBatcher{Size: size, Begin: cl.BeginTransaction, Commit: func(ctx context.Context) error {
		err := cl.Flush(ctx)
		commit := kgo.TryCommit
		if err != nil {
			commit = kgo.TryAbort
		}
		if eerr := cl.EndTransaction(ctx, commit); err == nil {
			err = eerr
		}
		return err
	}}}
}

func (p *txnProducer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	p.b.Send(ctx, func() error {
		p.cl.Produce(ctx, &kgo.Record{Key: key, Value: payload}, nil)
		return nil
	}, done)
}

// CommittingSince implements loadgen.CommitWaiter.
func (p *txnProducer) CommittingSince() (time.Time, bool) { return p.b.CommittingSince() }

func (p *txnProducer) Flush(ctx context.Context) error {
	p.b.Flush(ctx)
	return nil
}

func (p *txnProducer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.b.Flush(ctx)
	p.cl.Close()
	return nil
}

type producer struct{ cl *kgo.Client }

func (p *producer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	p.cl.Produce(ctx, &kgo.Record{Key: key, Value: payload}, func(_ *kgo.Record, err error) { done(err) })
}

func (p *producer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

func (p *producer) Close() error {
	p.cl.Close()
	return nil
}

// NewConsumer implements loadgen.Driver: a group member polling in its own
// goroutine until Close.
func (d *Driver) NewConsumer(_ context.Context, topic, subscription string, deliver func([]byte)) (loadgen.Consumer, error) {
	c := &consumer{}
	count := func(sign int64) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			for _, ps := range m {
				c.assigned.Add(sign * int64(len(ps)))
			}
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(d.cfg.Brokers...),
		kgo.ConsumerGroup(subscription),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolation(d.cfg.ReadCommitted)),
		kgo.OnPartitionsAssigned(count(1)),
		kgo.OnPartitionsRevoked(count(-1)),
		kgo.OnPartitionsLost(count(-1)),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka consumer client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cl, c.cancel = cl, cancel
	c.wg.Go(func() { c.poll(ctx, deliver) })
	return c, nil
}

type consumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	// assigned: partitions assigned minus revoked or lost (the group's
	// callbacks; incremental with the cooperative balancer).
	assigned atomic.Int64
	wg       sync.WaitGroup
	once     sync.Once

	mu       sync.Mutex
	firstErr error // first fetch error, returned by Close
	errs     int
}

func (c *consumer) poll(ctx context.Context, deliver func([]byte)) {
	for {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			c.mu.Lock()
			c.errs++
			if c.firstErr == nil {
				c.firstErr = fmt.Errorf("fetch %s/%d: %w", topic, p, err)
			}
			c.mu.Unlock()
		})
		fs.EachRecord(func(r *kgo.Record) { deliver(r.Value) })
	}
}

// Assigned implements loadgen.AssignmentCounter.
func (c *consumer) Assigned() int { return int(c.assigned.Load()) }

func (c *consumer) Close() error {
	c.once.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.cl.Close()
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstErr != nil {
		return fmt.Errorf("%d fetch errors, first: %w", c.errs, c.firstErr)
	}
	return nil
}

func isolation(readCommitted bool) kgo.IsolationLevel {
	if readCommitted {
		return kgo.ReadCommitted()
	}
	return kgo.ReadUncommitted()
}
