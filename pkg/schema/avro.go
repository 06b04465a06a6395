package schema

import (
	"encoding/json"
	"fmt"

	"github.com/hamba/avro/v2"
)

// avroSchema is an Avro schema parsed by hamba/avro, in a cache of its own
// (named types are registered per parse, so two versions of one record
// never meet in a shared cache).
type avroSchema struct {
	s          avro.Schema
	norm       string
	maxPayload int // Limits.MaxPayloadBytes
}

func parseAvro(text string, refs []Resolved, lim Limits) (Schema, error) {
	cache := &avro.SchemaCache{}
	// References first, depth first: their named types are then known to
	// the schemas that use them.
	var load func([]Resolved) error
	load = func(rs []Resolved) error {
		for _, r := range rs {
			if err := load(r.Refs); err != nil {
				return err
			}
			if _, err := avro.ParseWithCache(r.Schema, "", cache); err != nil {
				return fmt.Errorf("%w: reference %q: %v", ErrInvalidSchema, r.Name, err)
			}
		}
		return nil
	}
	if err := load(refs); err != nil {
		return nil, err
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	// The full form (defaults, aliases, docs kept; hamba writes keys in a
	// fixed order): two texts differing only in layout normalize alike.
	// Parsing Canonical Form would drop defaults, which matter.
	norm, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return &avroSchema{s: s, norm: string(norm), maxPayload: lim.MaxPayloadBytes}, nil
}

// AvroOf returns the hamba/avro schema of an Avro schema (false for other
// formats), for decoding into Go values.
func AvroOf(s Schema) (avro.Schema, bool) {
	a, ok := s.(*avroSchema)
	if !ok {
		return nil, false
	}
	return a.s, true
}

func (a *avroSchema) Format() Format     { return Avro }
func (a *avroSchema) Normalized() string { return a.norm }

func (a *avroSchema) CanRead(writer Schema) error {
	w, ok := writer.(*avroSchema)
	if !ok {
		return fmt.Errorf("the writer's schema is %s, not AVRO", writer.Format())
	}
	return avro.NewSchemaCompatibility().Compatible(a.s, w.s)
}

func (a *avroSchema) JSON(payload []byte) ([]byte, error) {
	if err := a.Validate(payload); err != nil {
		return nil, err
	}
	var v any
	if err := avro.Unmarshal(a.s, payload, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return b, nil
}

func (a *avroSchema) Validate(payload []byte) error {
	if len(payload) > a.maxPayload {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidPayload, len(payload), a.maxPayload)
	}
	return validateAvro(a.s, payload)
}
