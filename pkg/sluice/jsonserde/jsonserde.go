// Package jsonserde is JSON Schema serialization for the Sluice SDK
// through the schema registry, in Confluent's wire format: magic byte 0,
// the 4-byte schema id, the JSON document — what Confluent's JSON Schema
// serializers write and read. Both directions validate the document
// against the schema, as Confluent's do by default.
//
//	reg := serde.NewRegistry(http.DefaultClient, "http://127.0.0.1:7420")
//	ser, err := jsonserde.NewSerializer(reg, serde.ValueSubject("refunds"), refundSchema, true)
//	value, err := ser.Serialize(ctx, refund) // json.Marshal-able
//	var got Refund
//	err = jsonserde.NewDeserializer(reg).Deserialize(ctx, value, &got)
package jsonserde

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/pkg/sluice/serde"
)

// Serializer writes documents of one schema under one subject. Safe for
// concurrent use.
type Serializer struct {
	reg          *serde.Registry
	subject      string
	text         string
	schema       schema.Schema
	autoRegister bool

	once sync.Mutex // guards id
	id   int64
}

// NewSerializer returns a serializer of documents valid under schemaText
// (a JSON Schema without references) under subject. With autoRegister it
// registers the schema on first use; without, the subject must have it.
func NewSerializer(reg *serde.Registry, subject, schemaText string, autoRegister bool) (*Serializer, error) {
	s, err := schema.Parse(schema.JSON, schemaText, nil, schema.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("jsonserde: %w", err)
	}
	return &Serializer{reg: reg, subject: subject, text: schemaText, schema: s, autoRegister: autoRegister}, nil
}

// Serialize encodes v with encoding/json, checks the document against the
// schema, and frames it with the schema's id.
func (s *Serializer) Serialize(ctx context.Context, v any) ([]byte, error) {
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("jsonserde: %w", err)
	}
	return s.SerializeJSON(ctx, doc)
}

// SerializeJSON checks a JSON document against the schema and frames it.
func (s *Serializer) SerializeJSON(ctx context.Context, doc []byte) ([]byte, error) {
	if err := s.schema.Validate(doc); err != nil {
		return nil, fmt.Errorf("jsonserde: %s: %w", s.subject, err)
	}
	id, err := s.schemaID(ctx)
	if err != nil {
		return nil, err
	}
	return schema.AppendWire(make([]byte, 0, schema.WireHeaderBytes+len(doc)), id, doc), nil
}

func (s *Serializer) schemaID(ctx context.Context) (int64, error) {
	s.once.Lock()
	defer s.once.Unlock()
	if s.id > 0 {
		return s.id, nil
	}
	id, err := s.reg.ID(ctx, s.subject, &sluicev1.SchemaInput{Schema: s.text, Type: string(schema.JSON)}, s.autoRegister)
	if err != nil {
		return 0, fmt.Errorf("jsonserde: %w", err)
	}
	s.id = id
	return id, nil
}

// Deserializer reads framed documents. Safe for concurrent use.
type Deserializer struct{ reg *serde.Registry }

// NewDeserializer returns a deserializer over reg.
func NewDeserializer(reg *serde.Registry) *Deserializer { return &Deserializer{reg: reg} }

// Deserialize checks the framed document b against the schema it names
// and decodes it into v with encoding/json.
func (d *Deserializer) Deserialize(ctx context.Context, b []byte, v any) error {
	c, doc, err := d.reg.Unframe(ctx, b)
	if err != nil {
		return fmt.Errorf("jsonserde: %w", err)
	}
	if c.Schema.Format() != schema.JSON {
		return fmt.Errorf("jsonserde: schema %d is %s, not JSON", c.Info.GetId(), c.Schema.Format())
	}
	if err := c.Schema.Validate(doc); err != nil {
		return fmt.Errorf("jsonserde: schema %d: %w", c.Info.GetId(), err)
	}
	if err := json.Unmarshal(doc, v); err != nil {
		return fmt.Errorf("jsonserde: %w", err)
	}
	return nil
}
