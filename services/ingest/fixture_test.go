package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

// memLedgers is an in-memory ledger client for the service's unit tests
// (the partition writer's tests have a fuller one): metadata lives in the
// real embedded catalog, entries in memory. Acknowledgements come on one
// goroutine of its own, in entry order, at once or when the test releases
// them (hold). Recover fences a ledger as another copy's takeover does: it
// keeps what was acknowledged, seals the ledger in the catalog, and its
// writer's later appends (and the answers still due to it) fail with
// partition.ErrFenced.
type memLedgers struct {
	cat  catalog.Ledgers
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	ledgers map[catalog.LedgerID]*memLedger
	hold    bool
	queue   []func() // answers due, in the order the entries were sent
	// onCreate, if set, runs before CreateLedger does.
	onCreate func()
}

type memLedger struct {
	m       *memLedgers
	id      catalog.LedgerID
	first   int64
	entries [][]byte
	acked   int
	fenced  bool
	failed  error
	sealed  bool
}

func newMemLedgers(t *testing.T, cat catalog.Ledgers) *memLedgers {
	m := &memLedgers{cat: cat, ledgers: map[catalog.LedgerID]*memLedger{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-m.wake:
				m.answer()
			}
		}
	}()
	t.Cleanup(func() { close(m.stop); <-m.done })
	return m
}

// answer delivers the answers due unless they are held.
func (m *memLedgers) answer() {
	m.mu.Lock()
	if m.hold {
		m.mu.Unlock()
		return
	}
	run := m.queue
	m.queue = nil
	m.mu.Unlock()
	for _, f := range run {
		f()
	}
}

// setHold holds the answers (true) or releases them and those to come.
func (m *memLedgers) setHold(hold bool) {
	m.mu.Lock()
	m.hold = hold
	m.mu.Unlock()
	m.kick()
}

func (m *memLedgers) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// fail makes ledger id fail its entries not yet acknowledged (a bookie
// write failure the writer recovers from), and releases the answers.
func (m *memLedgers) fail(id catalog.LedgerID) {
	m.mu.Lock()
	m.ledgers[id].failed = errors.New("add failed: not enough bookies")
	m.hold = false
	m.mu.Unlock()
	m.kick()
}

// tail returns the newest ledger's id.
func (m *memLedgers) tail() catalog.LedgerID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var id catalog.LedgerID
	for l := range m.ledgers {
		id = max(id, l)
	}
	return id
}

func (m *memLedgers) CreateLedger(ctx context.Context, spec catalog.LedgerSpec) (partition.Ledger, error) {
	m.mu.Lock()
	hook := m.onCreate
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	for i := range spec.Replication.Ensemble {
		spec.Ensemble = append(spec.Ensemble, fmt.Sprintf("bookie-%d:3181", i))
	}
	md, err := m.cat.CreateLedger(ctx, spec)
	if err != nil {
		return nil, err
	}
	l := &memLedger{m: m, id: md.ID, first: spec.FirstOffset}
	m.mu.Lock()
	m.ledgers[l.id] = l
	m.mu.Unlock()
	return l, nil
}

func (m *memLedgers) Recover(ctx context.Context, id catalog.LedgerID, lastOffset func(int64, []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	m.mu.Lock()
	l := m.ledgers[id]
	l.fenced = true
	l.entries = l.entries[:l.acked] // a real recovery may keep more
	entries := l.entries
	m.mu.Unlock()
	last := l.first - 1
	if n := len(entries); n > 0 {
		var err error
		if last, err = lastOffset(int64(n-1), entries[n-1]); err != nil {
			return catalog.LedgerMetadata{}, err
		}
	}
	return m.seal(ctx, l, int64(len(entries)-1), last)
}

// seal closes the ledger's catalog record (once).
func (m *memLedgers) seal(ctx context.Context, l *memLedger, lastEntry, lastOffset int64) (catalog.LedgerMetadata, error) {
	md, err := m.cat.GetLedger(ctx, l.id)
	if err != nil || md.State.Sealed() {
		return md, err
	}
	md.State, md.LastEntry, md.LastOffset = catalog.LedgerClosed, lastEntry, lastOffset
	md, err = m.cat.UpdateLedger(ctx, md)
	if err == nil {
		m.mu.Lock()
		l.sealed = true
		m.mu.Unlock()
	}
	return md, err
}

func (m *memLedgers) ReadEntries(_ context.Context, id catalog.LedgerID, first, last int64) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ledgers[id].entries[first : last+1], nil
}

func (l *memLedger) ID() catalog.LedgerID { return l.id }

func (l *memLedger) LeavingBookies(context.Context) ([]string, error) { return nil, nil }

func (l *memLedger) AppendAsync(payload []byte, done func(int64, error)) error {
	m := l.m
	m.mu.Lock()
	if l.fenced {
		m.mu.Unlock()
		return fmt.Errorf("ledger %d: %w", l.id, partition.ErrFenced)
	}
	if l.failed != nil || l.sealed {
		m.mu.Unlock()
		return fmt.Errorf("ledger %d is closed or failed", l.id)
	}
	entry := int64(len(l.entries))
	l.entries = append(l.entries, append([]byte(nil), payload...))
	m.queue = append(m.queue, func() {
		m.mu.Lock()
		var err error
		switch {
		case l.fenced:
			err = fmt.Errorf("ledger %d: %w", l.id, partition.ErrFenced)
		case l.failed != nil:
			err = l.failed
		default:
			l.acked++
		}
		m.mu.Unlock()
		done(entry, err)
	})
	m.mu.Unlock()
	m.kick()
	return nil
}

func (l *memLedger) Close(ctx context.Context, lastOffset int64) (catalog.LedgerMetadata, error) {
	l.m.mu.Lock()
	fenced := l.fenced
	n := len(l.entries)
	l.m.mu.Unlock()
	if fenced {
		return catalog.LedgerMetadata{}, fmt.Errorf("ledger %d: %w", l.id, partition.ErrFenced)
	}
	return l.m.seal(ctx, l, int64(n-1), lastOffset)
}

// fixture is a topic in an embedded catalog over memLedgers, for ingest
// copies made with copyOf.
type fixture struct {
	t       *testing.T
	cat     *catalog.Catalog
	ledgers *memLedgers
	topic   catalog.Topic
	// meters, if set, receives the copies' metrics.
	meters metric.MeterProvider
}

// newFixture creates topic "t" with the given partitions. The test fails
// if a goroutine started after it is still running once the copies shut
// down (their cleanups run first).
func newFixture(t *testing.T, partitions int) *fixture {
	t.Helper()
	before := goleak.IgnoreCurrent()
	cat, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cat.Close()
		if !t.Failed() {
			goleak.VerifyNone(t, before)
		}
	})
	tp, err := cat.CreateTopic(context.Background(), "t", partitions, catalog.DefaultTopicConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, cat: cat, ledgers: newMemLedgers(t, cat), topic: tp}
}

// copyOf returns an ingest copy whose heartbeat is live; it does not Run
// (no balancing rounds but those the test calls). Its cleanup shuts it
// down.
func (f *fixture) copyOf(id string, mod func(*Config)) *Service {
	f.t.Helper()
	return f.copyWith(id, f.cat, mod)
}

// copyWith is copyOf over cat (the fixture's catalog, wrapped).
func (f *fixture) copyWith(id string, cat Catalog, mod func(*Config)) *Service {
	f.t.Helper()
	cfg := Config{OwnerID: id, Address: id + ".test:9092", BalanceInterval: time.Second, OpenTimeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg, Deps{Catalog: cat, Ledgers: f.ledgers, Forward: unreachable, Meters: f.meters})
	if err != nil {
		f.t.Fatal(err)
	}
	f.beat(s)
	f.t.Cleanup(func() {
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if !closing {
			_ = s.shutdown()
		}
	})
	return s
}

// beat renews the copy's owner record (Run's heartbeat).
func (f *fixture) beat(s *Service) {
	f.t.Helper()
	if _, err := f.cat.HeartbeatOwner(context.Background(), s.cfg.OwnerID, s.cfg.Address, s.cfg.OwnerTTL); err != nil {
		f.t.Fatal(err)
	}
	s.beatOnce.Do(func() { close(s.heartbeatOK) })
}

// expire removes the copy's owner record, as if its heartbeat had lapsed
// (a pause longer than OwnerTTL): other copies may take its partitions.
func (f *fixture) expire(s *Service) {
	f.t.Helper()
	if err := f.cat.RemoveOwner(context.Background(), s.cfg.OwnerID); err != nil {
		f.t.Fatal(err)
	}
}

// produce sends one record to partition p through s (Produce).
func (f *fixture) produce(s *Service, p int) (*sluicev1.ProduceResponse, error) {
	p32 := int32(p)
	resp, err := s.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{
		Topic: f.topic.Name, Partition: &p32, Records: []*sluicev1.Record{{Value: []byte("v")}}}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// writerOf returns the writer s runs for partition p, or nil.
func writerOf(s *Service, topic catalog.TopicID, p int) *partition.Writer {
	s.mu.Lock()
	sl := s.writers[slotKey{topic, p}]
	s.mu.Unlock()
	if sl == nil {
		return nil
	}
	<-sl.ready
	return sl.w
}

// unreachable is Deps.Forward for tests that forward nothing.
func unreachable(string) sluicev1connect.ProducerServiceClient {
	return sluicev1connect.NewProducerServiceClient(http.DefaultClient, "http://127.0.0.1:1")
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// hookedCatalog runs a hook before GetPartition and RemoveOwner, so a test
// can hold a call at a point of a race.
type hookedCatalog struct {
	Catalog
	getPartition, removeOwner, getTopic func()
}

func (h *hookedCatalog) GetTopic(ctx context.Context, name string) (catalog.Topic, error) {
	if h.getTopic != nil {
		h.getTopic()
	}
	return h.Catalog.GetTopic(ctx, name)
}

func (h *hookedCatalog) GetPartition(ctx context.Context, topic string, p int) (catalog.Partition, error) {
	if h.getPartition != nil {
		h.getPartition()
	}
	return h.Catalog.GetPartition(ctx, topic, p)
}

func (h *hookedCatalog) RemoveOwner(ctx context.Context, id string) error {
	if h.removeOwner != nil {
		h.removeOwner()
	}
	return h.Catalog.RemoveOwner(ctx, id)
}

// pause returns a hook that, the first time it runs, signals reached and
// waits for resume.
func pause(reached, resume chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			close(reached)
			<-resume
		})
	}
}
