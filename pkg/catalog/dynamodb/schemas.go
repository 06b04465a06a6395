package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// The schema registry's items (catalog.Schemas):
//
//	counters / schema-id              the last schema id given (ADD)
//	schema-fp#<fingerprint> / fp      the id of the schema with that fingerprint
//	schema#<id, 20 digits> / schema   a schema: format, text, references
//	subjects / <subject>              a subject's head: latest, live, total; CAS version
//	subject#<subject> / v#<10 digits> a version: schema id, deleted, created
//	schema-config / <subject>         a compatibility level ("#global": the global one)
//
// The heads share one item collection, so ListSubjects is one query; a
// subject's versions are another, read whole (at most MaxSchemaVersions).
// A registration writes the head (conditioned on the version read), the
// version and, for a schema new to the registry, the fingerprint and the
// schema (conditioned on absence) in one transaction.
const (
	pkSubjects     = "subjects"
	pkSchemaConfig = "schema-config"
	skSchemaID     = "schema-id"
	skGlobalCompat = "#global"
)

func fingerprintPK(fp string) string { return "schema-fp#" + fp }
func schemaPK(id int64) string       { return fmt.Sprintf("schema#%020d", id) }
func versionsPK(subject string) string {
	return "subject#" + subject
}
func versionSK(v int) string { return fmt.Sprintf("v#%010d", v) }

func compatSK(subject string) string {
	if subject == "" {
		return skGlobalCompat
	}
	return subject
}

// errSchemaRace: another registration stored the same schema first; read
// its id and go on.
var errSchemaRace = errors.New("the schema was registered concurrently")

// subjectHead is a subject's head item.
type subjectHead struct {
	latest, live, total int
	version             int64 // 0: no item
}

func headItem(subject string, h subjectHead) map[string]av {
	it := item(pkSubjects, subject)
	it["latest"], it["live"], it["total"] = n(int64(h.latest)), n(int64(h.live)), n(int64(h.total))
	it[attrVersion] = n(h.version)
	return it
}

func decodeHead(it map[string]av) (subjectHead, error) {
	r := read(it)
	h := subjectHead{latest: int(r.num("latest")), live: int(r.num("live")), total: int(r.num("total")), version: r.num(attrVersion)}
	if err := r.err(); err != nil {
		return subjectHead{}, err
	}
	if h.version < 1 || h.live < 0 || h.total < h.live || h.latest < h.total {
		return subjectHead{}, fmt.Errorf("%w: subject head %s: %+v", ErrCorrupt, keyString(it, attrSK), h)
	}
	return h, nil
}

func versionItem(v catalog.SubjectVersion) map[string]av {
	it := item(versionsPK(v.Subject), versionSK(v.Version))
	it["ver"], it["sid"], it["created"] = n(int64(v.Version)), n(v.SchemaID), n(ms(v.CreatedAt))
	if v.Deleted {
		it["del"] = b(true)
	}
	return it
}

func decodeVersion(subject string, it map[string]av) (catalog.SubjectVersion, error) {
	r := read(it)
	v := catalog.SubjectVersion{Subject: subject, Version: int(r.num("ver")), SchemaID: r.num("sid"),
		Deleted: r.optBool("del"), CreatedAt: fromMs(r.num("created"))}
	if err := r.err(); err != nil {
		return catalog.SubjectVersion{}, err
	}
	if v.Version < 1 || v.SchemaID < 1 || keyString(it, attrSK) != versionSK(v.Version) {
		return catalog.SubjectVersion{}, fmt.Errorf("%w: version item %s/%s: %+v", ErrCorrupt, versionsPK(subject), keyString(it, attrSK), v)
	}
	return v, nil
}

func schemaItem(rec catalog.SchemaRecord) map[string]av {
	it := item(schemaPK(rec.ID), "schema")
	it["id"], it["fmt"], it["text"] = n(rec.ID), s(rec.Format), s(rec.Schema)
	if len(rec.References) > 0 {
		refs := make([]av, len(rec.References))
		for i, ref := range rec.References {
			refs[i] = &types.AttributeValueMemberM{Value: map[string]av{"name": s(ref.Name), "subject": s(ref.Subject), "ver": n(int64(ref.Version))}}
		}
		it["refs"] = &types.AttributeValueMemberL{Value: refs}
	}
	return it
}

func decodeSchema(id int64, it map[string]av) (catalog.SchemaRecord, error) {
	r := read(it)
	rec := catalog.SchemaRecord{ID: r.num("id"), Format: r.str("fmt"), Schema: r.str("text")}
	if _, ok := it["refs"]; ok {
		for _, e := range r.list("refs", catalog.MaxSchemaReferences) {
			sub := r.sub("refs", e)
			rec.References = append(rec.References, catalog.SchemaReference{Name: sub.str("name"), Subject: sub.str("subject"), Version: int(sub.num("ver"))})
			r.adopt("refs", sub)
		}
	}
	if err := r.err(); err != nil {
		return catalog.SchemaRecord{}, err
	}
	if rec.ID != id || catalog.ValidateSchemaRecord(rec) != nil {
		return catalog.SchemaRecord{}, fmt.Errorf("%w: schema item %s holds id %d, format %q", ErrCorrupt, schemaPK(id), rec.ID, rec.Format)
	}
	return rec, nil
}

// nextSchemaID allocates a schema id as nextLedgerID does a ledger id.
func (c *store) nextSchemaID(ctx context.Context) (int64, error) {
	out, err := c.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(pkCounters, skSchemaID),
		UpdateExpression:          aws.String("ADD #last :one SET #fv = :fv"),
		ExpressionAttributeNames:  map[string]string{"#last": "last", "#fv": attrFormat},
		ExpressionAttributeValues: map[string]av{":one": n(1), ":fv": n(formatVersion)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("allocate a schema id: %w", err)
	}
	r := &reader{item: out.Attributes}
	id := r.num("last")
	return id, r.err()
}

// subjectVersions reads a subject's head and versions (soft-deleted ones
// only if deleted).
func (c *store) subjectVersions(ctx context.Context, subject string, deleted bool) (catalog.SubjectVersions, subjectHead, error) {
	var h subjectHead
	it, err := c.get(ctx, pkSubjects, subject)
	if err != nil {
		return catalog.SubjectVersions{}, h, err
	}
	if it != nil {
		if h, err = decodeHead(it); err != nil {
			return catalog.SubjectVersions{}, h, err
		}
	}
	vs := catalog.SubjectVersions{Latest: h.latest}
	items, err := c.queryAll(ctx, versionsPK(subject), catalog.MaxSchemaVersions)
	if err != nil {
		return catalog.SubjectVersions{}, h, err
	}
	for _, it := range items {
		v, err := decodeVersion(subject, it)
		if err != nil {
			return catalog.SubjectVersions{}, h, err
		}
		if v.Version > h.latest {
			return catalog.SubjectVersions{}, h, fmt.Errorf("%w: subject %q has version %d past its latest %d", ErrCorrupt, subject, v.Version, h.latest)
		}
		if deleted || !v.Deleted {
			vs.Versions = append(vs.Versions, v)
		}
	}
	return vs, h, nil
}

// RegisterSchema implements catalog.Schemas (see the layout above). A lost
// race on the head is decided again from a fresh read: NextSubjectVersion
// then refuses if Latest moved.
func (c *store) RegisterSchema(ctx context.Context, subject string, rec catalog.SchemaRecord, expectLatest int) (catalog.SubjectVersion, error) {
	for range casAttempts {
		v, err := c.registerSchema(ctx, subject, rec, expectLatest)
		if errors.Is(err, errSchemaRace) || (errors.Is(err, catalog.ErrVersionConflict) && !errors.Is(err, errLatestMoved)) {
			continue
		}
		if err != nil {
			return catalog.SubjectVersion{}, fmt.Errorf("register a schema under %q: %w", subject, err)
		}
		return v, nil
	}
	return catalog.SubjectVersion{}, fmt.Errorf("register a schema under %q: %d attempts lost a race: %w", subject, casAttempts, catalog.ErrVersionConflict)
}

// errLatestMoved marks the conflict the caller must see (expectLatest is
// stale), as opposed to a lost race retried here.
var errLatestMoved = errors.New("latest moved")

func (c *store) registerSchema(ctx context.Context, subject string, rec catalog.SchemaRecord, expectLatest int) (catalog.SubjectVersion, error) {
	fp := rec.Fingerprint()
	it, err := c.get(ctx, fingerprintPK(fp), "fp")
	if err != nil {
		return catalog.SubjectVersion{}, err
	}
	var id int64
	newSchema := it == nil
	if newSchema {
		if id, err = c.nextSchemaID(ctx); err != nil {
			return catalog.SubjectVersion{}, err
		}
	} else {
		r := read(it)
		if id = r.num("id"); r.err() != nil || id < 1 {
			return catalog.SubjectVersion{}, fmt.Errorf("%w: fingerprint item %s: id %d %v", ErrCorrupt, fingerprintPK(fp), id, r.err())
		}
	}
	vs, h, err := c.subjectVersions(ctx, subject, true)
	if err != nil {
		return catalog.SubjectVersion{}, err
	}
	existing, next, err := catalog.NextSubjectVersion(vs, id, expectLatest)
	if errors.Is(err, catalog.ErrVersionConflict) {
		return catalog.SubjectVersion{}, fmt.Errorf("%w: %w", errLatestMoved, err)
	}
	if err != nil {
		return catalog.SubjectVersion{}, err
	}
	if existing != nil {
		return *existing, nil
	}
	v := catalog.SubjectVersion{Subject: subject, Version: next, SchemaID: id, CreatedAt: c.now()}
	headCond := notExists
	if h.version > 0 {
		headCond = versionIs(h.version)
	}
	ops := []txOp{
		c.txPut(headItem(subject, subjectHead{latest: next, live: h.live + 1, total: h.total + 1, version: h.version + 1}), headCond, catalog.ErrVersionConflict),
		c.txPut(versionItem(v), notExists, catalog.ErrVersionConflict),
	}
	if newSchema {
		rec.ID = id
		fpItem := item(fingerprintPK(fp), "fp")
		fpItem["id"] = n(id)
		reused := fmt.Errorf("%w: schema id %d allocated twice", ErrCorrupt, id)
		ops = append(ops, c.txPut(fpItem, notExists, errSchemaRace), c.txPut(schemaItem(rec), notExists, reused))
	}
	if err := c.transact(ctx, ops); err != nil {
		return catalog.SubjectVersion{}, err
	}
	return v, nil
}

// GetSchema implements catalog.Schemas.
func (c *store) GetSchema(ctx context.Context, id int64) (catalog.SchemaRecord, error) {
	it, err := c.get(ctx, schemaPK(id), "schema")
	if err == nil && it == nil {
		err = catalog.ErrNotFound
	}
	var rec catalog.SchemaRecord
	if err == nil {
		rec, err = decodeSchema(id, it)
	}
	if err != nil {
		return catalog.SchemaRecord{}, fmt.Errorf("get schema %d: %w", id, err)
	}
	return rec, nil
}

// ListSubjectVersions implements catalog.Schemas.
func (c *store) ListSubjectVersions(ctx context.Context, subject string, deleted bool) (catalog.SubjectVersions, error) {
	vs, _, err := c.subjectVersions(ctx, subject, deleted)
	if err != nil {
		return catalog.SubjectVersions{}, fmt.Errorf("list the versions of %q: %w", subject, err)
	}
	return vs, nil
}

// ListSubjects implements catalog.Schemas: a page of the heads, keeping
// those with a live version (any, if deleted); a page may come short.
func (c *store) ListSubjects(ctx context.Context, deleted bool, pageToken string, limit int) (catalog.Page[string], error) {
	items, next, err := c.queryPage(ctx, pkSubjects, pageToken, limit)
	if err != nil {
		return catalog.Page[string]{}, fmt.Errorf("list subjects: %w", err)
	}
	page := catalog.Page[string]{NextPageToken: next}
	for _, it := range items {
		h, err := decodeHead(it)
		if err != nil {
			return catalog.Page[string]{}, fmt.Errorf("list subjects: %w", err)
		}
		if h.live > 0 || (deleted && h.total > 0) {
			page.Items = append(page.Items, keyString(it, attrSK))
		}
	}
	return page, nil
}

// DeleteSubjectVersion implements catalog.Schemas: the version and the
// head change in one transaction, conditioned on the head read.
func (c *store) DeleteSubjectVersion(ctx context.Context, subject string, version int, permanent bool) (catalog.SubjectVersion, error) {
	for range casAttempts {
		vs, h, err := c.subjectVersions(ctx, subject, true)
		if err != nil {
			return catalog.SubjectVersion{}, fmt.Errorf("delete %q version %d: %w", subject, version, err)
		}
		i := slices.IndexFunc(vs.Versions, func(v catalog.SubjectVersion) bool { return v.Version == version })
		if i < 0 {
			return catalog.SubjectVersion{}, fmt.Errorf("delete %q version %d: %w", subject, version, catalog.ErrNotFound)
		}
		old := vs.Versions[i]
		if err := catalog.CheckVersionDelete(old, permanent); err != nil {
			return catalog.SubjectVersion{}, err
		}
		next := h
		next.version++
		var op txOp
		if permanent {
			next.total--
			op = c.txDelete(versionsPK(subject), versionSK(version), &exists, catalog.ErrVersionConflict)
		} else {
			next.live--
			del := old
			del.Deleted = true
			op = c.txPut(versionItem(del), exists, catalog.ErrVersionConflict)
		}
		err = c.transact(ctx, []txOp{c.txPut(headItem(subject, next), versionIs(h.version), catalog.ErrVersionConflict), op})
		if errors.Is(err, catalog.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return catalog.SubjectVersion{}, fmt.Errorf("delete %q version %d: %w", subject, version, err)
		}
		return old, nil
	}
	return catalog.SubjectVersion{}, fmt.Errorf("delete %q version %d: %d attempts lost a race: %w", subject, version, casAttempts, catalog.ErrVersionConflict)
}

// GetCompatibility implements catalog.Schemas.
func (c *store) GetCompatibility(ctx context.Context, subject string) (string, error) {
	it, err := c.get(ctx, pkSchemaConfig, compatSK(subject))
	if err == nil && it == nil {
		err = catalog.ErrNotFound
	}
	var level string
	if err == nil {
		r := read(it)
		level = r.str("level")
		if err = r.err(); err == nil && catalog.ValidateCompatibilityLevel(level) != nil {
			err = fmt.Errorf("%w: compatibility item %s: level %q", ErrCorrupt, compatSK(subject), level)
		}
	}
	if err != nil {
		return "", fmt.Errorf("get the compatibility of %q: %w", subject, err)
	}
	return level, nil
}

// SetCompatibility implements catalog.Schemas.
func (c *store) SetCompatibility(ctx context.Context, subject, level string) error {
	var err error
	if level == "" {
		_, err = c.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &c.table, Key: key(pkSchemaConfig, compatSK(subject))})
	} else {
		it := item(pkSchemaConfig, compatSK(subject))
		it["level"] = s(level)
		_, err = c.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &c.table, Item: it})
	}
	if err != nil {
		return fmt.Errorf("set the compatibility of %q: %w", subject, err)
	}
	return nil
}
