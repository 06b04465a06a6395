package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

const (
	// counterName is the producer_id_blocks row all Stores reserve from.
	counterName = "producer"

	selectNextID    = `SELECT next_id FROM producer_id_blocks WHERE name = ?`
	insertNextID    = `INSERT INTO producer_id_blocks (name, next_id) VALUES (?, ?) IF NOT EXISTS`
	advanceNextID   = `UPDATE producer_id_blocks SET next_id = ? WHERE name = ? IF next_id = ?`
	firstProducerID = 1
)

// idBlocks hands out producer ids from blocks reserved by LWT (see the
// package doc for why they are unique).
type idBlocks struct {
	store *store
	size  int64

	mu        sync.Mutex // guards next and end; held while reserving a block
	next, end int64      // ids in [next, end) are ours and unused
}

func (b *idBlocks) allocate(ctx context.Context) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == b.end {
		start, err := b.reserve(ctx)
		if err != nil {
			return 0, err
		}
		b.next, b.end = start, start+b.size
	}
	id := b.next
	b.next++
	return id, nil
}

// reserve wins the block [n, n+size) by moving the counter from n to n+size.
func (b *idBlocks) reserve(ctx context.Context) (int64, error) {
	s := b.store
	for range maxCASAttempts {
		var n int64
		err := s.serialRead(selectNextID, counterName).ScanContext(ctx, &n)
		var applied bool
		switch {
		case err == gocql.ErrNotFound:
			n = firstProducerID
			applied, err = s.lwt(insertNextID, counterName, n+b.size).MapScanCASContext(ctx, map[string]any{})
		case err != nil:
			return 0, fmt.Errorf("reserve producer ids: %w", err)
		case n < firstProducerID || n > math.MaxInt64-b.size:
			return 0, fmt.Errorf("reserve producer ids: counter at %d cannot advance by %d", n, b.size)
		default:
			applied, err = s.lwt(advanceNextID, n+b.size, counterName, n).MapScanCASContext(ctx, map[string]any{})
		}
		switch {
		case err == nil && applied:
			return n, nil
		case err == nil || unknownOutcome(err):
			// Lost the race, or do not know: never use a block we are
			// not sure we won; read again.
		default:
			return 0, fmt.Errorf("reserve producer ids: %w", err)
		}
	}
	return 0, fmt.Errorf("reserve producer ids: %w: lost %d races in a row", bookkeeping.ErrConflict, maxCASAttempts)
}

// AllocateProducerID implements bookkeeping.Producers.
func (s *store) AllocateProducerID(ctx context.Context) (int64, error) {
	return s.ids.allocate(ctx)
}

// InitProducer implements bookkeeping.Producers: a compare-and-set writer
// of the transactional id's record, like PutTxn — a serial read, the
// decision, and one compare-and-set conditioned on the version it read
// (and on the producer id and epoch, see initTxnIf), batched with the
// bucket's other writes like PutTxn's (txnbatch.go).
func (s *store) InitProducer(ctx context.Context, transactionalID string) (bookkeeping.Producer, error) {
	if transactionalID == "" {
		id, err := s.AllocateProducerID(ctx)
		return bookkeeping.Producer{ID: id}, err
	}
	wrap := func(err error) error { return fmt.Errorf("init producer %q: %w", transactionalID, err) }
	for range maxCASAttempts {
		cur, found, err := s.txn(ctx, transactionalID)
		if err != nil {
			return bookkeeping.Producer{}, wrap(err)
		}
		if found && !cur.Status.Idle() {
			return bookkeeping.Producer{}, wrap(fmt.Errorf("%w: a transaction is %v; the transaction coordinator ends it first", bookkeeping.ErrConflict, cur.Status))
		}
		next := cur
		next.TransactionalID, next.Status, next.Version = transactionalID, bookkeeping.TxnEmpty, cur.Version+1
		next.Deadline, next.Partitions, next.Groups, next.PrevProducerID = time.Time{}, nil, nil, 0
		if !found || cur.Epoch >= bookkeeping.MaxProducerEpoch-1 {
			// First use, or the epoch space is spent: a new id starts at 0.
			if next.ProducerID, err = s.AllocateProducerID(ctx); err != nil {
				return bookkeeping.Producer{}, wrap(err)
			}
			next.Epoch, next.BumpedByCoordinator = 0, false
		} else {
			next.Epoch++
			next.BumpedByCoordinator = true
		}
		b := s.bucket(transactionalID)
		w := &txnWrite{next: next, expect: txnExpect{version: cur.Version, bump: found, producerID: cur.ProducerID, epoch: cur.Epoch}}
		switch {
		case !found:
			w.stmt, w.args = insertTxnRow, append([]any{b, transactionalID}, txnArgs(next)...)
		case cur.Version == 1:
			w.stmt, w.args = initTxnIfV1, append(txnArgs(next), b, transactionalID, cur.ProducerID, int(cur.Epoch))
		default:
			w.stmt, w.args = initTxnIf, append(txnArgs(next), b, transactionalID, cur.Version, cur.ProducerID, int(cur.Epoch))
		}
		err = s.batches.do(ctx, b, w)
		switch {
		case err == nil:
			return bookkeeping.Producer{ID: next.ProducerID, Epoch: next.Epoch}, nil
		case errors.Is(err, bookkeeping.ErrConflict) || unknownOutcome(err):
			// Lost a race, or do not know (a bump may have applied: that
			// epoch is then simply skipped, never handed out twice).
		default:
			return bookkeeping.Producer{}, wrap(err)
		}
	}
	return bookkeeping.Producer{}, wrap(fmt.Errorf("%w: lost %d races in a row", bookkeeping.ErrConflict, maxCASAttempts))
}
