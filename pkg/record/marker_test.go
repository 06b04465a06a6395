package record

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A marker round-trips, is a control batch Kafka's own parser reads as
// one (franz-go's kmsg.RecordBatch), and ordinary batches are not markers.
func TestMarkerRoundTrip(t *testing.T) {
	for _, m := range []Marker{
		{ProducerID: 7, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 1, Timestamp: 1_700_000_000_000},
		{ProducerID: 1 << 40, ProducerEpoch: 32767, Commit: false, Timestamp: 0},
	} {
		b, err := BuildMarker(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseMarker(b)
		if err != nil || got != m {
			t.Fatalf("ParseMarker(BuildMarker(%+v)) = %+v, %v", m, got, err)
		}
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if kb.Attributes&0x30 != 0x30 || kb.FirstSequence != -1 || kb.ProducerID != m.ProducerID || kb.NumRecords != 1 {
			t.Fatalf("kmsg reads attributes %#x, sequence %d, producer %d, %d records", kb.Attributes, kb.FirstSequence, kb.ProducerID, kb.NumRecords)
		}
		if err := Validate(b, Limits{}); err == nil {
			t.Fatal("Validate accepted a control batch (clients may not send markers)")
		}
	}
	plain, err := NewBuilder(BuilderOptions{Producer: &Producer{ID: 7, Epoch: 3}, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Append(&Record{Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	b, err := plain.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMarker(b); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ParseMarker of a transactional data batch: %v; want ErrInvalid", err)
	}
	if _, err := BuildMarker(Marker{ProducerID: -1}); err == nil {
		t.Fatal("BuildMarker accepted producer id -1")
	}
}
