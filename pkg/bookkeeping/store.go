package bookkeeping

import (
	"context"
	"slices"
)

// Driver is what a bookkeeping backend implements: storage, and nothing
// else. Only Store calls a Driver; a backend's constructor hands its driver
// to New and returns the *Store, so no caller can reach a driver directly.
//
// Store has checked every argument before a Driver method runs (the
// Validate functions listed on each Store method), so a driver checks none
// of them again. It decides everything that depends on stored state —
// liveness, lease ownership and epochs (fencing), the never-backwards rule
// of offsets and its exception for another topic incarnation, the
// live-member rule of standalone commits, MaxGroupMembers, producer epochs,
// the version of a transactional id's record — and makes each decision
// atomic with its write.
type Driver interface {
	Members
	Leases
	Offsets
	Groups
	Producers
	Transactions

	// Close releases what the driver holds (the embedded store's files,
	// Cassandra's session).
	Close() error
}

// Store is the bookkeeping callers use: one portable type over any
// backend's Driver. It checks every argument once and calls the driver only
// with arguments that passed, so every backend refuses the same input with
// the same *ValidationError, returned as the check made it (not wrapped),
// before any I/O. Everything else is the driver's: its results and errors
// are returned unchanged.
//
// Store implements Members, Leases, Offsets, Groups, Producers and
// Transactions. Depend
// on those, not on *Store, except where the store is opened and closed.
// Safe for concurrent use (every backend's driver is).
type Store struct {
	d Driver
}

var (
	_ Members   = (*Store)(nil)
	_ Leases    = (*Store)(nil)
	_ Offsets   = (*Store)(nil)
	_ Groups    = (*Store)(nil)
	_ Producers = (*Store)(nil)

	_ Transactions = (*Store)(nil)
)

// New returns the store over d. Backends call it in their constructors;
// callers get a *Store from there (embedded.Open, cassandra.Open).
func New(d Driver) *Store { return &Store{d: d} }

// Close closes the driver.
func (s *Store) Close() error { return s.d.Close() }

// Join implements Members. Checked: the group name, Member.Validate.
func (s *Store) Join(ctx context.Context, group string, m Member) error {
	if err := ValidateName("group", group); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	return s.d.Join(ctx, group, m)
}

// Heartbeat implements Members. Checked: the group name, the member id.
func (s *Store) Heartbeat(ctx context.Context, group, memberID string) error {
	if err := validateMember(group, memberID); err != nil {
		return err
	}
	return s.d.Heartbeat(ctx, group, memberID)
}

// Leave implements Members. Checked: the group name, the member id.
func (s *Store) Leave(ctx context.Context, group, memberID string) error {
	if err := validateMember(group, memberID); err != nil {
		return err
	}
	return s.d.Leave(ctx, group, memberID)
}

// ListMembers implements Members. Checked: the group name.
func (s *Store) ListMembers(ctx context.Context, group string) ([]Member, error) {
	if err := ValidateName("group", group); err != nil {
		return nil, err
	}
	return s.d.ListMembers(ctx, group)
}

// Acquire implements Leases. Checked: ValidateLeaseKey.
func (s *Store) Acquire(ctx context.Context, group, topic string, partition int32, member string) (int64, error) {
	if err := ValidateLeaseKey(group, topic, partition, member); err != nil {
		return 0, err
	}
	return s.d.Acquire(ctx, group, topic, partition, member)
}

// Release implements Leases. Checked: ValidateLeaseKey, the epoch.
func (s *Store) Release(ctx context.Context, group, topic string, partition int32, member string, epoch int64) error {
	if err := ValidateLeaseKey(group, topic, partition, member); err != nil {
		return err
	}
	if err := ValidateEpoch("epoch", epoch); err != nil {
		return err
	}
	return s.d.Release(ctx, group, topic, partition, member, epoch)
}

// ListLeases implements Leases. Checked: the group and topic names.
func (s *Store) ListLeases(ctx context.Context, group, topic string) ([]Lease, error) {
	if err := validateGroupTopic(group, topic); err != nil {
		return nil, err
	}
	return s.d.ListLeases(ctx, group, topic)
}

// Commit implements Offsets. Checked: Commit.Validate.
func (s *Store) Commit(ctx context.Context, c Commit) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return s.d.Commit(ctx, c)
}

// Reset implements Offsets. Checked: Commit.ValidateReset.
func (s *Store) Reset(ctx context.Context, c Commit) error {
	if err := c.ValidateReset(); err != nil {
		return err
	}
	return s.d.Reset(ctx, c)
}

// FetchOffset implements Offsets. Checked: the group and topic names, the
// partition.
func (s *Store) FetchOffset(ctx context.Context, group, topic string, partition int32) (Committed, error) {
	if err := validateGroupTopic(group, topic); err != nil {
		return Committed{}, err
	}
	if err := ValidatePartition("partition", partition); err != nil {
		return Committed{}, err
	}
	return s.d.FetchOffset(ctx, group, topic, partition)
}

// ListOffsets implements Offsets. Checked: the group name, Cursor.Validate,
// ValidateListLimit.
func (s *Store) ListOffsets(ctx context.Context, group string, after Cursor, limit int) ([]GroupOffset, bool, error) {
	if err := ValidateName("group", group); err != nil {
		return nil, false, err
	}
	if err := after.Validate(); err != nil {
		return nil, false, err
	}
	if err := ValidateListLimit(limit); err != nil {
		return nil, false, err
	}
	return s.d.ListOffsets(ctx, group, after, limit)
}

// CommitTxnOffsets implements Offsets. Checked: ValidateTxnOffsets, and at
// least one offset.
func (s *Store) CommitTxnOffsets(ctx context.Context, offsets []TxnOffset) error {
	if len(offsets) == 0 {
		return invalid("offsets", "at least one offset is required")
	}
	if err := ValidateTxnOffsets("offsets", offsets); err != nil {
		return err
	}
	return s.d.CommitTxnOffsets(ctx, slices.Clone(offsets))
}

// ListGroups implements Groups. Checked: ValidateListGroups.
func (s *Store) ListGroups(ctx context.Context, after string, limit int) ([]string, bool, error) {
	if err := ValidateListGroups(after, limit); err != nil {
		return nil, false, err
	}
	return s.d.ListGroups(ctx, after, limit)
}

// AllocateProducerID implements Producers. It takes no arguments to check.
func (s *Store) AllocateProducerID(ctx context.Context) (int64, error) {
	return s.d.AllocateProducerID(ctx)
}

// InitProducer implements Producers. Checked: ValidateTransactionalID.
func (s *Store) InitProducer(ctx context.Context, transactionalID string) (Producer, error) {
	if err := ValidateTransactionalID(transactionalID); err != nil {
		return Producer{}, err
	}
	return s.d.InitProducer(ctx, transactionalID)
}

// GetTxn implements Transactions. Checked: the transactional id, a valid
// name ("" is not one here: it names no record).
func (s *Store) GetTxn(ctx context.Context, transactionalID string) (Txn, error) {
	if err := ValidateName("transactional_id", transactionalID); err != nil {
		return Txn{}, err
	}
	return s.d.GetTxn(ctx, transactionalID)
}

// PutTxn implements Transactions. Checked: Txn.Validate. The driver gets
// t.Stored() — milliseconds, nil for empty lists, slices of its own — so
// every backend stores and returns the same.
func (s *Store) PutTxn(ctx context.Context, t Txn) (Txn, error) {
	if err := t.Validate(); err != nil {
		return Txn{}, err
	}
	return s.d.PutTxn(ctx, t.Stored())
}

// ListTxns implements Transactions. Checked: ValidateListTxns.
func (s *Store) ListTxns(ctx context.Context, after string, limit int) ([]Txn, bool, error) {
	if err := ValidateListTxns(after, limit); err != nil {
		return nil, false, err
	}
	return s.d.ListTxns(ctx, after, limit)
}

func validateMember(group, memberID string) error {
	if err := ValidateName("group", group); err != nil {
		return err
	}
	return ValidateName("member", memberID)
}

func validateGroupTopic(group, topic string) error {
	if err := ValidateName("group", group); err != nil {
		return err
	}
	return ValidateName("topic", topic)
}
