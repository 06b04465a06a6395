package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// AllocateProducerID implements bookkeeping.Producers. Ids come from one
// counter advanced by a synced write under the writer lock, so no id is handed
// out twice, even across crashes.
func (s *store) AllocateProducerID(ctx context.Context) (int64, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	b := s.db.NewBatch()
	defer b.Close()
	id, err := s.allocate(b)
	if err == nil {
		err = commit(b)
	}
	if err != nil {
		return 0, fmt.Errorf("allocate producer id: %w", err)
	}
	return id, nil
}

// allocate adds the counter's advance to b and returns the id it hands out.
// The caller holds the writer lock and commits b.
func (s *store) allocate(b *pebble.Batch) (int64, error) {
	v, err := s.get(counterKey)
	if err != nil {
		return 0, err
	}
	c := counterRecord{next: 1}
	if v != nil {
		if c, err = decodeCounter(v); err != nil {
			return 0, fmt.Errorf("producer id counter: %w", err)
		}
	}
	if err := b.Set(counterKey, counterRecord{next: c.next + 1}.encode(), nil); err != nil {
		return 0, err
	}
	return c.next, nil
}

// InitProducer implements bookkeeping.Producers: a compare-and-set writer
// of the transactional id's record like PutTxn (here trivially: the read,
// the decision and the synced write happen under the writer lock).
func (s *store) InitProducer(ctx context.Context, transactionalID string) (bookkeeping.Producer, error) {
	if transactionalID == "" {
		id, err := s.AllocateProducerID(ctx)
		return bookkeeping.Producer{ID: id}, err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return bookkeeping.Producer{}, err
	}
	defer unlock()
	wrap := func(err error) error { return fmt.Errorf("init producer %q: %w", transactionalID, err) }

	cur, found, err := s.txn(transactionalID)
	if err != nil {
		return bookkeeping.Producer{}, wrap(err)
	}
	if found && !cur.Status.Idle() {
		return bookkeeping.Producer{}, wrap(fmt.Errorf("%w: a transaction is %v; the transaction coordinator ends it first", bookkeeping.ErrConflict, cur.Status))
	}
	b := s.db.NewBatch()
	defer b.Close()
	next := cur
	next.TransactionalID, next.Status, next.Version = transactionalID, bookkeeping.TxnEmpty, cur.Version+1
	next.Deadline, next.Partitions, next.Groups, next.PrevProducerID = time.Time{}, nil, nil, 0
	if !found || cur.Epoch >= bookkeeping.MaxProducerEpoch-1 {
		// First use, or the epoch space is spent: a new id starts at 0.
		id, err := s.allocate(b)
		if err != nil {
			return bookkeeping.Producer{}, wrap(err)
		}
		next.ProducerID, next.Epoch, next.BumpedByCoordinator = id, 0, false
	} else {
		next.Epoch++
		next.BumpedByCoordinator = true
	}
	if err := b.Set(txnKey(transactionalID), encodeTxn(next), nil); err != nil {
		return bookkeeping.Producer{}, wrap(err)
	}
	if err := commit(b); err != nil {
		return bookkeeping.Producer{}, wrap(err)
	}
	return bookkeeping.Producer{ID: next.ProducerID, Epoch: next.Epoch}, nil
}
