// Package schema is what Sluice's schema registry knows about schema
// formats (issue 25, docs/DESIGN.md §2.11): parsing a schema text of one
// format (with the schemas it references), its normalized text (the
// registry's identity of a schema), whether data written with one schema
// can be read with another, the compatibility modes of Confluent Schema
// Registry over a subject's versions, and checking that a payload is one
// datum of a schema (the validation at produce).
//
// Formats: Avro (github.com/hamba/avro/v2, the reader/writer resolution
// rules of the Avro specification), Protobuf (github.com/bufbuild/
// protocompile, Confluent's wire-level rules) and JSON Schema
// (github.com/santhosh-tekuri/jsonschema/v6, Confluent's content-model
// rules).
package schema

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Format is a schema language, named as Confluent's schemaType is.
type Format string

// The formats. Confluent omits schemaType for Avro; Parse takes "" as Avro.
const (
	Avro     Format = "AVRO"
	Protobuf Format = "PROTOBUF"
	JSON     Format = "JSON"
)

// ParseFormat maps a schemaType ("" is Avro) to a Format.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToUpper(s)); f {
	case "", Avro:
		return Avro, nil
	case Protobuf, JSON:
		return f, nil
	}
	return "", fmt.Errorf("%w: schema type %q (want AVRO, PROTOBUF or JSON)", ErrInvalidSchema, s)
}

// Compatibility is a subject's compatibility mode: which earlier versions
// a new version is checked against, and in which direction.
type Compatibility string

// The modes, as Confluent Schema Registry names them.
const (
	None               Compatibility = "NONE"
	Backward           Compatibility = "BACKWARD" // the default
	BackwardTransitive Compatibility = "BACKWARD_TRANSITIVE"
	Forward            Compatibility = "FORWARD"
	ForwardTransitive  Compatibility = "FORWARD_TRANSITIVE"
	Full               Compatibility = "FULL"
	FullTransitive     Compatibility = "FULL_TRANSITIVE"
)

// Compatibilities lists every mode.
var Compatibilities = []Compatibility{None, Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive}

// ParseCompatibility maps a mode's name (any case) to the mode.
func ParseCompatibility(s string) (Compatibility, error) {
	c := Compatibility(strings.ToUpper(s))
	if !slices.Contains(Compatibilities, c) {
		return "", fmt.Errorf("%w: %q (want one of %v)", ErrInvalidCompatibility, s, Compatibilities)
	}
	return c, nil
}

// Errors, for errors.Is.
var (
	// ErrInvalidSchema: the text is not a schema of its format, or a
	// reference does not resolve (Confluent's 42201).
	ErrInvalidSchema = errors.New("invalid schema")
	// ErrInvalidCompatibility: not a compatibility mode (42203).
	ErrInvalidCompatibility = errors.New("invalid compatibility level")
	// ErrInvalidPayload: a payload is not a datum of the schema.
	ErrInvalidPayload = errors.New("payload does not match the schema")
)

// Reference names a schema another schema uses (Confluent's references):
// Name is how the referring schema names it (an Avro full type name, a
// .proto import path, a JSON Schema $ref URL), Subject and Version where
// the registry holds it.
type Reference struct {
	Name    string
	Subject string
	Version int
}

// Resolved is a referenced schema's text, with its own references resolved
// the same way (depth first: a schema's references come before it).
type Resolved struct {
	Name   string
	Schema string
	Refs   []Resolved
}

// Schema is a parsed schema of one format.
type Schema interface {
	// Format is the schema's language.
	Format() Format
	// Normalized is the schema's text in a normal form: equal for
	// schemas that differ only in whitespace and key order (the
	// registry's identity of a schema, with the references).
	Normalized() string
	// CanRead returns nil if every datum written with writer (of the
	// same format) can be read with this schema, else an error saying
	// why not.
	CanRead(writer Schema) error
	// Validate returns nil if payload is exactly one datum of the
	// schema, else an error wrapping ErrInvalidPayload.
	Validate(payload []byte) error
	// JSON decodes a payload Validate accepts and writes it as JSON: an
	// Avro datum as hamba/avro decodes it (a union's branch as
	// {"type": value}), a Protobuf message in protojson's form, a JSON
	// document as it is (compacted). Errors wrap ErrInvalidPayload.
	JSON(payload []byte) ([]byte, error)
}

// Limits bounds what Parse and Validate accept.
type Limits struct {
	// MaxSchemaBytes bounds a schema's text, each referenced one's too.
	MaxSchemaBytes int
	// MaxReferences bounds the references of a schema, transitively.
	MaxReferences int
	// MaxPayloadBytes bounds a payload Validate decodes (and the bytes
	// and strings inside it).
	MaxPayloadBytes int
}

// DefaultLimits are the registry's defaults.
var DefaultLimits = Limits{MaxSchemaBytes: 1 << 20, MaxReferences: 64, MaxPayloadBytes: 32 << 20}

// Parse parses text as a schema of format f, with its references resolved.
// Errors wrap ErrInvalidSchema.
func Parse(f Format, text string, refs []Resolved, lim Limits) (Schema, error) {
	n := 0
	var check func([]Resolved) error
	check = func(rs []Resolved) error {
		for _, r := range rs {
			if n++; n > lim.MaxReferences {
				return fmt.Errorf("%w: more than %d references", ErrInvalidSchema, lim.MaxReferences)
			}
			if len(r.Schema) > lim.MaxSchemaBytes {
				return fmt.Errorf("%w: referenced schema %q is %d bytes, more than %d", ErrInvalidSchema, r.Name, len(r.Schema), lim.MaxSchemaBytes)
			}
			if err := check(r.Refs); err != nil {
				return err
			}
		}
		return nil
	}
	if len(text) > lim.MaxSchemaBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidSchema, len(text), lim.MaxSchemaBytes)
	}
	if err := check(refs); err != nil {
		return nil, err
	}
	switch f {
	case Avro:
		return parseAvro(text, refs, lim)
	case Protobuf:
		return parseProtobuf(text, refs, lim)
	case JSON:
		return parseJSONSchema(text, refs, lim)
	}
	return nil, fmt.Errorf("%w: unknown format %q", ErrInvalidSchema, f)
}

// Check returns why candidate may not follow the existing versions of a
// subject (oldest first) under mode: one message per incompatible pair,
// none when it may. BACKWARD: the candidate reads data written with the
// latest version; FORWARD: the latest reads data written with the
// candidate; FULL: both; the _TRANSITIVE forms check every existing
// version, not only the latest; NONE checks nothing. A version of another
// format is incompatible in every mode but NONE.
//
// The messages name the existing versions 1, 2, … in order; CheckVersions
// names them as the subject numbers them.
func Check(mode Compatibility, candidate Schema, existing []Schema) []string {
	return CheckVersions(mode, candidate, existing, nil)
}

// CheckVersions is Check with the subject's version number of each
// existing schema (versions[i] is existing[i]'s), which the messages name;
// nil numbers them 1, 2, … in order.
func CheckVersions(mode Compatibility, candidate Schema, existing []Schema, versions []int) []string {
	if mode == None || len(existing) == 0 {
		return nil
	}
	against := existing[len(existing)-1:]
	var backward, forward bool
	switch mode {
	case Backward, Forward, Full:
		backward, forward = mode != Forward, mode != Backward
	case BackwardTransitive, ForwardTransitive, FullTransitive:
		against = existing
		backward, forward = mode != ForwardTransitive, mode != BackwardTransitive
	}
	var out []string
	for i, old := range against {
		version := len(existing) - len(against) + i + 1 // 1-based, among the given versions
		if len(versions) == len(existing) {
			version = versions[len(existing)-len(against)+i]
		}
		if old.Format() != candidate.Format() {
			out = append(out, fmt.Sprintf("version %d is %s, the new schema %s", version, old.Format(), candidate.Format()))
			continue
		}
		if backward {
			if err := candidate.CanRead(old); err != nil {
				out = append(out, fmt.Sprintf("the new schema cannot read data written with version %d: %v", version, err))
			}
		}
		if forward {
			if err := old.CanRead(candidate); err != nil {
				out = append(out, fmt.Sprintf("version %d cannot read data written with the new schema: %v", version, err))
			}
		}
	}
	return out
}
