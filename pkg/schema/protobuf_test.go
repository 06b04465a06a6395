package schema

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func protoT(t *testing.T, text string, refs ...Resolved) Schema {
	t.Helper()
	s, err := Parse(Protobuf, text, refs, DefaultLimits)
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	return s
}

const protoHead = "syntax = \"proto3\";\npackage shop;\n"

// Confluent's Protobuf rules, change by change: whether the new version
// reads the old one's data (BACKWARD) and the old the new's (FORWARD).
func TestProtobufCanRead(t *testing.T) {
	for _, c := range []struct {
		name, old, new    string
		backward, forward bool
		says              string
	}{
		{"same", "message A { int32 a = 1; }", "message A { int32 a = 1; }", true, true, ""},
		{"field added", "message A { int32 a = 1; }", "message A { int32 a = 1; string b = 2; }", true, true, ""},
		{"field renamed", "message A { int32 a = 1; }", "message A { int32 renamed = 1; }", true, true, ""},
		{"int32 to int64 (varint)", "message A { int32 a = 1; }", "message A { int64 a = 1; }", true, true, ""},
		{"uint64 to bool (varint)", "message A { uint64 a = 1; }", "message A { bool a = 1; }", true, true, ""},
		{"enum to int32 (varint)", "enum E { X = 0; } message A { E a = 1; }", "enum E { X = 0; } message A { int32 a = 1; }", true, true, ""},
		{"string to bytes", "message A { string a = 1; }", "message A { bytes a = 1; }", true, true, ""},
		{"fixed32 to sfixed32", "message A { fixed32 a = 1; }", "message A { sfixed32 a = 1; }", true, true, ""},
		{"int32 to string", "message A { int32 a = 1; }", "message A { string a = 1; }", false, false, "string cannot read int32"},
		{"int32 to sint32 (zigzag)", "message A { int32 a = 1; }", "message A { sint32 a = 1; }", false, false, "sint32 cannot read int32"},
		{"fixed32 to fixed64", "message A { fixed32 a = 1; }", "message A { fixed64 a = 1; }", false, false, "cannot read"},
		{"message type changed", "message B {} message C {} message A { B a = 1; }", "message B {} message C {} message A { C a = 1; }", false, false, "message type shop.B changed to shop.C"},
		{"string to repeated string", "message A { string a = 1; }", "message A { repeated string a = 1; }", true, true, ""},
		{"int32 to repeated int32", "message A { int32 a = 1; }", "message A { repeated int32 a = 1; }", false, false, "repeated and singular"},
		{"message removed", "message A {} message B {}", "message A {}", false, true, "message shop.B was removed"},
		{"nested message removed", "message A { message N {} }", "message A {}", false, true, "message shop.A.N was removed"},
		{"package changed", "message A {}", "", false, false, "package changed"},
		{"enum value added", "enum E { X = 0; } message A { E e = 1; }", "enum E { X = 0; Y = 1; } message A { E e = 1; }", true, true, ""},
		{"map value kind changed", "message A { map<string, int32> m = 1; }", "message A { map<string, string> m = 1; }", false, false, "map<string, string> cannot read map<string, int32>"},
		{"field moved into a new oneof", "message A { int32 a = 1; int32 b = 2; }", "message A { oneof o { int32 a = 1; } int32 b = 2; }", true, true, ""},
		{"two fields moved into one oneof", "message A { int32 a = 1; int32 b = 2; }", "message A { oneof o { int32 a = 1; int32 b = 2; } }", false, true, "moved into oneof o"},
		{"field added to a oneof", "message A { oneof o { int32 a = 1; } }", "message A { oneof o { int32 a = 1; string b = 2; } }", true, false, "removed from oneof o"},
	} {
		old, cur := protoHead+c.old, protoHead+c.new
		if c.name == "package changed" {
			cur = "syntax = \"proto3\";\npackage other;\nmessage A {}"
		}
		o, n := protoT(t, old), protoT(t, cur)
		back, fwd := n.CanRead(o), o.CanRead(n)
		if (back == nil) != c.backward || (fwd == nil) != c.forward {
			t.Errorf("%s: new reads old: %v; old reads new: %v; want %v, %v", c.name, back, fwd, c.backward, c.forward)
			continue
		}
		if c.says != "" && !strings.Contains(errors.Join(back, fwd).Error(), c.says) {
			t.Errorf("%s: %v / %v; want it to say %q", c.name, back, fwd, c.says)
		}
	}
}

// proto2 required fields: adding or removing one breaks either direction.
func TestProtobufRequiredFields(t *testing.T) {
	v1 := protoT(t, `syntax = "proto2"; message A { optional int32 a = 1; }`)
	v2 := protoT(t, `syntax = "proto2"; message A { optional int32 a = 1; required int32 b = 2; }`)
	if v2.CanRead(v1) == nil || v1.CanRead(v2) == nil {
		t.Fatal("a required field added: both directions should be refused")
	}
	v3 := protoT(t, `syntax = "proto2"; message A { required int32 a = 1; }`)
	if err := v3.CanRead(v1); err == nil || !strings.Contains(err.Error(), "became required") {
		t.Fatalf("optional to required: %v", err)
	}
}

// The modes over versions: the rules are symmetric, so transitivity is
// what tells the modes apart — a field dropped in v2 comes back in v3 with
// a kind v1's data cannot be read as.
func TestProtobufCheckModes(t *testing.T) {
	v1 := protoT(t, protoHead+"message A { int32 a = 1; }")
	v2 := protoT(t, protoHead+"message A { }")
	v3 := protoT(t, protoHead+"message A { string a = 1; }")
	for _, c := range []struct {
		mode Compatibility
		ok   bool
	}{
		{Backward, true}, {Forward, true}, {Full, true},
		{BackwardTransitive, false}, {ForwardTransitive, false}, {FullTransitive, false}, {None, true},
	} {
		if msgs := Check(c.mode, v3, []Schema{v1, v2}); (len(msgs) == 0) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.mode, msgs, c.ok)
		}
	}
	if msgs := Check(Backward, v3, []Schema{avroT(t, rec1)}); len(msgs) != 1 || !strings.Contains(msgs[0], "AVRO") {
		t.Errorf("a Protobuf version after an Avro one: %v", msgs)
	}
}

// Parse takes .proto text or a descriptor's base64 (what Confluent's
// serializers register), imports as references, and the well-known types
// without one; it refuses what protoc would.
func TestProtobufParse(t *testing.T) {
	dep := Resolved{Name: "money.proto", Schema: "syntax = \"proto3\";\npackage shop;\nmessage Money { int64 cents = 1; }"}
	text := "syntax = \"proto3\";\npackage shop;\nimport \"money.proto\";\nimport \"google/protobuf/timestamp.proto\";\n" +
		"message Order { string id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }"
	s := protoT(t, text, dep)
	if s.Normalized() != strings.TrimSpace(text) {
		t.Fatalf("normalized %q", s.Normalized())
	}
	// The same file as a serialized descriptor, its import a reference.
	fdp := protodesc.ToFileDescriptorProto(s.(*protoSchema).file)
	fdp.Name = proto.String("order.proto")
	b, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	encoded := base64.StdEncoding.EncodeToString(b)
	d := protoT(t, encoded, dep)
	if d.Normalized() != encoded || d.CanRead(s) != nil || s.CanRead(d) != nil {
		t.Fatalf("descriptor form: normalized %q, reads the text form: %v", d.Normalized(), d.CanRead(s))
	}
	for _, c := range []struct{ text, says string }{
		{"syntax = \"proto3\"; message A { int32 a = 1 }", "expecting ';'"},
		{"syntax = \"proto3\"; import \"missing.proto\"; message A {}", "missing.proto"},
		{"syntax = \"proto3\"; message A { B b = 1; }", "B"},
		{"syntax = \"proto3\"; message A { int32 a = 1; int32 b = 1; }", "1"},
		{"syntax = \"proto3\"; enum E { X = 0; }", "defines no message"},
	} {
		_, err := Parse(Protobuf, c.text, nil, DefaultLimits)
		if !errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v; want ErrInvalidSchema saying %q", c.text, err, c.says)
		}
	}
}

// A payload is the message index path, then the message's encoding.
func TestProtobufValidate(t *testing.T) {
	s := protoT(t, protoHead+"message A { string name = 1; int64 n = 2; }\nmessage B { message C { bool ok = 1; } }")
	msg := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, "x")
	msg = protowire.AppendTag(msg, 2, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 7)
	zz := func(v int64) []byte { return protowire.AppendVarint(nil, protowire.EncodeZigZag(v)) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	okC := cat(zz(2), zz(1), zz(0), protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1))
	for _, c := range []struct {
		name    string
		payload []byte
		ok      bool
		says    string
	}{
		{"A as [0]", cat([]byte{0}, msg), true, ""},
		{"A as the path [0] written out", cat(zz(1), zz(0), msg), true, ""},
		{"B.C", okC, true, ""},
		{"empty A", []byte{0}, true, ""},
		{"unknown field", cat([]byte{0}, protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1)), true, ""},
		{"no path", nil, false, "cut short"},
		{"index out of range", cat(zz(1), zz(5), msg), false, "message index 5"},
		{"negative count", cat(zz(-3)), false, "index path of -3"},
		{"a field of another wire type (kept as unknown, as protobuf does)", cat([]byte{0}, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)), true, ""},
		{"field number 0", cat([]byte{0}, []byte{0x00, 0x01}), false, "shop.A"},
		{"cut short", cat([]byte{0}, msg[:len(msg)-1]), false, "shop.A"},
		{"invalid UTF-8", cat([]byte{0}, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff")), false, "UTF-8"},
	} {
		err := s.Validate(c.payload)
		if (err == nil) != c.ok || err != nil && (!errors.Is(err, ErrInvalidPayload) || !strings.Contains(err.Error(), c.says)) {
			t.Errorf("%s: %v; want ok=%v saying %q", c.name, err, c.ok, c.says)
		}
	}
}

// AppendMessageIndexes writes the path ProtobufMessageAt reads back, [0]
// as the single byte 0 as Confluent's serializers do.
func TestProtobufMessageIndexes(t *testing.T) {
	s := protoT(t, protoHead+"message A {}\nmessage B { message C {} message D { message E {} } }")
	f := s.(*protoSchema).file
	for _, md := range []protoreflect.MessageDescriptor{
		f.Messages().Get(0), f.Messages().Get(1), f.Messages().Get(1).Messages().Get(1).Messages().Get(0),
	} {
		b := AppendMessageIndexes(nil, md)
		if md.FullName() == "shop.A" && string(b) != "\x00" {
			t.Fatalf("[0] written as %x", b)
		}
		got, rest, err := ProtobufMessageAt(s, append(b, 0x42))
		if err != nil || got.FullName() != md.FullName() || string(rest) != "\x42" {
			t.Fatalf("%s: %x read back as %v, %x, %v", md.FullName(), b, got, rest, err)
		}
	}
}

// Validate walks the wire format: a 1 MiB value of empty submessages costs
// no allocation per message (decoded with dynamicpb it took ~190 MB).
func TestProtobufValidateIsBounded(t *testing.T) {
	s := protoT(t, protoHead+"message M { repeated M c = 1; string s = 2; }")
	payload := []byte{0}
	for len(payload) < 1<<20 {
		payload = append(payload, 0x0a, 0x00) // c: an empty M
	}
	if err := s.Validate(payload); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(3, func() { _ = s.Validate(payload) }); n > 2 {
		t.Fatalf("%v allocations to validate a value of %d empty messages", n, len(payload)/2)
	}
}
