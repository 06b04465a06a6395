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
// The decisions are package machine's, a pure state machine with
// transcripts and a simulation; Writer is its driver. Goroutines: one
// maintenance goroutine per writer carries out the machine's I/O steps
// (create, seal, recover, release — catalog and bookie calls), started by
// Open and stopped by Close; ledger callbacks (on the ledger client's
// goroutines), the linger and retry timers and enqueuers step the machine
// under the writer's mutex, a leaf lock. Idempotent producers' state per
// partition is package dedup's, rebuilt from the ledger tail when a writer
// opens.
//
// # Files
//
//	writer.go                     Writer, the machine's driver: Open (tail recovery, producer-state rebuild), Enqueue/Wait, running actions, the maintenance goroutine's I/O steps, AckedEnd, Close
//	config.go                     Config (entry and buffer bounds, linger, roll sizes, timeouts), validated
//	machine/                      the state machine (see its package doc)
package partition
