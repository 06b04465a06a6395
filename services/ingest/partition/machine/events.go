package machine

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Event is an input to the writer machine: a producer's batch, the ledger's
// answer for an entry, the outcome of an I/O step the machine asked for, a
// timer that fired, or Close. Events that carry Now are the driver's clock
// reading when the event happened; the machine never reads a clock.
type Event interface {
	fmt.Stringer
	isEvent()
}

// Enqueue offers a validated batch (record.Validate passed). The first
// action Step returns is always its verdict: Accepted, Duplicate, Attach,
// Refused or NoSpace. When accepted, the machine sets the batch's base
// offset and partition leader epoch in place and keeps Batch until its
// entry settles: the caller must not reuse it. Tag identifies the batch in
// the actions that answer it (the driver's waiter).
type Enqueue struct {
	Batch []byte
	Tag   any
	Now   time.Time
}

// Mark asks for a transaction marker (the coordinator's, issue 24): the
// end, committed or aborted, of producer ProducerID's transaction, written
// at Epoch — the epoch the coordinator bumped to when it ended it, above
// the transaction's batches'. The first action Step returns is its
// verdict: Accepted at the marker's one offset (Answer or Acknowledge
// follow, as for a batch), Duplicate with offsets -1 (nothing to write:
// see Writer.mark), Refused or NoSpace. Tag identifies it as Enqueue's.
type Mark struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	Tag        any
	Now        time.Time
}

// Settled is the ledger's answer for entry Seq of the ledger opened as
// generation Gen: durable on the ack quorum (Err nil) or failed. The ledger
// answers in entry order; a synchronous refusal of a Send is reported as
// Settled with its error too. Answers for a ledger the machine gave up are
// ignored.
type Settled struct {
	Gen, Seq int64
	Err      error
	Now      time.Time
}

// LingerExpired: the timer of an ArmLinger fired.
type LingerExpired struct{ Now time.Time }

// Opened answers OpenLedger: the ledger Handle (the driver's, opaque here)
// with ID was created and appended to the chain from FirstOffset.
type Opened struct {
	Handle      any
	ID          catalog.LedgerID
	FirstOffset int64
	Now         time.Time
}

// OpenFailed answers OpenLedger. An Err wrapping ErrFenced stops the
// writer; any other is retried after a backoff.
type OpenFailed struct{ Err error }

// SealDone answers SealLedger: the ledger is CLOSED at the LastOffset asked
// (Err nil), or could not be sealed.
type SealDone struct{ Err error }

// Recovered answers RecoverLedger: the failed ledger is CLOSED, its last
// record at LastOffset (Err nil), or the recovery failed (an Err wrapping
// ErrFenced stops the writer; others are retried).
type Recovered struct {
	LastOffset int64
	Err        error
}

// RetryDue: the timer of a RetryAfter fired.
type RetryDue struct{}

// Close asks for a graceful hand-over: no new batches, the queued ones
// fail (they were never sent), the ones in flight settle, the ledger is
// sealed and the lease released. Finished reports the outcome.
type Close struct{}

// CloseTimedOut: the driver's bound on Close ran out before Finished.
type CloseTimedOut struct{}

// Released answers ReleaseLease.
type Released struct{ Err error }

// Roll asks for an early roll-over of the ledger opened as generation Gen,
// as RollBytes or RollAge would cause: the driver learned that a bookie it
// names is being drained (decommissioned), and a ledger's copies move off
// a bookie only once it is sealed. Ignored unless that ledger is the one
// being written (a roll, replacement or close under way replaces it
// anyway). An empty ledger is sealed empty.
type Roll struct{ Gen int64 }

func (Enqueue) isEvent()       {}
func (Mark) isEvent()          {}
func (Roll) isEvent()          {}
func (Settled) isEvent()       {}
func (LingerExpired) isEvent() {}
func (Opened) isEvent()        {}
func (OpenFailed) isEvent()    {}
func (SealDone) isEvent()      {}
func (Recovered) isEvent()     {}
func (RetryDue) isEvent()      {}
func (Close) isEvent()         {}
func (CloseTimedOut) isEvent() {}
func (Released) isEvent()      {}

func (e Enqueue) String() string { return fmt.Sprintf("enqueue %v (%d bytes)", e.Tag, len(e.Batch)) }
func (e Mark) String() string {
	outcome := "abort"
	if e.Commit {
		outcome = "commit"
	}
	return fmt.Sprintf("mark %v %s pid=%d epoch=%d", e.Tag, outcome, e.ProducerID, e.Epoch)
}
func (e Settled) String() string {
	if e.Err != nil {
		return fmt.Sprintf("settled g%d e%d: %v", e.Gen, e.Seq, e.Err)
	}
	return fmt.Sprintf("settled g%d e%d", e.Gen, e.Seq)
}
func (LingerExpired) String() string { return "linger expired" }
func (e Opened) String() string {
	return fmt.Sprintf("opened ledger %d from %d", e.ID, e.FirstOffset)
}
func (e OpenFailed) String() string { return fmt.Sprintf("open failed: %v", e.Err) }
func (e SealDone) String() string {
	if e.Err != nil {
		return fmt.Sprintf("seal failed: %v", e.Err)
	}
	return "sealed"
}
func (e Recovered) String() string {
	if e.Err != nil {
		return fmt.Sprintf("recovery failed: %v", e.Err)
	}
	return fmt.Sprintf("recovered to %d", e.LastOffset)
}
func (RetryDue) String() string      { return "retry due" }
func (Close) String() string         { return "close" }
func (CloseTimedOut) String() string { return "close timed out" }
func (e Released) String() string {
	if e.Err != nil {
		return fmt.Sprintf("release failed: %v", e.Err)
	}
	return "released"
}

func (e Roll) String() string { return fmt.Sprintf("roll g%d", e.Gen) }
