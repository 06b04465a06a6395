package registry

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	"github.com/sluicemq/sluice/pkg/schema"
)

// countingStore counts the reads of subjects' versions.
type countingStore struct {
	catalog.Schemas
	lists atomic.Int64
}

func (c *countingStore) ListSubjectVersions(ctx context.Context, subject string, deleted bool) (catalog.SubjectVersions, error) {
	c.lists.Add(1)
	return c.Schemas.ListSubjectVersions(ctx, subject, deleted)
}

// The validator's verdicts, and what each costs of the store: the ids of
// a subject are read once, again for an id not seen (once per request,
// not again for an id found unknown within MissInterval), and again after
// RefreshInterval, when a deleted version stops being accepted.
func TestValidator(t *testing.T) {
	ctx := context.Background()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	st := &countingStore{Schemas: cat}
	r, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	v := NewValidator(r, ValidatorConfig{Now: func() time.Time { return now }})
	v1 := register(t, r, "orders-value", rec1)
	other := register(t, r, "other-value", `"int"`)
	value := func(id int64, payload ...byte) []byte { return schema.AppendWire(nil, id, payload) }
	order := value(v1.ID, 6, 'a', 'b', 'c') // {"id": "abc"}

	reads := func(want int64, what string) {
		t.Helper()
		if got := st.lists.Swap(0); got != want {
			t.Fatalf("%s: %d reads of the subject's versions; want %d", what, got, want)
		}
	}
	invalid := func(err error, id int64, says, what string) {
		t.Helper()
		var inv *InvalidRecordError
		if !errors.As(err, &inv) || inv.SchemaID != id || inv.Subject != "orders-value" || !strings.Contains(inv.Reason, says) {
			t.Fatalf("%s: %v; want an InvalidRecordError for id %d saying %q", what, err, id, says)
		}
	}
	check := func(val []byte) error {
		_, err := v.Request().Check(ctx, "orders-value", val)
		return err
	}

	st.lists.Store(0) // registering read them
	if err := check(order); err != nil {
		t.Fatal(err)
	}
	reads(1, "first value")
	if err := check(order); err != nil {
		t.Fatal(err)
	}
	reads(0, "a value of a known id")
	invalid(check(value(v1.ID, 6, 'a')), v1.ID, "", "payload cut short")
	invalid(check([]byte{1, 0, 0, 0, 1}), 0, "magic byte", "wrong magic byte")
	reads(0, "values of a known id, and one with no id")

	// Unknown ids: one read per request, none for an id missed lately.
	rc := v.Request()
	_, err = rc.Check(ctx, "orders-value", value(other.ID, 2))
	invalid(err, other.ID, "not one of the subject's live versions", "another subject's id")
	_, err = rc.Check(ctx, "orders-value", value(9999, 2))
	invalid(err, 9999, "not one of", "an id nobody has, in the same request")
	reads(1, "two unknown ids in one request")
	invalid(check(value(other.ID, 2)), other.ID, "not one of", "the same unknown id, next request")
	reads(0, "an id found unknown within MissInterval")
	now = now.Add(time.Second)
	invalid(check(value(other.ID, 2)), other.ID, "not one of", "the same unknown id, a second later")
	reads(1, "an id found unknown MissInterval ago")

	// A version registered now is accepted at once.
	v2 := register(t, r, "orders-value", rec2)
	st.lists.Store(0)
	if err := check(value(v2.ID, 6, 'a', 'b', 'c', 4)); err != nil {
		t.Fatalf("version 2, registered just now: %v", err)
	}
	reads(1, "a new version's id")

	// A version deleted is refused once the ids are read again.
	if _, err := r.DeleteVersion(ctx, "orders-value", 1, false); err != nil {
		t.Fatal(err)
	}
	st.lists.Store(0)
	if err := check(order); err != nil {
		t.Fatalf("within RefreshInterval of the delete: %v", err)
	}
	now = now.Add(time.Minute)
	invalid(check(order), v1.ID, "not one of the subject's live versions", "a deleted version, after RefreshInterval")
	reads(1, "after RefreshInterval")

	// A subject with no version says so.
	_, err = v.Request().Check(ctx, "nobody-value", order)
	var inv *InvalidRecordError
	if !errors.As(err, &inv) || !strings.Contains(inv.Reason, "no live schema versions") {
		t.Fatalf("a subject with no versions: %v", err)
	}
}

// BenchmarkRequestCheck is the cost of checking one valid value of a
// request (a 1 KiB Avro bytes datum): the id's membership, the compiled
// schema, the walk.
func BenchmarkRequestCheck(b *testing.B) {
	ctx := context.Background()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cat.Close() })
	r, err := New(Config{Store: cat})
	if err != nil {
		b.Fatal(err)
	}
	v, err := r.Register(ctx, "p-value", Input{Schema: `{"type":"record","name":"P","fields":[{"name":"data","type":"bytes"}]}`})
	if err != nil {
		b.Fatal(err)
	}
	payload := append([]byte{0xf2, 0x0f}, make([]byte, 1017)...) // length 1017, zigzag
	value := schema.AppendWire(nil, v.ID, payload)
	val := NewValidator(r, ValidatorConfig{})
	rc := val.Request()
	if _, err := rc.Check(ctx, "p-value", value); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := rc.Check(ctx, "p-value", value); err != nil {
			b.Fatal(err)
		}
	}
}
