package bookkeeping

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// TxnStatus is where a transactional id's current transaction is. The
// values are stored (they are the embedded record's and the Cassandra
// column's numbers) and never change; they are those of the coordinator's
// txn.Status, which the coordinator converts to and from.
type TxnStatus uint8

const (
	// TxnEmpty: the producer is initialised and no transaction is open. A
	// record written only by InitProducer, or by a binary older than the
	// transaction state, reads as TxnEmpty.
	TxnEmpty TxnStatus = iota + 1
	// TxnOngoing: a transaction is open; partitions and groups join it.
	TxnOngoing
	// TxnPrepareCommit, TxnPrepareAbort: the outcome is decided and stored;
	// the markers are being written.
	TxnPrepareCommit
	TxnPrepareAbort
	// TxnCompleteCommit, TxnCompleteAbort: every marker is written.
	TxnCompleteCommit
	TxnCompleteAbort
)

func (s TxnStatus) String() string {
	switch s {
	case TxnEmpty:
		return "empty"
	case TxnOngoing:
		return "ongoing"
	case TxnPrepareCommit:
		return "prepare-commit"
	case TxnPrepareAbort:
		return "prepare-abort"
	case TxnCompleteCommit:
		return "complete-commit"
	case TxnCompleteAbort:
		return "complete-abort"
	}
	return fmt.Sprintf("TxnStatus(%d)", uint8(s))
}

// Valid reports whether s is one of the six statuses.
func (s TxnStatus) Valid() bool { return s >= TxnEmpty && s <= TxnCompleteAbort }

// Idle reports whether no transaction is open or ending (TxnEmpty,
// TxnCompleteCommit, TxnCompleteAbort): the only statuses InitProducer
// bumps over.
func (s TxnStatus) Idle() bool {
	return s == TxnEmpty || s == TxnCompleteCommit || s == TxnCompleteAbort
}

// TxnPartition is a partition of a topic incarnation a transaction wrote to.
type TxnPartition struct {
	// TopicID is the catalog's id of the topic incarnation (bounded like a
	// name; see Commit.TopicID for why it is a plain string).
	TopicID   string
	Partition int32
}

// TxnOffset is a consumer offset a transaction commits: the next offset
// to consume of a partition of a topic incarnation, for a group.
type TxnOffset struct {
	Group, Topic string
	// TopicID is the incarnation the offset belongs to (see Commit.TopicID).
	TopicID   string
	Partition int32
	// Offset is the next offset to consume, in [0, MaxOffset].
	Offset int64
}

// Txn is the record of one transactional id: the producer session
// InitProducer hands out and the transaction coordinator's state, in ONE
// record, so that the producer id and epoch InitProducer returns and the
// ones the coordinator decides on are the same data. It is changed only by
// compare-and-set on Version (PutTxn, InitProducer).
//
// The store keeps the fields as given, except Timeout and Deadline, which
// it keeps to the millisecond (Store truncates them before any backend
// sees them, so every backend returns the same), and Partitions and
// Groups, which read as nil when empty. It does not check the
// coordinator's rules (which status may follow which, that partitions are
// empty when idle, that only an Ongoing transaction has a deadline): those
// are the coordinator's (services/ingest/txn), and the store only stores.
type Txn struct {
	TransactionalID string
	// ProducerID ≥ 1 and Epoch in [0, MaxProducerEpoch]: the producer
	// session; InitProducer returns them.
	ProducerID int64
	Epoch      int16
	Status     TxnStatus
	// Timeout is the producer's transaction timeout, in [0,
	// MaxTxnTimeout], stored to the millisecond. 0 until a coordinator
	// sets one (a record InitProducer created).
	Timeout time.Duration
	// Deadline is when the open transaction times out; zero for none.
	// Stored to the millisecond and returned in UTC; a non-zero deadline
	// must lie in [1970-01-01T00:00:00.001Z, 9999-12-31T23:59:59.999Z].
	Deadline time.Time
	// Partitions and Groups joined the current transaction: at most
	// MaxTxnPartitions distinct partitions and MaxTxnGroups distinct
	// group names, returned in the order stored; nil when none.
	Partitions []TxnPartition
	Groups     []string
	// Offsets are the consumer offsets the transaction commits: applied
	// (Offsets.CommitTxnOffsets) when it commits, dropped when it aborts.
	// At most MaxTxnOffsets, distinct by (group, topic, partition); nil
	// when none.
	Offsets []TxnOffset
	// BumpedByCoordinator: the last epoch bump was the coordinator's (an
	// InitProducer, or a timeout's abort), not the client's EndTxn.
	BumpedByCoordinator bool
	// PrevProducerID is the producer id an EndTxn replaced with ProducerID
	// because its epochs were spent (KIP-890); 0 for none. ≥ 0.
	PrevProducerID int64
	// Next are the partitions the producer's next transaction opens with,
	// named by the EndTxn this (prepared) record decided: at most
	// MaxTxnPartitions distinct, in the order stored; nil when none.
	Next []TxnPartition
	// Ended is how the transaction whose EndTxn opened the current one
	// (with Next) ended — a status, or 0 for none.
	Ended TxnStatus
	// TimedOut: the last epoch bump was a timeout's abort, and the session
	// before it may resume (KIP-588).
	TimedOut bool
	// Version is the compare-and-set token: 0 when nothing is stored,
	// 1 once the record is created, one more with every write (PutTxn or
	// InitProducer). Records stored before the transaction state existed
	// read as version 1.
	Version int64
}

// Transactions stores the transaction coordinator's state per
// transactional id: the Txn record, which is also the record
// Producers.InitProducer keeps its producer id and epoch in.
//
// Consistency: GetTxn, PutTxn and InitProducer are linearizable (one
// compare-and-set on the record: Cassandra LWT, and a serial read for
// GetTxn; the embedded store's lock), so a decision the coordinator makes
// on GetTxn's answer without writing — a request that changes nothing —
// is made on the current state. ListTxns reads like ListGroups (every
// write acknowledged before it started is seen); a sweeper re-reads an
// entry with GetTxn before acting on it.
type Transactions interface {
	// GetTxn returns the record of transactionalID. Errors: ErrNotFound
	// when none is stored (InitProducer or PutTxn creates it);
	// *ValidationError.
	GetTxn(ctx context.Context, transactionalID string) (Txn, error)

	// PutTxn stores t if the stored record's Version is t.Version (0:
	// nothing is stored yet) and returns t as stored, with Version one
	// higher (and Timeout and Deadline to the millisecond). The fields are
	// stored as given: a producer id new to the record must come from
	// AllocateProducerID, and the epoch rules are the coordinator's.
	// Errors:
	// ErrConflict when the stored version is another (another writer —
	// a coordinator, an InitProducer — won; nothing was written: read
	// again and decide again); *ValidationError.
	PutTxn(ctx context.Context, t Txn) (Txn, error)

	// ListTxns returns up to limit records in the backend's listing order,
	// starting strictly after the transactional id after ("" starts at the
	// beginning; after need not be stored); more reports whether records
	// remain (continue from the last one returned). The order is a total
	// order on ids that never changes: byte order of the id on the
	// embedded store; on Cassandra the partitioner's token of the id, then
	// its bytes (a scan of the table in its own order; id order would need
	// an index of every id). Every record stored before the first page and
	// still stored is listed exactly once by a complete pass; one created
	// during the pass may or may not be. Errors: *ValidationError (limit
	// in [1, MaxTxnListLimit], after "" or a valid name).
	ListTxns(ctx context.Context, after string, limit int) (txns []Txn, more bool, err error)
}

// Validate checks t as an argument of PutTxn: the transactional id a valid
// name, the producer session, a known status, the timeout and deadline in
// range, at most MaxTxnPartitions distinct valid partitions and
// MaxTxnGroups distinct valid group names, and a version in [0,
// math.MaxInt64).
func (t Txn) Validate() error {
	if err := ValidateName("txn.transactional_id", t.TransactionalID); err != nil {
		return err
	}
	if t.ProducerID < 1 {
		return invalid("txn.producer_id", "%d is not a producer id (ids start at 1)", t.ProducerID)
	}
	if t.Epoch < 0 {
		return invalid("txn.epoch", "%d is outside [0, %d]", t.Epoch, MaxProducerEpoch)
	}
	if !t.Status.Valid() {
		return invalid("txn.status", "%v is not a transaction status", t.Status)
	}
	if t.Timeout < 0 || t.Timeout > MaxTxnTimeout {
		return invalid("txn.timeout", "%v is outside [0, %v]", t.Timeout, MaxTxnTimeout)
	}
	if !t.Deadline.IsZero() && (t.Deadline.Before(minDeadline) || t.Deadline.After(maxDeadline)) {
		return invalid("txn.deadline", "%v is outside [%v, %v] (and not zero)",
			t.Deadline, minDeadline.Format(time.RFC3339Nano), maxDeadline.Format(time.RFC3339Nano))
	}
	if err := validateTxnPartitions(t.Partitions); err != nil {
		return err
	}
	if err := validateTxnGroups(t.Groups); err != nil {
		return err
	}
	if err := ValidateTxnOffsets("txn.offsets", t.Offsets); err != nil {
		return err
	}
	if err := validateTxnPartitionsAs("txn.next", t.Next); err != nil {
		return err
	}
	if t.Ended != 0 && !t.Ended.Valid() {
		return invalid("txn.ended", "%v is not a transaction status (or 0)", t.Ended)
	}
	if t.PrevProducerID < 0 {
		return invalid("txn.prev_producer_id", "%d is not a producer id (ids start at 1; 0 for none)", t.PrevProducerID)
	}
	if t.Version < 0 || t.Version == math.MaxInt64 {
		return invalid("txn.version", "%d is outside [0, %d)", t.Version, int64(math.MaxInt64))
	}
	return nil
}

// The range of a non-zero Deadline: after the Unix epoch (a stored 0 means
// none) and within four-digit years, so that it is exact in milliseconds
// on every backend.
var (
	minDeadline = time.UnixMilli(1).UTC()
	maxDeadline = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
)

func validateTxnPartitions(ps []TxnPartition) error {
	return validateTxnPartitionsAs("txn.partitions", ps)
}

// validateTxnPartitionsAs validates the partition list named name.
func validateTxnPartitionsAs(name string, ps []TxnPartition) error {
	if len(ps) > MaxTxnPartitions {
		return invalid(name, "has %d partitions, more than %d", len(ps), MaxTxnPartitions)
	}
	seen := make(map[TxnPartition]int, len(ps))
	for i, p := range ps {
		field := func(f string) string { return fmt.Sprintf("%s[%d].%s", name, i, f) }
		if err := ValidateTopicID(field("topic_id"), p.TopicID); err != nil {
			return err
		}
		if err := ValidatePartition(field("partition"), p.Partition); err != nil {
			return err
		}
		if j, dup := seen[p]; dup {
			return invalid(fmt.Sprintf("%s[%d]", name, i), "%s/%d repeats %s[%d]", p.TopicID, p.Partition, name, j)
		}
		seen[p] = i
	}
	return nil
}

// ValidateTxnOffsets checks offsets: at most MaxTxnOffsets, valid names,
// topic ids, partitions and offsets, distinct by (group, topic,
// partition). field names the list in errors.
func ValidateTxnOffsets(field string, offsets []TxnOffset) error {
	if len(offsets) > MaxTxnOffsets {
		return invalid(field, "has %d offsets, more than %d", len(offsets), MaxTxnOffsets)
	}
	type key struct {
		group, topic string
		partition    int32
	}
	seen := make(map[key]int, len(offsets))
	for i, o := range offsets {
		f := func(name string) string { return fmt.Sprintf("%s[%d].%s", field, i, name) }
		if err := ValidateName(f("group"), o.Group); err != nil {
			return err
		}
		if err := ValidateName(f("topic"), o.Topic); err != nil {
			return err
		}
		if err := ValidateTopicID(f("topic_id"), o.TopicID); err != nil {
			return err
		}
		if err := ValidatePartition(f("partition"), o.Partition); err != nil {
			return err
		}
		if o.Offset < 0 || o.Offset > MaxOffset {
			return invalid(f("offset"), "%d is outside [0, %d]", o.Offset, int64(MaxOffset))
		}
		k := key{o.Group, o.Topic, o.Partition}
		if j, dup := seen[k]; dup {
			return invalid(fmt.Sprintf("%s[%d]", field, i), "%s/%s/%d repeats %s[%d]", o.Group, o.Topic, o.Partition, field, j)
		}
		seen[k] = i
	}
	return nil
}

func validateTxnGroups(gs []string) error {
	if len(gs) > MaxTxnGroups {
		return invalid("txn.groups", "has %d groups, more than %d", len(gs), MaxTxnGroups)
	}
	seen := make(map[string]int, len(gs))
	for i, g := range gs {
		field := fmt.Sprintf("txn.groups[%d]", i)
		if err := ValidateName(field, g); err != nil {
			return err
		}
		if j, dup := seen[g]; dup {
			return invalid(field, "%q repeats groups[%d]", g, j)
		}
		seen[g] = i
	}
	return nil
}

// Stored returns t as every backend stores it: Timeout and Deadline
// truncated to the millisecond, Deadline in UTC, empty Partitions and
// Groups nil, and slices of its own. Store hands the driver the stored
// form, so a backend that keeps only milliseconds (Cassandra's timestamp)
// and one that could keep more return the same.
func (t Txn) Stored() Txn {
	t.Timeout = t.Timeout.Truncate(time.Millisecond)
	if !t.Deadline.IsZero() {
		t.Deadline = time.UnixMilli(t.Deadline.UnixMilli()).UTC()
	}
	t.Partitions = cloneOrNil(t.Partitions)
	t.Groups = cloneOrNil(t.Groups)
	t.Offsets = cloneOrNil(t.Offsets)
	t.Next = cloneOrNil(t.Next)
	return t
}

func cloneOrNil[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// ValidateListTxns checks the arguments of ListTxns.
func ValidateListTxns(after string, limit int) error {
	if after != "" {
		if err := ValidateName("after", after); err != nil {
			return err
		}
	}
	if limit < 1 || limit > MaxTxnListLimit {
		return invalid("limit", "%d is outside [1, %d]", limit, MaxTxnListLimit)
	}
	return nil
}
