// Package serde is what the SDK's serializers share: the schema registry
// as they use it (sluice.v1.SchemaService) — schemas fetched by id once and
// compiled with their references, schemas registered or looked up under a
// subject — and decoding any framed value to JSON, whatever its format
// (what `sluice consume --decode` prints). The format packages are
// avroserde, protoserde and jsonserde.
//
// It lives apart from package sluice so the SDK's core keeps its small
// dependency tree (this one adds the three formats' libraries through
// pkg/schema).
package serde

import (
	"context"
	"fmt"
	"sync"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/schema"
)

// maxCached bounds the schemas a Registry keeps by id.
const maxCached = 1024

// maxReferenceDepth bounds how deep references are followed.
const maxReferenceDepth = 16

// Registry is the schema registry as serializers use it. Safe for
// concurrent use.
type Registry struct {
	svc sluicev1connect.SchemaServiceClient

	mu   sync.Mutex
	byID map[int64]Compiled
}

// Compiled is a registered schema: as stored, and compiled.
type Compiled struct {
	Info   *sluicev1.SchemaInfo
	Schema schema.Schema
}

// NewRegistry returns the registry served at baseURL ("http://HOST:PORT":
// sluice dev or an ingest copy).
func NewRegistry(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Registry {
	return &Registry{svc: sluicev1connect.NewSchemaServiceClient(httpClient, baseURL, opts...), byID: map[int64]Compiled{}}
}

// Service is the registry's client, for what this package does not wrap.
func (r *Registry) Service() sluicev1connect.SchemaServiceClient { return r.svc }

// ByID returns schema id, compiled with its references (cached: a schema
// never changes).
func (r *Registry) ByID(ctx context.Context, id int64) (Compiled, error) {
	r.mu.Lock()
	c, ok := r.byID[id]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	resp, err := r.svc.GetSchema(ctx, connect.NewRequest(&sluicev1.GetSchemaRequest{Id: id}))
	if err != nil {
		return Compiled{}, fmt.Errorf("serde: schema %d: %w", id, err)
	}
	info := resp.Msg.GetSchema()
	refs, err := r.resolve(ctx, info.GetReferences(), 0)
	if err != nil {
		return Compiled{}, fmt.Errorf("serde: schema %d: %w", id, err)
	}
	f, err := schema.ParseFormat(info.GetType())
	if err != nil {
		return Compiled{}, fmt.Errorf("serde: schema %d: %w", id, err)
	}
	s, err := schema.Parse(f, info.GetSchema(), refs, schema.DefaultLimits)
	if err != nil {
		return Compiled{}, fmt.Errorf("serde: schema %d does not parse: %w", id, err)
	}
	c = Compiled{Info: info, Schema: s}
	r.mu.Lock()
	if len(r.byID) >= maxCached {
		clear(r.byID)
	}
	r.byID[id] = c
	r.mu.Unlock()
	return c, nil
}

// resolve fetches the schemas refs name, with theirs, depth first.
func (r *Registry) resolve(ctx context.Context, refs []*sluicev1.SchemaReference, depth int) ([]schema.Resolved, error) {
	if depth > maxReferenceDepth {
		return nil, fmt.Errorf("references nest deeper than %d", maxReferenceDepth)
	}
	var out []schema.Resolved
	for _, ref := range refs {
		resp, err := r.svc.GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: ref.GetSubject(), Version: ref.GetVersion(), Deleted: true}))
		if err != nil {
			return nil, fmt.Errorf("reference %q (subject %q version %d): %w", ref.GetName(), ref.GetSubject(), ref.GetVersion(), err)
		}
		info := resp.Msg.GetVersion().GetSchema()
		sub, err := r.resolve(ctx, info.GetReferences(), depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, schema.Resolved{Name: ref.GetName(), Schema: info.GetSchema(), Refs: sub})
	}
	return out, nil
}

// ID registers in under subject (autoRegister: a new version if the
// subject's compatibility level allows it) or looks it up there, and
// returns its schema id.
func (r *Registry) ID(ctx context.Context, subject string, in *sluicev1.SchemaInput, autoRegister bool) (int64, error) {
	v, err := r.Version(ctx, subject, in, autoRegister)
	if err != nil {
		return 0, err
	}
	return v.GetSchema().GetId(), nil
}

// Version is ID returning the whole version (its number is what a
// reference to it names).
func (r *Registry) Version(ctx context.Context, subject string, in *sluicev1.SchemaInput, autoRegister bool) (*sluicev1.SubjectVersion, error) {
	var v *sluicev1.SubjectVersion
	if autoRegister {
		resp, err := r.svc.RegisterSchema(ctx, connect.NewRequest(&sluicev1.RegisterSchemaRequest{Subject: subject, Schema: in}))
		if err != nil {
			return nil, fmt.Errorf("serde: register the schema under %s: %w", subject, err)
		}
		v = resp.Msg.GetVersion()
	} else {
		resp, err := r.svc.LookupSchema(ctx, connect.NewRequest(&sluicev1.LookupSchemaRequest{Subject: subject, Schema: in}))
		if err != nil {
			return nil, fmt.Errorf("serde: look the schema up under %s: %w", subject, err)
		}
		v = resp.Msg.GetVersion()
	}
	return v, nil
}

// ValueSubject is the subject of a topic's record values under Confluent's
// default naming (TopicNameStrategy): TOPIC-value.
func ValueSubject(topic string) string { return topic + "-value" }

// KeySubject is the subject of a topic's record keys: TOPIC-key.
func KeySubject(topic string) string { return topic + "-key" }

// Unframe splits a framed value into the compiled schema it names and its
// payload.
func (r *Registry) Unframe(ctx context.Context, value []byte) (Compiled, []byte, error) {
	id, payload, err := schema.ParseWire(value)
	if err != nil {
		return Compiled{}, nil, fmt.Errorf("serde: %w", err)
	}
	c, err := r.ByID(ctx, id)
	if err != nil {
		return Compiled{}, nil, err
	}
	return c, payload, nil
}

// JSON decodes a framed value of any format to JSON with the schema it
// names (see schema.Schema.JSON).
func (r *Registry) JSON(ctx context.Context, value []byte) ([]byte, error) {
	c, payload, err := r.Unframe(ctx, value)
	if err != nil {
		return nil, err
	}
	b, err := c.Schema.JSON(payload)
	if err != nil {
		return nil, fmt.Errorf("serde: schema %d: %w", c.Info.GetId(), err)
	}
	return b, nil
}
