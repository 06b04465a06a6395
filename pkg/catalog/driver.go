package catalog

import "context"

// Driver is what a catalog backend implements: storage, and nothing else.
// Only Catalog calls a Driver; a backend's constructor hands its driver to
// New and returns the *Catalog, so no caller can reach a driver directly.
//
// Catalog has checked every argument before a Driver method runs, so a
// driver checks none of them again. A driver may rely on:
//
//   - names, ids, addresses, indexes, TTLs, specs and configs passing this
//     package's Validate functions, as listed on each Catalog method;
//   - limit being resolved: in [1, MaxPageSize], never 0;
//   - GetLedgers' ids being sorted and distinct, at most MaxPageSize;
//   - ListLedgersByState's state being Valid.
//
// A driver still decides everything that depends on stored state — the
// rules in partition.go, topic.go, trigger.go and ledgerrules.go (CanAcquire,
// CheckAddPartitions, CheckTriggerUpdate, NextLedger, ...), which it calls on
// what it read and commits atomically — and it decodes its own page tokens
// (their format is the backend's: a token that is not one of its own is a
// *ValidationError with field "pageToken"). Its errors are the taxonomy of
// errors.go, as each interface method documents.
//
// The methods are those of the catalog's interfaces, with one exception:
// partitions are listed by index range (ListPartitionRange), because the
// page token of ListPartitions is the same for every backend (IndexToken)
// and Catalog owns it. So a Driver does not implement Partitions, and a
// driver cannot be passed where the catalog is expected.
type Driver interface {
	Topics
	DeletedTopics
	Writers
	LedgerTrimmer
	Owners
	Ledgers
	LedgerLister
	Bookies
	Triggers
	Schemas
	ACLDriver

	// GetPartition is Partitions.GetPartition.
	GetPartition(ctx context.Context, topic string, partition int) (Partition, error)

	// ListPartitionRange returns the partitions of a live topic from index
	// start on, at most limit of them (fewer at the topic's end; none when
	// start is at or past it), in index order; more reports whether
	// partitions follow the last one returned. Errors: ErrNotFound (topic).
	ListPartitionRange(ctx context.Context, topic string, start, limit int) (partitions []Partition, more bool, err error)

	// Close releases what the driver holds (the embedded store's files;
	// DynamoDB's client holds nothing to release).
	Close() error
}
