package journal

import "errors"

var (
	// ErrCorrupt means stored journal data is damaged in a way a crash
	// cannot explain (see "Recovery" in the package doc). The journal refuses
	// to open; nothing is skipped or repaired. An operator must decide what to
	// do with the disk.
	ErrCorrupt = errors.New("journal: corrupt")

	// ErrRecordTooLarge is returned by Append for a record above
	// Config.MaxRecordSize. The record is not enqueued.
	ErrRecordTooLarge = errors.New("journal: record too large")

	// ErrQueueFull is returned by Append when the queue of records waiting for
	// their group commit stayed full until the caller's context ended. It
	// wraps the context's error too. The record is not enqueued; the caller
	// may retry later (a bookie answers RESOURCE_EXHAUSTED).
	ErrQueueFull = errors.New("journal: queue full")

	// ErrClosed is returned for operations on a closed (or closing) journal.
	ErrClosed = errors.New("journal: closed")

	// ErrFailed means a write or fsync of the journal failed. The journal
	// refuses every later append: after a failed fsync the kernel may have
	// dropped the dirty pages and marked them clean, so a retried fsync can
	// report success for data that is not on disk ("fsyncgate"). The only
	// safe recovery is to Close and Open again, which re-reads what is really
	// on disk. Errors returned with ErrFailed also wrap the I/O error.
	ErrFailed = errors.New("journal: failed, reopen required")

	// ErrCheckpointAhead is returned by Checkpoint for a position beyond the
	// last durable record: the journal cannot forget what it has not synced.
	ErrCheckpointAhead = errors.New("journal: checkpoint beyond durable position")
)
