package registry

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	"github.com/sluicemq/sluice/pkg/schema/registry"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	r, err := registry.New(registry.Config{Store: cat})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/registry", REST(r)))
	t.Cleanup(srv.Close)
	return srv
}

// call sends a request and returns the status and body; it checks the
// content type Confluent's clients send and expect.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+"/registry"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ContentType)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != ContentType {
		t.Errorf("%s %s: content type %q", method, path, ct)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func want(t *testing.T, srv *httptest.Server, method, path, body string, status int, out string) {
	t.Helper()
	got, b := call(t, srv, method, path, body)
	if got != status || b != out {
		t.Errorf("%s %s %s\n= %d %s\nwant %d %s", method, path, body, got, b, status, out)
	}
}

func schemaJSON(s string) string {
	b, _ := json.Marshal(map[string]string{"schema": s})
	return string(b)
}

const (
	// In the registry's normal form (pkg/schema: hamba/avro's key order),
	// so what is stored reads back as sent.
	order1 = `{"name":"Order","type":"record","fields":[{"name":"id","type":"string"}]}`
	order2 = `{"name":"Order","type":"record","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int","default":1}]}`
	orderX = `{"type":"record","name":"Order","fields":[{"name":"id","type":"int"}]}`
)

// The paths and bodies Confluent's serializers and tools use, answered as
// Confluent Schema Registry answers them — registering, reading by id and
// version, lookup, checks, levels, deletes — and its error codes.
func TestRESTConfluentPaths(t *testing.T) {
	srv := newServer(t)
	n1 := `{\"name\":\"Order\",\"type\":\"record\",\"fields\":[{\"name\":\"id\",\"type\":\"string\"}]}`
	v1 := `{"subject":"orders-value","version":1,"id":1,"schema":"` + n1 + `"}`
	want(t, srv, "GET", "/", "", 200, `{}`)
	want(t, srv, "GET", "/subjects", "", 200, `[]`)
	want(t, srv, "POST", "/subjects/orders-value/versions", schemaJSON(order1), 200, v1)
	want(t, srv, "POST", "/subjects/orders-value/versions", schemaJSON(order1), 200, v1) // idempotent
	want(t, srv, "GET", "/schemas/ids/1", "", 200, `{"schema":"`+n1+`"}`)
	want(t, srv, "GET", "/schemas/ids/1/schema", "", 200, order1)
	want(t, srv, "GET", "/subjects/orders-value/versions/latest", "", 200, v1)
	want(t, srv, "GET", "/subjects/orders-value/versions/1/schema", "", 200, order1)
	want(t, srv, "POST", "/subjects/orders-value", schemaJSON(order1), 200, v1)
	want(t, srv, "GET", "/subjects", "", 200, `["orders-value"]`)

	want(t, srv, "POST", "/compatibility/subjects/orders-value/versions/latest", schemaJSON(order2), 200, `{"is_compatible":true}`)
	_, b := call(t, srv, "POST", "/compatibility/subjects/orders-value/versions/latest?verbose=true", schemaJSON(orderX))
	if !strings.HasPrefix(b, `{"is_compatible":false,"messages":["the new schema cannot read data written with version 1`) {
		t.Errorf("verbose check of an incompatible schema: %s", b)
	}
	status, b := call(t, srv, "POST", "/subjects/orders-value/versions", schemaJSON(orderX))
	if status != 409 || !strings.HasPrefix(b, `{"error_code":409,"message":"Schema being registered is incompatible`) {
		t.Errorf("an incompatible registration: %d %s", status, b)
	}
	want(t, srv, "POST", "/subjects/orders-value/versions", schemaJSON(order2), 200,
		`{"subject":"orders-value","version":2,"id":2,"schema":"{\"name\":\"Order\",\"type\":\"record\",\"fields\":[{\"name\":\"id\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"int\",\"default\":1}]}"}`)
	want(t, srv, "GET", "/subjects/orders-value/versions", "", 200, `[1,2]`)

	want(t, srv, "GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`)
	want(t, srv, "GET", "/config/orders-value", "", 404, `{"error_code":40408,"message":"Subject 'orders-value' does not have subject-level compatibility configured"}`)
	want(t, srv, "GET", "/config/orders-value?defaultToGlobal=true", "", 200, `{"compatibilityLevel":"BACKWARD"}`)
	want(t, srv, "PUT", "/config/orders-value", `{"compatibility":"FULL"}`, 200, `{"compatibility":"FULL"}`)
	want(t, srv, "GET", "/config/orders-value", "", 200, `{"compatibilityLevel":"FULL"}`)
	want(t, srv, "DELETE", "/config/orders-value", "", 200, `{"compatibilityLevel":"FULL"}`)
	status, _ = call(t, srv, "PUT", "/config", `{"compatibility":"SIDEWAYS"}`)
	if status != 422 {
		t.Errorf("an unknown level: %d", status)
	}

	want(t, srv, "GET", "/schemas/ids/99", "", 404, `{"error_code":40403,"message":"Schema 99 not found"}`)
	want(t, srv, "GET", "/subjects/nope/versions", "", 404, `{"error_code":40401,"message":"Subject 'nope' not found."}`)
	want(t, srv, "GET", "/subjects/orders-value/versions/9", "", 404, `{"error_code":40402,"message":"Version 9 not found."}`)
	status, b = call(t, srv, "GET", "/subjects/orders-value/versions/zero", "")
	if status != 422 || !strings.HasPrefix(b, `{"error_code":42202,`) {
		t.Errorf("a version that is not one: %d %s", status, b)
	}
	status, b = call(t, srv, "POST", "/subjects/orders-value/versions", `{"schema":"{\"type\":"}`)
	if status != 422 || !strings.HasPrefix(b, `{"error_code":42201,`) {
		t.Errorf("a schema that does not parse: %d %s", status, b)
	}
	status, _ = call(t, srv, "POST", "/subjects/orders-value/versions", `not json`)
	if status != 400 {
		t.Errorf("a body that is not JSON: %d", status)
	}
	big := `{"schema":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	status, b = call(t, srv, "POST", "/subjects/orders-value/versions", big)
	if status != 422 || !strings.Contains(b, "more than") {
		t.Errorf("a body past the bound: %d %s", status, b)
	}

	want(t, srv, "DELETE", "/subjects/orders-value/versions/1?permanent=true", "", 404,
		`{"error_code":40407,"message":"Subject 'orders-value' Version 1 was not deleted first before being permanently deleted"}`)
	want(t, srv, "DELETE", "/subjects/orders-value/versions/1", "", 200, `1`)
	want(t, srv, "GET", "/subjects/orders-value/versions", "", 200, `[2]`)
	want(t, srv, "GET", "/subjects/orders-value/versions?deleted=true", "", 200, `[1,2]`)
	want(t, srv, "DELETE", "/subjects/orders-value", "", 200, `[2]`)
	want(t, srv, "GET", "/subjects", "", 200, `[]`)
	want(t, srv, "GET", "/subjects?deleted=true", "", 200, `["orders-value"]`)
	want(t, srv, "DELETE", "/subjects/orders-value?permanent=true", "", 200, `[1,2]`)
	want(t, srv, "GET", "/schemas/ids/1", "", 200, `{"schema":"`+n1+`"}`) // ids outlive their versions
}
