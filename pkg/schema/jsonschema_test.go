package schema

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func jsonT(t *testing.T, text string, refs ...Resolved) Schema {
	t.Helper()
	s, err := Parse(JSON, text, refs, DefaultLimits)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	return s
}

// Confluent's JSON Schema rules, change by change: whether the new version
// accepts every document the old one did (BACKWARD) and the reverse
// (FORWARD).
func TestJSONSchemaCanRead(t *testing.T) {
	const open = `{"type":"object","properties":{"id":{"type":"string"}}}`
	const closed = `{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`
	for _, c := range []struct {
		name, old, new    string
		backward, forward bool
		says              string
	}{
		{"same, other layout", open, `{ "properties": {"id": {"type": "string"}}, "type": "object" }`, true, true, ""},
		{"optional property added to a closed model", closed,
			`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"additionalProperties":false}`, true, false, "removed from a closed content model"},
		{"typed property added to an open model", open,
			`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}}}`, false, true, "added to an open content model"},
		{"property removed from an open model", `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}}}`, open, true, false, "added to an open content model"},
		{"required added", open, `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`, false, true, `"id" became required`},
		{"integer widened to number", `{"type":"integer"}`, `{"type":"number"}`, true, false, "type number is no longer allowed"},
		{"string to integer", `{"type":"string"}`, `{"type":"integer"}`, false, false, "type string is no longer allowed"},
		{"type union widened", `{"type":"string"}`, `{"type":["string","null"]}`, true, false, ""},
		{"enum grown", `{"enum":["a","b"]}`, `{"enum":["a","b","c"]}`, true, false, `enum value "c" was removed`},
		{"maxLength raised", `{"type":"string","maxLength":5}`, `{"type":"string","maxLength":10}`, true, false, "maxLength fell from 10 to 5"},
		{"minimum added", `{"type":"number"}`, `{"type":"number","minimum":0}`, false, true, "minimum 0 was added"},
		{"pattern added", `{"type":"string"}`, `{"type":"string","pattern":"^a"}`, false, true, "pattern"},
		{"closing the model", open, closed, false, true, "content model was closed"},
		{"nested property type changed", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}}`,
			`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"boolean"}}}}}`, false, false, "/properties/a/properties/b: type"},
		{"array items narrowed", `{"type":"array","items":{"type":"number"}}`, `{"type":"array","items":{"type":"integer"}}`, false, true, "/items: type number"},
		{"oneOf branch added", `{"oneOf":[{"type":"string"}]}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, true, false, "no branch reads"},
		{"local $ref followed", `{"definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s"}}}`,
			`{"definitions":{"s":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/s"}}}`, false, false, "/properties/a: type"},
	} {
		o, n := jsonT(t, c.old), jsonT(t, c.new)
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

// Parse: draft-07 by default, $schema picks another; references by URL;
// nothing is loaded from anywhere else; layout is normalized.
func TestJSONSchemaParse(t *testing.T) {
	addr := Resolved{Name: "address.json", Schema: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`}
	s := jsonT(t, `{"type":"object","properties":{"home":{"$ref":"address.json"}}}`, addr)
	if err := s.Validate([]byte(`{"home":{"city":"Oslo"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(`{"home":{}}`)); err == nil || !strings.Contains(err.Error(), "city") {
		t.Fatalf("a reference's required property missing: %v", err)
	}
	if a, b := jsonT(t, `{"type": "string", "minLength": 1}`), jsonT(t, `{"minLength":1,"type":"string"}`); a.Normalized() != b.Normalized() {
		t.Fatalf("normal forms differ: %s / %s", a.Normalized(), b.Normalized())
	}
	d2020 := jsonT(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}],"items":false}`)
	if err := d2020.Validate([]byte(`["a", 1]`)); err == nil {
		t.Fatal("2020-12 prefixItems/items:false not applied")
	}
	for _, c := range []struct{ text, says string }{
		{`{"type": "strin"}`, "strin"},
		{`{"$ref": "file:///etc/passwd"}`, "neither in the schema nor one of its references"},
		{`{"$ref": "https://example.com/s.json"}`, "neither in the schema nor one of its references"},
		{`[1, 2]`, "an object or a boolean"},
		{`{"type":`, "not JSON"},
	} {
		_, err := Parse(JSON, c.text, nil, DefaultLimits)
		if !errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want ErrInvalidSchema saying %q", c.text, err, c.says)
		}
	}
}

func TestJSONSchemaValidate(t *testing.T) {
	s := jsonT(t, `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer","minimum":0}},"required":["id"],"additionalProperties":false}`)
	for _, c := range []struct {
		payload string
		ok      bool
		says    string
	}{
		{`{"id":"a","n":3}`, true, ""},
		{`{"id":"a","n":12345678901234567890}`, true, ""},
		{`{"n":3}`, false, "id"},
		{`{"id":"a","n":-1}`, false, "/n"},
		{`{"id":"a","x":1}`, false, "x"},
		{`{"id":"a"} {}`, false, "more than one JSON value"},
		{`{"id":`, false, "not JSON"},
		{``, false, "not JSON"},
	} {
		err := s.Validate([]byte(c.payload))
		if (err == nil) != c.ok || err != nil && (!errors.Is(err, ErrInvalidPayload) || !strings.Contains(err.Error(), c.says)) {
			t.Errorf("%s: %v; want ok=%v saying %q", c.payload, err, c.ok, c.says)
		}
	}
}

// The modes over versions: v2 drops property n from an open model, v3
// brings it back as a string — fine against v2 (the latest), not against
// v1's integers once the check is transitive.
func TestJSONSchemaCheckModes(t *testing.T) {
	v1 := jsonT(t, `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"additionalProperties":false}`)
	v2 := jsonT(t, `{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`)
	v3 := jsonT(t, `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"string"}},"additionalProperties":false}`)
	for _, c := range []struct {
		mode Compatibility
		ok   bool
	}{
		{Backward, true}, {BackwardTransitive, false}, {Forward, false}, {ForwardTransitive, false},
		{Full, false}, {FullTransitive, false}, {None, true},
	} {
		if msgs := Check(c.mode, v3, []Schema{v1, v2}); (len(msgs) == 0) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.mode, msgs, c.ok)
		}
	}
}

// A recursive schema compares in bounded work: each pair of schema
// objects once (this one took about 2^33 steps before), and any check past
// maxJSONCompareSteps fails saying so.
func TestJSONSchemaCompareIsBounded(t *testing.T) {
	tree := `{"type":"object","properties":{"a":{"$ref":"#"},"b":{"$ref":"#"},"c":{"$ref":"#"}}}`
	v1, v2 := jsonT(t, tree), jsonT(t, strings.Replace(tree, `"type"`, `"description":"v2","type"`, 1))
	done := make(chan error, 1)
	go func() { done <- v2.CanRead(v1) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a recursive tree read by itself with a description added: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the comparison of two recursive schemas did not end")
	}
	// Many distinct branches: the step bound answers.
	var b strings.Builder
	b.WriteString(`{"anyOf":[`)
	for i := range 300 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"type":"object","properties":{"p%d":{"anyOf":[{"type":"string"},{"type":"integer","minimum":%d}]}}}`, i, i)
	}
	b.WriteString(`]}`)
	wide := jsonT(t, b.String())
	other := jsonT(t, strings.Replace(b.String(), `"minimum":0}`, `"minimum":1}`, 1))
	start := time.Now()
	_ = other.CanRead(wide)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a wide anyOf took %v to compare", d)
	}
}

// Bytes after the document are refused, not ignored.
func TestJSONSchemaValidateRefusesTrailingBytes(t *testing.T) {
	s := jsonT(t, `{"type":"object"}`)
	for _, p := range []string{`{"a":1}xyz`, `{"a":1}]`, `{"a":1},`, `{"a":1} {}`} {
		if err := s.Validate([]byte(p)); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("%s: %v; want it refused", p, err)
		}
	}
	if err := s.Validate([]byte("{\"a\":1} \n")); err != nil {
		t.Errorf("trailing white space: %v", err)
	}
}

// A document is bounded by its values before it is decoded.
func TestJSONSchemaValidateIsBounded(t *testing.T) {
	s := jsonT(t, `{"type":"array"}`)
	many := "[" + strings.Repeat("{},", maxJSONValues) + "{}]"
	if err := s.Validate([]byte(many)); !errors.Is(err, ErrInvalidPayload) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("%d objects: %v; want refused naming the bound", maxJSONValues+1, err)
	}
	fine := "[" + strings.Repeat(`{"s":"a,b[{"},`, 1000) + "{}]"
	if err := s.Validate([]byte(fine)); err != nil {
		t.Fatalf("commas and brackets inside strings counted: %v", err)
	}
	if n := jsonValues([]byte(`{"a":"x\"[,","b":[1,2]}`)); n != 5 {
		t.Fatalf("jsonValues = %d; want 5 (the object, its second member, the array and its second element, plus one)", n)
	}
}
