package machine

import "errors"

// Errors of the partition writer. Package partition re-exports them; the
// ingest service maps them to codes at its RPC edge.
var (
	// ErrFenced: the writer lost its lease (another ingest copy took the
	// partition, or a recovery fenced its ledger). It stops for good; the
	// caller drops it and routes to the new owner. Drivers wrap the ledger
	// client's and catalog's fencing errors in it so Step recognises them.
	ErrFenced = errors.New("partition: writer fenced: partition moved to another writer")
	// ErrBusy: MaxBufferedBytes stayed full for the driver's queue wait.
	// Backpressure: retry after a delay. (Step answers NoSpace; the driver
	// waits and turns a wait that ran out into ErrBusy.)
	ErrBusy = errors.New("partition: writer busy")
	// ErrUnavailable: the writer is replacing a failed ledger (or closing).
	// The append's outcome is unknown when it had been accepted: retry
	// (with an idempotent producer, a retry is deduplicated).
	ErrUnavailable = errors.New("partition: writer unavailable")
	// ErrClosed: the writer was closed.
	ErrClosed = errors.New("partition: writer closed")
	// ErrLostAcknowledged: a recovery decided an end before an entry the
	// writer had acknowledged. The ledger tier broke its promise; the
	// writer stops rather than give acknowledged offsets out again.
	ErrLostAcknowledged = errors.New("partition: recovery lost acknowledged records")
)
