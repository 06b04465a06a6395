// Package registry serves the schema registry (pkg/schema/registry):
// sluice.v1.SchemaService over Connect (connect.go) and Confluent Schema
// Registry's REST API (rest.go), so the serializers that already speak it
// work against Sluice unchanged. Both answer from one registry.
package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/schema/registry"
)

// RESTPrefix is where the services serve the REST API: a Confluent
// client's schema registry URL is http://HOST:PORT/registry.
const RESTPrefix = "/registry"

// ContentType is Confluent's media type; plain JSON is accepted too.
const ContentType = "application/vnd.schemaregistry.v1+json"

// maxBodyBytes bounds a request body: a schema at its bound, escaped in
// JSON, with its references.
const maxBodyBytes = 2*catalog.MaxSchemaBytes + 64<<10

// REST returns Confluent Schema Registry's REST API over r, rooted at "/"
// (mount it under a prefix with http.StripPrefix).
func REST(r *registry.Registry) http.Handler {
	h := &rest{r: r}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, struct{}{}) })
	mux.HandleFunc("GET /schemas/types", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, []string{"AVRO", "JSON", "PROTOBUF"})
	})
	mux.HandleFunc("GET /schemas/ids/{id}", h.schemaByID)
	mux.HandleFunc("GET /schemas/ids/{id}/schema", h.rawSchemaByID)
	mux.HandleFunc("GET /subjects", h.subjects)
	mux.HandleFunc("POST /subjects/{subject}", h.lookup)
	mux.HandleFunc("DELETE /subjects/{subject}", h.deleteSubject)
	mux.HandleFunc("GET /subjects/{subject}/versions", h.versions)
	mux.HandleFunc("POST /subjects/{subject}/versions", h.register)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", h.version)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}/schema", h.rawVersion)
	mux.HandleFunc("DELETE /subjects/{subject}/versions/{version}", h.deleteVersion)
	mux.HandleFunc("GET /config", h.getConfig)
	mux.HandleFunc("PUT /config", h.putConfig)
	mux.HandleFunc("GET /config/{subject}", h.getConfig)
	mux.HandleFunc("PUT /config/{subject}", h.putConfig)
	mux.HandleFunc("DELETE /config/{subject}", h.deleteConfig)
	mux.HandleFunc("POST /compatibility/subjects/{subject}/versions", h.compatibility)
	mux.HandleFunc("POST /compatibility/subjects/{subject}/versions/{version}", h.compatibility)
	return mux
}

type rest struct{ r *registry.Registry }

// schemaBody is the JSON of a registration, lookup or check.
type schemaBody struct {
	Schema     string         `json:"schema"`
	SchemaType string         `json:"schemaType,omitempty"`
	References []referenceDoc `json:"references,omitempty"`
}

type referenceDoc struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// versionDoc is a subject version as Confluent returns it.
type versionDoc struct {
	Subject    string         `json:"subject"`
	Version    int            `json:"version"`
	ID         int64          `json:"id"`
	SchemaType string         `json:"schemaType,omitempty"` // omitted for Avro, as Confluent does
	Schema     string         `json:"schema"`
	References []referenceDoc `json:"references,omitempty"`
}

type errorDoc struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers err as Confluent does: its error code and message, with the
// HTTP status the code stands for.
func fail(w http.ResponseWriter, err error) {
	var e *registry.Error
	if !errors.As(err, &e) {
		e = &registry.Error{Code: registry.CodeBackendError, Message: err.Error()}
	}
	reply(w, e.HTTPStatus(), errorDoc{Code: e.Code, Message: e.Message})
}

func badRequest(format string, args ...any) error {
	return &registry.Error{Code: registry.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

func typeOut(t string) string {
	if t == "AVRO" {
		return ""
	}
	return t
}

func refsIn(in []referenceDoc) []catalog.SchemaReference {
	var out []catalog.SchemaReference
	for _, r := range in {
		out = append(out, catalog.SchemaReference(r))
	}
	return out
}

func refsOut(in []catalog.SchemaReference) []referenceDoc {
	var out []referenceDoc
	for _, r := range in {
		out = append(out, referenceDoc(r))
	}
	return out
}

func docOf(v registry.Version) versionDoc {
	return versionDoc{Subject: v.Subject, Version: v.Version, ID: v.ID, SchemaType: typeOut(v.Type), Schema: v.Schema, References: refsOut(v.References)}
}

// body decodes a schema body, bounded.
func body(r *http.Request) (registry.Input, error) {
	var b schemaBody
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err := dec.Decode(&b); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return registry.Input{}, &registry.Error{Code: registry.CodeInvalidSchema, Message: fmt.Sprintf("the request body is more than %d bytes", maxBodyBytes)}
		}
		if errors.Is(err, io.EOF) {
			return registry.Input{}, badRequest("the request has no body; want {\"schema\": ...}")
		}
		return registry.Input{}, badRequest("the request body is not a schema request: %v", err)
	}
	if b.Schema == "" {
		return registry.Input{}, &registry.Error{Code: registry.CodeInvalidSchema, Message: "Empty schema"}
	}
	return registry.Input{Type: b.SchemaType, Schema: b.Schema, References: refsIn(b.References)}, nil
}

func flag(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

func (h *rest) register(w http.ResponseWriter, r *http.Request) {
	in, err := body(r)
	if err == nil {
		var v registry.Version
		if v, err = h.r.Register(r.Context(), r.PathValue("subject"), in); err == nil {
			reply(w, http.StatusOK, docOf(v))
			return
		}
	}
	fail(w, err)
}

func (h *rest) lookup(w http.ResponseWriter, r *http.Request) {
	in, err := body(r)
	if err == nil {
		var v registry.Version
		if v, err = h.r.Lookup(r.Context(), r.PathValue("subject"), in, flag(r, "deleted")); err == nil {
			reply(w, http.StatusOK, docOf(v))
			return
		}
	}
	fail(w, err)
}

func (h *rest) id(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, &registry.Error{Code: registry.CodeSchemaNotFound, Message: fmt.Sprintf("Schema %s not found", r.PathValue("id"))}
	}
	return id, nil
}

func (h *rest) schemaByID(w http.ResponseWriter, r *http.Request) {
	id, err := h.id(r)
	if err == nil {
		var rec catalog.SchemaRecord
		if rec, err = h.r.Schema(r.Context(), id); err == nil {
			reply(w, http.StatusOK, schemaBody{Schema: rec.Schema, SchemaType: typeOut(rec.Format), References: refsOut(rec.References)})
			return
		}
	}
	fail(w, err)
}

func (h *rest) rawSchemaByID(w http.ResponseWriter, r *http.Request) {
	id, err := h.id(r)
	if err == nil {
		var rec catalog.SchemaRecord
		if rec, err = h.r.Schema(r.Context(), id); err == nil {
			w.Header().Set("Content-Type", ContentType)
			_, _ = io.WriteString(w, rec.Schema)
			return
		}
	}
	fail(w, err)
}

func (h *rest) subjects(w http.ResponseWriter, r *http.Request) {
	s, err := h.r.Subjects(r.Context(), flag(r, "deleted"))
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, append([]string{}, s...))
}

func (h *rest) versions(w http.ResponseWriter, r *http.Request) {
	vs, err := h.r.Versions(r.Context(), r.PathValue("subject"), flag(r, "deleted"))
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, vs)
}

func (h *rest) versionOf(r *http.Request) (registry.Version, error) {
	v, err := registry.ParseVersion(r.PathValue("version"))
	if err != nil {
		return registry.Version{}, err
	}
	return h.r.Version(r.Context(), r.PathValue("subject"), v, flag(r, "deleted"))
}

func (h *rest) version(w http.ResponseWriter, r *http.Request) {
	v, err := h.versionOf(r)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, docOf(v))
}

func (h *rest) rawVersion(w http.ResponseWriter, r *http.Request) {
	v, err := h.versionOf(r)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	_, _ = io.WriteString(w, v.Schema)
}

func (h *rest) deleteVersion(w http.ResponseWriter, r *http.Request) {
	v, err := registry.ParseVersion(r.PathValue("version"))
	if err == nil {
		if v, err = h.r.DeleteVersion(r.Context(), r.PathValue("subject"), v, flag(r, "permanent")); err == nil {
			reply(w, http.StatusOK, v)
			return
		}
	}
	fail(w, err)
}

func (h *rest) deleteSubject(w http.ResponseWriter, r *http.Request) {
	vs, err := h.r.DeleteSubject(r.Context(), r.PathValue("subject"), flag(r, "permanent"))
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, vs)
}

type configDoc struct {
	Compatibility      string `json:"compatibility,omitempty"`      // PUT's body and answer
	CompatibilityLevel string `json:"compatibilityLevel,omitempty"` // GET's answer
}

func (h *rest) getConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	get := h.r.ConfiguredCompatibility
	if subject != "" && flag(r, "defaultToGlobal") {
		get = h.r.Compatibility
	}
	l, err := get(r.Context(), subject)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, configDoc{CompatibilityLevel: string(l)})
}

func (h *rest) putConfig(w http.ResponseWriter, r *http.Request) {
	var c configDoc
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 4<<10)).Decode(&c); err != nil {
		fail(w, badRequest("the request body is not a config request: %v", err))
		return
	}
	l, err := h.r.SetCompatibility(r.Context(), r.PathValue("subject"), c.Compatibility)
	if err == nil && l == "" {
		err = &registry.Error{Code: registry.CodeInvalidCompatibility, Message: "Invalid compatibility level: the body names none ({\"compatibility\": \"BACKWARD\"})"}
	}
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, configDoc{Compatibility: string(l)})
}

func (h *rest) deleteConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	old, err := h.r.ConfiguredCompatibility(r.Context(), subject)
	if err == nil {
		_, err = h.r.SetCompatibility(r.Context(), subject, "")
	}
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, configDoc{CompatibilityLevel: string(old)})
}

type compatibilityDoc struct {
	IsCompatible bool     `json:"is_compatible"`
	Messages     []string `json:"messages,omitempty"`
}

// compatibility answers both forms: against one version (or "latest"), or
// without one against every version the subject's level reaches.
func (h *rest) compatibility(w http.ResponseWriter, r *http.Request) {
	in, err := body(r)
	if err != nil {
		fail(w, err)
		return
	}
	version, all := registry.LatestVersion, r.PathValue("version") == ""
	if !all {
		if version, err = registry.ParseVersion(r.PathValue("version")); err != nil {
			fail(w, err)
			return
		}
	}
	msgs, err := h.r.CheckCompatibility(r.Context(), r.PathValue("subject"), version, all, in)
	if err != nil {
		fail(w, err)
		return
	}
	doc := compatibilityDoc{IsCompatible: len(msgs) == 0}
	if flag(r, "verbose") {
		doc.Messages = msgs
	}
	reply(w, http.StatusOK, doc)
}
