package history

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Format and Version identify a history file; they are the first line's
// "format" and "version". A reader refuses any other format and any version
// it does not know (versions only move forward; see the package doc).
//
// Version 2 added the fault op (and its "fault" and "target" fields); a
// version-1 file is still read (it simply has no fault ops).
const (
	Format  = "sluice-history"
	Version = 2
	// MinVersion is the oldest version a Reader still reads.
	MinVersion = 1
)

// Header is the first line of a history.
type Header struct {
	// Format is always the constant Format.
	Format string `json:"format"`
	// Version is the format version the file was written with.
	Version int `json:"version"`
	// Start is the wall-clock time of the history's time zero: every op's
	// times are durations since Start, read from a monotonic clock.
	Start time.Time `json:"start"`
	// Scenario names what produced the history (free text, for humans).
	Scenario string `json:"scenario,omitempty"`
	// Seed is the random seed of the run, to reproduce it.
	Seed int64 `json:"seed"`
}

// Kind is an op's type: the JSON "op" field.
type Kind string

// The op kinds. The package doc's field table says which fields each has.
const (
	// Produce is one produce attempt of one unique value.
	Produce Kind = "produce"
	// Consume is one record a consumer received.
	Consume Kind = "consume"
	// Commit is one attempt to commit a consumer group's offset.
	Commit Kind = "commit"
	// Lease is a partition lease granted to a group member, as the member
	// observed it.
	Lease Kind = "lease"
	// Reset is an explicit change of a group's committed offset (an
	// operator's seek), which may move it backwards.
	Reset Kind = "reset"
	// Drain is the final-drain marker of one partition: after the faults
	// healed, the history's consumers together read every record of the
	// partition below Offset (the end offset).
	Drain Kind = "drain"
	// Fault is a fault the harness injected or healed (a process killed,
	// paused or restarted, a link cut or healed). It says nothing about
	// the data; the checker counts faults and reports them for context.
	// Added in version 2.
	Fault Kind = "fault"
)

// Kinds lists every op kind, in the package doc's order.
func Kinds() []Kind { return []Kind{Produce, Consume, Commit, Lease, Reset, Drain, Fault} }

// Outcome is how a produce or commit attempt ended, as the client saw it.
type Outcome string

// Produce outcomes.
const (
	// OK: the server acknowledged the produce and said where the record is
	// (Partition, Offset).
	OK Outcome = "ok"
	// Failed: the client knows the record was not written (a definite
	// error). A reader must never see it.
	Failed Outcome = "failed"
	// Indeterminate: the client cannot know (timeout, connection lost). The
	// record may or may not appear. Also a commit outcome.
	Indeterminate Outcome = "indeterminate"
)

// Commit outcomes (and Indeterminate).
const (
	// Accepted: the server stored the committed offset.
	Accepted Outcome = "accepted"
	// Rejected: the server refused the commit (stale lease epoch, not the
	// lease holder, ...) and did not store it.
	Rejected Outcome = "rejected"
)

// Idempotence is the producer identity and sequence of an idempotent
// produce. Sequence numbers are per partition and per (ProducerID,
// ProducerEpoch); the broker appends a producer's records in sequence order
// and drops a retried sequence instead of writing it twice.
type Idempotence struct {
	ProducerID    int64
	ProducerEpoch int32
	// Sequence is this record's sequence number (a batch's base sequence
	// plus the record's index in the batch).
	Sequence int32
}

// Op is one line of a history after the header. Which fields an op has
// depends on Kind (see the package doc); fields that do not belong to the
// kind must be zero, and Validate says so.
type Op struct {
	Kind Kind
	// Time is when the op completed, as a duration since Header.Start. The
	// Recorder stamps it, so lines are in completion order.
	Time time.Duration
	// Invoke is when the op was invoked (produce, commit, reset): the
	// caller reads Recorder.Now before sending the request.
	Invoke time.Duration

	// Producer names the producing client (produce); the checker's
	// duplicate policy is per producer.
	Producer string
	// Idempotence is set for a produce by an idempotent producer.
	Idempotence *Idempotence

	Topic string
	// Partition: for a produce, the partition the record went to, or -1 if
	// the server chose and the outcome did not say (an acknowledged produce
	// always names its partition).
	Partition int32
	// Offset: the acknowledged offset (produce, outcome OK), the offset read
	// (consume), the committed offset — the next offset to read — (commit,
	// reset), or the end offset (drain).
	Offset int64
	// Value is the record's unique value (produce, consume). The harness
	// never produces the same value twice.
	Value string

	// Outcome of a produce (OK, Failed, Indeterminate) or commit (Accepted,
	// Rejected, Indeterminate).
	Outcome Outcome
	// Error is the client's error text for an unsuccessful produce or
	// commit, for humans; on a drain, why it could read no further than
	// its Offset (an incomplete drain).
	Error string

	// Group is the consumer group (commit, lease, reset; optional for
	// consume and drain: a reader with assigned partitions has none).
	Group string
	// Member is the group member or reader name (consume, lease; optional
	// for commit — empty for a standalone commit — and drain). A name must
	// not be reused by two independent readers: the checker follows a
	// member's reads per lease.
	Member string
	// LeaseEpoch is the epoch of the member's partition lease (consume:
	// optional, zero without a lease; commit: the epoch the commit carried,
	// zero for a standalone commit; lease: the epoch granted).
	LeaseEpoch int64

	// FaultName says what the harness did (fault): e.g. "kill", "restart",
	// "pause", "resume", "cut", "heal" (free text, at most a word or two).
	FaultName string
	// Target names what the fault hit (fault): a process ("bookie-2",
	// "ingest-1") or a link ("ingest-1:bookie-3").
	Target string
}

// field is one JSON field of an op line.
type field uint16

const (
	fTime field = 1 << iota
	fInvoke
	fProducer
	fIdempotence // producer_id, producer_epoch and sequence, all or none
	fTopic
	fPartition
	fOffset
	fValue
	fOutcome
	fError
	fGroup
	fMember
	fLeaseEpoch
	fFault
	fTarget
)

// fieldNames are the JSON names, in bit order.
var fieldNames = [...]string{"time", "invoke", "producer", "producer_id", "topic", "partition", "offset", "value", "outcome", "error", "group", "member", "lease_epoch", "fault", "target"}

func (f field) String() string {
	for i, n := range fieldNames {
		if f == 1<<i {
			return n
		}
	}
	return fmt.Sprintf("field(%#x)", uint16(f))
}

// spec says which fields an op kind must and may have.
type spec struct {
	required, optional field
	outcomes           []Outcome
}

var specs = map[Kind]spec{
	// Produce's offset is present exactly when the outcome is OK; that is
	// checked on its own.
	Produce: {
		required: fTime | fInvoke | fProducer | fTopic | fPartition | fValue | fOutcome,
		optional: fIdempotence | fOffset | fError,
		outcomes: []Outcome{OK, Failed, Indeterminate},
	},
	Consume: {
		required: fTime | fMember | fTopic | fPartition | fOffset | fValue,
		optional: fGroup | fLeaseEpoch,
	},
	Commit: {
		required: fTime | fInvoke | fGroup | fTopic | fPartition | fOffset | fLeaseEpoch | fOutcome,
		optional: fMember | fError,
		outcomes: []Outcome{Accepted, Rejected, Indeterminate},
	},
	Lease: {
		required: fTime | fGroup | fMember | fTopic | fPartition | fLeaseEpoch,
	},
	Reset: {
		required: fTime | fInvoke | fGroup | fTopic | fPartition | fOffset,
	},
	Drain: {
		required: fTime | fTopic | fPartition | fOffset,
		optional: fGroup | fMember | fError, // error: stuck at Offset, could read no further
	},
	Fault: {
		required: fTime | fFault | fTarget,
		optional: fError,
	},
}

// present reports which fields of op are set (non-zero). Numeric fields
// whose zero is a valid value (offset 0, partition 0, lease epoch 0, time 0)
// count as present whenever the kind requires them.
func (op *Op) present() field {
	var f field
	set := func(b bool, x field) {
		if b {
			f |= x
		}
	}
	req := specs[op.Kind].required
	set(op.Time != 0 || req&fTime != 0, fTime)
	set(op.Invoke != 0 || req&fInvoke != 0, fInvoke)
	set(op.Producer != "", fProducer)
	set(op.Idempotence != nil, fIdempotence)
	set(op.Topic != "", fTopic)
	set(op.Partition != 0 || req&fPartition != 0, fPartition)
	set(op.Offset != 0 || req&fOffset != 0 || (op.Kind == Produce && op.Outcome == OK), fOffset)
	set(op.Value != "", fValue)
	set(op.Outcome != "", fOutcome)
	set(op.Error != "", fError)
	set(op.Group != "", fGroup)
	set(op.Member != "", fMember)
	set(op.LeaseEpoch != 0 || req&fLeaseEpoch != 0, fLeaseEpoch)
	set(op.FaultName != "", fFault)
	set(op.Target != "", fTarget)
	return f
}

// Validate reports the first problem with op: a missing or foreign field, or
// a value out of range. The error is a *FormatError with Line 0.
func (op *Op) Validate() error {
	sp, err := specOf(op.Kind)
	if err != nil {
		return err
	}
	return op.validate(sp, op.present())
}

func specOf(k Kind) (spec, error) {
	sp, ok := specs[k]
	switch {
	case ok:
		return sp, nil
	case k == "":
		return spec{}, fieldErr("op", "missing")
	}
	return spec{}, fieldErr("op", "unknown op %q (want one of %v)", k, Kinds())
}

// validate checks op against its kind's spec, given which fields are
// present (the decoder knows presence exactly; Validate derives it).
func (op *Op) validate(sp spec, has field) error {
	for f := field(1); f <= fTarget; f <<= 1 {
		switch {
		case sp.required&f != 0 && has&f == 0:
			return fieldErr(f.String(), "missing (required in a %s op)", op.Kind)
		case (sp.required|sp.optional)&f == 0 && has&f != 0:
			return fieldErr(f.String(), "not part of a %s op", op.Kind)
		}
	}
	if sp.outcomes != nil && !containsOutcome(sp.outcomes, op.Outcome) {
		return fieldErr("outcome", "%q is not a %s outcome (want one of %v)", op.Outcome, op.Kind, sp.outcomes)
	}
	if op.Kind == Produce {
		switch {
		case op.Outcome == OK && has&fOffset == 0:
			return fieldErr("offset", "missing (required with outcome ok)")
		case op.Outcome != OK && has&fOffset != 0:
			return fieldErr("offset", "only with outcome ok (outcome is %s)", op.Outcome)
		case op.Outcome == OK && op.Error != "":
			return fieldErr("error", "not with outcome ok")
		}
	}
	if op.Kind == Commit && op.Outcome == Accepted && op.Error != "" {
		return fieldErr("error", "not with outcome accepted")
	}
	switch {
	case op.Time < 0:
		return fieldErr("time", "negative (%d)", op.Time)
	case op.Invoke < 0:
		return fieldErr("invoke", "negative (%d)", op.Invoke)
	case op.Invoke > op.Time:
		return fieldErr("invoke", "after time (%d > %d)", op.Invoke, op.Time)
	case op.Offset < 0:
		return fieldErr("offset", "negative (%d)", op.Offset)
	case op.LeaseEpoch < 0:
		return fieldErr("lease_epoch", "negative (%d)", op.LeaseEpoch)
	}
	minPartition := int32(0)
	if op.Kind == Produce && op.Outcome != OK {
		minPartition = -1
	}
	if op.Partition < minPartition {
		if minPartition == -1 {
			return fieldErr("partition", "%d below -1 (-1: chosen by the server, not known)", op.Partition)
		}
		return fieldErr("partition", "negative (%d)", op.Partition)
	}
	if id := op.Idempotence; id != nil {
		switch {
		case id.ProducerID < 0:
			return fieldErr("producer_id", "negative (%d)", id.ProducerID)
		case id.ProducerEpoch < 0:
			return fieldErr("producer_epoch", "negative (%d)", id.ProducerEpoch)
		case id.Sequence < 0:
			return fieldErr("sequence", "negative (%d)", id.Sequence)
		}
	}
	for _, s := range []struct {
		name, v string
	}{{"producer", op.Producer}, {"topic", op.Topic}, {"value", op.Value}, {"error", op.Error}, {"group", op.Group}, {"member", op.Member}, {"fault", op.FaultName}, {"target", op.Target}} {
		if !utf8.ValidString(s.v) {
			return fieldErr(s.name, "not valid UTF-8")
		}
	}
	return nil
}

func containsOutcome(list []Outcome, o Outcome) bool {
	for _, x := range list {
		if x == o {
			return true
		}
	}
	return false
}
