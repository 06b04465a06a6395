// Package protoserde is Protobuf serialization for the Sluice SDK through
// the schema registry, in Confluent's wire format: magic byte 0, the
// 4-byte schema id, the message index path (which message of its .proto
// file), the message's encoding — what Confluent's Protobuf serializers
// write and read.
//
// A Serializer registers a message's file as Confluent's serializers do:
// the base64 of its FileDescriptorProto, each import registered first
// under a subject named by its path and named as a reference; the
// well-known types (google/protobuf/*.proto) need none.
//
//	reg := serde.NewRegistry(http.DefaultClient, "http://127.0.0.1:7420")
//	ser := protoserde.NewSerializer(reg, serde.ValueSubject("orders"), true)
//	value, err := ser.Serialize(ctx, order) // an *orderpb.Order
//	got := &orderpb.Order{}
//	err = protoserde.NewDeserializer(reg).Deserialize(ctx, value, got)
package protoserde

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/pkg/sluice/serde"
)

// Serializer writes messages under one subject. Safe for concurrent use.
type Serializer struct {
	reg          *serde.Registry
	subject      string
	autoRegister bool

	mu  sync.Mutex
	ids map[protoreflect.FullName]int64 // schema id by message type
}

// NewSerializer returns a serializer of messages under subject. With
// autoRegister it registers each message's file (and its imports) on
// first use; without, the subject must have it already (a lookup).
func NewSerializer(reg *serde.Registry, subject string, autoRegister bool) *Serializer {
	return &Serializer{reg: reg, subject: subject, autoRegister: autoRegister, ids: map[protoreflect.FullName]int64{}}
}

// Serialize encodes m and frames it with its file's schema id and its
// message index path.
func (s *Serializer) Serialize(ctx context.Context, m proto.Message) ([]byte, error) {
	md := m.ProtoReflect().Descriptor()
	id, err := s.schemaID(ctx, md)
	if err != nil {
		return nil, err
	}
	out := schema.AppendWire(nil, id, nil)
	out = schema.AppendMessageIndexes(out, md)
	out, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(out, m)
	if err != nil {
		return nil, fmt.Errorf("protoserde: encode %s: %w", md.FullName(), err)
	}
	return out, nil
}

// schemaID registers or looks up md's file once.
func (s *Serializer) schemaID(ctx context.Context, md protoreflect.MessageDescriptor) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids[md.FullName()]; ok {
		return id, nil
	}
	v, err := s.file(ctx, s.subject, md.ParentFile(), 0)
	if err != nil {
		return 0, fmt.Errorf("protoserde: %w", err)
	}
	s.ids[md.FullName()] = v.GetSchema().GetId()
	return v.GetSchema().GetId(), nil
}

// maxImportDepth bounds how deep imports are registered.
const maxImportDepth = 16

// file registers (or looks up) fd under subject, its imports first.
func (s *Serializer) file(ctx context.Context, subject string, fd protoreflect.FileDescriptor, depth int) (*sluicev1.SubjectVersion, error) {
	if depth > maxImportDepth {
		return nil, fmt.Errorf("imports nest deeper than %d", maxImportDepth)
	}
	in := &sluicev1.SchemaInput{Type: string(schema.Protobuf)}
	imports := fd.Imports()
	for i := 0; i < imports.Len(); i++ {
		imp := imports.Get(i)
		if strings.HasPrefix(imp.Path(), "google/protobuf/") {
			continue // built into every registry
		}
		v, err := s.file(ctx, imp.Path(), imp.FileDescriptor, depth+1)
		if err != nil {
			return nil, err
		}
		in.References = append(in.References, &sluicev1.SchemaReference{Name: imp.Path(), Subject: imp.Path(), Version: v.GetVersion()})
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(protodesc.ToFileDescriptorProto(fd))
	if err != nil {
		return nil, err
	}
	in.Schema = base64.StdEncoding.EncodeToString(b)
	return s.reg.Version(ctx, subject, in, s.autoRegister)
}

// Deserializer reads framed messages. Safe for concurrent use.
type Deserializer struct{ reg *serde.Registry }

// NewDeserializer returns a deserializer over reg.
func NewDeserializer(reg *serde.Registry) *Deserializer { return &Deserializer{reg: reg} }

// Deserialize decodes the framed value b into m, which must be of the
// message type the value's index path names (by full name).
func (d *Deserializer) Deserialize(ctx context.Context, b []byte, m proto.Message) error {
	c, payload, err := d.reg.Unframe(ctx, b)
	if err != nil {
		return fmt.Errorf("protoserde: %w", err)
	}
	md, msg, err := schema.ProtobufMessageAt(c.Schema, payload)
	if err != nil {
		return fmt.Errorf("protoserde: schema %d: %w", c.Info.GetId(), err)
	}
	if want := m.ProtoReflect().Descriptor().FullName(); md.FullName() != want {
		return fmt.Errorf("protoserde: the value is a %s, not a %s", md.FullName(), want)
	}
	if err := (proto.UnmarshalOptions{RecursionLimit: 100}).Unmarshal(msg, m); err != nil {
		return fmt.Errorf("protoserde: decode %s: %w", md.FullName(), err)
	}
	return nil
}
