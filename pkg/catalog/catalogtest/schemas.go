package catalogtest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func runSchemas(t *testing.T, h Harness) {
	subtests(t, h, map[string]func(e *env){
		"RegisterIdempotentAndShared": schemasRegister,
		"Deletes":                     schemasDeletes,
		"ListSubjects":                schemasListSubjects,
		"Compatibility":               schemasCompatibility,
		"Validation":                  schemasValidation,
	})
}

var (
	schemaA = catalog.SchemaRecord{Format: "AVRO", Schema: `{"type":"string"}`}
	schemaB = catalog.SchemaRecord{Format: "AVRO", Schema: `{"type":"long"}`}
	// schemaC has a reference: the same text without it is another schema.
	schemaC = catalog.SchemaRecord{Format: "JSON", Schema: `{"$ref":"b.json"}`,
		References: []catalog.SchemaReference{{Name: "b.json", Subject: "refs", Version: 1}}}
)

func (e *env) register(subject string, r catalog.SchemaRecord, expectLatest int) catalog.SubjectVersion {
	e.t.Helper()
	v, err := e.b.RegisterSchema(e.ctx, subject, r, expectLatest)
	if err != nil {
		e.t.Fatalf("RegisterSchema(%q, %s, %d): %v", subject, r.Schema, expectLatest, err)
	}
	return v
}

func (e *env) versions(subject string, deleted bool) ([]string, int) {
	e.t.Helper()
	vs, err := e.b.ListSubjectVersions(e.ctx, subject, deleted)
	if err != nil {
		e.t.Fatalf("ListSubjectVersions(%q): %v", subject, err)
	}
	var out []string
	for _, v := range vs.Versions {
		s := fmt.Sprintf("v%d=%d", v.Version, v.SchemaID)
		if v.Deleted {
			s += " deleted"
		}
		if v.Subject != subject || !v.CreatedAt.Equal(Start) {
			e.t.Fatalf("version %+v: want subject %q, created at %v", v, subject, Start)
		}
		out = append(out, s)
	}
	return out, vs.Latest
}

// Versions count from 1 under a subject; registering a schema the subject
// has gives its version back; a stale expectLatest is a conflict; the same
// schema under another subject has the same id, and a schema with other
// references another id.
func schemasRegister(e *env) {
	a := e.register("orders-value", schemaA, 0)
	if a.Version != 1 || a.SchemaID < 1 || a.Subject != "orders-value" || !a.CreatedAt.Equal(Start) {
		e.t.Fatalf("first registration: %+v", a)
	}
	if again := e.register("orders-value", schemaA, 0); again != a {
		e.t.Fatalf("registering it again: %+v, want %+v", again, a)
	}
	_, err := e.b.RegisterSchema(e.ctx, "orders-value", schemaB, 0)
	wantErr(e.t, err, catalog.ErrVersionConflict, "a new schema with a stale expectLatest")
	b := e.register("orders-value", schemaB, 1)
	if b.Version != 2 || b.SchemaID == a.SchemaID {
		e.t.Fatalf("second schema: %+v (first %+v)", b, a)
	}
	other := e.register("payments-value", schemaA, 0)
	if other.Version != 1 || other.SchemaID != a.SchemaID {
		e.t.Fatalf("the first schema under another subject: %+v, want id %d", other, a.SchemaID)
	}
	c := e.register("orders-value", schemaC, 2)
	noRefs := schemaC
	noRefs.References = nil
	d := e.register("orders-value", noRefs, 3)
	if c.SchemaID == d.SchemaID || c.Version != 3 || d.Version != 4 {
		e.t.Fatalf("with and without references: %+v %+v", c, d)
	}
	for id, want := range map[int64]catalog.SchemaRecord{a.SchemaID: schemaA, b.SchemaID: schemaB, c.SchemaID: schemaC} {
		got, err := e.b.GetSchema(e.ctx, id)
		want.ID = id
		if err != nil || got.ID != id || got.Format != want.Format || got.Schema != want.Schema || !slices.Equal(got.References, want.References) {
			e.t.Fatalf("GetSchema(%d) = %+v, %v; want %+v", id, got, err, want)
		}
	}
	_, err = e.b.GetSchema(e.ctx, d.SchemaID+100)
	wantErr(e.t, err, catalog.ErrNotFound, "GetSchema of an id never given")
	if vs, latest := e.versions("orders-value", false); len(vs) != 4 || latest != 4 {
		e.t.Fatalf("versions %v, latest %d", vs, latest)
	}
	if vs, latest := e.versions("never-registered", true); len(vs) != 0 || latest != 0 {
		e.t.Fatalf("a subject never registered: %v, latest %d", vs, latest)
	}
}

// A version is deleted softly (hidden, its schema still found by id), then
// for good; a version number is never given twice, even after every
// version was deleted for good.
func schemasDeletes(e *env) {
	a := e.register("s", schemaA, 0)
	b := e.register("s", schemaB, 1)
	_, err := e.b.DeleteSubjectVersion(e.ctx, "s", 1, true)
	wantInvalid(e.t, err, "permanent", "deleting a live version for good")
	got, err := e.b.DeleteSubjectVersion(e.ctx, "s", 1, false)
	if err != nil || got != a {
		e.t.Fatalf("soft delete: %+v, %v; want %+v", got, err, a)
	}
	_, err = e.b.DeleteSubjectVersion(e.ctx, "s", 1, false)
	wantInvalid(e.t, err, "version", "deleting a version softly twice")
	_, err = e.b.DeleteSubjectVersion(e.ctx, "s", 7, false)
	wantErr(e.t, err, catalog.ErrNotFound, "deleting a version that does not exist")
	live, latest := e.versions("s", false)
	all, _ := e.versions("s", true)
	want := fmt.Sprintf("v2=%d", b.SchemaID)
	if !slices.Equal(live, []string{want}) || !slices.Equal(all, []string{fmt.Sprintf("v1=%d deleted", a.SchemaID), want}) || latest != 2 {
		e.t.Fatalf("after a soft delete: live %v, all %v, latest %d", live, all, latest)
	}
	if _, err := e.b.GetSchema(e.ctx, a.SchemaID); err != nil {
		e.t.Fatalf("a soft-deleted version's schema: %v", err)
	}
	// The deleted schema again: a new version, the same id.
	again := e.register("s", schemaA, 2)
	if again.Version != 3 || again.SchemaID != a.SchemaID {
		e.t.Fatalf("re-registered after a soft delete: %+v", again)
	}
	for _, v := range []int{2, 3} {
		if _, err := e.b.DeleteSubjectVersion(e.ctx, "s", v, false); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, v := range []int{1, 2, 3} {
		if _, err := e.b.DeleteSubjectVersion(e.ctx, "s", v, true); err != nil {
			e.t.Fatalf("delete version %d for good: %v", v, err)
		}
	}
	if all, latest := e.versions("s", true); len(all) != 0 || latest != 3 {
		e.t.Fatalf("after every version is gone: %v, latest %d (want 3: never reused)", all, latest)
	}
	if v := e.register("s", schemaB, 3); v.Version != 4 || v.SchemaID != b.SchemaID {
		e.t.Fatalf("a registration after everything was deleted: %+v", v)
	}
}

// Subjects are listed in name order, page by page: with a live version,
// or (deleted) with any version left.
func schemasListSubjects(e *env) {
	for _, s := range []string{"e", "b", "d", "a", "c"} {
		e.register(s, schemaA, 0)
	}
	if _, err := e.b.DeleteSubjectVersion(e.ctx, "c", 1, false); err != nil {
		e.t.Fatal(err)
	}
	e.register("f", schemaB, 0)
	if _, err := e.b.DeleteSubjectVersion(e.ctx, "f", 1, false); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.b.DeleteSubjectVersion(e.ctx, "f", 1, true); err != nil {
		e.t.Fatal(err)
	}
	for _, c := range []struct {
		deleted bool
		want    []string
	}{{false, []string{"a", "b", "d", "e"}}, {true, []string{"a", "b", "c", "d", "e"}}} {
		for _, size := range []int{1, 2, 0} {
			var got []string
			token := ""
			for calls := 0; ; calls++ {
				if calls > 10 {
					e.t.Fatal("ListSubjects does not end")
				}
				page, err := e.b.ListSubjects(e.ctx, c.deleted, token, size)
				if err != nil {
					e.t.Fatal(err)
				}
				if size > 0 && len(page.Items) > size {
					e.t.Fatalf("page of %d at size %d", len(page.Items), size)
				}
				got = append(got, page.Items...)
				if token = page.NextPageToken; token == "" {
					break
				}
			}
			if !slices.Equal(got, c.want) {
				e.t.Errorf("ListSubjects(deleted=%v, size %d) = %v, want %v", c.deleted, size, got, c.want)
			}
		}
	}
}

// Levels are set per subject and globally (""), read back, and removed.
func schemasCompatibility(e *env) {
	_, err := e.b.GetCompatibility(e.ctx, "")
	wantErr(e.t, err, catalog.ErrNotFound, "the global level before it is set")
	set := func(subject, level string) {
		e.t.Helper()
		if err := e.b.SetCompatibility(e.ctx, subject, level); err != nil {
			e.t.Fatalf("SetCompatibility(%q, %q): %v", subject, level, err)
		}
	}
	get := func(subject string) string {
		e.t.Helper()
		l, err := e.b.GetCompatibility(e.ctx, subject)
		if err != nil {
			e.t.Fatalf("GetCompatibility(%q): %v", subject, err)
		}
		return l
	}
	set("", "FULL")
	set("orders-value", "NONE")
	set("orders-value", "FORWARD_TRANSITIVE")
	if g, s := get(""), get("orders-value"); g != "FULL" || s != "FORWARD_TRANSITIVE" {
		e.t.Fatalf("levels: global %q, subject %q", g, s)
	}
	set("orders-value", "")
	_, err = e.b.GetCompatibility(e.ctx, "orders-value")
	wantErr(e.t, err, catalog.ErrNotFound, "a subject level after it was removed")
	if g := get(""); g != "FULL" {
		e.t.Fatalf("the global level after a subject's was removed: %q", g)
	}
	wantInvalid(e.t, e.b.SetCompatibility(e.ctx, "", "SIDEWAYS"), "compatibility", "an unknown level")
}

func schemasValidation(e *env) {
	long := make([]byte, catalog.MaxSchemaBytes+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, c := range []struct {
		subject string
		rec     catalog.SchemaRecord
		expect  int
		field   string
	}{
		{"", schemaA, 0, "subject"},
		{"has space", schemaA, 0, "subject"},
		{"s", catalog.SchemaRecord{Format: "XML", Schema: "<a/>"}, 0, "format"},
		{"s", catalog.SchemaRecord{Format: "AVRO"}, 0, "schema"},
		{"s", catalog.SchemaRecord{Format: "AVRO", Schema: string(long)}, 0, "schema"},
		{"s", catalog.SchemaRecord{Format: "AVRO", Schema: "{}", References: []catalog.SchemaReference{{Name: "x", Subject: "y", Version: 0}}}, 0, "references"},
		{"s", schemaA, -1, "expectLatest"},
	} {
		_, err := e.b.RegisterSchema(e.ctx, c.subject, c.rec, c.expect)
		wantInvalid(e.t, err, c.field, fmt.Sprintf("RegisterSchema(%q, %+v)", c.subject, c.rec.Format))
	}
	_, err := e.b.GetSchema(e.ctx, 0)
	wantInvalid(e.t, err, "id", "GetSchema(0)")
	_, err = e.b.DeleteSubjectVersion(e.ctx, "s", 0, false)
	wantInvalid(e.t, err, "version", "DeleteSubjectVersion(0)")
	if vs, _ := e.versions("s", true); len(vs) != 0 {
		e.t.Fatalf("refused registrations stored versions: %v", vs)
	}
}
