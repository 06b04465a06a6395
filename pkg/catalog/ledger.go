package catalog

import (
	"context"
	"fmt"
	"time"
)

// LedgerID identifies a ledger cluster-wide. Ids are allocated by
// CreateLedger from a monotonic counter, start at 1, are never reused, and
// may have gaps (an allocation whose create failed burns its id).
type LedgerID int64

// LedgerState is a ledger's lifecycle state (DESIGN §2.1):
// OPEN → (IN_RECOVERY) → CLOSED → OFFLOADED → DELETED.
type LedgerState uint8

// The states. The zero value is not a state, so a forgotten field is caught.
const (
	LedgerOpen LedgerState = iota + 1
	LedgerInRecovery
	LedgerClosed
	LedgerOffloaded
	LedgerDeleted
)

var ledgerStateNames = map[LedgerState]string{
	LedgerOpen:       "OPEN",
	LedgerInRecovery: "IN_RECOVERY",
	LedgerClosed:     "CLOSED",
	LedgerOffloaded:  "OFFLOADED",
	LedgerDeleted:    "DELETED",
}

func (s LedgerState) String() string {
	if n, ok := ledgerStateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("LedgerState(%d)", uint8(s))
}

// Valid reports whether s is one of the states.
func (s LedgerState) Valid() bool { _, ok := ledgerStateNames[s]; return ok }

// Sealed reports whether the ledger's content is final: CLOSED or later.
// A sealed ledger's last entry and offsets never change again, nor do its
// segments' boundaries; only re-replication moves a CLOSED ledger's copies
// to other bookies (NextLedger, checkReplicaMove).
func (s LedgerState) Sealed() bool { return s >= LedgerClosed }

// ParseLedgerState parses a state's String form.
func ParseLedgerState(name string) (LedgerState, error) {
	for s, n := range ledgerStateNames {
		if n == name {
			return s, nil
		}
	}
	return 0, Invalid("state", "%q is not a ledger state", name)
}

// EnsembleSegment is the ensemble that stores entries from FirstEntry on,
// until the next segment's FirstEntry (BookKeeper's ensemble change).
type EnsembleSegment struct {
	FirstEntry int64
	Bookies    []string // E bookie ids; entry e goes to Qw of them, striped by e mod E
}

// LedgerSpec is what CreateLedger needs.
type LedgerSpec struct {
	Topic       string
	TopicID     TopicID
	Partition   int
	Replication Replication
	Ensemble    []string // the first segment's bookies, len == Replication.Ensemble
	FirstOffset int64    // the partition offset of the ledger's first record
	WriterOwner string   // the creating writer's lease, for recovery and audit
	WriterEpoch int64
}

// LedgerMetadata is a ledger's catalog record.
//
// Invariants (checked by NextLedger on every update): ID, topic, partition,
// replication, FirstOffset, writer and CreatedAt never change; Ensembles
// start at entry 0 with strictly increasing FirstEntry, each segment of E
// distinct bookies; once Sealed, LastEntry, LastOffset and the segments'
// boundaries never change, and the bookies only by a replica move of a
// CLOSED ledger; LastEntry == -1 iff LastOffset == FirstOffset-1 (empty);
// Location is set exactly from OFFLOADED on; Damaged is empty unless
// CLOSED, names each bookie at most once, and only bookies the segments
// name (NextLedger drops the marks that no longer apply).
type LedgerMetadata struct {
	ID          LedgerID
	Topic       string
	TopicID     TopicID
	Partition   int
	Replication Replication
	Ensembles   []EnsembleSegment
	State       LedgerState
	LastEntry   int64 // -1 when the ledger has no entries (or none recorded yet)
	FirstOffset int64
	LastOffset  int64 // FirstOffset-1 when empty
	Location    string
	WriterOwner string
	WriterEpoch int64
	CreatedAt   time.Time // set by the store
	ClosedAt    time.Time // set by the store on the transition to CLOSED
	// Damaged are copies a reader found bad on a live bookie: the
	// auditor's findings that the registry cannot show (re-replication
	// moves each; bookkeeper/DESIGN.md §4.1).
	Damaged []DamagedCopy
	Version int64
}

// DamagedCopy marks a bookie's copy of a CLOSED ledger as bad: an entry
// the bookie should hold failed its checksum or the bookie answered that
// it does not have it. Re-replication moves the copy to another bookie;
// the move drops the mark.
type DamagedCopy struct {
	Bookie string
	Entry  int64 // the entry found bad (the first one reported)
	Reason DamageReason
	At     time.Time // when it was reported (the reporter's clock)
}

// DamageReason says how a copy was found bad.
type DamageReason string

const (
	// DamageMissing: the bookie answered that it does not hold an entry
	// of its write set (a partial or lost copy).
	DamageMissing DamageReason = "missing"
	// DamageChecksum: an entry it returned failed verification.
	DamageChecksum DamageReason = "checksum"
)

// Valid reports whether r is one of the reasons above.
func (r DamageReason) Valid() bool { return r == DamageMissing || r == DamageChecksum }

// DamagedOn returns m's mark on bookie b, if any.
func (m LedgerMetadata) DamagedOn(b string) (DamagedCopy, bool) {
	for _, d := range m.Damaged {
		if d.Bookie == b {
			return d, true
		}
	}
	return DamagedCopy{}, false
}

// Ledgers stores ledger metadata. The bookkeeper client (writers,
// recovery) depends on this.
type Ledgers interface {
	// CreateLedger allocates a new ledger id and stores the ledger OPEN,
	// with one ensemble segment from entry 0, LastEntry -1, Version 1.
	// Errors: *ValidationError.
	CreateLedger(ctx context.Context, spec LedgerSpec) (LedgerMetadata, error)

	// GetLedger returns a ledger's metadata. Errors: ErrNotFound.
	GetLedger(ctx context.Context, id LedgerID) (LedgerMetadata, error)

	// GetLedgers returns the metadata of those of ids that exist, each
	// once, in id order (ids may repeat; ids that do not exist are left
	// out), read as GetLedger would: one call instead of one per ledger.
	// Errors: *ValidationError (field "ids": more than MaxPageSize ids).
	GetLedgers(ctx context.Context, ids []LedgerID) ([]LedgerMetadata, error)

	// UpdateLedger stores m if the stored version is still m.Version
	// (compare-and-set) and the change is legal (NextLedger), and returns the
	// stored record (Version+1). Start m from a read. Errors: ErrNotFound,
	// ErrVersionConflict, *ValidationError (illegal transition or change to
	// an immutable field; field "state", "ensembles", ...).
	UpdateLedger(ctx context.Context, m LedgerMetadata) (LedgerMetadata, error)

	// DeleteLedgerMetadata removes a DELETED ledger's record, if its version
	// is still expectVersion: the last step after the bookies dropped its
	// data. Errors: ErrNotFound, ErrVersionConflict, *ValidationError
	// (state is not DELETED).
	DeleteLedgerMetadata(ctx context.Context, id LedgerID, expectVersion int64) error
}

// LedgerLister finds ledgers for the compactor: orphans of a partition
// (created but never appended), ledgers to offload or delete.
type LedgerLister interface {
	// ListLedgersByPartition returns the ledgers created for a partition of
	// a topic incarnation, in id order, whatever their state and whether or
	// not they are in the partition's chain. Errors: *ValidationError.
	ListLedgersByPartition(ctx context.Context, topicID TopicID, partition int, pageToken string, limit int) (Page[LedgerMetadata], error)

	// ListLedgersByState returns the ledgers in a state, in id order.
	// Errors: *ValidationError.
	ListLedgersByState(ctx context.Context, state LedgerState, pageToken string, limit int) (Page[LedgerMetadata], error)
}
