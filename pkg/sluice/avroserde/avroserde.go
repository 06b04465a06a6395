// Package avroserde is Avro serialization for the Sluice SDK through the
// schema registry (sluice.v1.SchemaService) in Confluent's wire format:
// a record value a Serializer writes — magic byte 0, the 4-byte schema id,
// the Avro datum — is what Confluent's serializers write, so Confluent's
// deserializers read it, and a Deserializer reads theirs.
//
// It lives apart from package sluice so the SDK's core keeps its small
// dependency tree (this one adds github.com/hamba/avro/v2).
//
//	reg := avroserde.NewRegistry(http.DefaultClient, "http://127.0.0.1:7420")
//	ser, err := avroserde.NewSerializer(reg, avroserde.ValueSubject("orders"), orderSchema, true)
//	value, err := ser.Serialize(ctx, order) // produce it as the record's value
//	var got Order
//	err = avroserde.NewDeserializer(reg).Deserialize(ctx, value, &got)
package avroserde

import (
	"context"
	"fmt"
	"sync"

	"connectrpc.com/connect"
	"github.com/hamba/avro/v2"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/pkg/sluice/serde"
)

// ValueSubject is the subject of a topic's record values under Confluent's
// default naming (TopicNameStrategy): TOPIC-value.
func ValueSubject(topic string) string { return serde.ValueSubject(topic) }

// KeySubject is the subject of a topic's record keys: TOPIC-key.
func KeySubject(topic string) string { return serde.KeySubject(topic) }

// Registry is the schema registry the serializers use (package serde).
type Registry = serde.Registry

// NewRegistry returns the registry served at baseURL ("http://HOST:PORT":
// sluice dev or an ingest copy).
func NewRegistry(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Registry {
	return serde.NewRegistry(httpClient, baseURL, opts...)
}

// Serializer writes values of one schema under one subject.
type Serializer struct {
	reg          *Registry
	subject      string
	text         string
	schema       avro.Schema
	autoRegister bool

	once sync.Mutex // guards id
	id   int64
}

// NewSerializer returns a serializer of values of schemaText under subject.
// With autoRegister it registers the schema on first use (a new version if
// the subject's compatibility level allows it); without, the subject must
// have it already (a lookup).
func NewSerializer(reg *Registry, subject, schemaText string, autoRegister bool) (*Serializer, error) {
	s, err := avro.ParseWithCache(schemaText, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("avroserde: %w", err)
	}
	return &Serializer{reg: reg, subject: subject, text: schemaText, schema: s, autoRegister: autoRegister}, nil
}

// schemaID registers or looks the schema up once.
func (s *Serializer) schemaID(ctx context.Context) (int64, error) {
	s.once.Lock()
	defer s.once.Unlock()
	if s.id > 0 {
		return s.id, nil
	}
	id, err := s.reg.ID(ctx, s.subject, &sluicev1.SchemaInput{Schema: s.text, Type: string(schema.Avro)}, s.autoRegister)
	if err != nil {
		return 0, fmt.Errorf("avroserde: %w", err)
	}
	s.id = id
	return id, nil
}

// Serialize encodes v (a struct with avro tags, a map[string]any, ...) and
// frames it with the schema's id.
func (s *Serializer) Serialize(ctx context.Context, v any) ([]byte, error) {
	id, err := s.schemaID(ctx)
	if err != nil {
		return nil, err
	}
	datum, err := avro.Marshal(s.schema, v)
	if err != nil {
		return nil, fmt.Errorf("avroserde: encode for %s: %w", s.subject, err)
	}
	return schema.AppendWire(make([]byte, 0, schema.WireHeaderBytes+len(datum)), id, datum), nil
}

// Deserializer reads framed values with the schema each names.
type Deserializer struct{ reg *Registry }

// NewDeserializer returns a deserializer over reg.
func NewDeserializer(reg *Registry) *Deserializer { return &Deserializer{reg: reg} }

// Deserialize decodes the framed value b into v (a pointer) with the
// writer's schema, fetched by the id in the frame (with its references).
// The datum is validated (bounded) before hamba/avro decodes it, since
// that decoder trusts the lengths and counts in the data.
func (d *Deserializer) Deserialize(ctx context.Context, b []byte, v any) error {
	c, datum, err := d.reg.Unframe(ctx, b)
	if err != nil {
		return fmt.Errorf("avroserde: %w", err)
	}
	id := c.Info.GetId()
	s, ok := schema.AvroOf(c.Schema)
	if !ok {
		return fmt.Errorf("avroserde: schema %d is %s, not AVRO", id, c.Schema.Format())
	}
	if err := c.Schema.Validate(datum); err != nil {
		return fmt.Errorf("avroserde: schema %d: %w", id, err)
	}
	if err := avro.Unmarshal(s, datum, v); err != nil {
		return fmt.Errorf("avroserde: decode with schema %d: %w", id, err)
	}
	return nil
}
