package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// Avro record schemas of one record, version by version.
const (
	rec1        = `{"type":"record","name":"R","fields":[{"name":"f1","type":"string"}]}`
	rec2        = `{"type":"record","name":"R","fields":[{"name":"f1","type":"string"},{"name":"f2","type":"string","default":"x"}]}`
	rec3        = `{"type":"record","name":"R","fields":[{"name":"f1","type":"string"},{"name":"f2","type":"string"}]}`
	recRenamed  = `{"type":"record","name":"R","fields":[{"name":"g1","type":"string","aliases":["f1"]}]}`
	recOptional = `{"type":"record","name":"R","fields":[{"name":"f1","type":["null","string"]}]}`
	recInt      = `{"type":"record","name":"R","fields":[{"name":"f1","type":"int"}]}`
	recLong     = `{"type":"record","name":"R","fields":[{"name":"f1","type":"long"}]}`
	enum2       = `{"type":"enum","name":"E","symbols":["A","B"]}`
	enum3       = `{"type":"enum","name":"E","symbols":["A","B","C"]}`
	enum2Def    = `{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}`
)

func avroT(t *testing.T, text string) Schema {
	t.Helper()
	s, err := Parse(Avro, text, nil, DefaultLimits)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	return s
}

// The Avro resolution rules, one pair at a time: a reader can read what a
// writer wrote when every field it needs is written or has a default,
// renamed fields are matched by alias, a union reader takes any writer
// branch it has, numbers are promoted only upwards, and an enum reader
// knows every written symbol or has a default.
func TestAvroCanRead(t *testing.T) {
	for _, c := range []struct {
		reader, writer string
		ok             bool
	}{
		{rec1, rec1, true},
		{rec2, rec1, true},  // a new field with a default
		{rec3, rec1, false}, // a new field without one
		{rec1, rec2, true},  // a field the reader does not know is skipped
		{rec1, rec3, true},
		{recRenamed, rec1, true}, // renamed, with the old name as alias
		{rec1, recRenamed, false},
		{recOptional, rec1, true}, // string into a union with string
		{rec1, recOptional, false},
		{recLong, recInt, true}, // int promotes to long
		{recInt, recLong, false},
		{enum3, enum2, true},
		{enum2, enum3, false},   // C unknown to the reader
		{enum2Def, enum3, true}, // ... unless it has a default
		{rec1, enum2, false},
	} {
		err := avroT(t, c.reader).CanRead(avroT(t, c.writer))
		if (err == nil) != c.ok {
			t.Errorf("reader %s\nwriter %s\nCanRead = %v, want ok=%v", c.reader, c.writer, err, c.ok)
		}
	}
}

// Check over a subject's versions, per mode: the direction (BACKWARD: the
// new schema reads the old data; FORWARD: the old schemas read the new
// data; FULL: both) and the reach (the latest version, or every version
// for the _TRANSITIVE modes).
func TestCheckModes(t *testing.T) {
	// Forward-transitive case: rec3 needs f2, rec2 defaults it, rec1 has
	// none: rec2 reads rec1's data, rec3 does not.
	for _, c := range []struct {
		mode      Compatibility
		existing  []string
		candidate string
		ok        bool
	}{
		{Backward, []string{rec1}, rec2, true},
		{Backward, []string{rec1}, rec3, false},
		{Backward, []string{rec1, rec2}, rec3, true}, // only the latest: rec3 reads rec2's data
		{BackwardTransitive, []string{rec1, rec2}, rec3, false},
		{BackwardTransitive, []string{rec1, rec2}, rec2, true},
		{Forward, []string{rec1}, rec3, true},
		{Forward, []string{rec1}, recOptional, false}, // rec1 cannot read a null
		{Forward, []string{rec3, rec2}, rec1, true},   // rec2 defaults f2
		{ForwardTransitive, []string{rec3, rec2}, rec1, false},
		{Full, []string{rec1}, rec2, true},
		{Full, []string{rec1}, rec3, false},
		{Full, []string{rec3}, rec1, false},
		{Full, []string{rec1, rec3}, rec2, true},
		{FullTransitive, []string{rec1, rec3}, rec2, true},
		{FullTransitive, []string{rec3, rec2}, rec1, false},
		{None, []string{rec1}, enum2, true},
		{Backward, nil, rec3, true}, // a first version has nothing to be checked against
	} {
		var existing []Schema
		for _, e := range c.existing {
			existing = append(existing, avroT(t, e))
		}
		msgs := Check(c.mode, avroT(t, c.candidate), existing)
		if (len(msgs) == 0) != c.ok {
			t.Errorf("%s: %d versions then %s: %v, want ok=%v", c.mode, len(c.existing), c.candidate, msgs, c.ok)
		}
	}
}

func TestParseCompatibilityAndFormat(t *testing.T) {
	for _, m := range Compatibilities {
		if got, err := ParseCompatibility(strings.ToLower(string(m))); err != nil || got != m {
			t.Errorf("ParseCompatibility(%q) = %q, %v", strings.ToLower(string(m)), got, err)
		}
	}
	if _, err := ParseCompatibility("SIDEWAYS"); !errors.Is(err, ErrInvalidCompatibility) {
		t.Errorf("ParseCompatibility(SIDEWAYS): %v", err)
	}
	for in, want := range map[string]Format{"": Avro, "avro": Avro, "PROTOBUF": Protobuf, "json": JSON} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFormat("XML"); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("ParseFormat(XML): %v", err)
	}
}

// The normalized text ignores layout and key order, and keeps what
// matters to readers (a default).
func TestAvroNormalized(t *testing.T) {
	a := avroT(t, rec2)
	b := avroT(t, `{ "name": "R", "type": "record",
	  "fields": [ {"type": "string", "name": "f1"}, {"default": "x", "name": "f2", "type": "string"} ] }`)
	if a.Normalized() != b.Normalized() {
		t.Errorf("layouts differ after normalizing:\n%s\n%s", a.Normalized(), b.Normalized())
	}
	c := avroT(t, strings.Replace(rec2, `"default":"x"`, `"default":"y"`, 1))
	if a.Normalized() == c.Normalized() {
		t.Errorf("a different default normalizes alike: %s", c.Normalized())
	}
}

// Named types of referenced schemas resolve; without the reference the
// schema is refused; limits are enforced.
func TestAvroParse(t *testing.T) {
	inner := Resolved{Name: "com.acme.Inner", Schema: `{"type":"record","name":"Inner","namespace":"com.acme","fields":[{"name":"x","type":"int"}]}`}
	outer := `{"type":"record","name":"Outer","fields":[{"name":"in","type":"com.acme.Inner"}]}`
	if _, err := Parse(Avro, outer, []Resolved{inner}, DefaultLimits); err != nil {
		t.Fatalf("with the reference: %v", err)
	}
	for name, c := range map[string]struct {
		text string
		refs []Resolved
		lim  Limits
	}{
		"no reference":       {outer, nil, DefaultLimits},
		"not JSON":           {`{"type":`, nil, DefaultLimits},
		"unknown type":       {`{"type":"record","name":"R","fields":[{"name":"f","type":"strang"}]}`, nil, DefaultLimits},
		"too big":            {rec1, nil, Limits{MaxSchemaBytes: 10, MaxReferences: 1, MaxPayloadBytes: 1}},
		"too many refs":      {outer, []Resolved{inner}, Limits{MaxSchemaBytes: 1 << 10, MaxReferences: 0, MaxPayloadBytes: 1}},
		"bad reference":      {outer, []Resolved{{Name: "com.acme.Inner", Schema: `{`}}, DefaultLimits},
		"protobuf (not yet)": {`syntax = "proto3";`, nil, DefaultLimits},
	} {
		f := Avro
		if strings.HasPrefix(name, "protobuf") {
			f = Protobuf
		}
		if _, err := Parse(f, c.text, c.refs, c.lim); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("%s: %v, want ErrInvalidSchema", name, err)
		}
	}
}

// A payload is valid when it is exactly one datum of the schema: not
// short, nothing left over, no string beyond the payload bound.
func TestAvroValidate(t *testing.T) {
	s := avroT(t, rec1)
	ok := []byte{0x04, 'h', 'i'} // string of length 2 (zig-zag 4)
	if err := s.Validate(ok); err != nil {
		t.Fatalf("valid payload: %v", err)
	}
	for name, p := range map[string][]byte{
		"empty":        nil,
		"short":        {0x04, 'h'},
		"left over":    {0x04, 'h', 'i', 0x00},
		"negative len": {0x03, 'h', 'i'},
	} {
		if err := s.Validate(p); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("%s: %v, want ErrInvalidPayload", name, err)
		}
	}
	small, err := Parse(Avro, rec1, nil, Limits{MaxSchemaBytes: 1 << 10, MaxReferences: 1, MaxPayloadBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := small.Validate(ok); !errors.Is(err, ErrInvalidPayload) {
		t.Errorf("a string beyond MaxPayloadBytes: %v", err)
	}
}

// Validation costs what the payload holds, not what it claims: a block
// count far beyond the bytes left, a block of zero-byte items (nulls)
// beyond the step budget, and nesting past the depth bound are refused at
// once (a decoder that trusts the count loops 2^31 times on 5 bytes).
func TestAvroValidateIsBounded(t *testing.T) {
	ints := avroT(t, `{"type":"record","name":"A","fields":[{"name":"a","type":{"type":"array","items":"int"}}]}`)
	nulls := avroT(t, `{"type":"record","name":"N","fields":[{"name":"a","type":{"type":"array","items":"null"}}]}`)
	list := avroT(t, `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`)
	deep := make([]byte, 0, 2*maxAvroDepth+4)
	for range maxAvroDepth + 2 {
		deep = append(deep, 0x02) // branch 1: another L
	}
	deep = append(deep, 0x00) // branch 0: null
	for name, c := range map[string]struct {
		s Schema
		p []byte
	}{
		"2^31 ints in 5 bytes":   {ints, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f, 0x00}},
		"2^62 ints":              {ints, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00}},
		"2^31 nulls":             {nulls, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f, 0x00}},
		"nesting past the bound": {list, deep},
		"negative block size":    {ints, []byte{0x01, 0x01, 0x00}},
	} {
		if err := c.s.Validate(c.p); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("%s: %v, want ErrInvalidPayload", name, err)
		}
	}
	// Within the bounds: 1,000 nulls in 3 bytes, a short list, a block
	// with its byte size (negative count).
	for name, c := range map[string]struct {
		s Schema
		p []byte
	}{
		"1000 nulls":         {nulls, []byte{0xd0, 0x0f, 0x00}},
		"a list of 3":        {list, []byte{0x02, 0x02, 0x02, 0x00}},
		"a sized block of 2": {ints, []byte{0x03, 0x04, 0x02, 0x04, 0x00}},
	} {
		if err := c.s.Validate(c.p); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// What hamba/avro encodes, every kind of value, validates.
func TestAvroValidateAcceptsEncodedData(t *testing.T) {
	s, err := avro.Parse(fuzzRecord)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{"s": "héllo", "b": []byte{1, 2, 3}, "l": int64(-1 << 40), "u": map[string]any{"string": "x"},
		"a": []int{1, -2, 300000}, "m": map[string]bool{"k": true, "j": false}, "e": "Y", "f": [4]byte{9, 8, 7, 6}}
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := avroT(t, fuzzRecord).Validate(b); err != nil {
		t.Fatalf("%x: %v", b, err)
	}
	if err := avroT(t, fuzzRecord).Validate(b[:len(b)-1]); !errors.Is(err, ErrInvalidPayload) {
		t.Fatalf("one byte short: %v", err)
	}
}
