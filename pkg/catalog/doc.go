// Package catalog is the contract of Sluice's catalog: topics, partitions
// with their writer ownership and ledger chains, ledger metadata, and the
// owner and bookie heartbeat registries (DESIGN §2.1–2.3, §2.5).
//
// The contract is split per aggregate so each consumer depends only on what
// it uses: Topics and DeletedTopics; Partitions (reads), Writers (ownership
// and chain growth, fenced by epoch) and LedgerTrimmer (retention, CAS by
// version); Owners; Ledgers and LedgerLister; Bookies; Triggers (function
// triggers, which the fetch service runs). *Catalog implements them all;
// there is deliberately no interface that bundles them for consumers (the
// one that spans them, Driver, is for backends).
//
// # Catalog and drivers
//
// One portable type over small drivers, as go-cloud splits its APIs:
// callers get a *Catalog from a backend's constructor (embedded.Open,
// dynamodb.New), and no backend is reachable any other way. Catalog checks
// every argument once (validate.go, config.go, trigger.go and the Validate
// functions next to each record) and calls the backend's Driver only with
// arguments that passed, so every backend refuses the same input with the
// same *ValidationError, before any I/O.
//
// A driver only stores. It reads, applies the rules of what is legal to
// what it read — ledger state transitions, fencing, chain order, ownership,
// also pure functions here (CanAcquire, AppendedLedger, NextLedger,
// CheckAddPartitions, CheckTriggerUpdate, ...), so the backends cannot
// disagree — and makes "read, check, write" atomic.
//
// Implementations: embedded (Pebble on local disk, for `sluice dev` and fast
// tests) and dynamodb (deployments). Both pass the conformance suite in
// catalogtest, run against the *Catalog their constructors return.
//
// # Errors
//
// Every method documents its errors from this package's taxonomy:
// ErrNotFound, ErrAlreadyExists, ErrVersionConflict, ErrFenced, ErrOwned,
// ErrOwnerExpired, ErrLimitExceeded, and *ValidationError (errors.Is
// ErrInvalid) naming the bad field. A bad argument's *ValidationError comes
// from Catalog, unwrapped; one about stored state (an illegal ledger
// transition, a page token of another listing) comes from the driver,
// wrapped with context. Anything else is an operational error of the
// backend (I/O, network, corruption) and is returned wrapped, never
// swallowed.
//
// # Consistency model
//
// Linearizable: every write. Each create is a conditional put (not exists);
// each update is a compare-and-set on the record's Version, or for the
// writer's calls on the partition's (owner, epoch); AcquireWriter and
// AppendLedger change one record conditioned on others (the old owner's
// heartbeat missing or expired, the caller's live, the topic still the same
// incarnation, the ledger present) and commit all of it atomically — a
// DynamoDB transaction, or one critical section over a synced Pebble batch.
// Ledger ids come from an atomic counter. Reads made to decide a write are
// always strongly consistent, and the write re-checks what they saw, so a
// decision is never made on stale data. Racing writers: exactly one wins,
// the others get ErrVersionConflict/ErrOwned/ErrAlreadyExists.
//
// Strongly consistent but not a snapshot: Get returns the latest committed
// record (DynamoDB ConsistentRead). List pages are each consistent, but a
// listing across pages is not one snapshot — a record changed between pages
// may appear in its old or new place (documented on Page).
//
// Not linearizable, on purpose: heartbeat expiry. "Expired" is decided by
// the clock of whoever evaluates it (the Clock given to the store, i.e. the
// caller's host), so clock skew can make a partition look free a little
// early or late. That is safe because ownership is for liveness only; safety
// comes from the epoch: a writer whose partition was taken gets ErrFenced
// here on its next catalog change, and its ledger is fenced on the bookies
// by the new writer's recovery (DESIGN §2.2) before the new writer appends.
// Two writers may believe they own a partition for a moment; at most one can
// ever extend its chain.
//
// The catalog is not on the per-batch path: it is touched at ownership moves,
// ledger roll-overs and heartbeats (one per owner and per bookie, not per
// partition), so its load does not grow with partitions × time.
package catalog
