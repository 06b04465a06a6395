package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema, as Confluent Schema Registry takes it: a schema document
// (draft-07 unless its $schema names another), its references the
// documents its $refs name, by URL (a Reference's Name). Validation by
// github.com/santhosh-tekuri/jsonschema/v6, which loads nothing: a $ref
// that is neither in the document nor a reference fails to compile.
// Payloads are one JSON document (after Confluent's 5-byte frame).

// jsonSchema is a compiled JSON Schema with its document, for the
// compatibility rules.
type jsonSchema struct {
	compiled   *jsonschema.Schema
	doc        any // the decoded document (json.Number numbers)
	refs       map[string]any
	norm       string
	maxPayload int
}

// jsonBase is where a schema given as text lives, for relative $refs.
const jsonBase = "mem://sluice/"

// noLoader refuses every URL the compiler was not given.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is neither in the schema nor one of its references", url)
}

func parseJSONSchema(text string, refs []Resolved, lim Limits) (Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalidSchema, err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("%w: a JSON Schema is an object or a boolean", ErrInvalidSchema)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(noLoader{})
	loaded := map[string]any{}
	var load func([]Resolved) error
	load = func(rs []Resolved) error {
		for _, r := range rs {
			if err := load(r.Refs); err != nil {
				return err
			}
			d, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Schema))
			if err != nil {
				return fmt.Errorf("%w: reference %q is not JSON: %v", ErrInvalidSchema, r.Name, err)
			}
			url := refURL(r.Name)
			if _, ok := loaded[url]; ok {
				continue
			}
			if err := c.AddResource(url, d); err != nil {
				return fmt.Errorf("%w: reference %q: %v", ErrInvalidSchema, r.Name, err)
			}
			loaded[url] = d
		}
		return nil
	}
	if err := load(refs); err != nil {
		return nil, err
	}
	main := jsonBase + "schema.json"
	if err := c.AddResource(main, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	compiled, err := c.Compile(main)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	norm, err := json.Marshal(doc) // keys sorted, numbers as written
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return &jsonSchema{compiled: compiled, doc: doc, refs: loaded, norm: string(norm), maxPayload: lim.MaxPayloadBytes}, nil
}

// refURL is where a reference named name lives: its name when it is an
// absolute URL, else relative to the schema's base.
func refURL(name string) string {
	if strings.Contains(name, "://") {
		return name
	}
	return jsonBase + strings.TrimPrefix(name, "/")
}

func (j *jsonSchema) Format() Format { return JSON }

// Normalized is the document re-encoded: keys sorted, no spaces.
func (j *jsonSchema) Normalized() string { return j.norm }

// Validate checks that payload is one JSON document the schema accepts.
func (j *jsonSchema) Validate(payload []byte) error {
	if len(payload) > j.maxPayload {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidPayload, len(payload), j.maxPayload)
	}
	// The validator needs the document decoded, which costs memory per
	// value: bound the values first (a 1 MiB [{},{},...] took ~50 MB).
	if n := jsonValues(payload); n > maxJSONValues {
		return fmt.Errorf("%w: the document holds more than %d values (objects, arrays, members, elements)", ErrInvalidPayload, maxJSONValues)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: not JSON: %v", ErrInvalidPayload, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: more than one JSON value, or bytes after it", ErrInvalidPayload)
	}
	if err := j.compiled.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w: %s", ErrInvalidPayload, firstCause(ve))
		}
		return fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return nil
}

func (j *jsonSchema) JSON(payload []byte) ([]byte, error) {
	if err := j.Validate(payload); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, payload); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return out.Bytes(), nil
}

// maxJSONValues bounds the values of a document Validate decodes.
const maxJSONValues = 1 << 17

// jsonValues counts a document's values from its structure, without
// decoding it: each object or array, and each member or element past the
// first (a comma), outside strings. An upper bound for valid documents
// within a constant; invalid ones fail to decode after.
func jsonValues(b []byte) int {
	n, inString, escaped := 1, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{', c == '[', c == ',':
			n++
		}
	}
	return n
}

// firstCause is the innermost first cause of a validation error, worded
// with where in the document it is.
func firstCause(ve *jsonschema.ValidationError) string {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	at := "/" + strings.Join(ve.InstanceLocation, "/")
	return fmt.Sprintf("at %s: %s", at, strings.TrimSpace(fmt.Sprint(ve.ErrorKind)))
}

// CanRead applies Confluent's JSON Schema rules: data valid under writer
// must be valid under j. Within objects: a property j requires must be
// required by writer; a property writer may hold must be one j accepts
// (j's own schema for it, else its additionalProperties: closed refuses
// it); a property j adds must be one writer's data cannot hold already
// (writer closed) or accept anything writer's additionalProperties allowed.
// Types may widen (integer to number), never narrow; enums grow, bounds
// relax; a new pattern, not, const or enum is a new constraint.
func (j *jsonSchema) CanRead(writer Schema) error {
	w, ok := writer.(*jsonSchema)
	if !ok {
		return fmt.Errorf("the writer's schema is %s, not JSON", writer.Format())
	}
	if reflect.DeepEqual(j.doc, w.doc) && reflect.DeepEqual(j.refs, w.refs) {
		return nil
	}
	cmp := &jsonCompare{r: j, w: w, work: &jsonWork{seen: map[[2]uintptr]pairState{}}}
	cmp.schema("#", j.doc, w.doc, 0)
	if len(cmp.probs) > 0 {
		return errors.New(strings.Join(cmp.probs, "; "))
	}
	return nil
}

type jsonCompare struct {
	r, w  *jsonSchema
	probs []string
	n     int       // problems found (probs keeps the first 20)
	work  *jsonWork // shared by the sub-comparisons of one CanRead
}

// jsonWork bounds one comparison: the pairs of schema objects already
// compared (recursive $refs and shared definitions are compared once;
// a pair met again while being compared is taken as compatible, the
// coinductive reading of recursion) and the steps taken.
type jsonWork struct {
	seen  map[[2]uintptr]pairState
	steps int
	over  bool
}

type pairState uint8

const (
	pairComparing pairState = iota + 1
	pairCompatible
	pairIncompatible
)

// maxJSONCompareSteps bounds the schema pairs one compatibility check
// compares; past it the check fails, saying so.
const maxJSONCompareSteps = 20000

// maxJSONCompareDepth bounds the comparison (recursive $refs).
const maxJSONCompareDepth = 32

func (c *jsonCompare) add(path, format string, args ...any) {
	c.n++
	if len(c.probs) < 20 {
		c.probs = append(c.probs, path+": "+fmt.Sprintf(format, args...))
	}
}

// resolve follows a local $ref ("#/definitions/x", "#/$defs/x") or a
// reference's URL within the schema's documents.
func (s *jsonSchema) resolve(v any) any {
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok || len(m) > 1 && !onlyAnnotations(m) {
			return v
		}
		doc, frag, _ := strings.Cut(ref, "#")
		root := s.doc
		if doc != "" {
			if root, ok = s.refs[refURL(doc)]; !ok {
				return v
			}
		}
		next := root
		for _, part := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			if part == "" {
				continue
			}
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			nm, ok := next.(map[string]any)
			if !ok {
				return v
			}
			next = nm[part]
		}
		if next == nil {
			return v
		}
		v = next
	}
	return v
}

// onlyAnnotations reports whether m holds nothing but $ref and words that
// do not constrain (title, description, $comment).
func onlyAnnotations(m map[string]any) bool {
	for k := range m {
		switch k {
		case "$ref", "title", "description", "$comment", "examples", "default":
		default:
			return false
		}
	}
	return true
}

// schema compares reader schema r with writer schema w at path.
func (c *jsonCompare) schema(path string, r, w any, depth int) {
	if depth > maxJSONCompareDepth {
		return
	}
	r, w = c.r.resolve(r), c.w.resolve(w)
	rm0, rok := r.(map[string]any)
	wm0, wok := w.(map[string]any)
	if rok && wok {
		key := [2]uintptr{reflect.ValueOf(rm0).Pointer(), reflect.ValueOf(wm0).Pointer()}
		switch c.work.seen[key] {
		case pairComparing, pairCompatible:
			return // being compared further up (recursion), or was
		case pairIncompatible:
			c.add(path, "incompatible, as found where these schemas were compared before")
			return
		}
		c.work.seen[key] = pairComparing
		before := c.n
		defer func() {
			if c.n == before {
				c.work.seen[key] = pairCompatible
			} else {
				c.work.seen[key] = pairIncompatible
			}
		}()
	}
	if c.work.steps++; c.work.steps > maxJSONCompareSteps {
		if !c.work.over {
			c.work.over = true
			c.add(path, "the schemas take more than %d steps to compare; simplify them or set the subject's compatibility to NONE", maxJSONCompareSteps)
		}
		return
	}
	rb, rIsBool := r.(bool)
	wb, wIsBool := w.(bool)
	switch {
	case rIsBool && rb, wIsBool && !wb:
		return // the reader accepts anything, or the writer nothing
	case rIsBool:
		c.add(path, "the schema became false: nothing is accepted")
		return
	}
	rm, _ := r.(map[string]any)
	wm, _ := w.(map[string]any)
	if wIsBool {
		wm = map[string]any{} // true: anything
	}
	if len(rm) == 0 {
		return // {} accepts anything
	}
	c.types(path, rm, wm)
	c.enums(path, rm, wm)
	c.bounds(path, rm, wm)
	for _, k := range []string{"pattern", "not", "format", "multipleOf", "uniqueItems", "dependencies", "dependentRequired", "dependentSchemas", "if", "propertyNames", "contains"} {
		if rv, ok := rm[k]; ok && !reflect.DeepEqual(rv, wm[k]) {
			if wv, had := wm[k]; had {
				c.add(path, "%s changed from %s to %s", k, compact(wv), compact(rv))
			} else {
				c.add(path, "%s %s was added", k, compact(rv))
			}
		}
	}
	c.objects(path, rm, wm, depth)
	c.arrays(path, rm, wm, depth)
	c.combined(path, rm, wm, depth)
}

// typeSet is the types a schema allows (nil: any).
func typeSet(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func (c *jsonCompare) types(path string, rm, wm map[string]any) {
	rt, wt := typeSet(rm), typeSet(wm)
	if rt == nil {
		return
	}
	if wt == nil {
		c.add(path, "type %v was added", rt)
		return
	}
	for _, t := range wt {
		if !slices.Contains(rt, t) && !(t == "integer" && slices.Contains(rt, "number")) {
			c.add(path, "type %s is no longer allowed (now %v)", t, rt)
		}
	}
}

func (c *jsonCompare) enums(path string, rm, wm map[string]any) {
	if rc, ok := rm["const"]; ok {
		if wc, had := wm["const"]; !had || !reflect.DeepEqual(rc, wc) {
			c.add(path, "const %s was added", compact(rc))
		}
	}
	re, ok := rm["enum"].([]any)
	if !ok {
		return
	}
	we, had := wm["enum"].([]any)
	if !had {
		if wc, isConst := wm["const"]; isConst {
			we = []any{wc}
		} else {
			c.add(path, "enum %s was added", compact(re))
			return
		}
	}
	have := make(map[string]bool, len(re))
	for _, v := range re {
		have[canon(v)] = true
	}
	for _, v := range we {
		if !have[canon(v)] {
			c.add(path, "enum value %s was removed", compact(v))
		}
	}
}

// bounds: a lower bound may only fall and an upper one only rise.
func (c *jsonCompare) bounds(path string, rm, wm map[string]any) {
	for _, b := range []struct {
		key   string
		lower bool
	}{
		{"minimum", true}, {"exclusiveMinimum", true}, {"minLength", true}, {"minItems", true}, {"minProperties", true},
		{"maximum", false}, {"exclusiveMaximum", false}, {"maxLength", false}, {"maxItems", false}, {"maxProperties", false},
	} {
		rv, ok := number(rm[b.key])
		if !ok {
			continue
		}
		wv, had := number(wm[b.key])
		switch {
		case !had:
			c.add(path, "%s %s was added", b.key, rv.RatString())
		case b.lower && rv.Cmp(wv) > 0:
			c.add(path, "%s rose from %s to %s", b.key, wv.RatString(), rv.RatString())
		case !b.lower && rv.Cmp(wv) < 0:
			c.add(path, "%s fell from %s to %s", b.key, wv.RatString(), rv.RatString())
		}
	}
}

func number(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(n.String())
	return r, ok
}

// additional is an object schema's additionalProperties: nil when open
// (absent or true), false when closed, else the schema.
func additional(m map[string]any) any {
	switch a := m["additionalProperties"].(type) {
	case nil:
		return nil
	case bool:
		if a {
			return nil
		}
		return false
	default:
		return a
	}
}

func (c *jsonCompare) objects(path string, rm, wm map[string]any, depth int) {
	rp, _ := rm["properties"].(map[string]any)
	wp, _ := wm["properties"].(map[string]any)
	ra, wa := additional(rm), additional(wm)
	// What the writer's data may hold under each name it declares.
	for _, name := range sortedKeys(wp) {
		at := path + "/properties/" + name
		switch rs, ok := rp[name]; {
		case ok:
			c.schema(at, rs, wp[name], depth+1)
		case ra == false:
			c.add(at, "the property was removed from a closed content model (additionalProperties false)")
		case ra != nil:
			c.schema(at, ra, wp[name], depth+1)
		}
	}
	// Names the reader declares that the writer did not.
	for _, name := range sortedKeys(rp) {
		if _, ok := wp[name]; ok {
			continue
		}
		at := path + "/properties/" + name
		switch {
		case wa == false:
			// The writer's data never holds it.
		case wa == nil:
			if !acceptsAnything(c.r.resolve(rp[name])) {
				c.add(at, "the property was added to an open content model: data written before may hold anything under this name")
			}
		default:
			c.schema(at, rp[name], wa, depth+1)
		}
	}
	switch {
	case ra == false && wa != false:
		c.add(path, "the content model was closed (additionalProperties false)")
	case ra != nil && ra != false && wa == nil:
		c.add(path, "additionalProperties %s was added to an open content model", compact(ra))
	case ra != nil && ra != false && wa != false:
		c.schema(path+"/additionalProperties", ra, wa, depth+1)
	}
	wreq := stringSet(wm["required"])
	for _, name := range sortedKeys(stringSet(rm["required"])) {
		if !wreq[name] {
			c.add(path, "property %q became required", name)
		}
	}
}

func (c *jsonCompare) arrays(path string, rm, wm map[string]any, depth int) {
	ri, rok := rm["items"]
	wi, wok := wm["items"]
	switch {
	case !rok:
	case !wok:
		if !acceptsAnything(c.r.resolve(ri)) {
			c.add(path, "items %s was added", compact(ri))
		}
	default:
		if rl, ok := ri.([]any); ok {
			wl, _ := wi.([]any)
			for i, s := range rl {
				if i < len(wl) {
					c.schema(fmt.Sprintf("%s/items/%d", path, i), s, wl[i], depth+1)
				}
			}
			return
		}
		c.schema(path+"/items", ri, wi, depth+1)
	}
}

// combined compares allOf, anyOf and oneOf: each writer branch must be
// read by some reader branch (a writer without the keyword is one branch).
func (c *jsonCompare) combined(path string, rm, wm map[string]any, depth int) {
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		rl, ok := rm[k].([]any)
		if !ok {
			continue
		}
		wl, had := wm[k].([]any)
		if !had {
			wl = []any{wm}
		}
		for i, wb := range wl {
			if k == "allOf" {
				// Every reader branch must read the writer.
				for j, rb := range rl {
					c.schema(fmt.Sprintf("%s/%s/%d", path, k, j), rb, wb, depth+1)
				}
				continue
			}
			read := false
			for _, rb := range rl {
				sub := &jsonCompare{r: c.r, w: c.w, work: c.work}
				sub.schema(path, rb, wb, depth+1)
				if sub.n == 0 {
					read = true
					break
				}
			}
			if !read {
				c.add(fmt.Sprintf("%s/%s", path, k), "no branch reads the writer's branch %d", i)
			}
		}
	}
}

func acceptsAnything(v any) bool {
	switch s := v.(type) {
	case bool:
		return s
	case map[string]any:
		return onlyAnnotations(s) && s["$ref"] == nil
	}
	return false
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	if l, ok := v.([]any); ok {
		for _, e := range l {
			if s, ok := e.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// canon is v's JSON, whole: equal for equal values (keys sorted).
func canon(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}
