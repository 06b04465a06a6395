package client

import "errors"

// The client's own errors. It also returns the state machines' errors
// (bookkeeper/ledger: ErrFenced, ErrInFlightLimit, ErrEntryTooLarge,
// ErrClosed, ErrTooManyEnsembleChanges, ErrRecoveryFailed, ErrNotReadable,
// ErrEntryUnavailable, ...) and the catalog's (pkg/catalog: ErrNotFound,
// ErrVersionConflict, ...), wrapped with context; test with errors.Is.
var (
	// ErrClientClosed: the Client was closed; every writer it owned was
	// aborted (their ledgers stay OPEN for recovery).
	ErrClientClosed = errors.New("ledger client: closed")

	// ErrAborted: Writer.Abort stopped the writer without sealing the
	// ledger; its pending appends failed with an unknown outcome.
	ErrAborted = errors.New("ledger client: writer aborted")

	// ErrNotEnoughBookies: the registry has fewer live, writable bookies
	// (outside the ones excluded) than an ensemble or a replacement needs.
	ErrNotEnoughBookies = errors.New("ledger client: not enough writable bookies")

	// ErrUnknownBookie: a bookie id of an ensemble has no address in the
	// bookie registry (its heartbeat expired and the client never saw it).
	ErrUnknownBookie = errors.New("ledger client: bookie not in the registry")

	// ErrBookieIdentity: the server at a bookie's registered address says
	// it is another bookie. Its answers are not used: a "no such entry"
	// from the wrong bookie could truncate a ledger in recovery.
	ErrBookieIdentity = errors.New("ledger client: bookie identity mismatch")

	// ErrChecksum: an entry read from a bookie failed its checksum (or
	// came back under another entry id). The read goes to another replica;
	// this error is only logged and counted (Stats.ChecksumFailures).
	ErrChecksum = errors.New("ledger client: entry checksum mismatch")

	// ErrLedgerSealed: WaitLAC on a closed ledger whose last entry is not
	// above previous: no more entries will come.
	ErrLedgerSealed = errors.New("ledger client: ledger is closed; no more entries")

	// ErrInvalidArgument: a caller's argument is out of range.
	ErrInvalidArgument = errors.New("ledger client: invalid argument")
)
