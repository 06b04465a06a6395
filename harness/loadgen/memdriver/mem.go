// Package memdriver is an in-process loadgen.Driver: topics are channels,
// sends are acknowledged at once, and every subscription of a topic gets a
// copy of every message. It measures the load generator itself (its CPU
// and latency floor, with no network and no storage), and lets the harness
// be tested and smoke-run without any server.
package memdriver

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/sluicemq/sluice/harness/loadgen"
)

// QueueLength is how many messages a subscription buffers before Send blocks.
const QueueLength = 1 << 16

// Driver is the in-memory driver. The zero value is not usable; call New.
type Driver struct {
	mu     sync.Mutex
	topics map[string]*topic
}

type topic struct {
	partitions int
	mu         sync.Mutex
	subs       map[string]chan []byte // subscription -> its queue, shared by its consumers
}

// New returns an empty in-memory driver.
func New() *Driver { return &Driver{topics: map[string]*topic{}} }

var _ loadgen.Driver = (*Driver)(nil)

// Name implements loadgen.Driver.
func (d *Driver) Name() string { return "mem" }

// CreateTopic implements loadgen.Driver.
func (d *Driver) CreateTopic(_ context.Context, name string, partitions int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.topics[name]; ok {
		return fmt.Errorf("topic %s exists", name)
	}
	d.topics[name] = &topic{partitions: partitions, subs: map[string]chan []byte{}}
	return nil
}

// DeleteTopic implements loadgen.Driver.
func (d *Driver) DeleteTopic(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.topics, name)
	return nil
}

func (d *Driver) topic(name string) (*topic, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[name]
	if !ok {
		return nil, fmt.Errorf("no topic %s", name)
	}
	return t, nil
}

// Describe implements loadgen.Driver.
func (d *Driver) Describe(_ context.Context, name string) (map[string]string, error) {
	t, err := d.topic(name)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"partitions":  strconv.Itoa(t.partitions),
		"durability":  "none (in-process loopback; acknowledged on send)",
		"queueLength": strconv.Itoa(QueueLength),
	}, nil
}

// NewProducer implements loadgen.Driver.
func (d *Driver) NewProducer(_ context.Context, name string) (loadgen.Producer, error) {
	t, err := d.topic(name)
	if err != nil {
		return nil, err
	}
	return &producer{t: t}, nil
}

// NewConsumer implements loadgen.Driver. Messages sent before the first
// consumer of a subscription joins are not delivered to it.
func (d *Driver) NewConsumer(_ context.Context, name, subscription string, deliver func([]byte)) (loadgen.Consumer, error) {
	t, err := d.topic(name)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	q, ok := t.subs[subscription]
	if !ok {
		q = make(chan []byte, QueueLength)
		t.subs[subscription] = q
	}
	t.mu.Unlock()
	c := &consumer{stop: make(chan struct{})}
	c.wg.Go(func() {
		for {
			select {
			case <-c.stop:
				return
			case m := <-q:
				deliver(m)
			}
		}
	})
	return c, nil
}

// Close implements loadgen.Driver.
func (d *Driver) Close() error { return nil }

type producer struct{ t *topic }

// Send copies payload to every subscription's queue, blocking while one is
// full, and acknowledges at once.
func (p *producer) Send(ctx context.Context, _, payload []byte, done func(error)) {
	p.t.mu.Lock()
	queues := make([]chan []byte, 0, len(p.t.subs))
	for _, q := range p.t.subs {
		queues = append(queues, q)
	}
	p.t.mu.Unlock()
	for _, q := range queues {
		m := append([]byte(nil), payload...)
		select {
		case q <- m:
		case <-ctx.Done():
			done(ctx.Err())
			return
		}
	}
	done(nil)
}

func (p *producer) Flush(context.Context) error { return nil }
func (p *producer) Close() error                { return nil }

type consumer struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func (c *consumer) Close() error {
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
	return nil
}
