// Package sluicedriver is the load generator's Sluice driver: topics through
// AdminService, producers through the Go SDK (pkg/sluice: idempotent,
// batching, one ProduceStream per producer). Consumers are not available
// until the fetch service exists; workloads for Sluice are produce-only
// (subscriptionsPerTopic: 0) until then.
package sluicedriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/loadgen"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// Config configures the driver.
type Config struct {
	// Addr is an ingest copy's (or sluice dev's) address.
	Addr string
	// Linger and BatchBytes are the SDK producer's batching settings
	// (zero: the SDK's defaults).
	Linger     time.Duration
	BatchBytes int
}

// Driver implements loadgen.Driver.
type Driver struct {
	cfg Config
	c   *sluice.Client
}

var _ loadgen.Driver = (*Driver)(nil)

// New connects to addr.
func New(cfg Config) (*Driver, error) {
	if cfg.Addr == "" {
		return nil, errors.New("sluice driver: Addr is required")
	}
	c, err := sluice.NewClient(cfg.Addr)
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, c: c}, nil
}

// Name implements loadgen.Driver.
func (d *Driver) Name() string { return "sluice" }

// CreateTopic implements loadgen.Driver: E3/Qw3/Qa2 (the default
// replication), fsync before every acknowledgement.
func (d *Driver) CreateTopic(ctx context.Context, topic string, partitions int) error {
	_, err := d.c.CreateTopic(ctx, topic, int32(partitions), nil)
	return err
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
	out := map[string]string{
		"client":             "pkg/sluice",
		"client.idempotence": "true",
		"client.compression": "none",
		"client.linger":      d.cfg.Linger.String(),
		"client.batchBytes":  strconv.Itoa(d.cfg.BatchBytes),
		"server.ack":         "after fsync on the ack quorum of bookies",
		"topic.partitions":   strconv.Itoa(len(t.GetPartitions())),
	}
	for k, v := range t.GetConfig() {
		out["topic."+k] = v
	}
	return out, nil
}

// NewProducer implements loadgen.Driver.
func (d *Driver) NewProducer(_ context.Context, topic string) (loadgen.Producer, error) {
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
	p, err := d.c.NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	return &producer{p: p, topic: topic}, nil
}

// NewConsumer implements loadgen.Driver: not available yet.
func (d *Driver) NewConsumer(context.Context, string, string, func([]byte)) (loadgen.Consumer, error) {
	return nil, fmt.Errorf("sluice driver: consuming needs the fetch service, which is not built yet; use a produce-only workload (subscriptionsPerTopic: 0)")
}

// Close implements loadgen.Driver.
func (d *Driver) Close() error { return d.c.Close() }

type producer struct {
	p     *sluice.Producer
	topic string
}

func (p *producer) Send(ctx context.Context, key, payload []byte, done func(error)) {
	p.p.Produce(ctx, &sluice.Record{Topic: p.topic, Partition: -1, Key: key, Value: payload}, func(r sluice.Result) { done(r.Err) })
}

func (p *producer) Flush(ctx context.Context) error { return p.p.Flush(ctx) }

func (p *producer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.p.Close(ctx)
}
