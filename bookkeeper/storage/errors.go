package storage

import "errors"

// The storage's error taxonomy. Errors are wrapped with context; test them
// with errors.Is. The bookie maps them to its protocol at the RPC edge.
var (
	// ErrCorrupt: stored data failed its checksum or does not decode. It is
	// never returned together with data. An entry that reads ErrCorrupt
	// stays unreadable (the bookie answers DATA_LOSS and the client reads
	// another replica); nothing is skipped or repaired.
	ErrCorrupt = errors.New("storage: corrupt data")

	// ErrDataLoss: data the storage had is gone — the index refers to an
	// entry log file that no longer exists, or a directory lost its index.
	// Open refuses; an operator must decide (the bookie's ledgers can be
	// re-replicated from the other bookies).
	ErrDataLoss = errors.New("storage: data lost")

	// ErrCookieMissing: a data directory has no cookie where one must be
	// (it was wiped or replaced), or holds data without a cookie. Open
	// refuses rather than serve "no such entry" for data it once had.
	ErrCookieMissing = errors.New("storage: cookie missing")

	// ErrCookieMismatch: a cookie belongs to another bookie, instance,
	// storage or directory role — a disk was swapped or mounted at the
	// wrong path. Open refuses.
	ErrCookieMismatch = errors.New("storage: cookie mismatch")

	// ErrNoSuchLedger: the storage has no entry and no metadata for the
	// ledger, or the ledger was deleted. Only ever returned by an open
	// storage, whose cookies proved at Open that no data was lost.
	ErrNoSuchLedger = errors.New("storage: no such ledger")

	// ErrNoSuchEntry: the ledger exists but the entry was never stored here
	// (same proof as ErrNoSuchLedger).
	ErrNoSuchEntry = errors.New("storage: no such entry")

	// ErrFenced: a normal add to a fenced ledger. Recovery and replay adds
	// pass.
	ErrFenced = errors.New("storage: ledger fenced")

	// ErrUnauthorized: the master key differs from the one the ledger's
	// first add (or fence) set.
	ErrUnauthorized = errors.New("storage: master key mismatch")

	// ErrBadChecksum: an add's checksum is not the wire.EntryChecksum of its
	// fields. Nothing is stored.
	ErrBadChecksum = errors.New("storage: entry checksum mismatch")

	// ErrEntryTooLarge: an add's payload exceeds Options.MaxEntrySize.
	ErrEntryTooLarge = errors.New("storage: entry too large")

	// ErrInvalidArgument: a negative id, a LAC below -1, an oversized master
	// key, a bad range.
	ErrInvalidArgument = errors.New("storage: invalid argument")

	// ErrLedgerDeleted: an add, fence or LAC for a ledger deleted on this
	// storage. Ledger ids are never reused, so this is final.
	ErrLedgerDeleted = errors.New("storage: ledger deleted")

	// ErrBufferFull: the write buffer stayed full until the add's context
	// ended (backpressure; the bookie answers RESOURCE_EXHAUSTED). Wraps
	// the context's error. Nothing is stored.
	ErrBufferFull = errors.New("storage: write buffer full")

	// ErrClosed: the storage is closed or closing.
	ErrClosed = errors.New("storage: closed")

	// ErrFailed: a write or sync of the entry log or index failed, or a
	// buffered entry failed its checksum before being written. The storage
	// refuses every later operation: after a failed fsync the kernel may
	// have dropped dirty pages ("fsyncgate"), so only Close and Open again
	// (which rebuilds from what is really on disk, and the journal replays
	// the rest) is safe. Wraps the first failure.
	ErrFailed = errors.New("storage: failed, reopen required")
)
