package schema

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Validating a Protobuf payload without decoding it into objects: a walk
// of the wire format against the message descriptor, as proto.Unmarshal
// would judge it — a field of the descriptor with a matching wire type is
// checked (nested messages walked, strings of proto3 and editions files
// UTF-8, packed scalars whole), anything else skipped as an unknown field,
// proto2 required fields present — allocating nothing per field, so a
// value's cost is its bytes however many messages it packs (a 1 MiB value
// of empty submessages decoded with dynamicpb took ~190 MB).

// maxProtoDepth bounds message nesting (proto.Unmarshal's default is 10,000;
// a value deeper than this is refused).
const maxProtoDepth = 100

func walkProto(md protoreflect.MessageDescriptor, b []byte, depth int) error {
	if depth > maxProtoDepth {
		return fmt.Errorf("%w: messages nest deeper than %d", ErrInvalidPayload, maxProtoDepth)
	}
	var required []protoreflect.FieldNumber // seen, of those the message requires
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: not a %s: %v", ErrInvalidPayload, md.FullName(), protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("%w: not a %s: field number %d is out of range", ErrInvalidPayload, md.FullName(), num)
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if fd == nil || !wireFits(fd, typ) {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("%w: not a %s: field %d: %v", ErrInvalidPayload, md.FullName(), num, protowire.ParseError(m))
			}
			b = b[m:]
			continue
		}
		if fd.Cardinality() == protoreflect.Required {
			required = append(required, num)
		}
		var m int
		switch typ {
		case protowire.VarintType:
			_, m = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			_, m = protowire.ConsumeFixed32(b)
		case protowire.Fixed64Type:
			_, m = protowire.ConsumeFixed64(b)
		case protowire.StartGroupType:
			var v []byte
			v, m = protowire.ConsumeGroup(num, b)
			if m >= 0 {
				if err := walkProto(fd.Message(), v, depth+1); err != nil {
					return err
				}
			}
		case protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m >= 0 {
				if err := walkBytesField(fd, v, depth); err != nil {
					return err
				}
			}
		}
		if m < 0 {
			return fmt.Errorf("%w: not a %s: field %d (%s): %v", ErrInvalidPayload, md.FullName(), num, fd.Name(), protowire.ParseError(m))
		}
		b = b[m:]
	}
	if md.ParentFile().Syntax() == protoreflect.Proto3 {
		return nil // no required fields (RequiredNumbers allocates: not asked)
	}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Cardinality() != protoreflect.Required {
			continue
		}
		found := false
		for _, n := range required {
			if n == fd.Number() {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%w: not a %s: required field %s not set", ErrInvalidPayload, md.FullName(), fd.Name())
		}
	}
	return nil
}

// walkBytesField checks a length-delimited field's contents.
func walkBytesField(fd protoreflect.FieldDescriptor, v []byte, depth int) error {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return walkProto(fd.Message(), v, depth+1)
	case protoreflect.StringKind:
		if enforcesUTF8(fd) && !utf8.Valid(v) {
			return fmt.Errorf("%w: not a %s: field %s: string field contains invalid UTF-8", ErrInvalidPayload, fd.ContainingMessage().FullName(), fd.Name())
		}
		return nil
	case protoreflect.BytesKind:
		return nil
	}
	// Packed repeated scalars: the contents are values of the kind.
	for len(v) > 0 {
		var n int
		switch wireOf(fd.Kind()) {
		case protowire.VarintType:
			_, n = protowire.ConsumeVarint(v)
		case protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(v)
		case protowire.Fixed64Type:
			_, n = protowire.ConsumeFixed64(v)
		default:
			n = -1
		}
		if n < 0 {
			return fmt.Errorf("%w: not a %s: packed field %s: cut short", ErrInvalidPayload, fd.ContainingMessage().FullName(), fd.Name())
		}
		v = v[n:]
	}
	return nil
}

// enforcesUTF8 is whether proto.Unmarshal checks a string field's UTF-8:
// proto3 files and editions (their default; a file that turns the feature
// off is checked anyway here).
func enforcesUTF8(fd protoreflect.FieldDescriptor) bool {
	return fd.ParentFile().Syntax() != protoreflect.Proto2
}

// wireOf is the wire type a kind's single value has.
func wireOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Sfixed32Kind, protoreflect.Fixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Sfixed64Kind, protoreflect.Fixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return -1
}

// wireFits is whether proto.Unmarshal reads a value of wire type typ into
// fd (else it keeps it as an unknown field): the kind's own wire type, or
// a packed list of a repeated scalar.
func wireFits(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	w := wireOf(fd.Kind())
	if typ == w {
		return true
	}
	return typ == protowire.BytesType && fd.IsList() && w != protowire.BytesType && w != protowire.StartGroupType
}
