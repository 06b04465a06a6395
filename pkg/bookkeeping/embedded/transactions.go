package embedded

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// GetTxn implements bookkeeping.Transactions.
func (s *store) GetTxn(ctx context.Context, transactionalID string) (bookkeeping.Txn, error) {
	unlock, err := s.rlock(ctx)
	if err != nil {
		return bookkeeping.Txn{}, err
	}
	defer unlock()
	t, found, err := s.txn(transactionalID)
	switch {
	case err != nil:
		return bookkeeping.Txn{}, fmt.Errorf("get transaction %q: %w", transactionalID, err)
	case !found:
		return bookkeeping.Txn{}, fmt.Errorf("get transaction %q: %w", transactionalID, bookkeeping.ErrNotFound)
	}
	return t, nil
}

// PutTxn implements bookkeeping.Transactions: under the writer lock, the
// stored version is compared with t.Version and the record written, synced,
// at the next version.
func (s *store) PutTxn(ctx context.Context, t bookkeeping.Txn) (bookkeeping.Txn, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return bookkeeping.Txn{}, err
	}
	defer unlock()
	wrap := func(err error) error { return fmt.Errorf("put transaction %q: %w", t.TransactionalID, err) }
	cur, _, err := s.txn(t.TransactionalID)
	if err != nil {
		return bookkeeping.Txn{}, wrap(err)
	}
	if cur.Version != t.Version { // 0 when none is stored
		return bookkeeping.Txn{}, wrap(fmt.Errorf("%w: stored version %d, not %d", bookkeeping.ErrConflict, cur.Version, t.Version))
	}
	t.Version++
	if err := s.db.Set(txnKey(t.TransactionalID), encodeTxn(t), syncWrite); err != nil {
		return bookkeeping.Txn{}, wrap(err)
	}
	return t, nil
}

// ListTxns implements bookkeeping.Transactions: a scan of the records,
// whose keys sort by transactional id (byte order).
func (s *store) ListTxns(ctx context.Context, after string, limit int) ([]bookkeeping.Txn, bool, error) {
	unlock, err := s.rlock(ctx)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	all := []byte{prefixTxn}
	lower := all
	if after != "" {
		// Names never contain NUL, so after+NUL is the first key after
		// after's own.
		lower = append(txnKey(after), 0)
	}
	txns := []bookkeeping.Txn{}
	more := false
	err = s.scan(lower, prefixEnd(all), func(k, v []byte) (bool, error) {
		if len(txns) == limit {
			more = true
			return false, nil
		}
		t, err := decodeTxn(string(k[1:]), v)
		if err != nil {
			return false, fmt.Errorf("transaction record %q: %w", k, err)
		}
		txns = append(txns, t)
		return true, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list transactions: %w", err)
	}
	return txns, more, nil
}

// txn reads the record of id; found is false when there is none (the zero
// Txn then has Version 0). The caller holds a lock.
func (s *store) txn(id string) (t bookkeeping.Txn, found bool, err error) {
	v, err := s.get(txnKey(id))
	if err != nil || v == nil {
		return bookkeeping.Txn{}, false, err
	}
	t, err = decodeTxn(id, v)
	return t, err == nil, err
}
