package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
)

const (
	rec1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`
	// rec1 laid out differently: the same schema.
	rec1Spaced = `{ "name": "Order", "type": "record", "fields": [ { "type": "string", "name": "id" } ] }`
	rec2       = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int","default":1}]}`
	rec3       = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"}]}`
	// recInt changes id's type: no version before reads it, nor it them.
	recInt = `{"type":"record","name":"Order","fields":[{"name":"id","type":"int"}]}`
)

func newRegistry(t *testing.T) *Registry {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	r, err := New(Config{Store: cat})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// code fails the test unless err is a registry *Error with code.
func code(t *testing.T, err error, want int, what string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("%s: %v, want error code %d", what, err, want)
	}
	return e
}

func register(t *testing.T, r *Registry, subject, text string) Version {
	t.Helper()
	v, err := r.Register(context.Background(), subject, Input{Schema: text})
	if err != nil {
		t.Fatalf("register %s under %s: %v", text, subject, err)
	}
	return v
}

// Registering: versions from 1, the same schema (in any layout) gives its
// version back, an incompatible one is refused with the reasons under
// BACKWARD and accepted under NONE, and a schema under another subject
// keeps its id.
func TestRegister(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	v1 := register(t, r, "orders-value", rec1)
	if v1.Version != 1 || v1.ID < 1 || v1.Type != "AVRO" {
		t.Fatalf("first: %+v", v1)
	}
	if again := register(t, r, "orders-value", rec1Spaced); again.Version != 1 || again.ID != v1.ID {
		t.Fatalf("the same schema laid out differently: %+v, want version 1 id %d", again, v1.ID)
	}
	v2 := register(t, r, "orders-value", rec2)
	if v2.Version != 2 || v2.ID == v1.ID {
		t.Fatalf("second: %+v", v2)
	}
	_, err := r.Register(ctx, "orders-value", Input{Schema: recInt})
	e := code(t, err, CodeIncompatibleSchema, "a field's type changed under BACKWARD")
	var inc *IncompatibleError
	if e.HTTPStatus() != 409 || !errors.As(err, &inc) || len(inc.Messages) != 1 || !strings.Contains(e.Message, "version 2") {
		t.Fatalf("incompatible: %q %+v", e.Message, inc)
	}
	if _, err := r.SetCompatibility(ctx, "orders-value", "none"); err != nil {
		t.Fatal(err)
	}
	if v3 := register(t, r, "orders-value", recInt); v3.Version != 3 {
		t.Fatalf("under NONE: %+v", v3)
	}
	if other := register(t, r, "returns-value", rec1); other.Version != 1 || other.ID != v1.ID {
		t.Fatalf("under another subject: %+v, want id %d", other, v1.ID)
	}
	_, err = r.Register(ctx, "orders-value", Input{Schema: `{"type":"record"`})
	code(t, err, CodeInvalidSchema, "a schema that does not parse")
	_, err = r.Register(ctx, "orders-value", Input{Type: "XML", Schema: rec1})
	code(t, err, CodeInvalidSchema, "an unknown schema type")
	if subjects, err := r.Subjects(ctx, false); err != nil || !slices.Equal(subjects, []string{"orders-value", "returns-value"}) {
		t.Fatalf("subjects %v, %v", subjects, err)
	}
}

// Reading: by id, by subject and version (or latest), lookup of a schema
// a subject has, and the errors Confluent's clients expect.
func TestReads(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	v1 := register(t, r, "s", rec1)
	v2 := register(t, r, "s", rec2)
	rec, err := r.Schema(ctx, v2.ID)
	if err != nil || rec.Schema != v2.Schema || rec.Format != "AVRO" {
		t.Fatalf("schema %d: %+v, %v", v2.ID, rec, err)
	}
	_, err = r.Schema(ctx, 999)
	code(t, err, CodeSchemaNotFound, "an unknown id")
	if latest, err := r.Version(ctx, "s", LatestVersion, false); err != nil || latest.Version != 2 || latest.ID != v2.ID {
		t.Fatalf("latest: %+v, %v", latest, err)
	}
	if got, err := r.Version(ctx, "s", 1, false); err != nil || got.ID != v1.ID {
		t.Fatalf("version 1: %+v, %v", got, err)
	}
	_, err = r.Version(ctx, "s", 7, false)
	code(t, err, CodeVersionNotFound, "a version that does not exist")
	_, err = r.Version(ctx, "nope", 1, false)
	code(t, err, CodeSubjectNotFound, "a subject that does not exist")
	for _, bad := range []string{"0", "-2", "x", "1.5", "99999999999"} {
		_, err := ParseVersion(bad)
		code(t, err, CodeInvalidVersion, "version "+bad)
	}
	if v, err := ParseVersion("latest"); err != nil || v != LatestVersion {
		t.Fatalf("latest: %d, %v", v, err)
	}
	if got, err := r.Lookup(ctx, "s", Input{Schema: rec1Spaced}, false); err != nil || got.Version != 1 {
		t.Fatalf("lookup: %+v, %v", got, err)
	}
	_, err = r.Lookup(ctx, "s", Input{Schema: rec3}, false)
	code(t, err, CodeSchemaNotFound, "lookup of a schema the subject lacks")
	_, err = r.Lookup(ctx, "nope", Input{Schema: rec1}, false)
	code(t, err, CodeSubjectNotFound, "lookup under an unknown subject")
	if vs, err := r.Versions(ctx, "s", false); err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("versions %v, %v", vs, err)
	}
}

// Deleting: a version softly (hidden, still found with deleted), then for
// good; a permanent delete first is refused; a subject the same way.
func TestDeletes(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	register(t, r, "s", rec1)
	register(t, r, "s", rec2)
	_, err := r.DeleteVersion(ctx, "s", 1, true)
	code(t, err, CodeVersionNotSoftDeleted, "a permanent delete before the soft one")
	if v, err := r.DeleteVersion(ctx, "s", 1, false); err != nil || v != 1 {
		t.Fatalf("soft delete: %d, %v", v, err)
	}
	if vs, _ := r.Versions(ctx, "s", false); !slices.Equal(vs, []int{2}) {
		t.Fatalf("live versions after a soft delete: %v", vs)
	}
	if vs, _ := r.Versions(ctx, "s", true); !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("all versions after a soft delete: %v", vs)
	}
	_, err = r.Version(ctx, "s", 1, false)
	code(t, err, CodeVersionNotFound, "a soft-deleted version")
	if got, err := r.Version(ctx, "s", 1, true); err != nil || !got.Deleted {
		t.Fatalf("a soft-deleted version with deleted: %+v, %v", got, err)
	}
	if v, err := r.DeleteVersion(ctx, "s", 1, true); err != nil || v != 1 {
		t.Fatalf("permanent delete: %d, %v", v, err)
	}
	_, err = r.DeleteSubject(ctx, "s", true)
	code(t, err, CodeSubjectNotSoftDeleted, "a permanent subject delete first")
	if vs, err := r.DeleteSubject(ctx, "s", false); err != nil || !slices.Equal(vs, []int{2}) {
		t.Fatalf("soft subject delete: %v, %v", vs, err)
	}
	_, err = r.DeleteSubject(ctx, "s", false)
	code(t, err, CodeSubjectSoftDeleted, "a second soft subject delete")
	if subjects, _ := r.Subjects(ctx, false); len(subjects) != 0 {
		t.Fatalf("subjects after a soft delete: %v", subjects)
	}
	if subjects, _ := r.Subjects(ctx, true); !slices.Equal(subjects, []string{"s"}) {
		t.Fatalf("subjects with deleted ones: %v", subjects)
	}
	if vs, err := r.DeleteSubject(ctx, "s", true); err != nil || !slices.Equal(vs, []int{2}) {
		t.Fatalf("permanent subject delete: %v, %v", vs, err)
	}
	_, err = r.Versions(ctx, "s", true)
	code(t, err, CodeSubjectNotFound, "a subject deleted for good")
	if v := register(t, r, "s", rec1); v.Version != 3 {
		t.Fatalf("registered again: version %d, want 3 (never reused)", v.Version)
	}
}

// Levels: unset per subject (40408), global BACKWARD by default, set and
// removed, refused when unknown; the check endpoint's two forms.
func TestCompatibility(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	_, err := r.ConfiguredCompatibility(ctx, "s")
	code(t, err, CodeCompatibilityNotSet, "a subject level never set")
	if l, err := r.ConfiguredCompatibility(ctx, ""); err != nil || l != "BACKWARD" {
		t.Fatalf("global default: %q, %v", l, err)
	}
	_, err = r.SetCompatibility(ctx, "", "sideways")
	code(t, err, CodeInvalidCompatibility, "an unknown level")
	if _, err := r.SetCompatibility(ctx, "", "FORWARD"); err != nil {
		t.Fatal(err)
	}
	if l, _ := r.Compatibility(ctx, "s"); l != "FORWARD" {
		t.Fatalf("a subject without its own level follows the global one: %q", l)
	}
	if _, err := r.SetCompatibility(ctx, "s", "BACKWARD_TRANSITIVE"); err != nil {
		t.Fatal(err)
	}
	register(t, r, "s", rec1)
	register(t, r, "s", rec2)
	// rec3 reads rec2's data (qty written) but not rec1's.
	msgs, err := r.CheckCompatibility(ctx, "s", LatestVersion, false, Input{Schema: rec3})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("against the latest: %v, %v", msgs, err)
	}
	msgs, err = r.CheckCompatibility(ctx, "s", 0, true, Input{Schema: rec3})
	if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0], "version 1") {
		t.Fatalf("against every version: %v, %v", msgs, err)
	}
	// A message names the subject's version, also when only the latest is
	// checked (it is version 2, not the first of the versions checked).
	noID := `{"type":"record","name":"Order","fields":[{"name":"id","type":"int"}]}`
	msgs, err = r.CheckCompatibility(ctx, "s", LatestVersion, false, Input{Schema: noID})
	if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0], "version 2") {
		t.Fatalf("an incompatible schema against the latest: %v, %v; want one message naming version 2", msgs, err)
	}
	msgs, err = r.CheckCompatibility(ctx, "s", 1, false, Input{Schema: noID})
	if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0], "version 1") {
		t.Fatalf("an incompatible schema against version 1: %v, %v; want one message naming version 1", msgs, err)
	}
	var inc *IncompatibleError
	if _, err := r.Register(ctx, "s", Input{Schema: noID}); !errors.As(err, &inc) || len(inc.Messages) != 2 ||
		!strings.Contains(inc.Messages[0], "version 1") || !strings.Contains(inc.Messages[1], "version 2") {
		t.Fatalf("registering an incompatible schema (BACKWARD_TRANSITIVE): %v; want messages naming versions 1 and 2", err)
	}
	if _, err := r.SetCompatibility(ctx, "s", ""); err != nil {
		t.Fatal(err)
	}
	_, err = r.ConfiguredCompatibility(ctx, "s")
	code(t, err, CodeCompatibilityNotSet, "a subject level removed")
}

// References resolve through the subject versions they name; compiled
// schemas validate payloads.
func TestReferencesAndCompiled(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	register(t, r, "money", `{"type":"record","name":"Money","namespace":"acme","fields":[{"name":"cents","type":"long"}]}`)
	outer := Input{Schema: `{"type":"record","name":"Order","fields":[{"name":"total","type":"acme.Money"}]}`,
		References: []catalog.SchemaReference{{Name: "acme.Money", Subject: "money", Version: 1}}}
	v, err := r.Register(ctx, "orders-value", outer)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Compiled(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte{0x02}); err != nil { // cents = 1
		t.Fatalf("valid payload: %v", err)
	}
	if err := s.Validate([]byte{0x02, 0x02}); err == nil {
		t.Fatal("a payload with a byte left over validated")
	}
	bad := outer
	bad.References = []catalog.SchemaReference{{Name: "acme.Money", Subject: "money", Version: 9}}
	_, err = r.Register(ctx, "orders-value", bad)
	code(t, err, CodeInvalidSchema, "a reference to a version that does not exist")
	_, err = r.Compiled(ctx, 999)
	code(t, err, CodeSchemaNotFound, "compiling an unknown id")
}

// A schema larger than the store keeps is refused as an invalid schema
// naming the bound, before it is parsed.
func TestRegisterRefusesASchemaTheStoreCannotKeep(t *testing.T) {
	r := newRegistry(t)
	big := `{"type":"record","name":"R","doc":"` + strings.Repeat("x", catalog.MaxSchemaBytes) + `","fields":[]}`
	_, err := r.Register(context.Background(), "s", Input{Schema: big})
	e := code(t, err, CodeInvalidSchema, "a schema past catalog.MaxSchemaBytes")
	if !strings.Contains(e.Message, "262144") {
		t.Fatalf("the message does not name the bound: %s", e.Message)
	}
}

// Protobuf through the registry: an import is a reference, the subject's
// compatibility level applies with Protobuf's rules, and a compiled
// version validates payloads with their message index path.
func TestProtobufSubjects(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	money := Input{Type: "PROTOBUF", Schema: "syntax = \"proto3\";\npackage acme;\nmessage Money { int64 cents = 1; }"}
	if _, err := r.Register(ctx, "money.proto", money); err != nil {
		t.Fatal(err)
	}
	ref := []catalog.SchemaReference{{Name: "money.proto", Subject: "money.proto", Version: 1}}
	v1 := Input{Type: "PROTOBUF", References: ref,
		Schema: "syntax = \"proto3\";\npackage acme;\nimport \"money.proto\";\nmessage Order { string id = 1; Money total = 2; }"}
	got, err := r.Register(ctx, "orders-value", v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != "PROTOBUF" || got.Version != 1 {
		t.Fatalf("registered %+v", got)
	}
	incompatible := v1
	incompatible.Schema = strings.Replace(v1.Schema, "string id = 1", "int64 id = 1", 1)
	_, err = r.Register(ctx, "orders-value", incompatible)
	e := code(t, err, CodeIncompatibleSchema, "string to int64 under BACKWARD")
	if !strings.Contains(e.Message, "int64 cannot read string") {
		t.Fatalf("message %q", e.Message)
	}
	added := v1
	added.Schema = strings.Replace(v1.Schema, "Money total = 2;", "Money total = 2; bool gift = 3;", 1)
	if _, err := r.Register(ctx, "orders-value", added); err != nil {
		t.Fatalf("a field added: %v", err)
	}
	s, err := r.Compiled(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	// [0], then id "a" and total {cents: 5}.
	if err := s.Validate([]byte{0, 0x0a, 1, 'a', 0x12, 2, 0x08, 5}); err != nil {
		t.Fatalf("valid payload: %v", err)
	}
	if err := s.Validate([]byte{0, 0x0a, 5, 'a'}); err == nil {
		t.Fatal("a string cut short validated")
	}
}
