package cassandra

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// The columns of a transactional id's record (schema v2, v5, v6, v7 and
// v9; in the bucketed table transactions since v8), in the order txnRow
// scans them and txnArgs binds them.
const txnColumns = txnColumnsV8 + `, next_partitions, ended, timed_out`

// txnColumnsV8 are the columns schema v8's data step copies (the v9
// columns do not exist yet when it runs), in txnRow.dest's order.
const txnColumnsV8 = `producer_id, epoch, status, timeout_ms, deadline, partitions, groups, bumped_by_coordinator, version, offsets, prev_producer_id`

const (
	selectTxnRow  = `SELECT ` + txnColumns + ` FROM transactions WHERE bucket = ? AND transactional_id = ?`
	selectTxnRows = `SELECT transactional_id, ` + txnColumns + ` FROM transactions WHERE bucket = ? AND transactional_id IN ?`
	insertTxnRow  = `INSERT INTO transactions (bucket, transactional_id, ` + txnColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`

	setTxnRow = `UPDATE transactions SET producer_id = ?, epoch = ?, status = ?, timeout_ms = ?, deadline = ?, ` +
		`partitions = ?, groups = ?, bumped_by_coordinator = ?, version = ?, offsets = ?, prev_producer_id = ?, ` +
		`next_partitions = ?, ended = ?, timed_out = ? WHERE bucket = ? AND transactional_id = ? `
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

	// ListTxns pages in (bucket, transactional id) order: the rest of the
	// bucket of the id it continues after, then each following bucket.
	listTxnsBucket      = `SELECT transactional_id, ` + txnColumns + ` FROM transactions WHERE bucket = ? LIMIT ?`
	listTxnsBucketAfter = `SELECT transactional_id, ` + txnColumns + ` FROM transactions WHERE bucket = ? AND transactional_id > ? LIMIT ?`

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
	next       []bookkeeping.TxnPartition
	ended      int  // null (older rows) scans as 0
	timedOut   bool // null (older rows) scans as false
}

// dest are the scan destinations of txnColumns.
func (r *txnRow) dest() []any {
	return append(r.destV8(), &r.next, &r.ended, &r.timedOut)
}

// destV8 are the scan destinations of txnColumnsV8.
func (r *txnRow) destV8() []any {
	return []any{&r.producerID, &r.epoch, &r.status, &r.timeoutMS, &r.deadline, &r.partitions, &r.groups, &r.bumped, &r.version, &r.offsets, &r.prevID}
}

// txn converts the row; a row that does not make a valid Txn is an error
// (never used, never overwritten).
func (r txnRow) txn() (bookkeeping.Txn, error) {
	t := bookkeeping.Txn{
		TransactionalID: r.id, ProducerID: r.producerID, Status: bookkeeping.TxnEmpty,
		Timeout: time.Duration(r.timeoutMS) * time.Millisecond, BumpedByCoordinator: r.bumped, PrevProducerID: r.prevID, Version: 1,
		Partitions: nilIfEmpty(r.partitions), Groups: nilIfEmpty(r.groups), Offsets: nilIfEmpty(r.offsets),
		Next: nilIfEmpty(r.next), TimedOut: r.timedOut,
	}
	if r.ended < 0 || r.ended > math.MaxUint8 {
		return bookkeeping.Txn{}, fmt.Errorf("stored record of %q: ended %d out of range", r.id, r.ended)
	}
	t.Ended = bookkeeping.TxnStatus(r.ended)
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
	return []any{t.ProducerID, int(t.Epoch), int(t.Status), t.Timeout.Milliseconds(), deadline, nonNil(t.Partitions), nonNil(t.Groups), t.BumpedByCoordinator, t.Version, nonNil(t.Offsets), t.PrevProducerID,
		nonNil(t.Next), int(t.Ended), t.TimedOut}
}

// txnBucket is the bucket of a transactional id's row among n: FNV-1a (32
// bits) of the id's bytes, modulo n. A stored format: every binary on a
// keyspace must compute the same bucket (schema v8).
func txnBucket(id string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// bucket is the bucket of id in this keyspace.
func (s *store) bucket(id string) int { return txnBucket(id, s.txnBuckets) }

// txn reads the record of id serially (completing any Paxos round in
// flight, so it is the settled outcome of every earlier write); found is
// false when there is none.
func (s *store) txn(ctx context.Context, id string) (t bookkeeping.Txn, found bool, err error) {
	r := txnRow{id: id}
	err = s.serialRead(selectTxnRow, s.bucket(id), id).ScanContext(ctx, r.dest()...)
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

// PutTxn implements bookkeeping.Transactions: one compare-and-set
// conditioned on the version (INSERT … IF NOT EXISTS at version 0), which
// the bucket's batcher sends with the other writes of the bucket waiting
// at that moment as one conditional batch (txnbatch.go). A write whose
// outcome is unknown is settled by a serial read: the record as written is
// success, the version unchanged a retry, anything else a conflict.
func (s *store) PutTxn(ctx context.Context, t bookkeeping.Txn) (bookkeeping.Txn, error) {
	w := s.putWrite(t)
	if err := s.batches.do(ctx, s.bucket(t.TransactionalID), w); err != nil {
		return bookkeeping.Txn{}, fmt.Errorf("put transaction %q: %w", t.TransactionalID, err)
	}
	return w.next, nil
}

// putWrite is PutTxn's conditional write of t at its next version.
func (s *store) putWrite(t bookkeeping.Txn) *txnWrite {
	next := t
	next.Version++
	w := &txnWrite{next: next, expect: txnExpect{version: t.Version}}
	b := s.bucket(t.TransactionalID)
	w.stmt, w.args = putTxnIf, append(txnArgs(next), b, t.TransactionalID, t.Version)
	switch t.Version {
	case 0:
		w.stmt, w.args = insertTxnRow, append([]any{b, t.TransactionalID}, txnArgs(next)...)
	case 1:
		w.stmt, w.args = putTxnIfV1, w.args[:len(w.args)-1]
	}
	return w
}

// sameTxn reports whether a and b are the same record.
func sameTxn(a, b bookkeeping.Txn) bool {
	return a.TransactionalID == b.TransactionalID && a.ProducerID == b.ProducerID && a.Epoch == b.Epoch &&
		a.Status == b.Status && a.Timeout == b.Timeout && a.Deadline.Equal(b.Deadline) &&
		slices.Equal(a.Partitions, b.Partitions) && slices.Equal(a.Groups, b.Groups) &&
		slices.Equal(a.Offsets, b.Offsets) && a.BumpedByCoordinator == b.BumpedByCoordinator && a.Version == b.Version &&
		a.PrevProducerID == b.PrevProducerID
}

// ListTxns implements bookkeeping.Transactions in (bucket, transactional
// id) order: the ids after `after` in its bucket, then every following
// bucket in turn. Reads at the regular consistency.
func (s *store) ListTxns(ctx context.Context, after string, limit int) ([]bookkeeping.Txn, bool, error) {
	txns := []bookkeeping.Txn{}
	first := 0
	if after != "" {
		first = s.bucket(after)
	}
	for b := first; b < s.txnBuckets && len(txns) <= limit; b++ {
		q := s.read(listTxnsBucket, b, limit+1-len(txns))
		if b == first && after != "" {
			q = s.read(listTxnsBucketAfter, b, after, limit+1-len(txns))
		}
		more, err := s.scanTxns(ctx, q, limit+1-len(txns))
		if err != nil {
			return nil, false, fmt.Errorf("list transactions: %w", err)
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

// The keyspace setting schema v8 writes, and v8's copy of the records.
const (
	txnBucketsSetting = "txn_buckets"
	insertSetting     = `INSERT INTO keyspace_settings (name, value) VALUES (?, ?) IF NOT EXISTS`
	selectSetting     = `SELECT value FROM keyspace_settings WHERE name = ?`
	selectOldTxnRows  = `SELECT transactional_id, ` + txnColumnsV8 + ` FROM transactional_producers`
	insertTxnRowV8    = `INSERT INTO transactions (bucket, transactional_id, ` + txnColumnsV8 + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`
)

// readTxnBuckets reads the keyspace's txn_buckets setting.
func readTxnBuckets(ctx context.Context, s *gocql.Session, cons gocql.Consistency) (int, error) {
	var n int64
	err := s.Query(selectSetting, txnBucketsSetting).Consistency(cons).Idempotent(true).ScanContext(ctx, &n)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return 0, fmt.Errorf("no %s setting in keyspace_settings: the migration to schema v8 did not finish (run it again)", txnBucketsSetting)
	case err != nil:
		return 0, fmt.Errorf("read the %s setting: %w", txnBucketsSetting, err)
	case n < 1 || n > MaxTxnBuckets:
		return 0, fmt.Errorf("stored %s setting %d: outside [1, %d]", txnBucketsSetting, n, MaxTxnBuckets)
	}
	return int(n), nil
}

// moveTxnsToBuckets is schema v8's data step: it writes the txn_buckets
// setting (unless a first run of the step already did) and copies every
// row of transactional_producers into transactions at its bucket, as it
// is (a column null there stays null). Each copy is INSERT … IF NOT
// EXISTS: a step run again after an interruption, or by two processes
// migrating at once, never overwrites a row a v8 binary has written since.
func moveTxnsToBuckets(ctx context.Context, s *gocql.Session, env migrationEnv) error {
	lwt := func(stmt string, args ...any) error {
		_, err := s.Query(stmt, args...).Consistency(env.cons).SerialConsistency(env.serial).MapScanCASContext(ctx, map[string]any{})
		return err
	}
	if err := lwt(insertSetting, txnBucketsSetting, int64(env.txnBuckets)); err != nil && !unknownOutcome(err) {
		return fmt.Errorf("write the %s setting: %w", txnBucketsSetting, err)
	}
	n, err := readTxnBuckets(ctx, s, env.cons)
	if err != nil {
		return err
	}
	iter := s.Query(selectOldTxnRows).Consistency(env.cons).Idempotent(true).PageSize(txnPageSize).IterContext(ctx)
	for {
		r := txnRow{}
		if !iter.Scan(append([]any{&r.id}, r.destV8()...)...) {
			break
		}
		var deadline any
		if !r.deadline.IsZero() {
			deadline = r.deadline
		}
		args := []any{txnBucket(r.id, n), r.id, r.producerID, r.epoch, r.status, r.timeoutMS, deadline,
			nonNil(r.partitions), nonNil(r.groups), r.bumped, r.version, nonNil(r.offsets), r.prevID}
		if err := lwt(insertTxnRowV8, args...); err != nil {
			_ = iter.Close()
			return fmt.Errorf("copy the record of %q to transactions: %w", r.id, err)
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("scan transactional_producers: %w", err)
	}
	return nil
}

// nonNil is s, or an empty slice for nil: lists are written empty, never
// null (a null cell is a tombstone).
func nonNil[S ~[]E, E any](s S) S {
	if s == nil {
		return S{}
	}
	return s
}
