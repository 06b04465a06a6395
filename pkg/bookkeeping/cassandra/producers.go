package cassandra

import (
	"context"
	"fmt"
	"math"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

const (
	// counterName is the producer_id_blocks row all Stores reserve from.
	counterName = "producer"

	selectNextID    = `SELECT next_id FROM producer_id_blocks WHERE name = ?`
	insertNextID    = `INSERT INTO producer_id_blocks (name, next_id) VALUES (?, ?) IF NOT EXISTS`
	advanceNextID   = `UPDATE producer_id_blocks SET next_id = ? WHERE name = ? IF next_id = ?`
	selectTxn       = `SELECT producer_id, epoch FROM transactional_producers WHERE transactional_id = ?`
	insertTxn       = `INSERT INTO transactional_producers (transactional_id, producer_id, epoch) VALUES (?, ?, 0) IF NOT EXISTS`
	bumpTxnEpoch    = `UPDATE transactional_producers SET epoch = ? WHERE transactional_id = ? IF producer_id = ? AND epoch = ?`
	replaceTxnID    = `UPDATE transactional_producers SET producer_id = ?, epoch = 0 WHERE transactional_id = ? IF producer_id = ? AND epoch = ?`
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

// InitProducer implements bookkeeping.Producers.
func (s *store) InitProducer(ctx context.Context, transactionalID string) (bookkeeping.Producer, error) {
	if transactionalID == "" {
		id, err := s.AllocateProducerID(ctx)
		return bookkeeping.Producer{ID: id}, err
	}
	wrap := func(err error) error { return fmt.Errorf("init producer %q: %w", transactionalID, err) }
	for range maxCASAttempts {
		var (
			id    int64
			epoch int
		)
		err := s.serialRead(selectTxn, transactionalID).ScanContext(ctx, &id, &epoch)
		var (
			next    bookkeeping.Producer
			applied bool
		)
		switch {
		case err == gocql.ErrNotFound:
			if next.ID, err = s.AllocateProducerID(ctx); err != nil {
				return bookkeeping.Producer{}, wrap(err)
			}
			applied, err = s.lwt(insertTxn, transactionalID, next.ID).MapScanCASContext(ctx, map[string]any{})
		case err != nil:
			return bookkeeping.Producer{}, wrap(err)
		case epoch < 0 || epoch > bookkeeping.MaxProducerEpoch:
			return bookkeeping.Producer{}, wrap(fmt.Errorf("stored epoch %d out of range", epoch))
		case epoch == bookkeeping.MaxProducerEpoch:
			// The epoch space is spent: a new id starts again at 0.
			if next.ID, err = s.AllocateProducerID(ctx); err != nil {
				return bookkeeping.Producer{}, wrap(err)
			}
			applied, err = s.lwt(replaceTxnID, next.ID, transactionalID, id, epoch).MapScanCASContext(ctx, map[string]any{})
		default:
			next = bookkeeping.Producer{ID: id, Epoch: int16(epoch + 1)}
			applied, err = s.lwt(bumpTxnEpoch, epoch+1, transactionalID, id, epoch).MapScanCASContext(ctx, map[string]any{})
		}
		switch {
		case err == nil && applied:
			return next, nil
		case err == nil || unknownOutcome(err):
			// Lost a race, or do not know (a bump may have applied: that
			// epoch is then simply skipped, never handed out twice).
		default:
			return bookkeeping.Producer{}, wrap(err)
		}
	}
	return bookkeeping.Producer{}, wrap(fmt.Errorf("%w: lost %d races in a row", bookkeeping.ErrConflict, maxCASAttempts))
}
