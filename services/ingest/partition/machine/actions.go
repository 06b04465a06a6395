package machine

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
)

// Action is an output of the writer machine for its driver to carry out, in
// the order returned. Verdicts (Accepted, Duplicate, Attach, Refused,
// NoSpace) answer the Enqueue being stepped; Send, Answer, SpaceFreed and
// the timers are cheap and run at once; OpenLedger, SealLedger,
// RecoverLedger and ReleaseLease are I/O steps the driver runs off the
// append path, one at a time, and answers with their event.
type Action interface {
	fmt.Stringer
	isAction()
}

// Verdict is Enqueue's answer, returned by Writer.Enqueue as a value (the
// hot path allocates nothing for it); Step returns it as the first action,
// as one of Accepted, Duplicate, Attach, Refused or NoSpace.
type Verdict struct {
	Kind       VerdictKind
	Base, Last int64 // Accepted, Duplicate
	To         any   // Attach
	Err        error // Refused
}

// VerdictKind says which of the verdict actions a Verdict is.
type VerdictKind uint8

const (
	KindAccepted VerdictKind = iota + 1
	KindDuplicate
	KindAttach
	KindRefused
	KindNoSpace
)

// Action is v as the verdict action for Tag.
func (v Verdict) Action(tag any) Action {
	switch v.Kind {
	case KindAccepted:
		return Accepted{tag, v.Base, v.Last}
	case KindDuplicate:
		return Duplicate{tag, v.Base, v.Last}
	case KindAttach:
		return Attach{tag, v.To}
	case KindRefused:
		return Refused{tag, v.Err}
	}
	return NoSpace{tag}
}

// Accepted: the batch got offsets Base..Last and is queued. Answer reports
// its outcome later.
type Accepted struct {
	Tag        any
	Base, Last int64
}

// Duplicate: an idempotent producer's retry of a batch already stored at
// Base..Last; nothing was written and no Answer follows.
type Duplicate struct {
	Tag        any
	Base, Last int64
}

// Attach: an idempotent producer's retry of a batch still in flight; its
// outcome is the original's (To, an earlier Accepted tag). No Answer
// follows for Tag.
type Attach struct{ Tag, To any }

// Refused: the batch was not accepted, for Err (stopped, replacing a
// ledger, bad input, or the idempotent producer's sequence rules).
type Refused struct {
	Tag any
	Err error
}

// NoSpace: MaxBufferedBytes is full; nothing changed. The driver waits for
// SpaceFreed (up to its queue wait) and enqueues the batch again.
type NoSpace struct{ Tag any }

// Send: append Payload as entry Seq of the ledger opened as generation
// Gen (Handle), then report Settled. Tags are the batches in it; First and
// Last its offsets.
type Send struct {
	Handle      any
	Gen, Seq    int64
	First, Last int64
	Payload     []byte
	Tags        []any
}

// Acknowledge: the accepted batches Tags (one entry's) are durable on the
// ack quorum.
type Acknowledge struct{ Tags []any }

// Answer: the accepted batch Tag will not be acknowledged by this writer,
// for Err (its outcome is unknown when Err wraps ErrUnavailable or
// ErrFenced: the batch may still be stored).
type Answer struct {
	Tag any
	Err error
}

// SpaceFreed: buffered bytes were released; wake the enqueuers waiting
// after NoSpace.
type SpaceFreed struct{}

// ArmLinger: step LingerExpired after After.
type ArmLinger struct{ After time.Duration }

// OpenLedger: create a ledger whose first record is FirstOffset and append
// it to the partition's chain (fenced by the lease); answer Opened or
// OpenFailed. A ledger created but not appended is the driver's to close.
type OpenLedger struct{ FirstOffset int64 }

// SealLedger: close Handle at LastOffset (every entry in it settled); if
// that fails, a recovery of it finds the same end. Answer SealDone.
type SealLedger struct {
	Handle     any
	LastOffset int64
}

// RecoverLedger: fence and recover the failed ledger Handle; answer
// Recovered with the offset of its last record.
type RecoverLedger struct{ Handle any }

// RetryAfter: step RetryDue after After (the backoff of a failed I/O step).
type RetryAfter struct{ After time.Duration }

// ReleaseLease: give the writer lease back in the catalog; answer Released.
type ReleaseLease struct{}

// Discard: close Handle, a ledger opened after the writer stopped; nothing
// was written to it and no event follows.
type Discard struct {
	Handle     any
	LastOffset int64
}

// LedgerFailed reports (for logs and metrics) that the ledger Handle
// failed with Cause, failing Entries entries; Fenced when it stopped the
// writer.
type LedgerFailed struct {
	Handle  any
	Entries int
	Cause   error
	Fenced  bool
}

// Finished: Close is done, with Err when the ledger could not be sealed
// or the lease released. Emitted once, for the first Close.
type Finished struct{ Err error }

func (Accepted) isAction()      {}
func (Duplicate) isAction()     {}
func (Attach) isAction()        {}
func (Refused) isAction()       {}
func (NoSpace) isAction()       {}
func (Send) isAction()          {}
func (Acknowledge) isAction()   {}
func (Answer) isAction()        {}
func (SpaceFreed) isAction()    {}
func (ArmLinger) isAction()     {}
func (OpenLedger) isAction()    {}
func (SealLedger) isAction()    {}
func (RecoverLedger) isAction() {}
func (RetryAfter) isAction()    {}
func (ReleaseLease) isAction()  {}
func (Discard) isAction()       {}
func (LedgerFailed) isAction()  {}
func (Finished) isAction()      {}

func (a Accepted) String() string  { return fmt.Sprintf("accepted %v %d-%d", a.Tag, a.Base, a.Last) }
func (a Duplicate) String() string { return fmt.Sprintf("duplicate %v %d-%d", a.Tag, a.Base, a.Last) }
func (a Attach) String() string    { return fmt.Sprintf("attach %v to %v", a.Tag, a.To) }
func (a Refused) String() string   { return fmt.Sprintf("refused %v: %v", a.Tag, a.Err) }
func (a NoSpace) String() string   { return fmt.Sprintf("no-space %v", a.Tag) }
func (a Send) String() string {
	lso := ""
	if h, _, err := record.EntryBatches(a.Payload); err == nil && h.Present {
		lso = fmt.Sprintf(" lso=%d", h.LSO)
	}
	return fmt.Sprintf("send %v g%d e%d %d-%d%s [%s]", a.Handle, a.Gen, a.Seq, a.First, a.Last, lso, tagList(a.Tags))
}
func (a Acknowledge) String() string { return fmt.Sprintf("acknowledge %s", tagList(a.Tags)) }
func (a Answer) String() string      { return fmt.Sprintf("answer %v: %v", a.Tag, a.Err) }

func tagList(tags []any) string {
	s := make([]string, len(tags))
	for i, t := range tags {
		s[i] = fmt.Sprint(t)
	}
	return strings.Join(s, " ")
}
func (SpaceFreed) String() string   { return "space-freed" }
func (a ArmLinger) String() string  { return fmt.Sprintf("arm-linger %v", a.After) }
func (a OpenLedger) String() string { return fmt.Sprintf("open-ledger from %d", a.FirstOffset) }
func (a SealLedger) String() string {
	return fmt.Sprintf("seal-ledger %v at %d", a.Handle, a.LastOffset)
}
func (a RecoverLedger) String() string { return fmt.Sprintf("recover-ledger %v", a.Handle) }
func (a RetryAfter) String() string    { return fmt.Sprintf("retry-after %v", a.After) }
func (ReleaseLease) String() string    { return "release-lease" }
func (a Discard) String() string       { return fmt.Sprintf("discard %v at %d", a.Handle, a.LastOffset) }
func (a LedgerFailed) String() string {
	f := ""
	if a.Fenced {
		f = " fenced"
	}
	return fmt.Sprintf("ledger-failed %v entries=%d%s: %v", a.Handle, a.Entries, f, a.Cause)
}
func (a Finished) String() string {
	if a.Err != nil {
		return fmt.Sprintf("finished: %v", a.Err)
	}
	return "finished"
}
