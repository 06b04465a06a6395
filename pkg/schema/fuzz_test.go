package schema

import (
	"errors"
	"testing"
)

// fuzzRecord has every kind of Avro value a decoder walks: strings and
// bytes (lengths), longs (varints), a union, an array and a map (blocks),
// an enum and a fixed.
const fuzzRecord = `{"type":"record","name":"F","fields":[
 {"name":"s","type":"string"},{"name":"b","type":"bytes"},{"name":"l","type":"long"},
 {"name":"u","type":["null","double","string"]},
 {"name":"a","type":{"type":"array","items":"int"}},
 {"name":"m","type":{"type":"map","values":"boolean"}},
 {"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
 {"name":"f","type":{"type":"fixed","name":"Four","size":4}}]}`

// FuzzAvroValidate: any payload is valid or ErrInvalidPayload — never a
// panic, never another error — within the payload bound.
func FuzzAvroValidate(f *testing.F) {
	s, err := Parse(Avro, fuzzRecord, nil, Limits{MaxSchemaBytes: 1 << 16, MaxReferences: 1, MaxPayloadBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	// s="", b="", l=0, u=null, a=[], m={}, e=X, f=4 bytes.
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4})
	f.Add([]byte{2, 'h', 4, 1, 2, 0x80, 0x01, 4, 3, 'x', 2, 2, 0, 2, 2, 'k', 1, 0, 2, 9, 9, 9, 9})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, payload []byte) {
		if err := s.Validate(payload); err != nil && !errors.Is(err, ErrInvalidPayload) {
			t.Fatalf("Validate: %v, not ErrInvalidPayload", err)
		}
	})
}

// FuzzAvroParse: any text parses or is ErrInvalidSchema; what parses
// normalizes to a text that parses to the same normal form.
func FuzzAvroParse(f *testing.F) {
	f.Add(fuzzRecord)
	f.Add(`"string"`)
	f.Add(`{"type":"enum","name":"E","symbols":["A","A"]}`)
	f.Add(`["null",{"type":"map","values":{"type":"array","items":"long"}}]`)
	lim := Limits{MaxSchemaBytes: 1 << 16, MaxReferences: 1, MaxPayloadBytes: 1 << 10}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(Avro, text, nil, lim)
		if err != nil {
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("Parse: %v, not ErrInvalidSchema", err)
			}
			return
		}
		again, err := Parse(Avro, s.Normalized(), nil, lim)
		if err != nil {
			t.Fatalf("the normal form %s does not parse: %v", s.Normalized(), err)
		}
		if again.Normalized() != s.Normalized() {
			t.Fatalf("normalizing twice differs:\n%s\n%s", s.Normalized(), again.Normalized())
		}
	})
}

const fuzzProto = `syntax = "proto3";
package f;
message A { string s = 1; int64 n = 2; repeated bytes b = 3; map<string, A> m = 4; oneof o { bool x = 5; double d = 6; } }
message B { message C { sint32 z = 1; fixed64 q = 2; } C c = 1; }`

// FuzzProtobufValidate: any payload is valid for the file or
// ErrInvalidPayload; nothing panics, however deep or long the index path;
// and the wire walk (Validate) agrees with decoding the payload into a
// dynamic message (proto.Unmarshal, the reference).
func FuzzProtobufValidate(f *testing.F) {
	s, err := Parse(Protobuf, fuzzProto, nil, Limits{MaxSchemaBytes: 1 << 16, MaxReferences: 1, MaxPayloadBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 0x0a, 1, 'a', 0x10, 5})
	f.Add([]byte{4, 2, 0, 0x0a, 2, 0x08, 3})
	f.Add([]byte{2, 0xfe, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0, 0x1a, 0x03, 'a', 'b', 'c', 0x22, 0x02, 0x0a, 0x00, 0x2a, 0x01, 0x01})
	f.Fuzz(func(t *testing.T, payload []byte) {
		err := s.Validate(payload)
		if err != nil && !errors.Is(err, ErrInvalidPayload) {
			t.Fatalf("Validate: %v, not ErrInvalidPayload", err)
		}
		if _, derr := s.(*protoSchema).decode(payload); (err == nil) != (derr == nil) {
			t.Fatalf("the wire walk says %v, proto.Unmarshal says %v", err, derr)
		}
	})
}

// FuzzProtobufParse: any text parses or is ErrInvalidSchema; what parses
// can be checked against itself, and is compatible with itself.
func FuzzProtobufParse(f *testing.F) {
	f.Add(fuzzProto)
	f.Add(`syntax = "proto2"; message A { required int32 a = 1; extensions 10 to 20; } extend A { optional int32 e = 10; }`)
	f.Add(`syntax = "proto3"; enum E { X = 0; } message M { E e = 1; reserved 2, 3; }`)
	f.Add(`edition = "2023"; message M { int32 a = 1; }`)
	lim := Limits{MaxSchemaBytes: 1 << 16, MaxReferences: 1, MaxPayloadBytes: 1 << 10}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(Protobuf, text, nil, lim)
		if err != nil {
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("Parse: %v, not ErrInvalidSchema", err)
			}
			return
		}
		if err := s.CanRead(s); err != nil {
			t.Fatalf("a schema cannot read its own data: %v", err)
		}
		_ = s.Validate([]byte{0})
	})
}

const fuzzJSONSchema = `{"type":"object","properties":{"s":{"type":"string","pattern":"^a+$"},"n":{"type":"integer","minimum":0},
"l":{"type":"array","items":{"$ref":"#"}},"e":{"enum":["x",1,null]}},"required":["s"],"additionalProperties":false}`

// FuzzJSONSchemaValidate: any payload is valid or ErrInvalidPayload.
func FuzzJSONSchemaValidate(f *testing.F) {
	s, err := Parse(JSON, fuzzJSONSchema, nil, Limits{MaxSchemaBytes: 1 << 16, MaxReferences: 1, MaxPayloadBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"s":"aa","n":1,"l":[{"s":"a"}],"e":"x"}`))
	f.Add([]byte(`{"s":"b"}`))
	f.Add([]byte(`[[[[[[[[[[]]]]]]]]]]`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		if err := s.Validate(payload); err != nil && !errors.Is(err, ErrInvalidPayload) {
			t.Fatalf("Validate: %v, not ErrInvalidPayload", err)
		}
	})
}

// FuzzJSONSchemaParse: any text parses or is ErrInvalidSchema; what parses
// reads its own data, and its normal form parses to itself.
func FuzzJSONSchemaParse(f *testing.F) {
	f.Add(fuzzJSONSchema)
	f.Add(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`)
	f.Add(`{"oneOf":[{"type":"string"},{"allOf":[{"minimum":1},{"maximum":2}]}]}`)
	f.Add(`true`)
	lim := Limits{MaxSchemaBytes: 1 << 16, MaxReferences: 1, MaxPayloadBytes: 1 << 10}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(JSON, text, nil, lim)
		if err != nil {
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("Parse: %v, not ErrInvalidSchema", err)
			}
			return
		}
		if err := s.CanRead(s); err != nil {
			t.Fatalf("a schema cannot read its own data: %v", err)
		}
		again, err := Parse(JSON, s.Normalized(), nil, lim)
		if err != nil || again.Normalized() != s.Normalized() {
			t.Fatalf("the normal form %s: %v", s.Normalized(), err)
		}
		_ = s.Validate([]byte(`{}`))
	})
}
