// Package registry is Sluice's schema registry (issue 25, docs/DESIGN.md
// §2.11): Confluent Schema Registry's model — subjects with versions of
// schemas under global ids, compatibility levels per subject and globally,
// soft then permanent deletes — over the catalog's store
// (catalog.Schemas), with pkg/schema deciding what schemas mean. The
// service (services/registry) serves it over Connect and Confluent's REST
// paths; the ingest service compiles schemas through it to validate
// records (Compiled).
//
// Errors are *Error with Confluent's error codes, so the REST facade
// answers as Confluent does and the Connect service maps them to codes.
package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/schema"
)

// Error is a registry error with Confluent Schema Registry's error code
// (and the HTTP status its REST API answers with).
type Error struct {
	Code    int // 40401, 409, 42201, ...
	Message string
	Err     error // the cause, if any
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus is the status Confluent's REST API answers Code with.
func (e *Error) HTTPStatus() int {
	switch {
	case e.Code == 409:
		return 409
	case e.Code >= 40400 && e.Code < 40500:
		return 404
	case e.Code >= 42200 && e.Code < 42300:
		return 422
	case e.Code >= 40000 && e.Code < 40100:
		return 400
	}
	return 500
}

// Confluent's error codes.
const (
	CodeSubjectNotFound       = 40401
	CodeVersionNotFound       = 40402
	CodeSchemaNotFound        = 40403
	CodeSubjectSoftDeleted    = 40404
	CodeSubjectNotSoftDeleted = 40405
	CodeVersionNotSoftDeleted = 40407
	CodeCompatibilityNotSet   = 40408
	CodeIncompatibleSchema    = 409
	CodeInvalidSchema         = 42201
	CodeInvalidVersion        = 42202
	CodeInvalidCompatibility  = 42203
	CodeBackendError          = 50001
	CodeBadRequest            = 40002 // malformed in another way (a name the store refuses)
)

const (
	defaultCompiledCacheSize   = 1024
	maxRegistrationAttempts    = 5
	latestVersion              = -1
	defaultCompatibilityLevel  = schema.Backward
	maxReferenceDepth          = 16
	maxListedSubjectsPageCalls = 1000
)

// LatestVersion stands for a subject's latest version.
const LatestVersion = latestVersion

func errorf(code int, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}

// backend maps a store error that no rule here explains.
func backend(err error) *Error {
	var ve *catalog.ValidationError
	if errors.As(err, &ve) {
		return errorf(CodeBadRequest, err, "%v", err)
	}
	return errorf(CodeBackendError, err, "the registry's store failed: %v", err)
}

// Config configures New.
type Config struct {
	Store  catalog.Schemas
	Limits schema.Limits // zero: schema.DefaultLimits
	// CompiledCacheSize bounds the compiled schemas kept (by id); zero:
	// 1024.
	CompiledCacheSize int
}

// Registry is the registry. Safe for concurrent use.
type Registry struct {
	st  catalog.Schemas
	lim schema.Limits

	// mu guards compiled and records. Leaf lock.
	mu       sync.Mutex
	compiled map[int64]schema.Schema        // bounded by maxCompiled
	records  map[int64]catalog.SchemaRecord // schemas are immutable: cached as read
	max      int
}

// New returns a registry over cfg.Store.
func New(cfg Config) (*Registry, error) {
	if cfg.Store == nil {
		return nil, errors.New("schema registry: Store is required")
	}
	if cfg.Limits == (schema.Limits{}) {
		cfg.Limits = schema.DefaultLimits
	}
	// A schema the store cannot keep is refused before it is parsed, as an
	// invalid schema (42201) naming the bound.
	cfg.Limits.MaxSchemaBytes = min(cfg.Limits.MaxSchemaBytes, catalog.MaxSchemaBytes)
	if cfg.CompiledCacheSize == 0 {
		cfg.CompiledCacheSize = defaultCompiledCacheSize
	}
	return &Registry{st: cfg.Store, lim: cfg.Limits, compiled: map[int64]schema.Schema{},
		records: map[int64]catalog.SchemaRecord{}, max: cfg.CompiledCacheSize}, nil
}

// Input is a schema as a client registers or looks it up.
type Input struct {
	Type       string // schemaType: "" (Avro), AVRO, PROTOBUF, JSON
	Schema     string
	References []catalog.SchemaReference
}

// Version is a subject version with its schema.
type Version struct {
	Subject    string
	Version    int
	ID         int64
	Type       string
	Schema     string
	References []catalog.SchemaReference
	Deleted    bool
}

// record reads a schema by id, cached (a schema never changes).
func (r *Registry) record(ctx context.Context, id int64) (catalog.SchemaRecord, error) {
	r.mu.Lock()
	rec, ok := r.records[id]
	r.mu.Unlock()
	if ok {
		return rec, nil
	}
	rec, err := r.st.GetSchema(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return catalog.SchemaRecord{}, errorf(CodeSchemaNotFound, err, "Schema %d not found", id)
	}
	if err != nil {
		return catalog.SchemaRecord{}, backend(err)
	}
	r.mu.Lock()
	if len(r.records) >= r.max {
		clear(r.records)
	}
	r.records[id] = rec
	r.mu.Unlock()
	return rec, nil
}

// resolve reads the schemas refs name, depth first, for schema.Parse.
func (r *Registry) resolve(ctx context.Context, refs []catalog.SchemaReference, depth int) ([]schema.Resolved, error) {
	if depth > maxReferenceDepth {
		return nil, errorf(CodeInvalidSchema, nil, "references nest deeper than %d", maxReferenceDepth)
	}
	var out []schema.Resolved
	for _, ref := range refs {
		v, err := r.Version(ctx, ref.Subject, ref.Version, true)
		if err != nil {
			return nil, errorf(CodeInvalidSchema, err, "reference %q (subject %q version %d): %v", ref.Name, ref.Subject, ref.Version, err)
		}
		sub, err := r.resolve(ctx, v.References, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, schema.Resolved{Name: ref.Name, Schema: v.Schema, Refs: sub})
	}
	return out, nil
}

// parse parses in (its references resolved) and returns it with the
// record the store keeps: the normalized text.
func (r *Registry) parse(ctx context.Context, in Input) (schema.Schema, catalog.SchemaRecord, error) {
	f, err := schema.ParseFormat(in.Type)
	if err != nil {
		return nil, catalog.SchemaRecord{}, errorf(CodeInvalidSchema, err, "%v", err)
	}
	if len(in.References) > catalog.MaxSchemaReferences {
		return nil, catalog.SchemaRecord{}, errorf(CodeInvalidSchema, nil, "%d references, at most %d", len(in.References), catalog.MaxSchemaReferences)
	}
	refs, err := r.resolve(ctx, in.References, 0)
	if err != nil {
		return nil, catalog.SchemaRecord{}, err
	}
	s, err := schema.Parse(f, in.Schema, refs, r.lim)
	if err != nil {
		return nil, catalog.SchemaRecord{}, errorf(CodeInvalidSchema, err, "Invalid schema: %v", err)
	}
	return s, catalog.SchemaRecord{Format: string(f), Schema: s.Normalized(), References: in.References}, nil
}

// Compiled returns schema id parsed, for validation (cached, bounded).
func (r *Registry) Compiled(ctx context.Context, id int64) (schema.Schema, error) {
	r.mu.Lock()
	s, ok := r.compiled[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	rec, err := r.record(ctx, id)
	if err != nil {
		return nil, err
	}
	refs, err := r.resolve(ctx, rec.References, 0)
	if err != nil {
		return nil, err
	}
	s, err = schema.Parse(schema.Format(rec.Format), rec.Schema, refs, r.lim)
	if err != nil {
		return nil, errorf(CodeInvalidSchema, err, "stored schema %d does not parse: %v", id, err)
	}
	r.mu.Lock()
	if len(r.compiled) >= r.max {
		clear(r.compiled) // rare: more schemas in use than the bound
	}
	r.compiled[id] = s
	r.mu.Unlock()
	return s, nil
}

// Compatibility returns the level that applies to subject: its own, else
// the global one, else BACKWARD.
func (r *Registry) Compatibility(ctx context.Context, subject string) (schema.Compatibility, error) {
	scopes := []string{subject, ""}
	if subject == "" {
		scopes = scopes[1:]
	}
	for _, s := range scopes {
		l, err := r.st.GetCompatibility(ctx, s)
		if err == nil {
			return schema.Compatibility(l), nil
		}
		if !errors.Is(err, catalog.ErrNotFound) {
			return "", backend(err)
		}
	}
	return defaultCompatibilityLevel, nil
}

// ConfiguredCompatibility returns the level set for subject ("": global);
// unset is CodeCompatibilityNotSet for a subject and BACKWARD globally.
func (r *Registry) ConfiguredCompatibility(ctx context.Context, subject string) (schema.Compatibility, error) {
	l, err := r.st.GetCompatibility(ctx, subject)
	switch {
	case err == nil:
		return schema.Compatibility(l), nil
	case errors.Is(err, catalog.ErrNotFound) && subject == "":
		return defaultCompatibilityLevel, nil
	case errors.Is(err, catalog.ErrNotFound):
		return "", errorf(CodeCompatibilityNotSet, err, "Subject '%s' does not have subject-level compatibility configured", subject)
	}
	return "", backend(err)
}

// SetCompatibility sets subject's ("": the global) level; "" removes it.
func (r *Registry) SetCompatibility(ctx context.Context, subject, level string) (schema.Compatibility, error) {
	var c schema.Compatibility
	if level != "" {
		var err error
		if c, err = schema.ParseCompatibility(level); err != nil {
			return "", errorf(CodeInvalidCompatibility, err, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
		}
	}
	if err := r.st.SetCompatibility(ctx, subject, string(c)); err != nil {
		return "", backend(err)
	}
	return c, nil
}

// liveVersions reads subject's versions (soft-deleted ones too if
// deleted) and its Latest.
func (r *Registry) liveVersions(ctx context.Context, subject string, deleted bool) (catalog.SubjectVersions, error) {
	vs, err := r.st.ListSubjectVersions(ctx, subject, deleted)
	if err != nil {
		return catalog.SubjectVersions{}, backend(err)
	}
	return vs, nil
}

// Register registers in under subject and returns its version: the one
// the subject has if it has this schema (no check), else a new version
// that the subject's compatibility level allows (CodeIncompatibleSchema
// with the reasons otherwise).
func (r *Registry) Register(ctx context.Context, subject string, in Input) (Version, error) {
	cand, rec, err := r.parse(ctx, in)
	if err != nil {
		return Version{}, err
	}
	fp := rec.Fingerprint()
	for range maxRegistrationAttempts {
		vs, err := r.liveVersions(ctx, subject, false)
		if err != nil {
			return Version{}, err
		}
		var existing []schema.Schema
		var numbers []int
		for _, v := range vs.Versions {
			old, err := r.record(ctx, v.SchemaID)
			if err != nil {
				return Version{}, err
			}
			if old.Fingerprint() == fp {
				return r.withSchema(v, old), nil
			}
			s, err := r.Compiled(ctx, v.SchemaID)
			if err != nil {
				return Version{}, err
			}
			existing, numbers = append(existing, s), append(numbers, v.Version)
		}
		level, err := r.Compatibility(ctx, subject)
		if err != nil {
			return Version{}, err
		}
		if msgs := schema.CheckVersions(level, cand, existing, numbers); len(msgs) > 0 {
			return Version{}, &Error{Code: CodeIncompatibleSchema, Message: fmt.Sprintf(
				"Schema being registered is incompatible with an earlier schema for subject \"%s\" (%s): %s", subject, level, msgs[0]),
				Err: &IncompatibleError{Messages: msgs}}
		}
		v, err := r.st.RegisterSchema(ctx, subject, rec, vs.Latest)
		if errors.Is(err, catalog.ErrVersionConflict) {
			continue // another version came first: check against it too
		}
		if err != nil {
			return Version{}, backend(err)
		}
		rec.ID = v.SchemaID
		return r.withSchema(v, rec), nil
	}
	return Version{}, errorf(CodeBackendError, catalog.ErrVersionConflict, "subject %q changed under %d registrations in a row; try again", subject, maxRegistrationAttempts)
}

// IncompatibleError lists why a schema is incompatible.
type IncompatibleError struct{ Messages []string }

func (e *IncompatibleError) Error() string { return fmt.Sprint(e.Messages) }

func (r *Registry) withSchema(v catalog.SubjectVersion, rec catalog.SchemaRecord) Version {
	return Version{Subject: v.Subject, Version: v.Version, ID: v.SchemaID, Type: rec.Format, Schema: rec.Schema,
		References: rec.References, Deleted: v.Deleted}
}

// Lookup finds the version of subject that has in's schema (soft-deleted
// ones too if deleted).
func (r *Registry) Lookup(ctx context.Context, subject string, in Input, deleted bool) (Version, error) {
	_, rec, err := r.parse(ctx, in)
	if err != nil {
		return Version{}, err
	}
	vs, err := r.liveVersions(ctx, subject, deleted)
	if err != nil {
		return Version{}, err
	}
	if len(vs.Versions) == 0 {
		return Version{}, errorf(CodeSubjectNotFound, nil, "Subject '%s' not found.", subject)
	}
	fp := rec.Fingerprint()
	for _, v := range slices.Backward(vs.Versions) {
		old, err := r.record(ctx, v.SchemaID)
		if err != nil {
			return Version{}, err
		}
		if old.Fingerprint() == fp {
			return r.withSchema(v, old), nil
		}
	}
	return Version{}, errorf(CodeSchemaNotFound, nil, "Schema not found")
}

// Schema returns a schema by id.
func (r *Registry) Schema(ctx context.Context, id int64) (catalog.SchemaRecord, error) {
	return r.record(ctx, id)
}

// Versions returns subject's version numbers (soft-deleted ones too if
// deleted).
func (r *Registry) Versions(ctx context.Context, subject string, deleted bool) ([]int, error) {
	vs, err := r.liveVersions(ctx, subject, deleted)
	if err != nil {
		return nil, err
	}
	if len(vs.Versions) == 0 {
		return nil, errorf(CodeSubjectNotFound, nil, "Subject '%s' not found.", subject)
	}
	out := make([]int, len(vs.Versions))
	for i, v := range vs.Versions {
		out[i] = v.Version
	}
	return out, nil
}

// ParseVersion reads a version as Confluent's paths give it: a number
// from 1, or "latest" (-1 also means latest).
func ParseVersion(s string) (int, error) {
	if s == "latest" {
		return latestVersion, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v == 0 || v < latestVersion || v > 1<<31-1 {
		return 0, errorf(CodeInvalidVersion, err, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", s)
	}
	return v, nil
}

// Version returns subject's version (latestVersion: the highest live one;
// soft-deleted ones are found only if deleted).
func (r *Registry) Version(ctx context.Context, subject string, version int, deleted bool) (Version, error) {
	vs, err := r.liveVersions(ctx, subject, true)
	if err != nil {
		return Version{}, err
	}
	live := slices.ContainsFunc(vs.Versions, func(v catalog.SubjectVersion) bool { return !v.Deleted })
	if !live && !(deleted && len(vs.Versions) > 0) {
		return Version{}, errorf(CodeSubjectNotFound, nil, "Subject '%s' not found.", subject)
	}
	var found *catalog.SubjectVersion
	for i := len(vs.Versions) - 1; i >= 0; i-- {
		v := vs.Versions[i]
		if (version == latestVersion && (!v.Deleted || deleted)) || v.Version == version {
			found = &vs.Versions[i]
			break
		}
	}
	if found == nil || (found.Deleted && !deleted) {
		return Version{}, errorf(CodeVersionNotFound, nil, "Version %d not found.", version)
	}
	rec, err := r.record(ctx, found.SchemaID)
	if err != nil {
		return Version{}, err
	}
	return r.withSchema(*found, rec), nil
}

// Subjects returns every subject with a live version (any, if deleted),
// in name order.
func (r *Registry) Subjects(ctx context.Context, deleted bool) ([]string, error) {
	var out []string
	token := ""
	for range maxListedSubjectsPageCalls {
		page, err := r.st.ListSubjects(ctx, deleted, token, catalog.MaxPageSize)
		if err != nil {
			return nil, backend(err)
		}
		out = append(out, page.Items...)
		if token = page.NextPageToken; token == "" {
			return out, nil
		}
	}
	return nil, errorf(CodeBackendError, nil, "more than %d subjects", maxListedSubjectsPageCalls*catalog.MaxPageSize)
}

// DeleteVersion deletes a version softly or (permanent, after a soft
// delete) for good, and returns its number.
func (r *Registry) DeleteVersion(ctx context.Context, subject string, version int, permanent bool) (int, error) {
	v, err := r.Version(ctx, subject, version, permanent)
	if err != nil {
		return 0, err
	}
	if permanent && !v.Deleted {
		return 0, errorf(CodeVersionNotSoftDeleted, nil, "Subject '%s' Version %d was not deleted first before being permanently deleted", subject, v.Version)
	}
	if _, err := r.st.DeleteSubjectVersion(ctx, subject, v.Version, permanent); err != nil {
		if errors.Is(err, catalog.ErrNotFound) {
			return 0, errorf(CodeVersionNotFound, err, "Version %d not found.", v.Version)
		}
		return 0, backend(err)
	}
	return v.Version, nil
}

// DeleteSubject deletes every version of subject softly, or (permanent:
// after a soft delete of the subject) for good, and returns their numbers.
func (r *Registry) DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int, error) {
	vs, err := r.liveVersions(ctx, subject, true)
	if err != nil {
		return nil, err
	}
	if len(vs.Versions) == 0 {
		return nil, errorf(CodeSubjectNotFound, nil, "Subject '%s' not found.", subject)
	}
	var out []int
	for _, v := range vs.Versions {
		switch {
		case permanent && !v.Deleted:
			return nil, errorf(CodeSubjectNotSoftDeleted, nil, "Subject '%s' was not deleted first before being permanently deleted", subject)
		case !permanent && v.Deleted:
			continue
		}
		out = append(out, v.Version)
	}
	if !permanent && len(out) == 0 {
		return nil, errorf(CodeSubjectSoftDeleted, nil, "Subject '%s' was soft deleted. Set permanent=true to delete permanently", subject)
	}
	for _, v := range out {
		if _, err := r.st.DeleteSubjectVersion(ctx, subject, v, permanent); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			return nil, backend(err)
		}
	}
	return out, nil
}

// CheckCompatibility reports why in may not follow subject's version
// (latestVersion: the latest), or, with all, every live version as the
// subject's level reaches; no messages: compatible.
func (r *Registry) CheckCompatibility(ctx context.Context, subject string, version int, all bool, in Input) ([]string, error) {
	cand, _, err := r.parse(ctx, in)
	if err != nil {
		return nil, err
	}
	level, err := r.Compatibility(ctx, subject)
	if err != nil {
		return nil, err
	}
	var against []catalog.SubjectVersion
	if all {
		vs, err := r.liveVersions(ctx, subject, false)
		if err != nil {
			return nil, err
		}
		against = vs.Versions
	} else {
		v, err := r.Version(ctx, subject, version, false)
		if err != nil {
			return nil, err
		}
		against = []catalog.SubjectVersion{{Subject: subject, Version: v.Version, SchemaID: v.ID}}
		level = nonTransitive(level) // one version named: the level's direction, that version only
	}
	var existing []schema.Schema
	var numbers []int
	for _, v := range against {
		s, err := r.Compiled(ctx, v.SchemaID)
		if err != nil {
			return nil, err
		}
		existing, numbers = append(existing, s), append(numbers, v.Version)
	}
	return schema.CheckVersions(level, cand, existing, numbers), nil
}

// nonTransitive is the level's direction without its reach.
func nonTransitive(c schema.Compatibility) schema.Compatibility {
	switch c {
	case schema.BackwardTransitive:
		return schema.Backward
	case schema.ForwardTransitive:
		return schema.Forward
	case schema.FullTransitive:
		return schema.Full
	}
	return c
}
