// Package partition is the partition writer: the single writer of one
// partition under one lease (docs/DESIGN.md §2.3–2.4). A Writer gives
// accepted batches their offsets, packs them into ledger entries (by
// linger, size and entries in flight), answers each append once its entry
// is durable on the ack quorum, rolls to a new ledger by size and age, and
// replaces a failed ledger (recovering it to its last acknowledged entry)
// without losing or reordering anything acknowledged. Open recovers the
// tail ledger a previous writer left open, which fences that writer. A
// writer that loses its lease (ErrFenced) stops for good; Close drains,
// seals its ledger and releases the lease.
//
// Goroutines: one maintenance goroutine per writer (ledger replacement and
// roll-over, which call the catalog and the bookies), started by Open and
// stopped by Close; ledger callbacks run on the ledger client's goroutines
// and take the writer's mutex. Idempotent producers' state per partition
// is package dedup's, rebuilt from the ledger tail when a writer opens.
//
// # Files
//
//	writer.go                     Writer: Open, Append, the entry queue, acknowledgements, roll-over, ledger replacement, Close
//	ends.go                       AckedEnd: the acknowledged end (high watermark), never moving back
//	config.go                     Config (entry and buffer bounds, linger, roll sizes, timeouts), validated
//	sabotage_on.go, _off.go       build-tagged faults for the chaos tests' sabotage builds
//
// Issue 23 turns the writer into a pure state machine with transcripts, as
// bookkeeper/ledger is; services/DESIGN.md describes it as it is now.
package partition
