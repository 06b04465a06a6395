package cassandra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// The columns of a transactional id's record (schema v2, v5, v6 and v7),
// in the order txnRow scans them and txnArgs binds them.
const txnColumns = `producer_id, epoch, status, timeout_ms, deadline, partitions, groups, bumped_by_coordinator, version, offsets, prev_producer_id`

const (
	selectTxnRow = `SELECT ` + txnColumns + ` FROM transactional_producers WHERE transactional_id = ?`
	insertTxnRow = `INSERT INTO transactional_producers (transactional_id, ` + txnColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`

	setTxnRow = `UPDATE transactional_producers SET producer_id = ?, epoch = ?, status = ?, timeout_ms = ?, deadline = ?, ` +
		`partitions = ?, groups = ?, bumped_by_coordinator = ?, version = ?, offsets = ?, prev_producer_id = ? WHERE transactional_id = ? `
	// putTxnIf is PutTxn over a stored version ≥ 2. putTxnIfV1 is PutTxn
	// over version 1, which is also a row written before schema v5 (null
	// version); `producer_id > 0` keeps it from creating a row that does
	// not exist (a missing row's columns compare as null, and every stored
	// row has a producer id).
	putTxnIf   = setTxnRow + `IF version = ?`
	putTxnIfV1 = setTxnRow + `IF version IN (1, null) AND producer_id > 0`
	// initTxnIf and initTxnIfV1 are InitProducer's bump: conditioned on
	// the producer id and epoch it read as well, so a bump of a binary
	// older than schema v5 (which does not move version) is never undone.
	initTxnIf   = setTxnRow + `IF version = ? AND producer_id = ? AND epoch = ?`
	initTxnIfV1 = setTxnRow + `IF version IN (1, null) AND producer_id = ? AND epoch = ?`

	// ListTxns pages in token order: the table's own order, a scan of its
	// token ranges. A page after a transactional id reads the rows that
	// share its token (the same id, or a hash collision) and then the rows
	// of the tokens after it.
	listTxnsFrom      = `SELECT transactional_id, ` + txnColumns + ` FROM transactional_producers LIMIT ?`
	listTxnsSameToken = `SELECT transactional_id, ` + txnColumns + ` FROM transactional_producers WHERE token(transactional_id) = token(?)`
	listTxnsAfter     = `SELECT transactional_id, ` + txnColumns + ` FROM transactional_producers WHERE token(transactional_id) > token(?) LIMIT ?`

	// txnPageSize is the driver's page size of ListTxns' reads: records can
	// be large (up to MaxTxnPartitions partitions), so a page of the
	// contract is fetched in several.
	txnPageSize = 100
)

// txnRow is a row of transactional_producers as scanned. Columns added by
// schema v5 are null on rows an older binary wrote: status reads as 0,
// version as nil, and both mean an idle record at version 1.
type txnRow struct {
	id         string
	producerID int64
	epoch      int
	status     int
	timeoutMS  int64
	deadline   time.Time
	partitions []bookkeeping.TxnPartition
	groups     []string
	bumped     bool
	version    *int64
	offsets    []bookkeeping.TxnOffset
	prevID     int64 // null (older rows, none replaced) scans as 0
}

// dest are the scan destinations of txnColumns.
func (r *txnRow) dest() []any {
	return []any{&r.producerID, &r.epoch, &r.status, &r.timeoutMS, &r.deadline, &r.partitions, &r.groups, &r.bumped, &r.version, &r.offsets, &r.prevID}
}

// txn converts the row; a row that does not make a valid Txn is an error
// (never used, never overwritten).
func (r txnRow) txn() (bookkeeping.Txn, error) {
	t := bookkeeping.Txn{
		TransactionalID: r.id, ProducerID: r.producerID, Status: bookkeeping.TxnEmpty,
		Timeout: time.Duration(r.timeoutMS) * time.Millisecond, BumpedByCoordinator: r.bumped, PrevProducerID: r.prevID, Version: 1,
		Partitions: nilIfEmpty(r.partitions), Groups: nilIfEmpty(r.groups), Offsets: nilIfEmpty(r.offsets),
	}
	if r.epoch < 0 || r.epoch > bookkeeping.MaxProducerEpoch {
		return bookkeeping.Txn{}, fmt.Errorf("stored record of %q: epoch %d out of range", r.id, r.epoch)
	}
	t.Epoch = int16(r.epoch)
	if r.status != 0 {
		if r.status > math.MaxUint8 || r.status < 0 {
			return bookkeeping.Txn{}, fmt.Errorf("stored record of %q: status %d out of range", r.id, r.status)
		}
		t.Status = bookkeeping.TxnStatus(r.status)
	}
	if r.timeoutMS < 0 || r.timeoutMS > bookkeeping.MaxTxnTimeout.Milliseconds() {
		return bookkeeping.Txn{}, fmt.Errorf("stored record of %q: timeout %d ms out of range", r.id, r.timeoutMS)
	}
	if !r.deadline.IsZero() {
		t.Deadline = time.UnixMilli(r.deadline.UnixMilli()).UTC()
	}
	if r.version != nil {
		t.Version = *r.version
	}
	if err := t.Validate(); err != nil {
		return bookkeeping.Txn{}, fmt.Errorf("stored record of %q is not valid: %w", r.id, err)
	}
	if t.Version < 1 {
		return bookkeeping.Txn{}, fmt.Errorf("stored record of %q: version %d", r.id, t.Version)
	}
	return t, nil
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

// txnArgs binds t's columns in txnColumns' order: a zero deadline as null,
// no partitions or groups as empty lists (not null, which would be a
// tombstone).
func txnArgs(t bookkeeping.Txn) []any {
	var deadline any
	if !t.Deadline.IsZero() {
		deadline = t.Deadline
	}
	partitions, groups, offsets := t.Partitions, t.Groups, t.Offsets
	if partitions == nil {
		partitions = []bookkeeping.TxnPartition{}
	}
	if groups == nil {
		groups = []string{}
	}
	if offsets == nil {
		offsets = []bookkeeping.TxnOffset{}
	}
	return []any{t.ProducerID, int(t.Epoch), int(t.Status), t.Timeout.Milliseconds(), deadline, partitions, groups, t.BumpedByCoordinator, t.Version, offsets, t.PrevProducerID}
}

// txn reads the record of id serially (completing any Paxos round in
// flight, so it is the settled outcome of every earlier write); found is
// false when there is none.
func (s *store) txn(ctx context.Context, id string) (t bookkeeping.Txn, found bool, err error) {
	r := txnRow{id: id}
	err = s.serialRead(selectTxnRow, id).ScanContext(ctx, r.dest()...)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return bookkeeping.Txn{}, false, nil
	case err != nil:
		return bookkeeping.Txn{}, false, err
	}
	t, err = r.txn()
	return t, err == nil, err
}

// GetTxn implements bookkeeping.Transactions: a serial read, so that it is
// linearizable with the LWTs that write the record.
func (s *store) GetTxn(ctx context.Context, transactionalID string) (bookkeeping.Txn, error) {
	t, found, err := s.txn(ctx, transactionalID)
	switch {
	case err != nil:
		return bookkeeping.Txn{}, fmt.Errorf("get transaction %q: %w", transactionalID, err)
	case !found:
		return bookkeeping.Txn{}, fmt.Errorf("get transaction %q: %w", transactionalID, bookkeeping.ErrNotFound)
	}
	return t, nil
}

// PutTxn implements bookkeeping.Transactions: one LWT conditioned on the
// version (INSERT … IF NOT EXISTS at version 0). An LWT whose outcome is
// unknown is settled by a serial read: the record as written is success,
// the version unchanged is a retry, anything else a conflict.
func (s *store) PutTxn(ctx context.Context, t bookkeeping.Txn) (bookkeeping.Txn, error) {
	wrap := func(err error) error { return fmt.Errorf("put transaction %q: %w", t.TransactionalID, err) }
	next := t
	next.Version++
	stmt, args := putTxnIf, append(txnArgs(next), t.TransactionalID, t.Version)
	switch t.Version {
	case 0:
		stmt, args = insertTxnRow, append([]any{t.TransactionalID}, txnArgs(next)...)
	case 1:
		stmt, args = putTxnIfV1, args[:len(args)-1]
	}
	var err error
	for range maxCASAttempts {
		var applied bool
		applied, err = s.lwt(stmt, args...).MapScanCASContext(ctx, map[string]any{})
		switch {
		case err == nil && applied:
			return next, nil
		case err == nil:
			return bookkeeping.Txn{}, wrap(fmt.Errorf("%w: the stored version is not %d", bookkeeping.ErrConflict, t.Version))
		case !unknownOutcome(err):
			return bookkeeping.Txn{}, wrap(err)
		}
		cur, found, rerr := s.txn(ctx, t.TransactionalID)
		switch {
		case rerr != nil:
			return bookkeeping.Txn{}, wrap(errors.Join(err, rerr))
		case found && sameTxn(cur, next):
			return next, nil // it applied (or an identical write did)
		case found && cur.Version != t.Version, !found && t.Version != 0:
			return bookkeeping.Txn{}, wrap(fmt.Errorf("%w: the stored version is not %d", bookkeeping.ErrConflict, t.Version))
		}
		// Not applied, and nothing else was written: try again.
	}
	return bookkeeping.Txn{}, wrap(fmt.Errorf("%d attempts with unknown outcomes, none applied: %w", maxCASAttempts, err))
}

// sameTxn reports whether a and b are the same record.
func sameTxn(a, b bookkeeping.Txn) bool {
	return a.TransactionalID == b.TransactionalID && a.ProducerID == b.ProducerID && a.Epoch == b.Epoch &&
		a.Status == b.Status && a.Timeout == b.Timeout && a.Deadline.Equal(b.Deadline) &&
		slices.Equal(a.Partitions, b.Partitions) && slices.Equal(a.Groups, b.Groups) &&
		slices.Equal(a.Offsets, b.Offsets) && a.BumpedByCoordinator == b.BumpedByCoordinator && a.Version == b.Version
}

// ListTxns implements bookkeeping.Transactions in token order (the
// partitioner's token of the id, then the id's bytes): the rows sharing
// after's token with an id above it, then a read of the tokens after it.
// Reads at the regular consistency.
func (s *store) ListTxns(ctx context.Context, after string, limit int) ([]bookkeeping.Txn, bool, error) {
	wrap := func(err error) error { return fmt.Errorf("list transactions: %w", err) }
	txns := []bookkeeping.Txn{}
	var rest *gocql.Query
	if after == "" {
		rest = s.read(listTxnsFrom, limit+1)
	} else {
		same, err := s.scanTxns(ctx, s.read(listTxnsSameToken, after), math.MaxInt)
		if err != nil {
			return nil, false, wrap(err)
		}
		same = slices.DeleteFunc(same, func(t bookkeeping.Txn) bool { return t.TransactionalID <= after })
		slices.SortFunc(same, func(a, b bookkeeping.Txn) int { return cmp.Compare(a.TransactionalID, b.TransactionalID) })
		txns = append(txns, same...)
		rest = s.read(listTxnsAfter, after, max(limit+1-len(txns), 1))
	}
	if len(txns) <= limit {
		more, err := s.scanTxns(ctx, rest, limit+1-len(txns))
		if err != nil {
			return nil, false, wrap(err)
		}
		txns = append(txns, more...)
	}
	if len(txns) > limit {
		return txns[:limit], true, nil
	}
	return txns, false, nil
}

// scanTxns reads up to n records of q (whose columns are transactional_id
// then txnColumns).
func (s *store) scanTxns(ctx context.Context, q *gocql.Query, n int) ([]bookkeeping.Txn, error) {
	iter := q.PageSize(txnPageSize).IterContext(ctx)
	var out []bookkeeping.Txn
	for len(out) < n {
		r := txnRow{}
		if !iter.Scan(append([]any{&r.id}, r.dest()...)...) {
			break
		}
		t, err := r.txn()
		if err != nil {
			return nil, errors.Join(err, iter.Close())
		}
		out = append(out, t)
	}
	if err := iter.Close(); err != nil {
		return nil, err
	}
	return out, nil
}
