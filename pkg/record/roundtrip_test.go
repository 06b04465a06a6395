package record

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRoundTripEveryCodec(t *testing.T) {
	for _, codec := range allCodecs {
		for _, n := range []int{1, 2, 37, 1000} {
			t.Run(fmt.Sprintf("%v/%d", codec, n), func(t *testing.T) {
				want := sampleRecords(n, uint64(n))
				prod := &Producer{ID: 77, Epoch: 3, BaseSequence: 1000}
				batch := build(t, BuilderOptions{Codec: codec, Producer: prod}, want)
				b := Batch(batch)
				if codec != CodecNone && n > 1 && b.Codec() != codec {
					t.Fatalf("codec %v, want %v (compression should pay off here)", b.Codec(), codec)
				}
				if err := Validate(batch, Limits{}); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				SetBaseOffset(batch, 5000)
				SetPartitionLeaderEpoch(batch, 9)
				got, err := Parse(batch, Limits{})
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				checkRecords(t, got, want, 5000)

				// Header accessors, read straight from the bytes.
				checks := []struct {
					name      string
					got, want int64
				}{
					{"BaseOffset", b.BaseOffset(), 5000},
					{"LastOffset", b.LastOffset(), 5000 + int64(n) - 1},
					{"NextOffset", b.NextOffset(), 5000 + int64(n)},
					{"RecordCount", int64(b.RecordCount()), int64(n)},
					{"LastOffsetDelta", int64(b.LastOffsetDelta()), int64(n - 1)},
					{"BaseTimestamp", b.BaseTimestamp(), want[0].Timestamp},
					{"MaxTimestamp", b.MaxTimestamp(), maxTimestamp(want)},
					{"ProducerID", b.ProducerID(), 77},
					{"ProducerEpoch", int64(b.ProducerEpoch()), 3},
					{"BaseSequence", int64(b.BaseSequence()), 1000},
					{"PartitionLeaderEpoch", int64(b.PartitionLeaderEpoch()), 9},
					{"BatchLength", int64(b.BatchLength()), int64(len(batch) - 12)},
					{"Magic", int64(b.Magic()), 2},
				}
				for _, c := range checks {
					if c.got != c.want {
						t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
					}
				}
			})
		}
	}
}

// The accessors agree with kmsg's decoding of the same header.
func TestAccessorsMatchKmsg(t *testing.T) {
	batch := build(t, BuilderOptions{Codec: CodecZstd, Producer: &Producer{ID: 1 << 40, Epoch: 32000, BaseSequence: 1 << 30}, Transactional: true}, sampleRecords(20, 1))
	SetBaseOffset(batch, -7) // any int64 goes; negative checks sign handling
	SetPartitionLeaderEpoch(batch, -123)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		t.Fatal(err)
	}
	b := Batch(batch)
	if rb.FirstOffset != b.BaseOffset() || rb.Length != b.BatchLength() || rb.PartitionLeaderEpoch != b.PartitionLeaderEpoch() ||
		rb.Magic != b.Magic() || uint32(rb.CRC) != b.CRC() || Attributes(rb.Attributes) != b.Attributes() ||
		rb.LastOffsetDelta != b.LastOffsetDelta() || rb.FirstTimestamp != b.BaseTimestamp() || rb.MaxTimestamp != b.MaxTimestamp() ||
		rb.ProducerID != b.ProducerID() || rb.ProducerEpoch != b.ProducerEpoch() || rb.FirstSequence != b.BaseSequence() ||
		rb.NumRecords != b.RecordCount() || !bytes.Equal(rb.Records, b.RawRecords()) {
		t.Fatalf("accessors disagree with kmsg: %+v", rb)
	}
	if !b.Attributes().Transactional() || b.Attributes().Control() || b.Codec() != CodecZstd {
		t.Fatalf("attributes %#x", b.Attributes())
	}
}

func TestSetBaseOffsetKeepsCRC(t *testing.T) {
	for _, codec := range allCodecs {
		batch := build(t, BuilderOptions{Codec: codec}, sampleRecords(10, 3))
		before := append([]byte(nil), batch...)
		for _, base := range []int64{0, 1, 1 << 40, 1<<63 - 1000} {
			SetBaseOffset(batch, base)
			SetPartitionLeaderEpoch(batch, int32(base%1000))
			if err := Verify(batch); err != nil {
				t.Fatalf("%v: after SetBaseOffset(%d): %v", codec, base, err)
			}
			if err := Validate(batch, Limits{}); err != nil {
				t.Fatalf("%v: after SetBaseOffset(%d): %v", codec, base, err)
			}
			if Batch(batch).BaseOffset() != base {
				t.Fatalf("BaseOffset = %d, want %d", Batch(batch).BaseOffset(), base)
			}
			// Only bytes 0-15 may change: nothing is re-encoded.
			if !bytes.Equal(batch[16:], before[16:]) {
				t.Fatal("SetBaseOffset changed bytes past the leader epoch")
			}
		}
	}
}

// Iterating yields offset = base + delta, timestamp = base + delta, and the
// record slices stay valid until the next Reset.
func TestIteratorReuse(t *testing.T) {
	it := NewIterator(Limits{})
	for i, codec := range allCodecs {
		want := sampleRecords(50, uint64(i))
		batch := build(t, BuilderOptions{Codec: codec}, want)
		SetBaseOffset(batch, int64(100*i))
		if err := it.Reset(batch); err != nil {
			t.Fatal(err)
		}
		var got []Record
		for it.Next() {
			got = append(got, *it.Record())
			if it.Index() != len(got)-1 {
				t.Fatalf("Index %d, want %d", it.Index(), len(got)-1)
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, want, int64(100*i))
		if it.Next() {
			t.Fatal("Next after the end returned true")
		}
	}
}

// Decode returns records that do not alias the batch.
func TestDecodeOwnsMemory(t *testing.T) {
	want := sampleRecords(10, 9)
	batch := build(t, BuilderOptions{}, want)
	got, err := Decode(batch, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	clear(batch)
	checkRecords(t, got, want, 0)
}

func TestBuilderBounds(t *testing.T) {
	lim := Limits{MaxRecords: 3, MaxBatchBytes: HeaderSize + 100}
	b, err := NewBuilder(BuilderOptions{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	small := Record{Timestamp: 1, Value: []byte("x")}
	for i := range 3 {
		if err := b.Append(&small); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := b.Append(&small); !errors.Is(err, ErrBatchFull) {
		t.Fatalf("4th record: %v, want ErrBatchFull", err)
	}
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(batch, lim); err != nil {
		t.Fatalf("built batch fails Validate under the same limits: %v", err)
	}
	if b.Len() != 0 || b.Size() != HeaderSize {
		t.Fatalf("Build did not empty the builder: %d records, %d bytes", b.Len(), b.Size())
	}
	if _, err := b.Build(); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("empty Build: %v", err)
	}

	// Bytes: two 40-byte values fit 100 bytes of records, a third does not.
	mid := Record{Timestamp: 1, Value: bytes.Repeat([]byte("v"), 40)}
	for i := range 2 {
		if err := b.Append(&mid); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := b.Append(&mid); !errors.Is(err, ErrBatchFull) {
		t.Fatalf("3rd 40-byte record: %v, want ErrBatchFull", err)
	}
	if b.Size() > lim.MaxBatchBytes {
		t.Fatalf("size %d over the bound", b.Size())
	}

	// A record too large for any batch is a limit error, not ErrBatchFull.
	b2, _ := NewBuilder(BuilderOptions{Limits: lim})
	huge := Record{Value: bytes.Repeat([]byte("v"), 200)}
	var fe *FormatError
	if err := b2.Append(&huge); !errors.As(err, &fe) || !errors.Is(err, ErrLimit) || fe.Field != "records[0].length" {
		t.Fatalf("huge record: %v", err)
	}
}

func TestBuilderRejectsBadRecords(t *testing.T) {
	b, _ := NewBuilder(BuilderOptions{Limits: Limits{MaxKeyBytes: 4, MaxHeaders: 1}})
	cases := []struct {
		rec   Record
		field string
		class error
	}{
		{Record{Key: []byte("12345")}, "records[0].key", ErrLimit},
		{Record{Timestamp: -1}, "records[0].timestamp", ErrInvalid},
		{Record{Headers: make([]Header, 2)}, "records[0].headers", ErrLimit},
		{Record{Headers: []Header{{Key: "\xff"}}}, "records[0].headers[0].key", ErrInvalid},
	}
	for _, c := range cases {
		var fe *FormatError
		err := b.Append(&c.rec)
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, c.class) {
			t.Errorf("Append(%+v) = %v, want %s (%v)", c.rec, err, c.field, c.class)
		}
	}
	if b.Len() != 0 {
		t.Fatal("rejected records were added")
	}
}

func TestBuilderOptionsChecked(t *testing.T) {
	bad := []BuilderOptions{
		{Codec: 5},
		{Codec: CodecGzip, Level: 10},
		{Codec: CodecSnappy, Level: 1},
		{Codec: CodecNone, Level: 1},
		{Transactional: true},
		{Control: true, Producer: &Producer{}},
		{Producer: &Producer{ID: -1}},
		{Limits: Limits{MaxRecords: -1}},
		{Limits: Limits{MaxBatchBytes: 10}},
	}
	for _, o := range bad {
		if _, err := NewBuilder(o); err == nil {
			t.Errorf("NewBuilder(%+v) accepted", o)
		}
	}
	// Every level of every codec builds a valid batch.
	for _, o := range []BuilderOptions{{Codec: CodecGzip, Level: 1}, {Codec: CodecGzip, Level: 9}, {Codec: CodecLZ4, Level: 9}, {Codec: CodecZstd, Level: 1}, {Codec: CodecZstd, Level: 19}} {
		want := sampleRecords(30, 4)
		batch := build(t, o, want)
		got, err := Parse(batch, Limits{})
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		checkRecords(t, got, want, 0)
	}
}

// Control batches (transaction markers) are built by the writer and read by
// the Iterator, but Validate refuses them from clients.
func TestControlBatch(t *testing.T) {
	prod := &Producer{ID: 5, Epoch: 1, BaseSequence: 0}
	marker := []Record{{Timestamp: 10, Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 7}}}
	batch := build(t, BuilderOptions{Producer: prod, Transactional: true, Control: true}, marker)
	if !Batch(batch).Attributes().Control() {
		t.Fatal("control bit not set")
	}
	got, err := Decode(batch, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, marker, 0)
	var fe *FormatError
	if err := Validate(batch, Limits{}); !errors.As(err, &fe) || fe.Field != "attributes" {
		t.Fatalf("Validate(control) = %v", err)
	}
}

func TestSplit(t *testing.T) {
	a := build(t, BuilderOptions{}, sampleRecords(3, 1))
	b := build(t, BuilderOptions{Codec: CodecLZ4}, sampleRecords(4, 2))
	buf := append(append([]byte(nil), a...), b...)
	first, rest, err := Split(buf)
	if err != nil || !bytes.Equal(first, a) {
		t.Fatalf("first: %v", err)
	}
	second, rest, err := Split(rest)
	if err != nil || !bytes.Equal(second, b) || len(rest) != 0 {
		t.Fatalf("second: %v, %d left", err, len(rest))
	}
	if _, _, err := Split(buf[:len(a)-1]); err == nil {
		t.Fatal("Split accepted a truncated batch")
	}
}

func TestLimitsCheck(t *testing.T) {
	if err := (Limits{}).Check(); err != nil {
		t.Fatalf("zero Limits: %v", err)
	}
	err := Limits{MaxKeyBytes: -1, MaxHeaders: -5, MaxDecompressedBytes: 2 << 30}.Check()
	for _, name := range []string{"MaxKeyBytes", "MaxHeaders", "MaxDecompressedBytes"} {
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(name)) {
			t.Errorf("Check does not report %s: %v", name, err)
		}
	}
	// MaxLimits is the widest Check accepts: each field one more fails.
	if err := MaxLimits().Check(); err != nil {
		t.Fatalf("MaxLimits: %v", err)
	}
	for name, grow := range map[string]func(*Limits){
		"MaxBatchBytes": func(l *Limits) { l.MaxBatchBytes++ },
		"MaxRecords":    func(l *Limits) { l.MaxRecords++ },
		"MaxHeaders":    func(l *Limits) { l.MaxHeaders++ },
		"MaxValueBytes": func(l *Limits) { l.MaxValueBytes++ },
	} {
		l := MaxLimits()
		grow(&l)
		if err := l.Check(); err == nil || !bytes.Contains([]byte(err.Error()), []byte(name)) {
			t.Errorf("MaxLimits with %s one larger: %v", name, err)
		}
	}
}

// SetProducer renumbers an encoded batch in place: the fields read back,
// the CRC verifies, and the records are unchanged.
func TestSetProducer(t *testing.T) {
	bld, err := NewBuilder(BuilderOptions{Producer: &Producer{ID: 7, Epoch: 1, BaseSequence: 0}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := bld.Append(&Record{Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := SetProducer(data, 42, 3, 1000); err != nil {
		t.Fatal(err)
	}
	if err := Verify(data); err != nil {
		t.Fatalf("verify after SetProducer: %v", err)
	}
	b := Batch(data)
	if b.ProducerID() != 42 || b.ProducerEpoch() != 3 || b.BaseSequence() != 1000 {
		t.Fatalf("read back %d/%d/%d", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	}
	recs, err := Decode(data, Limits{})
	if err != nil || len(recs) != 3 || recs[2].Value[0] != 2 {
		t.Fatalf("records after SetProducer: %v, %v", recs, err)
	}
	if err := SetProducer(data[:len(data)-1], 1, 1, 1); err == nil {
		t.Fatal("SetProducer accepted a truncated batch")
	}
}
