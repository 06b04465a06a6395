package authz

import (
	"encoding/json"
	"net/http"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// REST wraps the schema registry's REST API (mounted with its prefix
// stripped) with the same rules as SchemaService: each route's action on
// its subject. Listing subjects needs describe on the cluster (a plain
// HTTP answer is not filtered).
func (a *Authorizer) REST(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, act func(r *http.Request) []Action) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := a.Authorize(principalOf(r.Context()), act(r)...); err != nil {
				w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
				w.WriteHeader(http.StatusForbidden)
				_ = json.NewEncoder(w).Encode(map[string]any{"error_code": 40301, "message": err.Error()})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	subject := func(op catalog.Operation) func(r *http.Request) []Action {
		return func(r *http.Request) []Action { return []Action{subjectOr(op, r.PathValue("subject"))} }
	}
	none := func(*http.Request) []Action { return nil }
	route("GET /{$}", none)
	route("GET /schemas/types", none)
	route("GET /schemas/ids/{id}", none)
	route("GET /schemas/ids/{id}/schema", none)
	route("GET /subjects", func(*http.Request) []Action { return []Action{cluster(catalog.OpDescribe)} })
	route("POST /subjects/{subject}", subject(catalog.OpDescribe))
	route("DELETE /subjects/{subject}", subject(catalog.OpDelete))
	route("GET /subjects/{subject}/versions", subject(catalog.OpDescribe))
	route("POST /subjects/{subject}/versions", subject(catalog.OpAlter))
	route("GET /subjects/{subject}/versions/{version}", subject(catalog.OpDescribe))
	route("GET /subjects/{subject}/versions/{version}/schema", subject(catalog.OpDescribe))
	route("DELETE /subjects/{subject}/versions/{version}", subject(catalog.OpDelete))
	route("GET /config", subject(catalog.OpDescribe))
	route("PUT /config", subject(catalog.OpAlter))
	route("GET /config/{subject}", subject(catalog.OpDescribe))
	route("PUT /config/{subject}", subject(catalog.OpAlter))
	route("DELETE /config/{subject}", subject(catalog.OpAlter))
	route("POST /compatibility/subjects/{subject}/versions", subject(catalog.OpDescribe))
	route("POST /compatibility/subjects/{subject}/versions/{version}", subject(catalog.OpDescribe))
	// Anything else: the registry answers it (404, 405) after a check
	// that only the mighty pass, so no route escapes the rules.
	route("/", func(*http.Request) []Action { return []Action{cluster(catalog.OpAdmin)} })
	return mux
}
