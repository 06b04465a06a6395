package record

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transaction marker is Kafka's control batch: attributes control and
// transactional, the producer id and epoch of the transaction it ends, no
// sequence, and one record whose key is kmsg.ControlRecordKey (version 0,
// type ABORT or COMMIT) and whose value is kmsg.EndTxnMarker (version 0,
// the coordinator epoch). The partition writer writes markers; clients
// cannot (Validate refuses control batches), and readers never deliver
// them as records.

// Marker is what a transaction marker says.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	// Timestamp in milliseconds since the Unix epoch.
	Timestamp int64
}

// BuildMarker encodes m as a control batch (base offset 0; the writer sets
// it).
func BuildMarker(m Marker) ([]byte, error) {
	if m.ProducerID < 0 || m.ProducerEpoch < 0 || m.Timestamp < 0 {
		return nil, fmt.Errorf("record: marker producer id %d, epoch %d, timestamp %d: all must be ≥ 0", m.ProducerID, m.ProducerEpoch, m.Timestamp)
	}
	b, err := NewBuilder(BuilderOptions{
		Producer:      &Producer{ID: m.ProducerID, Epoch: m.ProducerEpoch, BaseSequence: NoSequence},
		Transactional: true,
		Control:       true,
	})
	if err != nil {
		return nil, err
	}
	key := kmsg.ControlRecordKey{Version: 0, Type: kmsg.ControlRecordKeyType(0)}
	if m.Commit {
		key.Type = 1
	}
	value := kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: m.CoordinatorEpoch}
	if err := b.Append(&Record{Timestamp: m.Timestamp, Key: key.AppendTo(nil), Value: value.AppendTo(nil)}); err != nil {
		return nil, err
	}
	return b.Build()
}

// ParseMarker decodes a control batch written by BuildMarker. It fails on a
// batch that is not a control batch, or whose record is not an ABORT or
// COMMIT marker of version 0.
func ParseMarker(batch []byte) (Marker, error) {
	b := Batch(batch)
	if len(batch) < HeaderSize {
		return Marker{}, fmt.Errorf("%w: marker of %d bytes", ErrInvalid, len(batch))
	}
	if a := b.Attributes(); !a.Control() || !a.Transactional() {
		return Marker{}, fmt.Errorf("%w: batch at offset %d is not a control batch", ErrInvalid, b.BaseOffset())
	}
	it := NewIterator(Limits{})
	if err := it.Reset(batch); err != nil {
		return Marker{}, err
	}
	if !it.Next() {
		if err := it.Err(); err != nil {
			return Marker{}, err
		}
		return Marker{}, fmt.Errorf("%w: control batch at offset %d has no record", ErrInvalid, b.BaseOffset())
	}
	r := it.Record()
	var key kmsg.ControlRecordKey
	if err := key.ReadFrom(r.Key); err != nil || key.Version != 0 || (key.Type != 0 && key.Type != 1) {
		return Marker{}, fmt.Errorf("%w: control record at offset %d is not a version-0 ABORT or COMMIT marker (key %x)", ErrInvalid, r.Offset, r.Key)
	}
	var value kmsg.EndTxnMarker
	if err := value.ReadFrom(r.Value); err != nil {
		return Marker{}, fmt.Errorf("%w: marker at offset %d: value %x: %v", ErrInvalid, r.Offset, r.Value, err)
	}
	return Marker{ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), Commit: key.Type == 1,
		CoordinatorEpoch: value.CoordinatorEpoch, Timestamp: r.Timestamp}, nil
}
