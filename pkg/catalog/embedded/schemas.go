package embedded

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// The schema registry's records (catalog.Schemas). Keys:
//
//	sr/c                          the last schema id given (counterRec)
//	sr/fp/<fingerprint>           the id of the schema with that fingerprint (schemaIDRec)
//	sr/id/<id, 8 bytes>           a schema (schemaRec)
//	sr/s/<subject>                a subject's head: Latest and version counts (subjectRec)
//	sr/v/<subject> 0x00 <version> a version (versionRec)
//	sr/cfg 0x00 <subject>         a compatibility level ("" subject: global)
//
// A subject is printable, so the 0x00 after it ends it: one subject's
// versions never share a prefix with another's.

var (
	schemaCounterKey = []byte("sr/c")
	subjectPrefix    = []byte("sr/s/")
)

func fingerprintKey(fp string) []byte     { return cat([]byte("sr/fp/"), []byte(fp)) }
func schemaKey(id int64) []byte           { return cat([]byte("sr/id/"), u64(id)) }
func subjectKey(subject string) []byte    { return cat(subjectPrefix, []byte(subject)) }
func versionPrefix(subject string) []byte { return cat([]byte("sr/v/"), []byte(subject), []byte{0}) }
func versionKey(subject string, v int) []byte {
	return cat(versionPrefix(subject), u32(v))
}
func compatKey(subject string) []byte { return cat([]byte("sr/cfg"), []byte{0}, []byte(subject)) }

type schemaIDRec struct {
	ID int64 `json:"id"`
}

type schemaRefRec struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

type schemaRec struct {
	ID     int64          `json:"id"`
	Format string         `json:"format"`
	Schema string         `json:"schema"`
	Refs   []schemaRefRec `json:"refs,omitempty"`
}

type subjectRec struct {
	Latest int `json:"latest"`
	Live   int `json:"live"`  // versions not deleted
	Total  int `json:"total"` // versions stored, soft-deleted included
}

type versionRec struct {
	Version   int   `json:"version"`
	SchemaID  int64 `json:"schemaId"`
	Deleted   bool  `json:"deleted,omitempty"`
	CreatedMs int64 `json:"createdMs"`
}

type compatRec struct {
	Level string `json:"level"`
}

// RegisterSchema implements catalog.Schemas: under the write lock, the
// schema's id (found by fingerprint, or the next one), then the subject's
// versions decide (catalog.NextSubjectVersion), and one batch writes
// whatever is new.
func (c *store) RegisterSchema(_ context.Context, subject string, rec catalog.SchemaRecord, expectLatest int) (catalog.SubjectVersion, error) {
	var out catalog.SubjectVersion
	err := c.write(func() error {
		fp := rec.Fingerprint()
		var idr schemaIDRec
		found, err := c.get(fingerprintKey(fp), &idr)
		if err != nil {
			return err
		}
		id, newSchema := idr.ID, !found
		if newSchema {
			var ctr counterRec
			if _, err := c.get(schemaCounterKey, &ctr); err != nil {
				return err
			}
			ctr.Last++
			id = ctr.Last
		}
		vs, head, err := c.subjectVersions(subject, true)
		if err != nil {
			return err
		}
		existing, next, err := catalog.NextSubjectVersion(vs, id, expectLatest)
		if err != nil {
			return err
		}
		if existing != nil {
			out = *existing
			return nil
		}
		b := c.db.NewBatch()
		if newSchema {
			set(b, schemaCounterKey, counterRec{Last: id})
			set(b, fingerprintKey(fp), schemaIDRec{ID: id})
			r := schemaRec{ID: id, Format: rec.Format, Schema: rec.Schema}
			for _, ref := range rec.References {
				r.Refs = append(r.Refs, schemaRefRec(ref))
			}
			set(b, schemaKey(id), r)
		}
		out = catalog.SubjectVersion{Subject: subject, Version: next, SchemaID: id, CreatedAt: c.now()}
		set(b, versionKey(subject, next), versionRec{Version: next, SchemaID: id, CreatedMs: ms(out.CreatedAt)})
		head.Latest, head.Live, head.Total = next, head.Live+1, head.Total+1
		set(b, subjectKey(subject), head)
		return c.commit(b)
	})
	if err != nil {
		return catalog.SubjectVersion{}, fmt.Errorf("register a schema under %q: %w", subject, err)
	}
	return out, nil
}

// subjectVersions reads a subject's head and versions; callers hold the
// lock.
func (c *store) subjectVersions(subject string, deleted bool) (catalog.SubjectVersions, subjectRec, error) {
	var head subjectRec
	if _, err := c.get(subjectKey(subject), &head); err != nil {
		return catalog.SubjectVersions{}, head, err
	}
	vs := catalog.SubjectVersions{Latest: head.Latest}
	_, err := c.scan(versionPrefix(subject), "", catalog.MaxSchemaVersions+1, func(k, v []byte) error {
		var r versionRec
		if err := decodeValue(k, v, &r); err != nil {
			return err
		}
		if r.Version < 1 || r.Version > head.Latest || r.SchemaID < 1 {
			return corrupt(k, fmt.Errorf("version %d (latest %d), schema id %d", r.Version, head.Latest, r.SchemaID))
		}
		if deleted || !r.Deleted {
			vs.Versions = append(vs.Versions, catalog.SubjectVersion{Subject: subject, Version: r.Version, SchemaID: r.SchemaID,
				Deleted: r.Deleted, CreatedAt: fromMs(r.CreatedMs)})
		}
		return nil
	})
	return vs, head, err
}

// GetSchema implements catalog.Schemas.
func (c *store) GetSchema(_ context.Context, id int64) (catalog.SchemaRecord, error) {
	var out catalog.SchemaRecord
	err := c.read(func() error {
		var r schemaRec
		found, err := c.get(schemaKey(id), &r)
		if err != nil {
			return err
		}
		if !found {
			return catalog.ErrNotFound
		}
		out = catalog.SchemaRecord{ID: r.ID, Format: r.Format, Schema: r.Schema}
		for _, ref := range r.Refs {
			out.References = append(out.References, catalog.SchemaReference(ref))
		}
		if r.ID != id || catalog.ValidateSchemaRecord(out) != nil {
			return corrupt(schemaKey(id), fmt.Errorf("schema %d holds id %d, format %q", id, r.ID, r.Format))
		}
		return nil
	})
	if err != nil {
		return catalog.SchemaRecord{}, fmt.Errorf("get schema %d: %w", id, err)
	}
	return out, nil
}

// ListSubjectVersions implements catalog.Schemas.
func (c *store) ListSubjectVersions(_ context.Context, subject string, deleted bool) (catalog.SubjectVersions, error) {
	var vs catalog.SubjectVersions
	err := c.read(func() (err error) { vs, _, err = c.subjectVersions(subject, deleted); return err })
	if err != nil {
		return catalog.SubjectVersions{}, fmt.Errorf("list the versions of %q: %w", subject, err)
	}
	return vs, nil
}

// ListSubjects implements catalog.Schemas: a scan of the subject heads,
// keeping those with a live version (any version, if deleted); a page
// may come short of limit.
func (c *store) ListSubjects(_ context.Context, deleted bool, pageToken string, limit int) (catalog.Page[string], error) {
	var page catalog.Page[string]
	err := c.read(func() (err error) {
		page.NextPageToken, err = c.scan(subjectPrefix, pageToken, limit, func(k, v []byte) error {
			var r subjectRec
			if err := decodeValue(k, v, &r); err != nil {
				return err
			}
			if r.Live > 0 || (deleted && r.Total > 0) {
				page.Items = append(page.Items, string(k[len(subjectPrefix):]))
			}
			return nil
		})
		return err
	})
	if err != nil {
		return catalog.Page[string]{}, fmt.Errorf("list subjects: %w", err)
	}
	return page, nil
}

// DeleteSubjectVersion implements catalog.Schemas.
func (c *store) DeleteSubjectVersion(_ context.Context, subject string, version int, permanent bool) (catalog.SubjectVersion, error) {
	var out catalog.SubjectVersion
	err := c.write(func() error {
		vs, head, err := c.subjectVersions(subject, true)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(vs.Versions, func(v catalog.SubjectVersion) bool { return v.Version == version })
		if i < 0 {
			return catalog.ErrNotFound
		}
		out = vs.Versions[i]
		if err := catalog.CheckVersionDelete(out, permanent); err != nil {
			return err
		}
		b := c.db.NewBatch()
		if permanent {
			_ = b.Delete(versionKey(subject, version), nil)
			head.Total--
		} else {
			set(b, versionKey(subject, version), versionRec{Version: version, SchemaID: out.SchemaID, Deleted: true, CreatedMs: ms(out.CreatedAt)})
			head.Live--
		}
		set(b, subjectKey(subject), head)
		return c.commit(b)
	})
	if err != nil {
		return catalog.SubjectVersion{}, fmt.Errorf("delete %q version %d: %w", subject, version, err)
	}
	return out, nil
}

// GetCompatibility implements catalog.Schemas.
func (c *store) GetCompatibility(_ context.Context, subject string) (string, error) {
	var r compatRec
	err := c.read(func() error {
		found, err := c.get(compatKey(subject), &r)
		if err == nil && !found {
			err = catalog.ErrNotFound
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("get the compatibility of %q: %w", subject, err)
	}
	return r.Level, nil
}

// SetCompatibility implements catalog.Schemas.
func (c *store) SetCompatibility(_ context.Context, subject, level string) error {
	err := c.write(func() error {
		b := c.db.NewBatch()
		if level == "" {
			_ = b.Delete(compatKey(subject), nil)
		} else {
			set(b, compatKey(subject), compatRec{Level: level})
		}
		return c.commit(b)
	})
	if err != nil {
		return fmt.Errorf("set the compatibility of %q: %w", subject, err)
	}
	return nil
}
