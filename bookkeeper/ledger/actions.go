package ledger

import "fmt"

// Action is an output of a state machine: a request for the wrapper to send,
// a result to hand to the caller, or a decision to store in the catalog.
// The wrapper carries out actions in the order returned.
type Action interface {
	fmt.Stringer
	isAction()
}

// SendAdd: send AddEntries{Entry, LAC, Payload, Recovery} to Bookie
// (writer, recovery), then report AddAcked or AddFailed.
type SendAdd struct {
	Bookie   string
	Entry    int64
	LAC      int64 // piggybacked last add confirmed
	Payload  []byte
	Recovery bool // a recovery add, allowed on a fenced ledger
}

// SendWriteLac: push LAC to Bookie explicitly (writer). Fire and forget:
// no answer is reported.
type SendWriteLac struct {
	Bookie string
	LAC    int64
}

// Acknowledge: Entry is durable on Qa bookies and every earlier entry was
// acknowledged before it; the LAC is now Entry (writer). Hand the caller
// its success.
type Acknowledge struct{ Entry int64 }

// FailAppend: Entry will not be acknowledged by this writer (writer). Its
// outcome is unknown: see ErrFenced.
type FailAppend struct {
	Entry int64
	Err   error
}

// EnsembleChangeNeeded asks the wrapper to replace the Failed bookies of the
// ledger's last ensemble segment (writer): pick a live replacement for each
// (not in Ensemble), and compare-and-set the catalog's ensembles so that a
// segment starting at FromEntry holds Ensemble with the replacements at the
// failed positions — replacing the last segment in place when it already
// starts at FromEntry, appending one otherwise. Then answer BookieReplaced,
// EnsembleChangeFailed, or (ledger no longer OPEN) Stop{ErrFenced}.
type EnsembleChangeNeeded struct {
	FromEntry int64
	Ensemble  []string // the current last segment
	Failed    []string // the bookies to replace, in ensemble order
}

// Stopped: the writer stopped for good with Err (writer).
type Stopped struct{ Err error }

// CloseLedger: store the ledger CLOSED at LastEntry (compare-and-set) —
// OPEN → CLOSED for a writer, IN_RECOVERY → CLOSED for a recovery.
// LastPayload is LastEntry's payload when the machine has it (a recovery
// that recovered at least one entry), for the wrapper to derive the last
// offset; nil otherwise.
type CloseLedger struct {
	LastEntry   int64
	LastPayload []byte
}

// SendFence: send Fence to Bookie (recovery), then report FenceOK or
// FenceFailed.
type SendFence struct{ Bookie string }

// SendRecoveryRead: send ReadEntries{Entry, Entry, fence_and_read: Fence}
// to Bookie (recovery), then report ReadOK, ReadNoEntry or ReadFailed.
type SendRecoveryRead struct {
	Bookie string
	Entry  int64
	Fence  bool // always true outside tests (BookKeeper PR #2616)
}

// RecoveryFailed: the recovery stopped without a decision (recovery); see
// ErrRecoveryFailed.
type RecoveryFailed struct{ Err error }

// SendRead: send a regular ReadEntries{Entry, Entry} to Bookie (reader),
// then report ReadOK, ReadNoEntry or ReadFailed.
type SendRead struct {
	Bookie string
	Entry  int64
}

// Deliver: hand Entry's Payload to the caller (reader).
type Deliver struct {
	Entry   int64
	Payload []byte
}

// ReadError: the read of Entry failed with Err (reader).
type ReadError struct {
	Entry int64
	Err   error
}

func (SendAdd) isAction()              {}
func (SendWriteLac) isAction()         {}
func (Acknowledge) isAction()          {}
func (FailAppend) isAction()           {}
func (EnsembleChangeNeeded) isAction() {}
func (Stopped) isAction()              {}
func (CloseLedger) isAction()          {}
func (SendFence) isAction()            {}
func (SendRecoveryRead) isAction()     {}
func (RecoveryFailed) isAction()       {}
func (SendRead) isAction()             {}
func (Deliver) isAction()              {}
func (ReadError) isAction()            {}

func (a SendAdd) String() string {
	kind := "send-add"
	if a.Recovery {
		kind = "send-recovery-add"
	}
	return fmt.Sprintf("%s %s e%d lac=%d %q", kind, a.Bookie, a.Entry, a.LAC, a.Payload)
}
func (a SendWriteLac) String() string {
	return fmt.Sprintf("send-write-lac %s lac=%d", a.Bookie, a.LAC)
}
func (a Acknowledge) String() string { return fmt.Sprintf("acknowledge e%d", a.Entry) }
func (a FailAppend) String() string  { return fmt.Sprintf("fail-append e%d: %v", a.Entry, a.Err) }
func (a EnsembleChangeNeeded) String() string {
	return fmt.Sprintf("ensemble-change-needed from=e%d ensemble=%v failed=%v", a.FromEntry, a.Ensemble, a.Failed)
}
func (a Stopped) String() string { return fmt.Sprintf("stopped: %v", a.Err) }
func (a CloseLedger) String() string {
	if a.LastPayload != nil {
		return fmt.Sprintf("close-ledger last=e%d %q", a.LastEntry, a.LastPayload)
	}
	return fmt.Sprintf("close-ledger last=e%d", a.LastEntry)
}
func (a SendFence) String() string { return fmt.Sprintf("send-fence %s", a.Bookie) }
func (a SendRecoveryRead) String() string {
	if a.Fence {
		return fmt.Sprintf("send-recovery-read %s e%d fence", a.Bookie, a.Entry)
	}
	return fmt.Sprintf("send-recovery-read %s e%d NO-FENCE", a.Bookie, a.Entry)
}
func (a RecoveryFailed) String() string { return fmt.Sprintf("recovery-failed: %v", a.Err) }
func (a SendRead) String() string       { return fmt.Sprintf("send-read %s e%d", a.Bookie, a.Entry) }
func (a Deliver) String() string        { return fmt.Sprintf("deliver e%d %q", a.Entry, a.Payload) }
func (a ReadError) String() string      { return fmt.Sprintf("read-error e%d: %v", a.Entry, a.Err) }
