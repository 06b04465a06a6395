package ledger

import (
	"fmt"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Event is an input to a state machine: a call from the caller, an answer
// from a bookie, a decision of the wrapper, or the passing of time. Each
// machine documents the events it takes; any other is ErrInvalidEvent.
//
// The wrapper reports exactly one answer (success, failure or timeout) for
// every request action it carried out; the machines never wait on a clock.
type Event interface {
	fmt.Stringer
	isEvent()
}

// FailReason says why a bookie failed a request.
type FailReason uint8

const (
	// FailUnavailable: the bookie did not answer in time, the connection
	// broke, or it refused for a reason that another bookie would not have
	// (read-only, queue full, internal error, bad checksum in transit).
	FailUnavailable FailReason = iota + 1
	// FailFenced: the ledger is fenced on the bookie (ADD_STATUS_FENCED).
	FailFenced
	// FailUnauthorized: the master key does not match (ADD_STATUS_UNAUTHORIZED).
	FailUnauthorized
)

func (r FailReason) String() string {
	switch r {
	case FailUnavailable:
		return "unavailable"
	case FailFenced:
		return "fenced"
	case FailUnauthorized:
		return "unauthorized"
	}
	return fmt.Sprintf("FailReason(%d)", uint8(r))
}

// Append asks the writer to add an entry (writer). The entry gets id
// Writer.NextEntry() as read before the step. The writer keeps Payload
// until the entry is acknowledged; the caller must not modify it.
type Append struct{ Payload []byte }

// AddAcked: Bookie durably stored Entry (writer, recovery).
type AddAcked struct {
	Bookie string
	Entry  int64
}

// AddFailed: Bookie did not store Entry (writer, recovery).
type AddFailed struct {
	Bookie string
	Entry  int64
	Reason FailReason
}

// Tick: a timer interval passed (writer). An interval in which no add was
// sent is idle: the writer then announces its LAC explicitly, and retries
// an ensemble change that failed.
type Tick struct{}

// BookieReplaced: the wrapper stored an ensemble change in the catalog
// (compare-and-set) — the segment FirstEntry with Ensemble — answering
// EnsembleChangeNeeded (writer). A failed bookie may keep its position
// when no spare exists and it answers again: it is listed in Rejoined, and
// the writer resends it the pending entries. When every failed position
// rejoins, Ensemble equals the current one and the catalog is unchanged.
type BookieReplaced struct {
	FirstEntry int64
	Ensemble   []string
	Rejoined   []string
}

// EnsembleChangeFailed: the wrapper could not carry out EnsembleChangeNeeded
// for a reason that may pass (no spare bookie yet). The writer asks again
// after the next Tick. A change refused because the ledger is no longer
// OPEN in the catalog is Stop{ErrFenced} instead.
type EnsembleChangeFailed struct{ Err error }

// Stop: the wrapper gave up on the ledger (writer), e.g. the catalog says
// another writer is recovering it. The writer fails every pending append
// with Err and stops.
type Stop struct{ Err error }

// Close asks the writer to seal the ledger once every pending append has
// settled (writer).
type Close struct{}

// FenceOK: Bookie fenced the ledger and reported its LAC (recovery).
type FenceOK struct {
	Bookie string
	LAC    int64
}

// FenceFailed: Bookie did not confirm the fence (recovery).
type FenceFailed struct{ Bookie string }

// ReadOK: Bookie returned Entry (recovery, reader).
type ReadOK struct {
	Bookie  string
	Entry   int64
	Payload []byte
}

// ReadNoEntry: Bookie answered that it does not have Entry (recovery,
// reader). A bookie answers this only when it can prove it never stored
// the entry (its cookie shows no data loss); otherwise it fails the read.
type ReadNoEntry struct {
	Bookie string
	Entry  int64
}

// ReadFailed: Bookie did not answer a read of Entry (recovery, reader).
type ReadFailed struct {
	Bookie string
	Entry  int64
}

// Read asks the reader for Entry (reader).
type Read struct{ Entry int64 }

// LacLearned: the wrapper learned an LAC for the ledger, from a bookie's
// ReadLac answer or an entry's piggybacked LAC (reader).
type LacLearned struct{ LAC int64 }

// MetadataChanged: the wrapper read newer ledger metadata (reader): more
// ensemble segments (an ensemble change), or the ledger is now closed at
// LastEntry. Closed is false for OPEN and IN_RECOVERY.
type MetadataChanged struct {
	Ensembles []catalog.EnsembleSegment
	Closed    bool
	LastEntry int64
}

// SpeculativeTimeout: the read of Entry has waited long enough that the
// reader should ask one more replica (reader).
type SpeculativeTimeout struct{ Entry int64 }

func (Append) isEvent()               {}
func (AddAcked) isEvent()             {}
func (AddFailed) isEvent()            {}
func (Tick) isEvent()                 {}
func (BookieReplaced) isEvent()       {}
func (EnsembleChangeFailed) isEvent() {}
func (Stop) isEvent()                 {}
func (Close) isEvent()                {}
func (FenceOK) isEvent()              {}
func (FenceFailed) isEvent()          {}
func (ReadOK) isEvent()               {}
func (ReadNoEntry) isEvent()          {}
func (ReadFailed) isEvent()           {}
func (Read) isEvent()                 {}
func (LacLearned) isEvent()           {}
func (MetadataChanged) isEvent()      {}
func (SpeculativeTimeout) isEvent()   {}

func (e Append) String() string   { return fmt.Sprintf("append %q", e.Payload) }
func (e AddAcked) String() string { return fmt.Sprintf("add-acked %s e%d", e.Bookie, e.Entry) }
func (e AddFailed) String() string {
	return fmt.Sprintf("add-failed %s e%d %v", e.Bookie, e.Entry, e.Reason)
}
func (Tick) String() string { return "tick" }
func (e BookieReplaced) String() string {
	return fmt.Sprintf("bookie-replaced from=e%d ensemble=%v", e.FirstEntry, e.Ensemble)
}
func (e EnsembleChangeFailed) String() string { return fmt.Sprintf("ensemble-change-failed %v", e.Err) }
func (e Stop) String() string                 { return fmt.Sprintf("stop %v", e.Err) }
func (Close) String() string                  { return "close" }
func (e FenceOK) String() string              { return fmt.Sprintf("fence-ok %s lac=%d", e.Bookie, e.LAC) }
func (e FenceFailed) String() string          { return fmt.Sprintf("fence-failed %s", e.Bookie) }
func (e ReadOK) String() string {
	return fmt.Sprintf("read-ok %s e%d %q", e.Bookie, e.Entry, e.Payload)
}
func (e ReadNoEntry) String() string { return fmt.Sprintf("read-no-entry %s e%d", e.Bookie, e.Entry) }
func (e ReadFailed) String() string  { return fmt.Sprintf("read-failed %s e%d", e.Bookie, e.Entry) }
func (e Read) String() string        { return fmt.Sprintf("read e%d", e.Entry) }
func (e LacLearned) String() string  { return fmt.Sprintf("lac-learned %d", e.LAC) }
func (e MetadataChanged) String() string {
	if e.Closed {
		return fmt.Sprintf("metadata-changed closed last=e%d ensembles=%v", e.LastEntry, e.Ensembles)
	}
	return fmt.Sprintf("metadata-changed open ensembles=%v", e.Ensembles)
}
func (e SpeculativeTimeout) String() string { return fmt.Sprintf("speculative-timeout e%d", e.Entry) }
