package cassandra

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// Group commit of transactional ids' compare-and-sets (schema v8).
//
// A Paxos round costs Cassandra about the same CPU whether it carries one
// conditional update or sixteen of one partition (docs/performance.md,
// BenchmarkIntegrationCassandraBatchedCAS). So every write of a record —
// PutTxn and InitProducer's bump — goes through its bucket's queue: while
// one batch of a bucket is in flight from this store, the writes that
// arrive wait, and go together as the next conditional batch, one Paxos
// round. Nothing waits on purpose: a write that finds its bucket idle goes
// at once, alone; batches form only when writes arrive faster than rounds
// complete, and grow with the load.
//
// Invariants (under txnBatcher.mu):
//   - a bucket has a queue iff exactly one runner goroutine serves it; the
//     runner deletes the queue when it finds it empty, under the lock, so a
//     write is never queued where no runner will take it;
//   - a batch holds at most one write per transactional id (two conditions
//     on one row in one batch would contradict each other), at most
//     maxTxnBatchRows writes and, unless it has one write, at most
//     maxTxnBatchBytes of estimated payload;
//   - every write queued is answered exactly once on its done channel.
//
// Outcomes. A batch that applied applied every write in it; a batch that
// was refused applied none (a conditional batch on one partition is one
// Paxos proposal: all or nothing). A refused batch of several writes, or a
// batch whose outcome is unknown (a timeout), is settled by one serial read
// of its rows: a row still as the write expected goes again in the next
// batch (another write made the batch fail, or it did not apply), anything
// else is ErrConflict for that write alone — except, after an unknown
// outcome, a row equal to a PutTxn's record, which is success (it applied,
// or an identical write did; as for a single LWT before schema v8).

const (
	// maxTxnBatchRows bounds the writes of one batch. At 16 rows a batch
	// costs Cassandra ~1.2× one row; far larger batches only lengthen the
	// round every one of them waits for.
	maxTxnBatchRows = 32
	// maxTxnBatchBytes bounds a batch's estimated payload (txnWrite.size).
	// Cassandra's batch size limits (batch_size_fail_threshold) do not
	// apply to a batch on one partition, but its mutation must fit half a
	// commit log segment; a single record larger than this goes alone.
	maxTxnBatchBytes = 256 << 10
)

// txnExpect is a write's condition as a predicate on the settled record.
type txnExpect struct {
	version int64 // the stored version; 0: no record
	// bump: InitProducer's condition also names the producer id and epoch
	// it read (initTxnIf).
	bump       bool
	producerID int64
	epoch      int16
}

// holds reports whether the condition holds on the record (cur, found).
// Version 1 is also a row without a version (txnRow reads it as 1).
func (e txnExpect) holds(cur bookkeeping.Txn, found bool) bool {
	switch {
	case e.version == 0:
		return !found
	case !found || cur.Version != e.version:
		return false
	}
	return !e.bump || (cur.ProducerID == e.producerID && cur.Epoch == e.epoch)
}

// txnWrite is one conditional write of a record, queued on its bucket.
type txnWrite struct {
	next   bookkeeping.Txn // the record as this write stores it
	stmt   string          // the conditional statement
	args   []any
	expect txnExpect

	ctx   context.Context
	done  chan error // buffered: the runner never blocks on an answer
	tries int        // batches it went in without an outcome of its own
}

// size estimates the bytes the write adds to a batch.
func (w *txnWrite) size() int {
	n := 96 + len(w.next.TransactionalID)
	for _, p := range w.next.Partitions {
		n += 12 + len(p.TopicID)
	}
	for _, g := range w.next.Groups {
		n += 4 + len(g)
	}
	for _, o := range w.next.Offsets {
		n += 24 + len(o.Group) + len(o.Topic) + len(o.TopicID)
	}
	return n
}

// txnBatcher queues the writes of each bucket and runs them in batches.
type txnBatcher struct {
	s *store

	mu     sync.Mutex
	queues map[int]*txnQueue // by bucket; see the invariants above

	// rounds and rows count the batches sent and the writes they carried
	// (rows/rounds is the batching achieved).
	rounds, rows atomic.Int64
}

// txnQueue is a bucket's writes waiting for its next batch, in arrival
// order (writes to go again first).
type txnQueue struct{ pending []*txnWrite }

// do queues w on its bucket and waits for its outcome: nil when it
// applied, an error wrapping bookkeeping.ErrConflict when its condition
// failed, or an operating error. When ctx ends first its outcome is
// unknown: it may still be written.
func (b *txnBatcher) do(ctx context.Context, bucket int, w *txnWrite) error {
	w.ctx, w.done = ctx, make(chan error, 1)
	b.mu.Lock()
	q := b.queues[bucket]
	if q == nil {
		q = &txnQueue{}
		b.queues[bucket] = q
		go b.run(bucket, q)
	}
	q.pending = append(q.pending, w)
	b.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("outcome unknown: %w", ctx.Err())
	}
}

// run serves bucket's queue until it is empty.
func (b *txnBatcher) run(bucket int, q *txnQueue) {
	for {
		b.mu.Lock()
		batch := q.take()
		if len(batch) == 0 { // take leaves writes only behind one it took
			delete(b.queues, bucket)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		again := b.exec(bucket, batch)
		if len(again) > 0 {
			b.mu.Lock()
			q.pending = append(again, q.pending...)
			b.mu.Unlock()
		}
	}
}

// take removes the next batch from q: writes in order, skipping (and
// leaving queued) a second write of an id already in it, up to the row and
// byte bounds. Writes whose caller gave up are answered and dropped.
// Called with mu held.
func (q *txnQueue) take() []*txnWrite {
	var batch []*txnWrite
	ids := map[string]bool{}
	bytes := 0
	rest := q.pending[:0]
	for i, w := range q.pending {
		switch {
		case w.ctx.Err() != nil:
			w.done <- fmt.Errorf("not written: %w", w.ctx.Err())
			continue
		case len(batch) == maxTxnBatchRows:
			rest = append(rest, q.pending[i:]...)
			q.pending = rest
			return batch
		case ids[w.next.TransactionalID], len(batch) > 0 && bytes+w.size() > maxTxnBatchBytes:
			rest = append(rest, w)
			continue
		}
		batch = append(batch, w)
		ids[w.next.TransactionalID] = true
		bytes += w.size()
	}
	clear(q.pending[len(rest):])
	q.pending = rest
	return batch
}

// exec runs one batch of bucket, answers the writes that have an outcome
// and returns those to go again.
func (b *txnBatcher) exec(bucket int, batch []*txnWrite) (again []*txnWrite) {
	s := b.s
	b.rounds.Add(1)
	b.rows.Add(int64(len(batch)))
	// The driver's request timeout bounds the call; no caller's context
	// may cut short a round that carries the others' writes.
	ctx := context.Background()
	var (
		applied bool
		err     error
	)
	if len(batch) == 1 {
		w := batch[0]
		applied, err = s.lwt(w.stmt, w.args...).MapScanCASContext(ctx, map[string]any{})
		if err == nil && !applied {
			w.done <- conflict(w)
			return nil
		}
	} else {
		bt := s.lwtBatch()
		for _, w := range batch {
			bt.Query(w.stmt, w.args...)
		}
		var iter *gocql.Iter
		applied, iter, err = bt.MapExecCASContext(ctx, map[string]any{})
		if iter != nil {
			_ = iter.Close()
		}
	}
	switch {
	case err == nil && applied:
		for _, w := range batch {
			w.done <- nil
		}
		return nil
	case err != nil && !unknownOutcome(err):
		for _, w := range batch {
			w.done <- err
		}
		return nil
	}
	// Refused (one write's condition failed, or several), or unknown.
	ids := make([]string, len(batch))
	for i, w := range batch {
		ids[i] = w.next.TransactionalID
	}
	cur, rerr := s.txnsOf(ctx, bucket, ids)
	if rerr != nil {
		if err == nil {
			err = errors.New("batch not applied")
		}
		for _, w := range batch {
			w.done <- fmt.Errorf("%w; settling it: %w", err, rerr)
		}
		return nil
	}
	for _, w := range batch {
		c, found := cur[w.next.TransactionalID]
		switch {
		case c.err != nil:
			w.done <- c.err
		case err != nil && !w.expect.bump && found && sameTxn(c.txn, w.next):
			// Unknown: it applied (or an identical write did). Never for
			// a bump: two callers must not be handed one epoch, so an
			// unknown bump is a conflict and InitProducer reads again.
			w.done <- nil
		case !w.expect.holds(c.txn, found):
			w.done <- conflict(w)
		case w.tries+1 >= maxCASAttempts:
			if err == nil {
				err = errors.New("batches not applied")
			}
			w.done <- fmt.Errorf("%d attempts, none applied: %w", maxCASAttempts, err)
		default:
			w.tries++
			again = append(again, w)
		}
	}
	return again
}

// Metric names (docs/metrics.md).
const (
	metricTxnRounds = "sluice_bookkeeping_txn_rounds_total"
	metricTxnWrites = "sluice_bookkeeping_txn_writes_total"
)

// register reports rounds and rows to mp (nil: nothing to register).
func (b *txnBatcher) register(mp metric.MeterProvider) (metric.Registration, error) {
	if mp == nil {
		return nil, nil
	}
	m := mp.Meter("github.com/sluicemq/sluice/pkg/bookkeeping/cassandra")
	rounds, err := m.Int64ObservableCounter(metricTxnRounds, metric.WithUnit("{round}"),
		metric.WithDescription("conditional batches (Paxos rounds) that wrote transactional ids' records"))
	if err != nil {
		return nil, err
	}
	writes, err := m.Int64ObservableCounter(metricTxnWrites, metric.WithUnit("{write}"),
		metric.WithDescription("writes of transactional ids' records those rounds carried (per round: the batching achieved)"))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(rounds, b.rounds.Load())
		o.ObserveInt64(writes, b.rows.Load())
		return nil
	}, rounds, writes)
}

// conflict is the error of a write whose condition failed.
func conflict(w *txnWrite) error {
	if w.expect.bump {
		return fmt.Errorf("%w: the record changed since it was read", bookkeeping.ErrConflict)
	}
	return fmt.Errorf("%w: the stored version is not %d", bookkeeping.ErrConflict, w.expect.version)
}

// settled is one record as a serial read found it.
type settled struct {
	txn bookkeeping.Txn
	err error // the stored row is not a valid record
}

// txnsOf reads the records of ids, all of bucket, serially (one Paxos read
// of the partition): found ones only.
func (s *store) txnsOf(ctx context.Context, bucket int, ids []string) (map[string]settled, error) {
	iter := s.serialRead(selectTxnRows, bucket, ids).IterContext(ctx)
	out := make(map[string]settled, len(ids))
	for {
		r := txnRow{}
		if !iter.Scan(append([]any{&r.id}, r.dest()...)...) {
			break
		}
		t, err := r.txn()
		out[r.id] = settled{txn: t, err: err}
	}
	if err := iter.Close(); err != nil {
		return nil, err
	}
	return out, nil
}
