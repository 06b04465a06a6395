package bookkeeping

import "context"

// Producer identifies an idempotent or transactional producer session: the
// partition writers deduplicate its batches by (ID, Epoch, sequence) and
// reject batches of an older epoch of the same ID.
type Producer struct {
	ID    int64 // ≥ 1, unique across the deployment for its lifetime
	Epoch int16 // in [0, MaxProducerEpoch]
}

// Producers hands out producer ids.
type Producers interface {
	// AllocateProducerID returns a producer id no other call — on any node,
	// before or after restarts — ever returned. Ids are ≥ 1 and need not be
	// dense: backends may reserve ranges and lose the unused rest on restart.
	AllocateProducerID(ctx context.Context) (int64, error)

	// InitProducer starts a producer session. With transactionalID "" it
	// returns a fresh id with epoch 0. With a transactional id it returns the
	// id registered for it with the epoch bumped by one (epoch 0 on first
	// use), fencing every earlier session of that transactional id; when the
	// bump would reach MaxProducerEpoch (an epoch left to transaction
	// markers) it registers a new id with epoch 0.
	// Concurrent calls for one transactional id each get a distinct epoch.
	//
	// The id and epoch are those of the transactional id's Txn record
	// (Transactions): there is one record, and InitProducer writes it by
	// compare-and-set on its Version like PutTxn — it reads the record and
	// writes the bump at Version+1 only if the Version is still the one it
	// read, so a PutTxn racing it either sees the bump or fails with
	// ErrConflict, and an InitProducer that loses to a PutTxn reads again
	// and decides again. The bump leaves the record idle: Status TxnEmpty,
	// no Deadline, Partitions or Groups, BumpedByCoordinator set (a new id
	// clears it); Timeout stays. It is made only while no transaction is
	// open or ending (Status.Idle): resetting one would lose the markers its
	// partitions wait for, and a new session must never join it. With one
	// open or ending, InitProducer writes nothing and fails with
	// ErrConflict; ending it is the coordinator's (which aborts an open
	// transaction at a bumped epoch and finishes a decided one), and the
	// coordinator will then do InitProducer through GetTxn and PutTxn
	// itself.
	//
	// Errors: *ValidationError; ErrConflict when a transaction of the id is
	// open or ending, or the call kept losing races against other writers
	// of the same id (retry).
	InitProducer(ctx context.Context, transactionalID string) (Producer, error)
}

// ValidateTransactionalID checks the argument of InitProducer: "" or a valid
// name.
func ValidateTransactionalID(id string) error {
	if id == "" {
		return nil
	}
	return ValidateName("transactional_id", id)
}
