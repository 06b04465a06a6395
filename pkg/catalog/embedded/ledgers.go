package embedded

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// getLedger reads a ledger record; callers hold the lock.
func (c *store) getLedger(id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	var r ledgerRec
	key := ledgerKey(id)
	found, err := c.get(key, &r)
	if err != nil {
		return catalog.LedgerMetadata{}, err
	}
	if !found {
		return catalog.LedgerMetadata{}, catalog.ErrNotFound
	}
	m, err := r.ledger()
	if err == nil && m.ID != id {
		err = fmt.Errorf("record is ledger %d", m.ID)
	}
	if err != nil {
		return catalog.LedgerMetadata{}, corrupt(key, err)
	}
	return m, nil
}

// CreateLedger implements catalog.Ledgers. The id counter, the record and
// both index entries are one batch.
func (c *store) CreateLedger(_ context.Context, spec catalog.LedgerSpec) (catalog.LedgerMetadata, error) {
	var m catalog.LedgerMetadata
	err := c.write(func() error {
		var ctr counterRec
		if _, err := c.get(ledgerCounterKey, &ctr); err != nil {
			return err
		}
		ctr.Last++
		m = catalog.NewLedger(spec, catalog.LedgerID(ctr.Last), c.clock.Now())
		b := c.db.NewBatch()
		set(b, ledgerCounterKey, ctr)
		set(b, ledgerKey(m.ID), toLedgerRec(m))
		_ = b.Set(byPartitionKey(m), nil, nil)
		_ = b.Set(byStateKey(m.State, m.ID), nil, nil)
		return c.commit(b)
	})
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("create ledger for %s/%d: %w", spec.Topic, spec.Partition, err)
	}
	return m, nil
}

// GetLedger implements catalog.Ledgers.
func (c *store) GetLedger(_ context.Context, id catalog.LedgerID) (catalog.LedgerMetadata, error) {
	var m catalog.LedgerMetadata
	err := c.read(func() (err error) { m, err = c.getLedger(id); return err })
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("get ledger %d: %w", id, err)
	}
	return m, nil
}

// GetLedgers implements catalog.Ledgers: one read transaction.
func (c *store) GetLedgers(_ context.Context, ids []catalog.LedgerID) ([]catalog.LedgerMetadata, error) {
	var out []catalog.LedgerMetadata
	err := c.read(func() error {
		for _, id := range ids {
			m, err := c.getLedger(id)
			if errors.Is(err, catalog.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get %d ledgers: %w", len(ids), err)
	}
	return out, nil
}

// UpdateLedger implements catalog.Ledgers.
func (c *store) UpdateLedger(_ context.Context, proposed catalog.LedgerMetadata) (catalog.LedgerMetadata, error) {
	var next catalog.LedgerMetadata
	err := c.write(func() error {
		old, err := c.getLedger(proposed.ID)
		if err != nil {
			return err
		}
		if next, err = catalog.NextLedger(old, proposed, c.clock.Now()); err != nil {
			return err
		}
		b := c.db.NewBatch()
		set(b, ledgerKey(next.ID), toLedgerRec(next))
		if next.State != old.State {
			_ = b.Delete(byStateKey(old.State, old.ID), nil)
			_ = b.Set(byStateKey(next.State, next.ID), nil, nil)
		}
		return c.commit(b)
	})
	if err != nil {
		return catalog.LedgerMetadata{}, fmt.Errorf("update ledger %d: %w", proposed.ID, err)
	}
	return next, nil
}

// DeleteLedgerMetadata implements catalog.Ledgers.
func (c *store) DeleteLedgerMetadata(_ context.Context, id catalog.LedgerID, expectVersion int64) error {
	err := c.write(func() error {
		m, err := c.getLedger(id)
		if err != nil {
			return err
		}
		if err := catalog.CheckDeletable(m, expectVersion); err != nil {
			return err
		}
		b := c.db.NewBatch()
		_ = b.Delete(ledgerKey(id), nil)
		_ = b.Delete(byPartitionKey(m), nil)
		_ = b.Delete(byStateKey(m.State, id), nil)
		return c.commit(b)
	})
	if err != nil {
		return fmt.Errorf("delete ledger metadata %d: %w", id, err)
	}
	return nil
}

// ListLedgersByPartition implements catalog.LedgerLister.
func (c *store) ListLedgersByPartition(_ context.Context, topicID catalog.TopicID, partition int, pageToken string, limit int) (catalog.Page[catalog.LedgerMetadata], error) {
	return c.listLedgers(byPartitionPrefix(topicID, partition), pageToken, limit)
}

// ListLedgersByState implements catalog.LedgerLister.
func (c *store) ListLedgersByState(_ context.Context, state catalog.LedgerState, pageToken string, limit int) (catalog.Page[catalog.LedgerMetadata], error) {
	return c.listLedgers(byStatePrefix(state), pageToken, limit)
}

// listLedgers pages through an index and reads each ledger it names.
func (c *store) listLedgers(prefix []byte, token string, limit int) (catalog.Page[catalog.LedgerMetadata], error) {
	var page catalog.Page[catalog.LedgerMetadata]
	err := c.read(func() (err error) {
		page.NextPageToken, err = c.scan(prefix, token, limit, func(k, _ []byte) error {
			if len(k) != len(prefix)+8 {
				return corrupt(k, fmt.Errorf("index key of %d bytes", len(k)))
			}
			m, err := c.getLedger(ledgerIDSuffix(k))
			if err != nil {
				// The index and the record change in one batch; a dangling
				// index entry means the store is damaged.
				return corrupt(k, err)
			}
			page.Items = append(page.Items, m)
			return nil
		})
		return err
	})
	if err != nil {
		return catalog.Page[catalog.LedgerMetadata]{}, fmt.Errorf("list ledgers: %w", err)
	}
	return page, nil
}
