package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// wireOp is an op line as JSON. Pointers tell "absent" from zero for the
// fields whose zero is a valid value; a string field is absent when empty.
type wireOp struct {
	Op            Kind    `json:"op"`
	Time          *int64  `json:"time,omitempty"`
	Invoke        *int64  `json:"invoke,omitempty"`
	Producer      string  `json:"producer,omitempty"`
	ProducerID    *int64  `json:"producer_id,omitempty"`
	ProducerEpoch *int32  `json:"producer_epoch,omitempty"`
	Sequence      *int32  `json:"sequence,omitempty"`
	Topic         string  `json:"topic,omitempty"`
	Partition     *int32  `json:"partition,omitempty"`
	Offset        *int64  `json:"offset,omitempty"`
	Value         string  `json:"value,omitempty"`
	Outcome       Outcome `json:"outcome,omitempty"`
	Error         string  `json:"error,omitempty"`
	Group         string  `json:"group,omitempty"`
	Member        string  `json:"member,omitempty"`
	LeaseEpoch    *int64  `json:"lease_epoch,omitempty"`
	Fault         string  `json:"fault,omitempty"`
	Target        string  `json:"target,omitempty"`
}

// marshalOp validates op and encodes it as one JSON line, without the
// newline. Only the fields that belong to op.Kind are written.
func marshalOp(op *Op) ([]byte, error) {
	if err := op.Validate(); err != nil {
		return nil, err
	}
	has := op.present()
	w := wireOp{
		Op:       op.Kind,
		Producer: op.Producer,
		Topic:    op.Topic,
		Value:    op.Value,
		Outcome:  op.Outcome,
		Error:    op.Error,
		Group:    op.Group,
		Member:   op.Member,
		Fault:    op.FaultName,
		Target:   op.Target,
	}
	if has&fTime != 0 {
		w.Time = ptr(int64(op.Time))
	}
	if has&fInvoke != 0 {
		w.Invoke = ptr(int64(op.Invoke))
	}
	if id := op.Idempotence; id != nil {
		w.ProducerID, w.ProducerEpoch, w.Sequence = ptr(id.ProducerID), ptr(id.ProducerEpoch), ptr(id.Sequence)
	}
	if has&fPartition != 0 {
		w.Partition = ptr(op.Partition)
	}
	if has&fOffset != 0 {
		w.Offset = ptr(op.Offset)
	}
	if has&fLeaseEpoch != 0 {
		w.LeaseEpoch = ptr(op.LeaseEpoch)
	}
	return json.Marshal(&w)
}

func ptr[T any](v T) *T { return &v }

// unmarshalOp decodes and validates one op line. Errors are *FormatError
// without a line number.
func unmarshalOp(line []byte) (Op, error) {
	var w wireOp
	if err := decodeStrict(line, &w); err != nil {
		return Op{}, err
	}
	sp, err := specOf(w.Op)
	if err != nil {
		return Op{}, err
	}
	op := Op{
		Kind:      w.Op,
		Producer:  w.Producer,
		Topic:     w.Topic,
		Value:     w.Value,
		Outcome:   w.Outcome,
		Error:     w.Error,
		Group:     w.Group,
		Member:    w.Member,
		FaultName: w.Fault,
		Target:    w.Target,
	}
	var has field
	if w.Time != nil {
		has |= fTime
		op.Time = time.Duration(*w.Time)
	}
	if w.Invoke != nil {
		has |= fInvoke
		op.Invoke = time.Duration(*w.Invoke)
	}
	switch n := countSet(w.ProducerID != nil, w.ProducerEpoch != nil, w.Sequence != nil); n {
	case 0:
	case 3:
		has |= fIdempotence
		op.Idempotence = &Idempotence{ProducerID: *w.ProducerID, ProducerEpoch: *w.ProducerEpoch, Sequence: *w.Sequence}
	default:
		for _, f := range []struct {
			name string
			set  bool
		}{{"producer_id", w.ProducerID != nil}, {"producer_epoch", w.ProducerEpoch != nil}, {"sequence", w.Sequence != nil}} {
			if !f.set {
				return Op{}, fieldErr(f.name, "missing (producer_id, producer_epoch and sequence come together)")
			}
		}
	}
	if w.Partition != nil {
		has |= fPartition
		op.Partition = *w.Partition
	}
	if w.Offset != nil {
		has |= fOffset
		op.Offset = *w.Offset
	}
	if w.LeaseEpoch != nil {
		has |= fLeaseEpoch
		op.LeaseEpoch = *w.LeaseEpoch
	}
	for _, s := range []struct {
		set bool
		f   field
	}{{op.Producer != "", fProducer}, {op.Topic != "", fTopic}, {op.Value != "", fValue}, {op.Outcome != "", fOutcome}, {op.Error != "", fError}, {op.Group != "", fGroup}, {op.Member != "", fMember}, {op.FaultName != "", fFault}, {op.Target != "", fTarget}} {
		if s.set {
			has |= s.f
		}
	}
	if err := op.validate(sp, has); err != nil {
		return Op{}, err
	}
	return op, nil
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// decodeStrict decodes exactly one JSON object from line into v, refusing
// unknown fields and trailing data, and turns encoding/json's errors into
// *FormatError naming the field where it can.
func decodeStrict(line []byte, v any) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return &FormatError{Msg: "empty line"}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if rest := line[dec.InputOffset():]; len(bytes.TrimSpace(rest)) != 0 {
		return &FormatError{Msg: fmt.Sprintf("trailing data after the JSON object at byte %d", dec.InputOffset())}
	}
	return nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &FormatError{Msg: fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn), Err: err}
	case errors.As(err, &typ):
		name := typ.Field
		if name == "" {
			return &FormatError{Msg: fmt.Sprintf("want a JSON object, got %s", typ.Value), Err: err}
		}
		return &FormatError{Field: name, Msg: fmt.Sprintf("wrong type: %s where %s is expected", typ.Value, typ.Type), Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &FormatError{Msg: "truncated JSON (a torn last line?)", Err: err}
	}
	// encoding/json reports an unknown field only in its message.
	const unknown = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		return &FormatError{Field: strings.TrimSuffix(strings.TrimPrefix(msg, unknown), `"`), Msg: "unknown field", Err: err}
	}
	return &FormatError{Msg: fmt.Sprintf("invalid JSON: %v", err), Err: err}
}
