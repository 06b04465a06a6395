package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The schema registry's store (issue 25, docs/DESIGN.md §2.11): schemas
// under global ids, subjects with numbered versions, and compatibility
// settings, as Confluent Schema Registry keeps them. What a schema means —
// parsing, normal form, compatibility — is pkg/schema's and the registry
// service's; the catalog stores texts and enforces the bookkeeping:
//
//   - A schema is identified by its format, text and references
//     (SchemaRecord.Fingerprint): registering the same one again, under
//     any subject, gives the same id. Ids increase and are never reused;
//     there may be gaps.
//   - A subject's versions are numbered from 1 and never reused: Latest
//     is the highest number ever given, even if that version was deleted
//     for good since.
//   - Registering a schema a subject already has as a live version gives
//     that version back; otherwise it is the subject's next version, if
//     Latest is still what the caller read (it checked compatibility
//     against what it read: a concurrent registration is a conflict, and
//     the caller reads and checks again).
//   - A version is deleted softly first (hidden, its schema still
//     resolvable by id), then for good.

// SchemaReference is a schema a schema uses (Confluent's reference): the
// name the referring schema uses for it, and the subject version that
// holds it.
type SchemaReference struct {
	Name    string
	Subject string
	Version int
}

// SchemaRecord is a registered schema.
type SchemaRecord struct {
	ID         int64  // set by the store
	Format     string // AVRO, PROTOBUF or JSON
	Schema     string
	References []SchemaReference
}

// Fingerprint identifies a schema by what it is: format, text and
// references (a SHA-256, hex).
func (r SchemaRecord) Fingerprint() string {
	h := sha256.New()
	h.Write([]byte(r.Format))
	h.Write([]byte{0})
	h.Write([]byte(r.Schema))
	for _, ref := range r.References {
		h.Write([]byte{0})
		h.Write([]byte(ref.Name + "\x00" + ref.Subject + "\x00" + strconv.Itoa(ref.Version)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SubjectVersion is one version of a subject.
type SubjectVersion struct {
	Subject   string
	Version   int
	SchemaID  int64
	Deleted   bool // deleted softly: hidden unless asked for
	CreatedAt time.Time
}

// SubjectVersions is a subject's versions, in version order.
type SubjectVersions struct {
	Versions []SubjectVersion
	// Latest is the highest version number the subject ever gave (0:
	// none); RegisterSchema's expectLatest.
	Latest int
}

// Schemas is the schema registry's store.
type Schemas interface {
	// RegisterSchema registers rec (its ID is ignored) under subject: the
	// live version that has the same schema if there is one, else a new
	// version Latest+1 if the subject's Latest is still expectLatest.
	// Errors: *ValidationError, ErrVersionConflict (Latest moved: read
	// the versions again, check again), ErrLimitExceeded (the subject
	// has MaxSchemaVersions versions).
	RegisterSchema(ctx context.Context, subject string, rec SchemaRecord, expectLatest int) (SubjectVersion, error)

	// GetSchema returns a schema by id (deleted versions' schemas too).
	// Errors: *ValidationError, ErrNotFound.
	GetSchema(ctx context.Context, id int64) (SchemaRecord, error)

	// ListSubjectVersions returns a subject's versions (soft-deleted
	// ones only if deleted) and its Latest. A subject that never had a
	// version has none and Latest 0. Errors: *ValidationError.
	ListSubjectVersions(ctx context.Context, subject string, deleted bool) (SubjectVersions, error)

	// ListSubjects returns, in name order, the subjects with a live
	// version (or, if deleted, with any version). limit 0 means
	// DefaultPageSize. Errors: *ValidationError (limit, pageToken).
	ListSubjects(ctx context.Context, deleted bool, pageToken string, limit int) (Page[string], error)

	// DeleteSubjectVersion deletes a version softly, or for good
	// (permanent: only a version deleted softly before), and returns it
	// as it was. Errors: *ValidationError (also: permanent on a live
	// version, field "permanent"), ErrNotFound.
	DeleteSubjectVersion(ctx context.Context, subject string, version int, permanent bool) (SubjectVersion, error)

	// GetCompatibility returns the compatibility level set for subject
	// ("": the global one). Errors: *ValidationError, ErrNotFound (not
	// set: the registry's default applies).
	GetCompatibility(ctx context.Context, subject string) (string, error)

	// SetCompatibility sets subject's ("": the global) level; level ""
	// removes the setting. Errors: *ValidationError.
	SetCompatibility(ctx context.Context, subject, level string) error
}

// Registry limits.
const (
	// MaxSchemaBytes bounds a schema's text; a DynamoDB item holds at most
	// 400 KB.
	MaxSchemaBytes = 256 << 10
	// MaxSchemaReferences bounds a schema's direct references.
	MaxSchemaReferences = 64
	// MaxSchemaVersions bounds the versions a subject keeps (deleted
	// softly included), so reading them is one bounded call.
	MaxSchemaVersions = 1000
)

// SchemaFormats are the formats the store accepts.
var SchemaFormats = []string{"AVRO", "PROTOBUF", "JSON"}

// CompatibilityLevels are the levels SetCompatibility accepts.
var CompatibilityLevels = []string{"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}

// ValidateSubject checks a subject name: 1..MaxSchemaSubjectLength bytes
// of printable UTF-8 without spaces (the schema.subject topic config's
// rule).
func ValidateSubject(subject string) error {
	if subject == "" {
		return Invalid("subject", "is empty")
	}
	if len(subject) > MaxSchemaSubjectLength {
		return Invalid("subject", "is %d bytes, more than %d", len(subject), MaxSchemaSubjectLength)
	}
	return validatePrintable("subject", subject)
}

// ValidateSchemaRecord checks what RegisterSchema stores.
func ValidateSchemaRecord(r SchemaRecord) error {
	if !slices.Contains(SchemaFormats, r.Format) {
		return Invalid("format", "%q is not one of %s", r.Format, strings.Join(SchemaFormats, ", "))
	}
	if r.Schema == "" {
		return Invalid("schema", "is empty")
	}
	if len(r.Schema) > MaxSchemaBytes {
		return Invalid("schema", "is %d bytes, more than %d", len(r.Schema), MaxSchemaBytes)
	}
	if len(r.References) > MaxSchemaReferences {
		return Invalid("references", "%d, more than %d", len(r.References), MaxSchemaReferences)
	}
	for i, ref := range r.References {
		if ref.Name == "" || len(ref.Name) > MaxSchemaSubjectLength {
			return Invalid("references", "reference %d: name is %d bytes; want 1..%d", i, len(ref.Name), MaxSchemaSubjectLength)
		}
		if err := ValidateSubject(ref.Subject); err != nil {
			return Invalid("references", "reference %d: %v", i, err)
		}
		if ref.Version < 1 {
			return Invalid("references", "reference %d: version %d; versions start at 1", i, ref.Version)
		}
	}
	return nil
}

// ValidateCompatibilityLevel checks a level ("" allowed: unset).
func ValidateCompatibilityLevel(level string) error {
	if level != "" && !slices.Contains(CompatibilityLevels, level) {
		return Invalid("compatibility", "%q is not one of %s", level, strings.Join(CompatibilityLevels, ", "))
	}
	return nil
}

// NextSubjectVersion decides a registration from the subject's versions as
// stored (all of them, soft-deleted included) and the schema's id: the
// live version with that id (existing), or the number of the new version.
// Errors: ErrVersionConflict (Latest is not expectLatest),
// ErrLimitExceeded.
func NextSubjectVersion(vs SubjectVersions, id int64, expectLatest int) (existing *SubjectVersion, next int, err error) {
	for i := range vs.Versions {
		if v := vs.Versions[i]; v.SchemaID == id && !v.Deleted {
			return &vs.Versions[i], 0, nil
		}
	}
	if vs.Latest != expectLatest {
		return nil, 0, fmt.Errorf("subject's latest version is %d, not %d: %w", vs.Latest, expectLatest, ErrVersionConflict)
	}
	if len(vs.Versions) >= MaxSchemaVersions {
		return nil, 0, fmt.Errorf("subject has %d versions, at most %d (delete some for good): %w", len(vs.Versions), MaxSchemaVersions, ErrLimitExceeded)
	}
	return nil, vs.Latest + 1, nil
}

// CheckVersionDelete checks a delete of v (permanent or not).
func CheckVersionDelete(v SubjectVersion, permanent bool) error {
	if permanent && !v.Deleted {
		return Invalid("permanent", "subject %q version %d must be deleted softly before it is deleted for good", v.Subject, v.Version)
	}
	if !permanent && v.Deleted {
		return Invalid("version", "subject %q version %d is deleted already", v.Subject, v.Version)
	}
	return nil
}
