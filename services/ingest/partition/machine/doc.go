// Package machine is the partition writer's logic as a pure, deterministic
// state machine, in the style of bookkeeper/ledger (docs/DESIGN.md
// §2.3–2.4). Nothing here does I/O, starts a goroutine or reads a clock.
// The machine is fed Events — a producer's batch, the ledger's answer for
// an entry, the outcome of an I/O step it asked for, a timer that fired,
// Close — and returns the Actions to carry out: send an entry, answer a
// batch, arm a timer, open, seal or recover a ledger, release the lease.
// Package partition's Writer is the driver: it serialises Step under one
// lock, carries out the cheap actions at once and the I/O steps on its
// maintenance goroutine, one at a time, and steps their outcome.
//
// # What it decides
//
//   - Offsets: an accepted batch gets the next offsets, in the order
//     accepted; its base offset and partition leader epoch are stamped in
//     place.
//   - Packing: batches share an entry up to MaxEntryBytes; at most
//     MaxInFlightEntries are unsettled, so under load new batches pile up
//     in the next entry; Linger holds a partly filled entry while there is
//     room in flight.
//   - Answers: a batch is acknowledged once its entry settled, entries in
//     order. A failed entry fails its ledger: every batch in flight or
//     queued gets an indeterminate answer, new ones are refused, the ledger
//     is recovered and the next one starts right after the end the
//     recovery decided (idempotent producers' batches up to it are stored,
//     the rest aborted).
//   - Roll-over by RollBytes and RollAge, or when asked (Roll: a bookie
//     of the ledger is being drained): the ledger drains, is sealed at
//     its last offset and the next opened; batches queue meanwhile.
//   - Close: queued batches fail, in-flight ones settle, the ledger is
//     sealed and the lease released; fencing at any point stops the writer
//     for good.
//   - Idempotent producers (package dedup): a retry of a stored batch is a
//     Duplicate, of one in flight an Attach to it.
//   - Transactions (issue 24): a transactional batch opens its producer's
//     transaction at its base offset unless one is open; a Mark (the
//     coordinator's commit or abort marker, at the epoch it bumped to)
//     is written as a control batch at one offset and ends it, and fences
//     the producer's older epochs; a Mark at an epoch the producer already
//     wrote at is late and writes nothing (Duplicate). The last stable
//     offset (LSO) is the first offset of the oldest open transaction,
//     else the end; an entry sent while a transaction is open carries the
//     LSO as of its end in an entry header (pkg/record), so readers and a
//     writer taking over learn it from the log. A failed ledger's recovery
//     rolls the open transactions back with the offsets it dropped.
//
// # Invariants
//
// Written on the fields they concern; the simulation test (sim_test.go)
// checks them after every step under random event orders:
//
//  1. Acknowledged means stored: a batch is answered with success only
//     after its entry settled on the current ledger, in offset order.
//  2. Offsets are never given twice for stored records: the next ledger
//     starts right after the previous one's sealed or recovered end, and a
//     recovery that ends before an acknowledged offset stops the writer
//     (ErrLostAcknowledged) instead.
//  3. A new ledger never follows one whose end is undecided: a failed
//     ledger is recovered before the next opens, however long that takes.
//  4. Bounds: at most MaxInFlightEntries unsettled entries and
//     MaxBufferedBytes of accepted, unsettled batches.
//  5. Every accepted batch is answered exactly once (or attached to the
//     original it retries); Close finishes exactly once.
//  6. At most one I/O step is under way, and never while a retry waits.
//  7. The LSO an entry carries is the LSO of the chain up to its end (the
//     simulation replays the chain from scratch to check it), and
//     StableOffset — the committed view's — never decreases and never
//     passes the durable end.
//
// # Files
//
//	doc.go                        this overview
//	machine.go                    Config, Phase, Writer and its fields' invariants, Step, enqueue, packing, settling, ledger failure
//	steps.go                      the I/O steps: open, seal, recover, release, retry, Close and its timeout
//	events.go, actions.go         the inputs and outputs, with their contracts
//	txns.go                       the open transactions, committed and queued views, the LSO
//	errors.go                     ErrFenced, ErrBusy, ErrUnavailable, ErrClosed, ErrLostAcknowledged
//	sabotage_on.go, _off.go       build-tagged faults for the chaos tests' sabotage builds
//	transcript_test.go, testdata  transcripts: one scenario per file
//	sim_test.go                   the randomized simulation against a model of ledgers and catalog
package machine
