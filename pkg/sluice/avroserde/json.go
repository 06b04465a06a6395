package avroserde

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// SerializeJSON encodes a datum written in Avro's JSON encoding (the
// specification's: a union is null or {"branch": value}, bytes and fixed
// are strings of code points 0–255) and frames it with the schema's id —
// what `sluice produce --encode` and Confluent's Avro console producer
// take. Logical types take their underlying type's JSON (timestamp-millis
// a number of milliseconds, date a number of days).
func (s *Serializer) SerializeJSON(ctx context.Context, data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("avroserde: not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("avroserde: more than one JSON value, or bytes after it")
	}
	native, err := fromJSON(s.schema, v, "")
	if err != nil {
		return nil, fmt.Errorf("avroserde: %w", err)
	}
	return s.Serialize(ctx, native)
}

// fromJSON turns v, decoded from JSON with UseNumber, into the Go value
// hamba/avro encodes as sch; path names the place for errors.
func fromJSON(sch avro.Schema, v any, path string) (any, error) {
	at := func(format string, args ...any) error {
		where := path
		if where == "" {
			where = "the value"
		}
		return fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
	switch s := sch.(type) {
	case *avro.RefSchema:
		return fromJSON(s.Schema(), v, path)
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, at("want an object for record %s", s.FullName())
		}
		out := make(map[string]any, len(s.Fields()))
		for _, f := range s.Fields() {
			fv, ok := m[f.Name()]
			if !ok {
				if f.HasDefault() {
					// hamba fills a field missing from the map with
					// its default.
					continue
				}
				return nil, at("field %q is missing and has no default", f.Name())
			}
			c, err := fromJSON(f.Type(), fv, join(path, f.Name()))
			if err != nil {
				return nil, err
			}
			out[f.Name()] = c
		}
		for k := range m {
			if _, ok := out[k]; !ok && !hasField(s, k) {
				return nil, at("record %s has no field %q", s.FullName(), k)
			}
		}
		return out, nil
	case *avro.ArraySchema:
		a, ok := v.([]any)
		if !ok {
			return nil, at("want an array")
		}
		out := make([]any, len(a))
		for i, e := range a {
			c, err := fromJSON(s.Items(), e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case *avro.MapSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, at("want an object for a map")
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			c, err := fromJSON(s.Values(), e, join(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case *avro.UnionSchema:
		if v == nil {
			if _, pos := s.Types().Get(string(avro.Null)); pos < 0 {
				return nil, at("null, and the union has no null branch")
			}
			return nil, nil
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, at(`a union's value is null or {"branch": value}`)
		}
		for name, e := range m {
			branch, _ := s.Types().Get(name)
			if branch == nil {
				return nil, at("the union has no branch %q", name)
			}
			c, err := fromJSON(branch, e, path)
			if err != nil {
				return nil, err
			}
			return map[string]any{name: c}, nil
		}
	case *avro.EnumSchema:
		str, ok := v.(string)
		if !ok {
			return nil, at("want a string for enum %s", s.FullName())
		}
		if _, ok := s.Symbol(indexOf(s.Symbols(), str)); !ok {
			return nil, at("%q is not a symbol of enum %s", str, s.FullName())
		}
		return str, nil
	case *avro.FixedSchema:
		b, err := codePoints(v)
		if err != nil {
			return nil, at("%v", err)
		}
		if len(b) != s.Size() {
			return nil, at("%d bytes for fixed %s of %d", len(b), s.FullName(), s.Size())
		}
		return b, nil
	case *avro.PrimitiveSchema:
		return primitiveFromJSON(s, v, at)
	case *avro.NullSchema:
		if v != nil {
			return nil, at("want null")
		}
		return nil, nil
	}
	return nil, at("schema type %s is not supported in JSON input", sch.Type())
}

func primitiveFromJSON(s *avro.PrimitiveSchema, v any, at func(string, ...any) error) (any, error) {
	logical := ""
	if l := s.Logical(); l != nil {
		logical = string(l.Type())
	}
	switch s.Type() {
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, at("want true or false")
		}
		return b, nil
	case avro.Int, avro.Long:
		n, ok := v.(json.Number)
		if !ok {
			return nil, at("want an integer")
		}
		i, err := n.Int64()
		if err != nil || s.Type() == avro.Int && (i < math.MinInt32 || i > math.MaxInt32) {
			return nil, at("%s is not a %s", n, s.Type())
		}
		switch logical {
		case string(avro.Date):
			return time.Unix(i*86400, 0).UTC(), nil
		case string(avro.TimeMillis):
			return time.Duration(i) * time.Millisecond, nil
		case string(avro.TimestampMillis):
			return time.UnixMilli(i).UTC(), nil
		case string(avro.TimeMicros):
			return time.Duration(i) * time.Microsecond, nil
		case string(avro.TimestampMicros):
			return time.UnixMicro(i).UTC(), nil
		}
		if s.Type() == avro.Int {
			return int(i), nil
		}
		return i, nil
	case avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return nil, at("want a number")
		}
		f, err := n.Float64()
		if err != nil {
			return nil, at("%s is not a number", n)
		}
		if s.Type() == avro.Float {
			return float32(f), nil
		}
		return f, nil
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return nil, at("want a string")
		}
		return str, nil
	case avro.Bytes:
		if logical != "" {
			return nil, at("logical type %s is not supported in JSON input", logical)
		}
		b, err := codePoints(v)
		if err != nil {
			return nil, at("%v", err)
		}
		return b, nil
	case avro.Null:
		if v != nil {
			return nil, at("want null")
		}
		return nil, nil
	}
	return nil, at("type %s is not supported in JSON input", s.Type())
}

// codePoints is bytes in Avro's JSON encoding: a string whose code points
// 0–255 are the bytes.
func codePoints(v any) ([]byte, error) {
	str, ok := v.(string)
	if !ok {
		return nil, errors.New("want a string (code points 0-255 are the bytes)")
	}
	out := make([]byte, 0, len(str))
	for _, r := range str {
		if r > 255 || r == utf8.RuneError {
			return nil, fmt.Errorf("code point %U is not a byte", r)
		}
		out = append(out, byte(r))
	}
	return out, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func hasField(s *avro.RecordSchema, name string) bool {
	for _, f := range s.Fields() {
		if f.Name() == name {
			return true
		}
	}
	return false
}

func indexOf(symbols []string, s string) int {
	for i, sym := range symbols {
		if sym == s {
			return i
		}
	}
	return -1
}
