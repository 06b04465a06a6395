package sluicedriver

import (
	"bytes"
	"testing"

	"github.com/sluicemq/sluice/harness/loadgen"
	"github.com/sluicemq/sluice/pkg/schema"
)

// Every message size from the smallest on frames a value of exactly that
// size (one byte less where the length's varint grows: 70 and 8,199
// bytes), which the registry's validator takes as one datum of AvroSchema
// and unframe turns back into the payload's first bytes; a smaller size is
// refused.
func TestAvroFrameSizes(t *testing.T) {
	s, err := schema.Parse(schema.Avro, AvroSchema, nil, schema.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	f := &avroFramer{id: 7}
	payload := make([]byte, 20_000)
	for i := range payload {
		payload[i] = byte(i)
	}
	for size := MinSchemaMessageSize; size <= len(payload); size++ {
		bp, err := f.frame(payload[:size])
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		v := *bp
		want := size
		if size == 70 || size == 8199 {
			want = size - 1
		}
		if len(v) != want {
			t.Fatalf("size %d: value of %d bytes; want %d", size, len(v), want)
		}
		id, p, err := schema.ParseWire(v)
		if err != nil || id != 7 {
			t.Fatalf("size %d: id %d, %v", size, id, err)
		}
		if err := s.Validate(p); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if d := unframe(v); len(d) < loadgen.HeaderSize || !bytes.Equal(d, payload[:len(d)]) {
			t.Fatalf("size %d: unframe gave %d bytes, not the payload's first ones", size, len(d))
		}
		f.release(bp)
	}
	if _, err := f.frame(payload[:MinSchemaMessageSize-1]); err == nil {
		t.Fatalf("size %d framed; want an error", MinSchemaMessageSize-1)
	}
	if got := unframe([]byte("SLB1 plain")); string(got) != "SLB1 plain" {
		t.Fatalf("unframe of an unframed value = %q; want it unchanged", got)
	}
}

// One value's framing: a pooled buffer, the prefix and one copy.
func BenchmarkAvroFrame1KiB(b *testing.B) {
	f := &avroFramer{id: 1}
	payload := make([]byte, 1024)
	b.SetBytes(1024)
	for b.Loop() {
		bp, _ := f.frame(payload)
		f.release(bp)
	}
}
