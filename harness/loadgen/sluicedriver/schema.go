package sluicedriver

// Schema-validated values (Config.Schema, `sluice bench --sluice-schema`):
// issue 25's P1 with validation at produce on. Before the run the driver
// registers AvroSchema under each topic's subject (SubjectOf: Confluent's
// TopicNameStrategy) and creates the topic with schema.subject set, so
// ingest validates every value (docs/DESIGN.md §2.11, "Validation at
// produce"); the producers send each payload as one datum of AvroSchema in
// Confluent's wire format, and the consumers take the frame off again, so
// the load generator's header and its latencies work unchanged.
//
// A value is the workload's message size in total, the load generator's
// payload cut to fit:
//
//	0       1            5                       5+k
//	+-------+------------+-----------------------+------------------------+
//	| 0x00  | schema id  | Avro long: data bytes | data: the first n bytes |
//	|       | big-endian | (zigzag varint, k B)  | of the payload          |
//	+-------+------------+-----------------------+------------------------+
//
// with n the largest length for which 5 + k + n <= size. That is exactly
// size except where the varint grows a byte (sizes 70 and 8,199: one byte
// less). For 1 KiB: k = 2, n = 1,017. The prefix is computed once per value
// size; a value costs one copy of the payload into a pooled buffer.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/harness/loadgen"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/schema"
)

// SchemaAvro is Config.Schema for Avro values validated at produce.
const SchemaAvro = "avro"

// AvroSchema is the schema of the benchmark's values: one bytes field, so
// a value carries the load generator's payload as it is and the validator
// still walks a datum (a record, a length, the bytes).
const AvroSchema = `{"type":"record","name":"Payload","fields":[{"name":"data","type":"bytes"}]}`

// topicSchemaSubject is the topic config key that turns validation on
// (catalog.KeySchemaSubject; the driver talks to the service, not the
// catalog).
const topicSchemaSubject = "schema.subject"

// SubjectOf is the subject of topic's values.
func SubjectOf(topic string) string { return topic + "-value" }

// MinSchemaMessageSize is the smallest message size Config.Schema takes:
// the frame, a one-byte length and the load generator's header.
const MinSchemaMessageSize = schema.WireHeaderBytes + 1 + loadgen.HeaderSize

// avroDataLen returns how many payload bytes a framed value of size bytes
// carries, and the length's varint width, or ok false when size is below
// MinSchemaMessageSize.
func avroDataLen(size int) (n, k int, ok bool) {
	if size < MinSchemaMessageSize {
		return 0, 0, false
	}
	var tmp [binary.MaxVarintLen64]byte
	for n = size - schema.WireHeaderBytes - 1; n >= loadgen.HeaderSize; n-- {
		k = binary.PutVarint(tmp[:], int64(n)) // zigzag, as Avro's long
		if schema.WireHeaderBytes+k+n <= size {
			return n, k, true
		}
	}
	return 0, 0, false
}

// avroFramer frames one producer's payloads. frame is called from the
// producer's goroutine only; release from any.
type avroFramer struct {
	id int64

	// The prefix for payloads of size bytes (producer goroutine only).
	size   int
	n      int
	prefix []byte

	pool sync.Pool // of *[]byte, values handed to the SDK until their callback
}

// frame returns payload as a framed value in a pooled buffer, which the
// caller gives back with release once the SDK is done with it.
func (f *avroFramer) frame(payload []byte) (*[]byte, error) {
	if len(payload) != f.size || f.prefix == nil {
		n, _, ok := avroDataLen(len(payload))
		if !ok {
			return nil, fmt.Errorf("sluice driver: a %d-byte message cannot carry a framed Avro value with the load generator's header (want at least %d bytes)", len(payload), MinSchemaMessageSize)
		}
		f.size, f.n = len(payload), n
		f.prefix = binary.AppendVarint(schema.AppendWire(nil, f.id, nil), int64(n))
	}
	bp, _ := f.pool.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, f.size)
		bp = &b
	}
	b := append((*bp)[:0], f.prefix...)
	*bp = append(b, payload[:f.n]...)
	return bp, nil
}

func (f *avroFramer) release(bp *[]byte) { f.pool.Put(bp) }

// unframe returns the data of a value the framer wrote, or v itself when
// it is not one (the load generator then counts it as foreign).
func unframe(v []byte) []byte {
	_, p, err := schema.ParseWire(v)
	if err != nil {
		return v
	}
	n, k := binary.Varint(p)
	if k <= 0 || n < 0 || n > int64(len(p)-k) {
		return v
	}
	return p[k : k+int(n)]
}

// registerSchema registers AvroSchema under topic's subject and returns
// its id (the id it has already if it is registered).
func (d *Driver) registerSchema(ctx context.Context, topic string) (int64, error) {
	r, err := d.schemas.RegisterSchema(ctx, connect.NewRequest(&sluicev1.RegisterSchemaRequest{
		Subject: SubjectOf(topic),
		Schema:  &sluicev1.SchemaInput{Schema: AvroSchema, Type: "AVRO"},
	}))
	if err != nil {
		return 0, fmt.Errorf("sluice driver: register the values' schema under %q: %w", SubjectOf(topic), err)
	}
	id := r.Msg.GetVersion().GetSchema().GetId()
	if id <= 0 {
		return 0, errors.New("sluice driver: the registry answered without a schema id")
	}
	return id, nil
}

// framer returns a framer for topic's values, or nil when values are sent
// as they are.
func (d *Driver) framer(topic string) (*avroFramer, error) {
	if d.cfg.Schema == "" {
		return nil, nil
	}
	d.mu.Lock()
	id, ok := d.schemaIDs[topic]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("sluice driver: topic %q was not created by this driver, so it has no registered schema", topic)
	}
	return &avroFramer{id: id}, nil
}
