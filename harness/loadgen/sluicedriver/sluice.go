// Package sluicedriver is the load generator's Sluice driver: topics through
// AdminService, producers through the Go SDK (pkg/sluice: idempotent,
// batching, one ProduceStream per producer), and consumers as consumer
// group members over the generated ConsumerService client (Subscribe with
// credits, GrantCredits keepalive, Commit with lease epochs, reconnect; see
// consumer.go). The consumers speak the protocol directly rather than
// through an SDK consumer, so the benchmark measures the service and a
// minimal client, and the driver does not move with the SDK's API.
package sluicedriver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// Config configures the driver.
type Config struct {
	// Addr is an ingest copy's (or sluice dev's) address: producers and
	// topic administration.
	Addr string
	// FetchAddr is a fetch copy's address for the consumers (empty: Addr,
	// as with sluice dev, which serves everything on one address).
	FetchAddr string
	// TLS, when set, has every client (the SDK's producers and admin
	// calls, the consumers', the schema registry's) reach the server over
	// https with this configuration (its RootCAs check the server's
	// certificate); a host:port address is then https. Nil: cleartext
	// HTTP/2 (h2c), as sluice dev serves by default.
	TLS *tls.Config
	// Token, when set, is sent as a bearer token (Authorization: Bearer)
	// on every call, producers', consumers' and admin's alike: a JWT for a
	// server with --auth required. It goes only over TLS or to a loopback
	// address.
	Token string
	// Linger and BatchBytes are the SDK producer's batching settings
	// (zero: the SDK's defaults).
	Linger     time.Duration
	BatchBytes int

	// CreditRecords and CreditBytes are each consumer's credit window: how
	// far the server may send ahead of what the consumer has delivered.
	// Zero means DefaultCreditRecords, DefaultCreditBytes.
	CreditRecords int64
	CreditBytes   int64
	// ReadyTimeout bounds CreateTopic's wait for every partition to have a
	// writer (zero: DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// CommitInterval is how often consumers commit their delivered offsets
	// (zero: DefaultCommitInterval).
	CommitInterval time.Duration
	// SessionTimeout is the consumers' group session timeout (zero: the
	// server's default).
	SessionTimeout time.Duration
	// SlowBatch, when positive, logs (to SlowLog, at most once a second)
	// produce batches acknowledged more than this long after their first
	// record was produced, with how long they waited before being sent:
	// where a publish tail comes from.
	SlowBatch time.Duration
	SlowLog   io.Writer
	// PerRecord has the consumers ask for one message per record (what
	// browsers and JSON clients get) instead of the stored record batches
	// the Go SDK reads.
	PerRecord bool
	// Schema, when SchemaAvro, has every value validated at produce: each
	// topic is created with schema.subject (AvroSchema registered under
	// SubjectOf(topic) first) and every value sent as one datum of it in
	// Confluent's wire format, of the message size in total (schema.go).
	// Empty: values are the load generator's payloads as they are.
	Schema string
	// TxnSize and ReadCommitted are set by SetTransactions (the
	// workload's transactionSize and readCommitted).
	TxnSize       int
	ReadCommitted bool
}

// Consumer defaults and limits.
const (
	DefaultCreditRecords  = 10_000
	DefaultCreditBytes    = 64 << 20
	DefaultCommitInterval = time.Second
	DefaultReadyTimeout   = 5 * time.Minute
	MaxCreditRecords      = 1_000_000
	MaxCreditBytes        = 1 << 30
)

func (c Config) withDefaults() Config {
	if c.CreditRecords == 0 {
		c.CreditRecords = DefaultCreditRecords
	}
	if c.CreditBytes == 0 {
		c.CreditBytes = DefaultCreditBytes
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	return c
}

// Validate reports every field out of range.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("sluice driver: Addr is required"))
	}
	if c.CreditRecords < 0 || c.CreditRecords > MaxCreditRecords {
		errs = append(errs, fmt.Errorf("sluice driver: CreditRecords %d is outside [0, %d]", c.CreditRecords, MaxCreditRecords))
	}
	if c.CreditBytes < 0 || c.CreditBytes > MaxCreditBytes {
		errs = append(errs, fmt.Errorf("sluice driver: CreditBytes %d is outside [0, %d]", c.CreditBytes, MaxCreditBytes))
	}
	if c.CommitInterval < 0 || c.CommitInterval > time.Minute {
		errs = append(errs, fmt.Errorf("sluice driver: CommitInterval %v is outside [0, 1m]", c.CommitInterval))
	}
	if c.ReadyTimeout < 0 || c.ReadyTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("sluice driver: ReadyTimeout %v is outside [0, 1h]", c.ReadyTimeout))
	}
	if c.Schema != "" && c.Schema != SchemaAvro {
		errs = append(errs, fmt.Errorf("sluice driver: Schema %q: want empty (none) or %q", c.Schema, SchemaAvro))
	}
	if c.SessionTimeout != 0 && (c.SessionTimeout < time.Second || c.SessionTimeout > 300*time.Second) {
		errs = append(errs, fmt.Errorf("sluice driver: SessionTimeout %v is outside [1s, 300s]", c.SessionTimeout))
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		errs = append(errs, errors.New("sluice driver: Token has white space (want the token alone, without \"Bearer \")"))
	}
	if c.TLS != nil {
		for _, a := range []string{c.Addr, c.FetchAddr} {
			if strings.HasPrefix(a, "http://") {
				errs = append(errs, fmt.Errorf("sluice driver: address %s is cleartext, but TLS is set: want https:// or host:port", a))
			}
		}
	}
	if c.Token != "" {
		for _, a := range []string{c.Addr, c.FetchAddr} {
			if a == "" {
				continue
			}
			if err := sluice.CheckTokenTransport(c.baseURL(a)); err != nil {
				errs = append(errs, fmt.Errorf("sluice driver: Token: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Driver implements loadgen.Driver.
type Driver struct {
	cfg  Config
	c    *sluice.Client
	http *http.Client // the consumers'
	cons sluicev1connect.ConsumerServiceClient
	// schemas registers the values' schema (Config.Schema).
	schemas sluicev1connect.SchemaServiceClient

	mu        sync.Mutex
	schemaIDs map[string]int64 // topic → its values' schema id (Config.Schema); guarded by mu
}

var (
	_ loadgen.Driver       = (*Driver)(nil)
	_ loadgen.CommitWaiter = (*txnProducer)(nil)
)

// New connects to addr.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c, err := sluice.NewClient(cfg.Addr, cfg.clientOptions()...)
	if err != nil {
		return nil, err
	}
	base := cfg.baseURL(cfg.Addr)
	if cfg.FetchAddr != "" {
		base = cfg.baseURL(cfg.FetchAddr)
	}
	hc := h2Client(cfg.TLS)
	copts := []connect.ClientOption{connect.WithGRPC()}
	if tok := cfg.Token; tok != "" {
		copts = append(copts, connect.WithInterceptors(sluice.BearerInterceptor(func(context.Context) (string, error) { return tok, nil })))
	}
	return &Driver{cfg: cfg, c: c, http: hc, schemaIDs: map[string]int64{},
		schemas: sluicev1connect.NewSchemaServiceClient(hc, cfg.baseURL(cfg.Addr), copts...),
		cons: sluicev1connect.NewConsumerServiceClient(hc, base, append(copts, connect.WithReadMaxBytes(maxFrameBytes),
			// No gzip: the producers send uncompressed (as the Kafka
			// driver's), and gzip of the load generator's random payloads
			// costs the server CPU for nothing.
			connect.WithAcceptCompression("gzip", nil, nil))...)}, nil
}

// clientOptions are the SDK client's options: TLS and the token.
func (c Config) clientOptions() []sluice.ClientOption {
	var opts []sluice.ClientOption
	if c.TLS != nil {
		opts = append(opts, sluice.WithTLS(c.TLS))
	}
	if c.Token != "" {
		opts = append(opts, sluice.WithToken(c.Token))
	}
	return opts
}

// baseURL is addr as a URL: a host:port is https with TLS, else http
// (as the SDK's NewClient reads it).
func (c Config) baseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	if c.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// h2Client speaks HTTP/2 (gRPC needs it): over TLS with cfg for https://
// addresses, cleartext (h2c) for http://, as the SDK's default client
// does; every consumer of the driver shares its connection.
func h2Client(cfg *tls.Config) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	if cfg != nil {
		cfg = cfg.Clone()
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     cfg,
		Protocols:           &p,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: 15 * time.Second, PingTimeout: 15 * time.Second},
	}}
}

// Name implements loadgen.Driver.
func (d *Driver) Name() string { return "sluice" }

// CreateTopic implements loadgen.Driver: E3/Qw3/Qa2 (the default
// replication), fsync before every acknowledgement.
//
// It returns once every partition has a writer (an ingest copy holds its
// lease and opened a ledger), as a Kafka topic is ready once its partitions
// have leaders: otherwise the first seconds of a run measure takeovers (a
// few catalog round trips each), not produce. Bounded by ReadyTimeout.
//
// With Config.Schema it registers the values' schema first and creates
// the topic with schema.subject.
func (d *Driver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	var config map[string]string
	if d.cfg.Schema != "" {
		id, err := d.registerSchema(ctx, topic)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.schemaIDs[topic] = id
		d.mu.Unlock()
		config = map[string]string{topicSchemaSubject: SubjectOf(topic)}
	}
	if _, err := d.c.CreateTopic(ctx, topic, int32(partitions), config); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	// Each poll lists every partition: with many partitions, poll less often
	// so the wait itself does not load the catalog the takeovers need.
	t := time.NewTicker(min(2*time.Second, max(250*time.Millisecond, time.Duration(partitions)*2*time.Millisecond)))
	defer t.Stop()
	owned := 0
	for {
		info, err := d.c.DescribeTopic(wctx, topic)
		if err == nil {
			owned = 0
			for _, p := range info.GetPartitions() {
				if p.GetOwner() != "" {
					owned++
				}
			}
			if owned == partitions {
				return nil
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("topic %s: %d of %d partitions have a writer after %v (is an ingest copy running? see its log)", topic, owned, partitions, d.cfg.ReadyTimeout)
		case <-t.C:
		}
	}
}

// DeleteTopic implements loadgen.Driver.
func (d *Driver) DeleteTopic(ctx context.Context, topic string) error {
	return d.c.DeleteTopic(ctx, topic)
}

// Describe implements loadgen.Driver.
func (d *Driver) Describe(ctx context.Context, topic string) (map[string]string, error) {
	t, err := d.c.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	// Zero settings are the SDK's defaults: report what is in effect.
	linger, batchBytes := d.cfg.Linger, d.cfg.BatchBytes
	if linger <= 0 {
		linger = sluice.DefaultLinger
	}
	if batchBytes <= 0 {
		batchBytes = sluice.DefaultBatchBytes
	}
	out := map[string]string{
		"client":             "pkg/sluice",
		"client.idempotence": "true",
		"client.compression": "none",
		"client.linger":      linger.String(),
		"client.batchBytes":  strconv.Itoa(batchBytes),
		"server.ack":         "after fsync on the ack quorum of bookies",
		"consumer":           "ConsumerService.Subscribe group session (generated Connect client, gRPC)",
		"consumer.credits":   fmt.Sprintf("%d records / %d bytes, returned at half", d.cfg.CreditRecords, d.cfg.CreditBytes),
		"consumer.commit":    "every " + d.cfg.CommitInterval.String() + ", with lease epochs",
		"topic.partitions":   strconv.Itoa(len(t.GetPartitions())),
	}
	if d.cfg.TLS != nil {
		out["client.transport"] = "TLS (https, HTTP/2), the server's certificate checked"
	} else {
		out["client.transport"] = "cleartext HTTP/2 (h2c)"
	}
	if d.cfg.Token != "" {
		out["client.auth"] = "bearer token (Authorization: Bearer) on every call"
	}
	if d.cfg.TxnSize > 0 {
		out["producer.transactions"] = fmt.Sprintf("a transaction every %d messages (TransactionalProducer: its first partition added ahead, records held to the commit, then flush, EndTxn)", d.cfg.TxnSize)
	}
	if d.cfg.ReadCommitted {
		out["consumer.isolation"] = "read_committed"
	}
	if d.cfg.Schema != "" {
		d.mu.Lock()
		id := d.schemaIDs[topic]
		d.mu.Unlock()
		out["client.schema"] = fmt.Sprintf("%s: %s under subject %s (id %d); each value one datum of it in Confluent's wire format, the message size in total (5-byte frame, the data's length, the payload cut to fit)",
			d.cfg.Schema, AvroSchema, SubjectOf(topic), id)
	}
	for k, v := range t.GetConfig() {
		out["topic."+k] = v
	}
	return out, nil
}

// SetTransactions implements loadgen.TransactionalDriver.
func (d *Driver) SetTransactions(size int, readCommitted bool) error {
	d.cfg.TxnSize, d.cfg.ReadCommitted = size, readCommitted
	return nil
}

// NewProducer implements loadgen.Driver.
func (d *Driver) NewProducer(ctx context.Context, topic string) (loadgen.Producer, error) {
	f, err := d.framer(topic)
	if err != nil {
		return nil, err
	}
	if d.cfg.TxnSize > 0 {
		return newTxnProducer(ctx, d.c, topic, d.cfg.TxnSize, d.cfg.Linger, f)
	}
	// No compression, as the Kafka driver: the load generator reuses one
	// random payload per producer, so batches of it compress far better
	// than real data would, and the comparison would measure that.
	opts := []sluice.ProducerOption{sluice.WithCompression(record.CodecNone)}
	if d.cfg.Linger > 0 {
		opts = append(opts, sluice.WithLinger(d.cfg.Linger))
	}
	if d.cfg.BatchBytes > 0 {
		opts = append(opts, sluice.WithBatchBytes(d.cfg.BatchBytes))
	}
	if d.cfg.SlowBatch > 0 && d.cfg.SlowLog != nil {
		opts = append(opts, sluice.WithHooks(newSlowBatches(d.cfg.SlowBatch, d.cfg.SlowLog).hooks()))
	}
	p, err := d.c.NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	return &producer{p: p, topic: topic, f: f}, nil
}

// NewConsumer implements loadgen.Driver: a member of consumer group
// subscription, starting at the earliest offset where the group has no
// commit. It returns once the session is open (SessionStarted); records
// follow as the server assigns partitions. With Config.Schema, deliver gets
// each value's data without the frame: the load generator's payload.
func (d *Driver) NewConsumer(ctx context.Context, topic, subscription string, deliver func([]byte)) (loadgen.Consumer, error) {
	if d.cfg.Schema != "" {
		inner := deliver
		deliver = func(v []byte) { inner(unframe(v)) }
	}
	c := newConsumer(d.cfg, d.cons, topic, subscription, deliver)
	if err := c.start(ctx); err != nil {
		return nil, fmt.Errorf("sluice driver: %w", err)
	}
	return c, nil
}

// Close implements loadgen.Driver. Close the consumers first.
func (d *Driver) Close() error {
	d.http.CloseIdleConnections()
	return d.c.Close()
}

type producer struct {
	p     *sluice.Producer
	topic string
	f     *avroFramer // nil: payloads as they are
}

func (p *producer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	if p.f == nil {
		p.p.Produce(ctx, &sluice.Record{Topic: p.topic, Partition: -1, Key: key, Value: payload}, func(r sluice.Result) { done(r.Err) })
		return
	}
	v, err := p.f.frame(payload)
	if err != nil {
		done(err)
		return
	}
	p.p.Produce(ctx, &sluice.Record{Topic: p.topic, Partition: -1, Key: key, Value: *v}, func(r sluice.Result) {
		p.f.release(v)
		done(r.Err)
	})
}

func (p *producer) Flush(ctx context.Context) error { return p.p.Flush(ctx) }

func (p *producer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.p.Close(ctx)
}

// txnProducer is a transactional producer of the benchmark: the SDK's
// TransactionalProducer under loadgen.TxnBatcher (a transaction every size
// messages, committed on the sending goroutine).
type txnProducer struct {
	p     *sluice.TransactionalProducer
	topic string
	b     loadgen.TxnBatcher
	f     *avroFramer // nil: payloads as they are
}

// txnIDs numbers the benchmark's transactional ids within the process.
var txnIDs atomic.Int64

func newTxnProducer(ctx context.Context, c *sluice.Client, topic string, size int, linger time.Duration, f *avroFramer) (*txnProducer, error) {
	id := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), txnIDs.Add(1))
	opts := []sluice.TxnOption{sluice.WithTxnCompression(record.CodecNone)}
	if linger > 0 { // a workload's explicit linger writes ahead; else the SDK's default, none
		opts = append(opts, sluice.WithTxnLinger(linger))
	}
	p, err := c.NewTransactionalProducer(ctx, id, opts...)
	if err != nil {
		return nil, err
	}
	tp := &txnProducer{p: p, topic: topic, f: f}
	tp.b = loadgen.TxnBatcher{Size: size, Begin: p.Begin, Commit: func(ctx context.Context) error {
		err := p.Commit(ctx)
		if err != nil {
			_ = p.Abort(ctx)
		}
		return err
	}}
	return tp, nil
}

func (p *txnProducer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	if p.f == nil {
		p.b.Send(ctx, func() error {
			return p.p.Send(ctx, &sluice.Record{Topic: p.topic, Partition: sluice.AnyPartition, Key: key, Value: payload})
		}, done)
		return
	}
	v, err := p.f.frame(payload)
	if err != nil {
		done(err)
		return
	}
	p.b.Send(ctx, func() error {
		return p.p.Send(ctx, &sluice.Record{Topic: p.topic, Partition: sluice.AnyPartition, Key: key, Value: *v})
	}, func(err error) {
		p.f.release(v)
		done(err)
	})
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
	return p.p.Close(ctx)
}
