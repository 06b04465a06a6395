package ledger

import "errors"

// The ledger client's error taxonomy. The state machines return these (or
// carry them in FailAppend, Stopped, RecoveryFailed and ReadError actions),
// wrapped with context; callers test with errors.Is.
var (
	// ErrFenced: a bookie refused an add because the ledger is fenced, so
	// another writer is recovering it. The writer stops for good. An append
	// failed with ErrFenced has an unknown outcome: recovery may or may not
	// keep the entry, so the caller must not assume either (the same holds
	// for every append failed after the writer stopped).
	ErrFenced = errors.New("ledger: fenced: another writer is recovering the ledger")

	// ErrUnauthorized: a bookie rejected the writer's master key. Another
	// writer owns the ledger on that bookie; the writer stops for good.
	ErrUnauthorized = errors.New("ledger: master key rejected")

	// ErrInFlightLimit: Append found Config.MaxInFlight entries already
	// waiting for acknowledgement. Backpressure: retry once some complete.
	ErrInFlightLimit = errors.New("ledger: too many entries in flight")

	// ErrEntryTooLarge: an Append payload exceeds Config.MaxEntryBytes.
	ErrEntryTooLarge = errors.New("ledger: entry too large")

	// ErrClosed: the writer is closing or closed and takes no more appends.
	ErrClosed = errors.New("ledger: writer closed")

	// ErrTooManyEnsembleChanges: the writer asked for Config.MaxEnsembleChanges
	// ensemble changes and needs another. It stops; the caller should roll
	// over to a new ledger (after recovering this one).
	ErrTooManyEnsembleChanges = errors.New("ledger: too many ensemble changes")

	// ErrRecoveryFailed: recovery could not decide the ledger's end safely
	// (too many bookies failed to answer, so an entry is neither known
	// present nor known absent, or a recovery add cannot reach Qa). Nothing
	// was decided; retry the recovery later with fresh metadata. Recovery
	// never guesses.
	ErrRecoveryFailed = errors.New("ledger: recovery failed; retry")

	// ErrNotReadable: a read asked for an entry beyond the LAC of an open
	// ledger or beyond the last entry of a closed one.
	ErrNotReadable = errors.New("ledger: entry not readable")

	// ErrEntryUnavailable: every replica of an entry failed or answered
	// "no such entry". On an open ledger the reader's metadata may be stale
	// (a newer ensemble segment holds the entry): refresh it and retry.
	ErrEntryUnavailable = errors.New("ledger: no replica returned the entry")

	// ErrTooManyReads: the reader already has Config.MaxOutstandingReads
	// reads in progress. Backpressure.
	ErrTooManyReads = errors.New("ledger: too many reads in progress")

	// ErrInvalidEvent: the wrapper fed an event the machine cannot take in
	// its state (a programming error in the wrapper). The machine's state is
	// unchanged.
	ErrInvalidEvent = errors.New("ledger: invalid event")
)
