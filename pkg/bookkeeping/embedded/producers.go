package embedded

import (
	"context"
	"fmt"

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

// InitProducer implements bookkeeping.Producers.
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

	key := txnKey(transactionalID)
	v, err := s.get(key)
	if err != nil {
		return bookkeeping.Producer{}, wrap(err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	var r txnRecord
	if v != nil {
		if r, err = decodeTxn(v); err != nil {
			return bookkeeping.Producer{}, wrap(err)
		}
	}
	if v == nil || r.epoch == bookkeeping.MaxProducerEpoch {
		// First use, or the epoch space is spent: a new id starts at 0.
		id, err := s.allocate(b)
		if err != nil {
			return bookkeeping.Producer{}, wrap(err)
		}
		r = txnRecord{producerID: id}
	} else {
		r.epoch++
	}
	if err := b.Set(key, r.encode(), nil); err != nil {
		return bookkeeping.Producer{}, wrap(err)
	}
	if err := commit(b); err != nil {
		return bookkeeping.Producer{}, wrap(err)
	}
	return bookkeeping.Producer{ID: r.producerID, Epoch: int16(r.epoch)}, nil
}
