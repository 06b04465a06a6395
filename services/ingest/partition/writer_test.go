package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest/dedup"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memLedgers is an in-memory model of the ledger client, for the writer's
// unit tests: entries are acknowledged when the test releases them (or at
// once), failures are injected per ledger. The real client is exercised by
// the ingest service's tests with real bookies.
type memLedgers struct {
	releaseMu sync.Mutex // one release at a time, so answers stay in order
	wake      chan struct{}
	stop      chan struct{}
	stopped   chan struct{}

	mu      sync.Mutex
	nextID  catalog.LedgerID
	ledgers map[catalog.LedgerID]*memLedger
	hold    bool // acknowledge only on release()
	failNew error
	// failRecover: Recover fails this many more times.
	failRecover int
	// createdAfterUnsealed: a ledger was created while an earlier one was
	// not sealed.
	createdAfterUnsealed bool
	// draining: the ledgers (by id) LeavingBookies says name a draining
	// bookie.
	draining map[catalog.LedgerID]bool
}

type memLedger struct {
	m       *memLedgers
	id      catalog.LedgerID
	first   int64
	entries [][]byte // stored (acknowledged or not)
	acked   int
	pending []func()
	sealed  bool
	last    int64
	failed  error
}

// newMemLedgers starts the model's acknowledging goroutine (answers never
// come on the appender's goroutine, as with the real client); the test's
// cleanup stops it.
func newMemLedgers(t testing.TB) *memLedgers {
	m := &memLedgers{nextID: 1, ledgers: map[catalog.LedgerID]*memLedger{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(m.stopped)
		for {
			select {
			case <-m.stop:
				return
			case <-m.wake:
				m.mu.Lock()
				hold := m.hold
				m.mu.Unlock()
				if !hold {
					m.release()
				}
			}
		}
	}()
	t.Cleanup(func() { close(m.stop); <-m.stopped })
	return m
}

func (m *memLedgers) CreateLedger(_ context.Context, spec catalog.LedgerSpec) (Ledger, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failNew != nil {
		return nil, m.failNew
	}
	for _, o := range m.ledgers {
		if !o.sealed {
			m.createdAfterUnsealed = true
		}
	}
	l := &memLedger{m: m, id: m.nextID, first: spec.FirstOffset, last: spec.FirstOffset - 1}
	m.ledgers[l.id] = l
	m.nextID++
	return l, nil
}

func (m *memLedgers) Recover(_ context.Context, id catalog.LedgerID, lastOffset func(int64, []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failRecover > 0 {
		m.failRecover--
		return catalog.LedgerMetadata{}, errors.New("recovery failed: fencing failed on 2 bookies")
	}
	l := m.ledgers[id]
	if !l.sealed {
		// Keep what was acknowledged (a real recovery may keep more).
		l.entries, l.pending, l.sealed = l.entries[:l.acked], nil, true
		l.failed = errors.New("fenced by recovery")
		l.last = l.first - 1
		if n := len(l.entries); n > 0 {
			last, err := lastOffset(int64(n-1), l.entries[n-1])
			if err != nil {
				return catalog.LedgerMetadata{}, err
			}
			l.last = last
		}
	}
	return catalog.LedgerMetadata{ID: id, State: catalog.LedgerClosed, FirstOffset: l.first, LastOffset: l.last, LastEntry: int64(len(l.entries) - 1)}, nil
}

func (m *memLedgers) ReadEntries(_ context.Context, id catalog.LedgerID, first, last int64) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ledgers[id].entries[first : last+1], nil
}

// release acknowledges every held entry of every ledger, in order.
func (m *memLedgers) release() {
	m.releaseMu.Lock()
	defer m.releaseMu.Unlock()
	m.mu.Lock()
	var run []func()
	for _, l := range m.ledgers {
		run = append(run, l.pending...)
		l.pending = nil
	}
	m.mu.Unlock()
	for _, f := range run {
		f()
	}
}

// fail makes ledger id fail its unacknowledged entries.
func (m *memLedgers) fail(id catalog.LedgerID, err error) {
	m.mu.Lock()
	l := m.ledgers[id]
	l.failed = err
	pending := l.pending
	l.pending = nil
	m.mu.Unlock()
	for _, f := range pending {
		f()
	}
}

func (l *memLedger) ID() catalog.LedgerID { return l.id }

func (l *memLedger) AppendAsync(payload []byte, done func(int64, error)) error {
	l.m.mu.Lock()
	if l.failed != nil || l.sealed {
		l.m.mu.Unlock()
		return fmt.Errorf("ledger %d: %w", l.id, l.failed)
	}
	entry := int64(len(l.entries))
	l.entries = append(l.entries, append([]byte(nil), payload...))
	ack := func() {
		l.m.mu.Lock()
		err := l.failed
		if err == nil {
			l.acked++
		}
		l.m.mu.Unlock()
		done(entry, err)
	}
	l.pending = append(l.pending, ack)
	l.m.mu.Unlock()
	select {
	case l.m.wake <- struct{}{}:
	default:
	}
	return nil
}

func (l *memLedger) LeavingBookies(context.Context) ([]string, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.m.draining[l.id] {
		return []string{"bookie-3"}, nil
	}
	return nil, nil
}

func (l *memLedger) Close(_ context.Context, lastOffset int64) (catalog.LedgerMetadata, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if !l.sealed {
		l.sealed, l.last = true, lastOffset
	}
	return catalog.LedgerMetadata{ID: l.id, State: catalog.LedgerClosed, FirstOffset: l.first, LastOffset: l.last}, nil
}

type memChain struct {
	mu       sync.Mutex
	refs     []catalog.LedgerRef
	released bool
	fenced   bool
}

func (c *memChain) AppendLedger(_ context.Context, _ catalog.WriterLease, ref catalog.LedgerRef) (catalog.Partition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenced {
		return catalog.Partition{}, catalog.ErrFenced
	}
	c.refs = append(c.refs, ref)
	return catalog.Partition{Ledgers: c.refs}, nil
}

func (c *memChain) ReleaseWriter(context.Context, catalog.WriterLease) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	return nil
}

var testLease = catalog.WriterLease{Topic: "t", TopicID: "tid", Partition: 0, Owner: "ingest-1", Epoch: 3}

func batchOf(t testing.TB, n int, size int) []byte {
	t.Helper()
	b, err := record.NewBuilder(record.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.Append(&record.Record{Value: make([]byte, size), Key: fmt.Appendf(nil, "k%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func openWriter(t *testing.T, cfg Config, l *memLedgers, c *memChain, p catalog.Partition) *Writer {
	t.Helper()
	w, err := Open(context.Background(), cfg, l, c, p, testLease, catalog.DefaultReplication)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// Offsets are dense and in acceptance order; batches share entries under
// load; every record lands in exactly one entry with its offset stamped.
func TestAppendAssignsOffsetsAndPacksEntries(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	l.hold = true
	w := openWriter(t, Config{MaxInFlightEntries: 1, MaxEntryBytes: 4 << 10}, l, c, catalog.Partition{LogStartOffset: 10})
	type result struct {
		a   Appended
		err error
	}
	results := make([]chan result, 20)
	for i := range results {
		results[i] = make(chan result, 1)
		batch := batchOf(t, 3, 100)
		go func(i int) {
			a, err := w.Append(context.Background(), batch)
			results[i] <- result{a, err}
		}(i)
		waitFor(t, func() bool { return w.NextOffset() == 10+int64(3*(i+1)) })
	}
	for done := 0; done < len(results); {
		l.release()
		done = 0
		for _, r := range results {
			if len(r) == 1 {
				done++
			}
		}
	}
	seen := map[int64]bool{}
	for i, r := range results {
		res := <-r
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.a.BaseOffset != 10+int64(3*i) || res.a.LastOffset != res.a.BaseOffset+2 || seen[res.a.BaseOffset] {
			t.Fatalf("append %d: %+v", i, res.a)
		}
		seen[res.a.BaseOffset] = true
	}
	ledger := l.ledgers[1]
	if len(ledger.entries) >= 20 {
		t.Fatalf("%d entries for 20 batches with one entry in flight: no packing", len(ledger.entries))
	}
	next := int64(10)
	for _, e := range ledger.entries {
		for rest := e; len(rest) > 0; {
			b, r, err := record.Split(rest)
			if err != nil {
				t.Fatal(err)
			}
			if b.BaseOffset() != next || b.PartitionLeaderEpoch() != int32(testLease.Epoch) {
				t.Fatalf("stored batch base %d epoch %d; want %d, %d", b.BaseOffset(), b.PartitionLeaderEpoch(), next, testLease.Epoch)
			}
			if err := record.Verify(b); err != nil {
				t.Fatalf("stored batch: %v", err)
			}
			next, rest = b.NextOffset(), r
		}
	}
	if next != 70 {
		t.Fatalf("entries end at %d; want 70", next)
	}
}

// A full buffer waits QueueWait, then refuses with ErrBusy.
func TestBackpressure(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	l.hold = true
	w := openWriter(t, Config{MaxBufferedBytes: MaxEntryBytesLimit, QueueWait: 10 * time.Millisecond, MaxEntryBytes: 1 << 20}, l, c, catalog.Partition{})
	errs := make(chan error, 8)
	for range 8 { // 8 × ~1,000 KB fit in 8 MiB; a 9th does not
		go func() { _, err := w.Append(context.Background(), batchOf(t, 1, 1000<<10)); errs <- err }()
	}
	waitFor(t, func() bool { return w.NextOffset() == 8 })
	if _, err := w.Append(context.Background(), batchOf(t, 1, 1000<<10)); !errors.Is(err, ErrBusy) {
		t.Fatalf("append to a full writer: %v; want ErrBusy", err)
	}
	l.release()
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A failed ledger fails its pending appends (outcome unknown), refuses
// appends while it is replaced, then recovery decides the end and a new
// ledger continues right after it.
func TestLedgerFailureRecoversAndContinues(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	w := openWriter(t, Config{}, l, c, catalog.Partition{})
	if a, err := w.Append(context.Background(), batchOf(t, 5, 10)); err != nil || a.LastOffset != 4 {
		t.Fatalf("append: %+v, %v", a, err)
	}
	l.mu.Lock()
	l.hold = true
	l.mu.Unlock()
	errc := make(chan error, 1)
	go func() { _, err := w.Append(context.Background(), batchOf(t, 5, 10)); errc <- err }()
	waitFor(t, func() bool { return w.NextOffset() == 10 })
	l.mu.Lock()
	l.hold = false
	l.mu.Unlock()
	l.fail(1, errors.New("bookies gone"))
	if err := <-errc; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("pending append of the failed ledger: %v; want ErrUnavailable", err)
	}
	var a Appended
	waitFor(t, func() bool {
		var err error
		a, err = w.Append(context.Background(), batchOf(t, 2, 10))
		return err == nil
	})
	if a.BaseOffset != 5 {
		t.Fatalf("first append after recovery at %d; want 5 (recovery kept offsets 0..4)", a.BaseOffset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.refs) != 2 || c.refs[1].FirstOffset != 5 || c.refs[1].ID != 2 {
		t.Fatalf("chain = %+v", c.refs)
	}
}

// A failed ledger whose recovery fails is recovered again, never skipped:
// the next ledger is created only once the failed one is sealed.
func TestFailedLedgerRecoveredBeforeTheNext(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	w := openWriter(t, Config{}, l, c, catalog.Partition{})
	if _, err := w.Append(context.Background(), batchOf(t, 5, 10)); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.failRecover = 2
	l.mu.Unlock()
	l.fail(1, errors.New("bookies gone"))
	var a Appended
	waitFor(t, func() bool {
		var err error
		a, err = w.Append(context.Background(), batchOf(t, 2, 10))
		return err == nil
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failRecover != 0 || l.createdAfterUnsealed {
		t.Fatalf("recoveries left %d, ledger created after an unsealed one: %v", l.failRecover, l.createdAfterUnsealed)
	}
	if a.BaseOffset != 5 || !l.ledgers[1].sealed {
		t.Fatalf("first append after recovery at %d (want 5), ledger 1 sealed %v", a.BaseOffset, l.ledgers[1].sealed)
	}
}

// Rolling by size seals the ledger at its last offset and continues in a new
// one, with no append failing and no offset skipped.
func TestRollOver(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	w := openWriter(t, Config{RollBytes: 1 << 20, MaxEntryBytes: 1 << 20}, l, c, catalog.Partition{})
	for i := range 40 {
		a, err := w.Append(context.Background(), batchOf(t, 1, 100<<10))
		if err != nil {
			t.Fatal(err)
		}
		if a.BaseOffset != int64(i) {
			t.Fatalf("append %d at %d", i, a.BaseOffset)
		}
	}
	c.mu.Lock()
	refs := append([]catalog.LedgerRef(nil), c.refs...)
	c.mu.Unlock()
	if len(refs) < 3 {
		t.Fatalf("chain %+v: want several ledgers after 4 MB with 1 MB roll size", refs)
	}
	for i := 0; i+1 < len(refs); i++ {
		old := l.ledgers[refs[i].ID]
		if !old.sealed || old.last != refs[i+1].FirstOffset-1 {
			t.Fatalf("ledger %d sealed=%v last %d; next starts at %d", refs[i].ID, old.sealed, old.last, refs[i+1].FirstOffset)
		}
	}
}

// Close seals the ledger and releases the lease; a fenced chain stops the
// writer with ErrFenced.
func TestCloseAndFence(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	w, err := Open(context.Background(), Config{}, l, c, catalog.Partition{}, testLease, catalog.DefaultReplication)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(context.Background(), batchOf(t, 4, 10)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if led := l.ledgers[1]; !led.sealed || led.last != 3 || !c.released {
		t.Fatalf("after Close: sealed %v last %d released %v", led.sealed, led.last, c.released)
	}
	if _, err := w.Append(context.Background(), batchOf(t, 1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}

	// A new writer recovers the previous tail ledger and starts after it.
	c2 := &memChain{refs: []catalog.LedgerRef{{ID: 1}}}
	w2 := openWriter(t, Config{}, l, c2, catalog.Partition{Ledgers: c2.refs})
	if a, err := w2.Append(context.Background(), batchOf(t, 1, 1)); err != nil || a.BaseOffset != 4 {
		t.Fatalf("append after takeover: %+v, %v", a, err)
	}
	c2.mu.Lock()
	c2.fenced = true
	c2.mu.Unlock()
	l.fail(2, fmt.Errorf("%w: recovered by another writer", ErrFenced))
	for range 2 { // the first append finds the fence, the second a stopped writer
		if _, err := w2.Append(context.Background(), batchOf(t, 1, 1)); !errors.Is(err, ErrFenced) {
			t.Fatalf("append after fence: %v", err)
		}
	}
	if !errors.Is(w2.Err(), ErrFenced) {
		t.Fatalf("Err() = %v; want ErrFenced", w2.Err())
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func idemBatch(t testing.TB, id int64, seq int32, n int) []byte {
	t.Helper()
	b, err := record.NewBuilder(record.BuilderOptions{Producer: &record.Producer{ID: id, Epoch: 0, BaseSequence: seq}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.Append(&record.Record{Value: fmt.Appendf(nil, "p%d-s%d", id, int(seq)+i)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// An idempotent producer's retry gets the original offsets, whether the
// original is still in flight or already stored; a gap is refused; after a
// failed ledger, a retry of a batch recovery kept is a duplicate and one it
// dropped is appended anew; a new writer rebuilds the state from the log.
func TestIdempotentProducer(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	w := openWriter(t, Config{}, l, c, catalog.Partition{})
	ctx := context.Background()
	first, err := w.Append(ctx, idemBatch(t, 42, 0, 3))
	if err != nil || first.BaseOffset != 0 || first.Duplicate {
		t.Fatalf("first batch: %+v, %v", first, err)
	}
	again, err := w.Append(ctx, idemBatch(t, 42, 0, 3))
	if err != nil || again.BaseOffset != 0 || again.LastOffset != 2 || !again.Duplicate {
		t.Fatalf("retry of a stored batch: %+v, %v; want the original offsets, duplicate", again, err)
	}
	if _, err := w.Append(ctx, idemBatch(t, 42, 5, 1)); !errors.Is(err, dedup.ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap: %v; want ErrOutOfOrderSequence", err)
	}

	// In flight: hold acknowledgements, send the batch and its retry.
	l.mu.Lock()
	l.hold = true
	l.mu.Unlock()
	p1, err := w.Enqueue(ctx, idemBatch(t, 42, 3, 2))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := w.Enqueue(ctx, idemBatch(t, 42, 3, 2))
	if err != nil {
		t.Fatal(err)
	}
	l.release()
	a1, err1 := p1.Wait(ctx)
	a2, err2 := p2.Wait(ctx)
	if err1 != nil || err2 != nil || a1.BaseOffset != 3 || a2.BaseOffset != 3 || a1.Duplicate || !a2.Duplicate {
		t.Fatalf("in-flight retry: %+v %v / %+v %v", a1, err1, a2, err2)
	}

	// A failed ledger: seq 5 is acknowledged by recovery (stored), seq 6
	// was never stored. Model: the fake keeps acknowledged entries only.
	p5, _ := w.Enqueue(ctx, idemBatch(t, 42, 5, 1))
	l.release()
	if _, err := p5.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p6, _ := w.Enqueue(ctx, idemBatch(t, 42, 6, 1))
	l.mu.Lock()
	l.hold = false
	l.mu.Unlock()
	l.fail(1, errors.New("bookies gone"))
	if _, err := p6.Wait(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("batch of the failed ledger: %v", err)
	}
	var r5, r6 Appended
	waitFor(t, func() bool {
		var err error
		r5, err = w.Append(ctx, idemBatch(t, 42, 5, 1))
		return err == nil
	})
	if !r5.Duplicate || r5.BaseOffset != 5 {
		t.Fatalf("retry of the recovered batch: %+v; want duplicate at 5", r5)
	}
	if r6, err = w.Append(ctx, idemBatch(t, 42, 6, 1)); err != nil || r6.Duplicate || r6.BaseOffset != 6 {
		t.Fatalf("retry of the dropped batch: %+v, %v; want appended at 6", r6, err)
	}

	// Takeover: a new writer rebuilds from the chain and still dedups.
	c.mu.Lock()
	refs := append([]catalog.LedgerRef(nil), c.refs...)
	c.mu.Unlock()
	w2 := openWriter(t, Config{}, l, &memChain{refs: refs}, catalog.Partition{Ledgers: refs})
	if r, err := w2.Append(ctx, idemBatch(t, 42, 6, 1)); err != nil || !r.Duplicate || r.BaseOffset != 6 {
		t.Fatalf("retry after takeover: %+v, %v; want duplicate at 6", r, err)
	}
	if r, err := w2.Append(ctx, idemBatch(t, 42, 7, 1)); err != nil || r.Duplicate || r.BaseOffset != 7 {
		t.Fatalf("next batch after takeover: %+v, %v; want appended at 7", r, err)
	}
}

// A ledger that names a draining bookie is rolled over by RollOffLeaving:
// sealed at its end, with the next ledger appended to the chain from
// there, so its copies can move; one that names none is left alone, and
// writing goes on in the new ledger.
func TestRollOffLeaving(t *testing.T) {
	l, c := newMemLedgers(t), &memChain{}
	w := openWriter(t, Config{}, l, c, catalog.Partition{})
	if _, err := w.Append(context.Background(), batchOf(t, 2, 10)); err != nil {
		t.Fatal(err)
	}
	if rolled, err := w.RollOffLeaving(context.Background()); rolled || err != nil {
		t.Fatalf("RollOffLeaving with no draining bookie = %v, %v", rolled, err)
	}
	l.mu.Lock()
	l.draining = map[catalog.LedgerID]bool{1: true}
	l.mu.Unlock()
	if rolled, err := w.RollOffLeaving(context.Background()); !rolled || err != nil {
		t.Fatalf("RollOffLeaving with ledger 1 naming a draining bookie = %v, %v", rolled, err)
	}
	waitFor(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.refs) == 2
	})
	l.mu.Lock()
	first := l.ledgers[1]
	sealed, last := first.sealed, first.last
	l.mu.Unlock()
	if !sealed || last != 1 || c.refs[1].FirstOffset != 2 {
		t.Fatalf("after the roll: ledger 1 sealed %v at %d, next ledger %+v; want sealed at 1, next from 2", sealed, last, c.refs[1])
	}
	a, err := w.Append(context.Background(), batchOf(t, 1, 10))
	if err != nil || a.BaseOffset != 2 {
		t.Fatalf("append after the roll = %+v, %v; want offset 2", a, err)
	}
	if rolled, _ := w.RollOffLeaving(context.Background()); rolled {
		t.Fatal("the new ledger names no draining bookie, yet it rolled")
	}
}
