package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicemq/sluice/pkg/schema"
)

// Validator checks record values against a subject: validation at produce
// (docs/DESIGN.md §2.11, "Validation at produce"). A value is valid when it is framed in
// Confluent's wire format, its schema id is one of the subject's live
// versions, and its payload is exactly one datum of that schema.
//
// The ids of a subject are cached: read once, read again after
// RefreshInterval (so a deleted version stops being accepted), and read
// again when a value names an id the cache does not hold — a version
// registered since — unless that id was looked for within MissInterval or
// the request already read the subject again (Request): a stream of bad
// ids does not become a stream of catalog reads. Compiled schemas are the
// Registry's bounded cache. Safe for concurrent use.
type Validator struct {
	r   *Registry
	cfg ValidatorConfig

	// mu guards subjects. Leaf lock; never held across a store read.
	mu       sync.Mutex
	subjects map[string]*subjectIDs // bounded by MaxSubjects
}

// ValidatorConfig configures NewValidator; zero fields take the defaults.
type ValidatorConfig struct {
	// RefreshInterval is how long a subject's ids are trusted (default
	// one minute): a version deleted is refused at most this long after.
	RefreshInterval time.Duration
	// MissInterval is how long an id found unknown stays so without
	// another read of its subject (default one second).
	MissInterval time.Duration
	// MaxSubjects bounds the subjects cached (default 4,096).
	MaxSubjects int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// subjectIDs is one subject's live schema ids as last read.
type subjectIDs struct {
	ids    map[int64]int       // id → version
	read   time.Time           // when ids was read
	missed map[int64]time.Time // ids found unknown, and when; bounded by maxMissed
}

// maxMissed bounds a subject's remembered unknown ids.
const maxMissed = 256

// InvalidRecordError says why a value is not valid for a subject: the
// record's fault, so sending it again cannot help. SchemaID is the id the
// value named (0 if its framing did not say).
type InvalidRecordError struct {
	Subject  string
	SchemaID int64
	Reason   string
}

func (e *InvalidRecordError) Error() string {
	if e.SchemaID == 0 {
		return fmt.Sprintf("not valid for subject %q: %s", e.Subject, e.Reason)
	}
	return fmt.Sprintf("not valid for subject %q with schema id %d: %s", e.Subject, e.SchemaID, e.Reason)
}

// NewValidator returns a validator over r.
func NewValidator(r *Registry, cfg ValidatorConfig) *Validator {
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Minute
	}
	if cfg.MissInterval <= 0 {
		cfg.MissInterval = time.Second
	}
	if cfg.MaxSubjects <= 0 {
		cfg.MaxSubjects = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Validator{r: r, cfg: cfg, subjects: map[string]*subjectIDs{}}
}

// Request returns a check of one produce request's values: it reads a
// subject's ids again for an unknown id at most once.
func (v *Validator) Request() *RequestCheck { return &RequestCheck{v: v} }

// RequestCheck checks the values of one request. Not safe for concurrent
// use.
type RequestCheck struct {
	v      *Validator
	reread bool // the request read a subject again for an unknown id
	// The last id this request found a member of its subject: the
	// values of a request mostly name one id, checked once.
	memberSubject string
	memberID      int64
}

// Check validates value for subject and returns the schema id it names.
// Errors: *InvalidRecordError when the value is not valid; otherwise the
// registry's store failed (*Error, CodeBackendError) and the record may be
// valid: the caller answers UNAVAILABLE.
func (rc *RequestCheck) Check(ctx context.Context, subject string, value []byte) (int64, error) {
	v := rc.v
	id, payload, err := schema.ParseWire(value)
	if err != nil {
		return 0, &InvalidRecordError{Subject: subject, Reason: err.Error()}
	}
	if id != rc.memberID || subject != rc.memberSubject {
		if err := rc.member(ctx, subject, id); err != nil {
			return id, err
		}
		rc.memberSubject, rc.memberID = subject, id
	}
	s, err := v.r.Compiled(ctx, id)
	if err != nil {
		var re *Error
		if errors.As(err, &re) && re.Code == CodeSchemaNotFound {
			// Deleted for good since the ids were read.
			return id, &InvalidRecordError{Subject: subject, SchemaID: id, Reason: "the registry has no schema with this id"}
		}
		return id, err
	}
	if err := s.Validate(payload); err != nil {
		return id, &InvalidRecordError{Subject: subject, SchemaID: id, Reason: err.Error()}
	}
	return id, nil
}

// member returns nil if id is one of subject's live versions.
func (rc *RequestCheck) member(ctx context.Context, subject string, id int64) error {
	v := rc.v
	now := v.cfg.Now()
	v.mu.Lock()
	e := v.subjects[subject]
	known, read := false, true
	if e != nil {
		_, known = e.ids[id]
		switch {
		case now.Sub(e.read) >= v.cfg.RefreshInterval:
		case known:
			read = false
		default:
			// Unknown: read again unless this request did, or the id
			// was looked for lately.
			at, missed := e.missed[id]
			read = !rc.reread && (!missed || now.Sub(at) >= v.cfg.MissInterval)
			rc.reread = rc.reread || read
		}
	}
	v.mu.Unlock()
	if read {
		var err error
		if e, err = v.read(ctx, subject, now); err != nil {
			return err
		}
		_, known = e.ids[id]
	}
	if known {
		return nil
	}
	v.mu.Lock()
	if len(e.missed) >= maxMissed {
		clear(e.missed)
	}
	e.missed[id] = now
	n := len(e.ids)
	v.mu.Unlock()
	if n == 0 {
		return &InvalidRecordError{Subject: subject, SchemaID: id, Reason: "the subject has no live schema versions; register one"}
	}
	return &InvalidRecordError{Subject: subject, SchemaID: id, Reason: "the id is not one of the subject's live versions"}
}

// read reads subject's live ids into the cache.
func (v *Validator) read(ctx context.Context, subject string, now time.Time) (*subjectIDs, error) {
	vs, err := v.r.liveVersions(ctx, subject, false)
	if err != nil {
		return nil, err
	}
	e := &subjectIDs{ids: make(map[int64]int, len(vs.Versions)), read: now, missed: map[int64]time.Time{}}
	for _, sv := range vs.Versions {
		if !sv.Deleted {
			e.ids[sv.SchemaID] = sv.Version
		}
	}
	v.mu.Lock()
	if _, ok := v.subjects[subject]; !ok && len(v.subjects) >= v.cfg.MaxSubjects {
		clear(v.subjects) // rare: more subjects in use than the bound
	}
	v.subjects[subject] = e
	v.mu.Unlock()
	return e, nil
}
