package schema

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Protobuf schemas, as Confluent Schema Registry takes them: a .proto
// file's text, or — what Confluent's serializers register — the base64 of
// its serialized FileDescriptorProto. A reference is an imported file, its
// Name the import path; the well-known types (google/protobuf/*.proto)
// need no reference. Compiled with github.com/bufbuild/protocompile.
//
// The payload of a framed value starts with the message's index path
// (which message of the file: Confluent's "message indexes"): a
// zigzag-varint count, then that many zigzag-varint indexes — the
// top-level message, then nested ones — with the path [0] written as the
// single byte 0. The protobuf encoding of the message follows.

// protoSchema is a compiled .proto file.
type protoSchema struct {
	file       protoreflect.FileDescriptor
	norm       string
	maxPayload int
}

// maxProtoIndexes bounds a payload's message index path.
const maxProtoIndexes = 32

// protoMainFile is the compiled name of a schema given as text.
const protoMainFile = "schema.proto"

func parseProtobuf(text string, refs []Resolved, lim Limits) (Schema, error) {
	files := map[string]string{}
	var load func([]Resolved) error
	load = func(rs []Resolved) error {
		for _, r := range rs {
			if err := load(r.Refs); err != nil {
				return err
			}
			files[r.Name] = r.Schema
		}
		return nil
	}
	if err := load(refs); err != nil {
		return nil, err
	}
	main := protoMainFile
	mainFDP, isDescriptor := descriptorText(text)
	if isDescriptor {
		main = mainFDP.GetName()
	} else {
		files[main] = text
	}
	resolve := func(path string) (protocompile.SearchResult, error) {
		if path == main && isDescriptor {
			return protocompile.SearchResult{Proto: mainFDP}, nil
		}
		src, ok := files[path]
		if !ok {
			return protocompile.SearchResult{}, fs.ErrNotExist
		}
		if fdp, ok := descriptorText(src); ok {
			if fdp.GetName() != path {
				fdp = proto.Clone(fdp).(*descriptorpb.FileDescriptorProto)
				fdp.Name = proto.String(path)
			}
			return protocompile.SearchResult{Proto: fdp}, nil
		}
		return protocompile.SearchResult{Source: strings.NewReader(src)}, nil
	}
	var errs []error
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(resolve)),
		Reporter: reporter.NewReporter(func(err reporter.ErrorWithPos) error {
			if errs = append(errs, err); len(errs) >= 5 {
				return err
			}
			return nil
		}, nil),
	}
	compiled, err := c.Compile(context.Background(), main)
	if err != nil {
		if len(errs) > 0 {
			err = errors.Join(errs...)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	f := compiled[0]
	if f.Messages().Len() == 0 {
		return nil, fmt.Errorf("%w: the file defines no message", ErrInvalidSchema)
	}
	return &protoSchema{file: f, norm: strings.TrimSpace(text), maxPayload: lim.MaxPayloadBytes}, nil
}

// descriptorText reports whether s is the base64 of a serialized
// FileDescriptorProto (with a name), and returns it.
func descriptorText(s string) (*descriptorpb.FileDescriptorProto, bool) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, " \t\n{;") {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if proto.Unmarshal(b, fdp) != nil || fdp.GetName() == "" {
		return nil, false
	}
	// protoc fills in every field's json_name; a descriptor built some
	// other way (Python's runtime, a hand-made one) may lack it, and
	// protocompile links a missing one as a custom "" — the same for every
	// such field, a conflict. Fill in protoc's default.
	var clean func([]*descriptorpb.DescriptorProto)
	fill := func(fs []*descriptorpb.FieldDescriptorProto) {
		for _, f := range fs {
			if f.GetJsonName() == "" {
				f.JsonName = proto.String(jsonName(f.GetName()))
			}
		}
	}
	clean = func(ms []*descriptorpb.DescriptorProto) {
		for _, m := range ms {
			fill(m.Field)
			fill(m.Extension)
			clean(m.NestedType)
		}
	}
	clean(fdp.MessageType)
	fill(fdp.Extension)
	return fdp, true
}

// jsonName is protoc's default JSON name of a field: underscores dropped,
// the letter after one upper-cased.
func jsonName(name string) string {
	var b strings.Builder
	up := false
	for _, r := range name {
		switch {
		case r == '_':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (p *protoSchema) Format() Format { return Protobuf }

// Normalized is the text as given, trimmed: a .proto file's layout is not
// normalized (a relaid file is a new version), and a descriptor's base64 is
// already canonical for the serializer that wrote it.
func (p *protoSchema) Normalized() string { return p.norm }

// Validate checks that payload is a message index path naming a message
// of the file, then one protobuf encoding of that message (unknown fields
// are allowed, as a reader of an older version meets them; proto2 required
// fields must be present; proto3 strings must be UTF-8).
func (p *protoSchema) Validate(payload []byte) error {
	if len(payload) > p.maxPayload {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidPayload, len(payload), p.maxPayload)
	}
	md, rest, err := p.messageAt(payload)
	if err != nil {
		return err
	}
	return walkProto(md, rest, 0) // protowalk.go: no decode into objects
}

func (p *protoSchema) JSON(payload []byte) ([]byte, error) {
	m, err := p.decode(payload)
	if err != nil {
		return nil, err
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	// protojson varies its spacing on purpose; print it one way.
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return out.Bytes(), nil
}

// decode decodes a payload into a dynamic message of the type its index
// path names.
func (p *protoSchema) decode(payload []byte) (*dynamicpb.Message, error) {
	if len(payload) > p.maxPayload {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidPayload, len(payload), p.maxPayload)
	}
	md, rest, err := p.messageAt(payload)
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{RecursionLimit: 100}).Unmarshal(rest, m); err != nil {
		return nil, fmt.Errorf("%w: not a %s: %v", ErrInvalidPayload, md.FullName(), err)
	}
	return m, nil
}

// messageAt reads the message index path at the start of b.
func (p *protoSchema) messageAt(b []byte) (protoreflect.MessageDescriptor, []byte, error) {
	n, b, err := zigzag(b)
	if err != nil {
		return nil, nil, err
	}
	path := []int64{0}
	if n != 0 {
		if n < 0 || n > maxProtoIndexes {
			return nil, nil, fmt.Errorf("%w: a message index path of %d indexes (at most %d)", ErrInvalidPayload, n, maxProtoIndexes)
		}
		path = make([]int64, n)
		for i := range path {
			if path[i], b, err = zigzag(b); err != nil {
				return nil, nil, err
			}
		}
	}
	msgs := p.file.Messages()
	var md protoreflect.MessageDescriptor
	for depth, i := range path {
		if i < 0 || i >= int64(msgs.Len()) {
			return nil, nil, fmt.Errorf("%w: message index %d at depth %d: the schema has %d messages there", ErrInvalidPayload, i, depth, msgs.Len())
		}
		md = msgs.Get(int(i))
		msgs = md.Messages()
	}
	return md, b, nil
}

// ProtobufMessageAt reads the message index path at the start of a
// Protobuf schema's payload and returns the message it names and the
// message's encoding. Errors wrap ErrInvalidPayload.
func ProtobufMessageAt(s Schema, payload []byte) (protoreflect.MessageDescriptor, []byte, error) {
	p, ok := s.(*protoSchema)
	if !ok {
		return nil, nil, fmt.Errorf("%w: schema is %s, not PROTOBUF", ErrInvalidPayload, s.Format())
	}
	return p.messageAt(payload)
}

// AppendMessageIndexes appends the message index path of md (its place in
// its file) as Confluent's serializers write it: the path [0] as the byte
// 0, any other as a zigzag-varint count and indexes.
func AppendMessageIndexes(dst []byte, md protoreflect.MessageDescriptor) []byte {
	var path []int
	for d := protoreflect.Descriptor(md); ; {
		path = append(path, d.Index())
		parent, ok := d.Parent().(protoreflect.MessageDescriptor)
		if !ok {
			break
		}
		d = parent
	}
	slices.Reverse(path)
	if len(path) == 1 && path[0] == 0 {
		return append(dst, 0)
	}
	dst = appendZigzag(dst, int64(len(path)))
	for _, i := range path {
		dst = appendZigzag(dst, int64(i))
	}
	return dst
}

func appendZigzag(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// zigzag reads a zigzag varint (Confluent's message indexes).
func zigzag(b []byte) (int64, []byte, error) {
	var u uint64
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, nil, fmt.Errorf("%w: the message index path is cut short", ErrInvalidPayload)
		}
		u |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return int64(u>>1) ^ -int64(u&1), b[i+1:], nil
		}
	}
	return 0, nil, fmt.Errorf("%w: a message index is not a varint", ErrInvalidPayload)
}

// CanRead applies Confluent's Protobuf rules, which are about the wire:
// data written with writer parses with p when every message of writer is
// still in p (by full name), the package is the same, and within each
// message the fields that share a number have wire-compatible kinds and
// cardinalities. Fields added or removed are compatible (unknown fields are
// skipped, missing ones read as defaults), except proto2 required ones;
// names do not matter; a field leaving a oneof, or joining one with other
// fields of the writer, is not compatible. Enums never are a problem.
func (p *protoSchema) CanRead(writer Schema) error {
	w, ok := writer.(*protoSchema)
	if !ok {
		return fmt.Errorf("the writer's schema is %s, not PROTOBUF", writer.Format())
	}
	var probs []string
	if w.file.Package() != p.file.Package() {
		probs = append(probs, fmt.Sprintf("the package changed from %q to %q", w.file.Package(), p.file.Package()))
	}
	var walk func(ws protoreflect.MessageDescriptors)
	walk = func(ws protoreflect.MessageDescriptors) {
		for i := 0; i < ws.Len(); i++ {
			wm := ws.Get(i)
			if wm.IsMapEntry() {
				continue
			}
			rm := findMessage(p.file, wm.FullName())
			if rm == nil {
				probs = append(probs, fmt.Sprintf("message %s was removed", wm.FullName()))
				continue
			}
			probs = append(probs, compareFields(rm, wm)...)
			walk(wm.Messages())
		}
	}
	walk(w.file.Messages())
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

// findMessage finds a message by full name in f (nested ones too).
func findMessage(f protoreflect.FileDescriptor, name protoreflect.FullName) protoreflect.MessageDescriptor {
	var find func(ms protoreflect.MessageDescriptors) protoreflect.MessageDescriptor
	find = func(ms protoreflect.MessageDescriptors) protoreflect.MessageDescriptor {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			if m.FullName() == name {
				return m
			}
			if strings.HasPrefix(string(name), string(m.FullName())+".") {
				if got := find(m.Messages()); got != nil {
					return got
				}
			}
		}
		return nil
	}
	return find(f.Messages())
}

// compareFields lists what keeps reader message r from parsing writer
// message w's data.
func compareFields(r, w protoreflect.MessageDescriptor) []string {
	var probs []string
	at := func(f protoreflect.FieldDescriptor, format string, args ...any) {
		probs = append(probs, fmt.Sprintf("%s field %d (%s): %s", r.FullName(), f.Number(), f.Name(), fmt.Sprintf(format, args...)))
	}
	rf, wf := r.Fields(), w.Fields()
	for i := 0; i < wf.Len(); i++ {
		old := wf.Get(i)
		cur := rf.ByNumber(old.Number())
		switch {
		case cur == nil && old.Cardinality() == protoreflect.Required:
			at(old, "a required field was removed")
		case cur == nil && old.ContainingOneof() != nil && !old.ContainingOneof().IsSynthetic():
			at(old, "a field was removed from oneof %s", old.ContainingOneof().Name())
		case cur == nil:
		default:
			if why := kindChange(cur, old); why != "" {
				at(cur, "%s", why)
			}
			if cur.Cardinality() == protoreflect.Required && old.Cardinality() != protoreflect.Required {
				at(cur, "became required")
			}
			if why := oneofChange(r, w, cur, old); why != "" {
				at(cur, "%s", why)
			}
		}
	}
	for i := 0; i < rf.Len(); i++ {
		cur := rf.Get(i)
		if wf.ByNumber(cur.Number()) == nil && cur.Cardinality() == protoreflect.Required {
			at(cur, "a required field was added")
		}
	}
	return probs
}

// wireGroup is the group of kinds that share an encoding.
func wireGroup(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.BoolKind, protoreflect.EnumKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "bytes"
	case protoreflect.FloatKind:
		return "float"
	case protoreflect.DoubleKind:
		return "double"
	case protoreflect.MessageKind:
		return "message"
	case protoreflect.GroupKind:
		return "group"
	}
	return f.Kind().String()
}

// kindChange says why cur cannot read what old wrote, or "".
func kindChange(cur, old protoreflect.FieldDescriptor) string {
	if cur.IsMap() != old.IsMap() {
		return "changed between a map and a non-map field"
	}
	if cur.IsMap() {
		if wireGroup(cur.MapKey()) != wireGroup(old.MapKey()) || kindChange(cur.MapValue(), old.MapValue()) != "" {
			return fmt.Sprintf("map<%s, %s> cannot read map<%s, %s>", cur.MapKey().Kind(), kindName(cur.MapValue()), old.MapKey().Kind(), kindName(old.MapValue()))
		}
		return ""
	}
	if wireGroup(cur) != wireGroup(old) {
		return fmt.Sprintf("%s cannot read %s", kindName(cur), kindName(old))
	}
	if cur.Kind() == protoreflect.MessageKind && cur.Message().FullName() != old.Message().FullName() {
		return fmt.Sprintf("message type %s changed to %s", old.Message().FullName(), cur.Message().FullName())
	}
	if cur.IsList() != old.IsList() && wireGroup(cur) != "bytes" && wireGroup(cur) != "message" {
		// Packed scalars and a single one are different encodings.
		return fmt.Sprintf("changed between repeated and singular %s", kindName(cur))
	}
	return ""
}

func kindName(f protoreflect.FieldDescriptor) string {
	if f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind {
		return string(f.Message().FullName())
	}
	if f.Kind() == protoreflect.EnumKind {
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}

// oneofChange says why moving old into cur's oneof breaks data, or "".
// Confluent's rules: a field moved into a oneof that held fields of the
// writer, or several writer fields moved into one new oneof, no longer
// parse as they were written (only one of them survives).
func oneofChange(r, w protoreflect.MessageDescriptor, cur, old protoreflect.FieldDescriptor) string {
	ro, wo := realOneof(cur), realOneof(old)
	if ro == nil || wo != nil {
		return ""
	}
	var fromWriter []string
	for i := 0; i < ro.Fields().Len(); i++ {
		f := ro.Fields().Get(i)
		if f.Number() == cur.Number() {
			continue
		}
		if wf := w.Fields().ByNumber(f.Number()); wf != nil {
			fromWriter = append(fromWriter, string(wf.Name()))
		}
	}
	if len(fromWriter) == 0 {
		return ""
	}
	slices.Sort(fromWriter)
	return fmt.Sprintf("moved into oneof %s with fields the writer had outside it (%s)", ro.Name(), strings.Join(fromWriter, ", "))
}

func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}
