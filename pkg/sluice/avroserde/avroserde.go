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
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/schema"
)

// ValueSubject is the subject of a topic's record values under Confluent's
// default naming (TopicNameStrategy): TOPIC-value.
func ValueSubject(topic string) string { return topic + "-value" }

// KeySubject is the subject of a topic's record keys: TOPIC-key.
func KeySubject(topic string) string { return topic + "-key" }

// maxCachedSchemas bounds the schemas a Registry keeps by id.
const maxCachedSchemas = 1024

// Registry is the schema registry as the serializers use it: schemas
// fetched by id once (a schema never changes). Safe for concurrent use.
type Registry struct {
	svc sluicev1connect.SchemaServiceClient

	mu   sync.Mutex
	byID map[int64]parsed
}

// parsed is a schema for decoding, and its validator: data is checked
// before hamba decodes it, since hamba's decoder trusts the lengths and
// counts in the data (pkg/schema's validator bounds the work by the bytes).
type parsed struct {
	s     avro.Schema
	check schema.Schema
}

// NewRegistry returns the registry served at baseURL ("http://HOST:PORT":
// sluice dev or an ingest copy).
func NewRegistry(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Registry {
	return &Registry{svc: sluicev1connect.NewSchemaServiceClient(httpClient, baseURL, opts...), byID: map[int64]parsed{}}
}

// schemaByID returns schema id, parsed (cached).
func (r *Registry) schemaByID(ctx context.Context, id int64) (parsed, error) {
	r.mu.Lock()
	p, ok := r.byID[id]
	r.mu.Unlock()
	if ok {
		return p, nil
	}
	resp, err := r.svc.GetSchema(ctx, connect.NewRequest(&sluicev1.GetSchemaRequest{Id: id}))
	if err != nil {
		return parsed{}, fmt.Errorf("avroserde: schema %d: %w", id, err)
	}
	info := resp.Msg.GetSchema()
	if info.GetType() != string(schema.Avro) {
		return parsed{}, fmt.Errorf("avroserde: schema %d is %s, not AVRO", id, info.GetType())
	}
	if len(info.GetReferences()) > 0 {
		return parsed{}, fmt.Errorf("avroserde: schema %d has references, which this package does not resolve yet", id)
	}
	if p.s, err = avro.ParseWithCache(info.GetSchema(), "", &avro.SchemaCache{}); err == nil {
		p.check, err = schema.Parse(schema.Avro, info.GetSchema(), nil, schema.DefaultLimits)
	}
	if err != nil {
		return parsed{}, fmt.Errorf("avroserde: schema %d does not parse: %w", id, err)
	}
	r.mu.Lock()
	if len(r.byID) >= maxCachedSchemas {
		clear(r.byID)
	}
	r.byID[id] = p
	r.mu.Unlock()
	return p, nil
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
	in := &sluicev1.SchemaInput{Schema: s.text, Type: string(schema.Avro)}
	var v *sluicev1.SubjectVersion
	if s.autoRegister {
		resp, err := s.reg.svc.RegisterSchema(ctx, connect.NewRequest(&sluicev1.RegisterSchemaRequest{Subject: s.subject, Schema: in}))
		if err != nil {
			return 0, fmt.Errorf("avroserde: register the schema under %s: %w", s.subject, err)
		}
		v = resp.Msg.GetVersion()
	} else {
		resp, err := s.reg.svc.LookupSchema(ctx, connect.NewRequest(&sluicev1.LookupSchemaRequest{Subject: s.subject, Schema: in}))
		if err != nil {
			return 0, fmt.Errorf("avroserde: look the schema up under %s: %w", s.subject, err)
		}
		v = resp.Msg.GetVersion()
	}
	s.id = v.GetSchema().GetId()
	return s.id, nil
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
// writer's schema, fetched by the id in the frame.
func (d *Deserializer) Deserialize(ctx context.Context, b []byte, v any) error {
	id, datum, err := schema.ParseWire(b)
	if err != nil {
		return fmt.Errorf("avroserde: %w", err)
	}
	p, err := d.reg.schemaByID(ctx, id)
	if err != nil {
		return err
	}
	if err := p.check.Validate(datum); err != nil {
		return fmt.Errorf("avroserde: schema %d: %w", id, err)
	}
	if err := avro.Unmarshal(p.s, datum, v); err != nil {
		return fmt.Errorf("avroserde: decode with schema %d: %w", id, err)
	}
	return nil
}
