//go:build integration

package registry

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/testenv"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/pkg/schema/registry"
)

// Confluent's own Python client — its SchemaRegistryClient, AvroSerializer
// and AvroDeserializer, from confluent-kafka on PyPI — against the REST API
// over the DynamoDB catalog on the AWS emulator: registering through the
// serializer, reading back through a deserializer that fetches the schema
// by id, a 409 for an incompatible version, compatibility checks, levels,
// lookup, an unknown id's 40403, and deletes (testdata/confluent_client.py
// holds every expectation). Then the record the serializer framed is
// checked here: magic byte, schema id, and an Avro datum the registry's
// own compiled schema validates.
func TestIntegrationConfluentPythonClient(t *testing.T) {
	python := testenv.ConfluentPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dc := catdynamo.NewClient(testenv.AWSConfig(t, testenv.AWSEndpoint(t)))
	opts := catdynamo.Options{Table: fmt.Sprintf("sluice-registry-%d", time.Now().UnixNano())}
	if err := catdynamo.EnsureTable(ctx, dc, opts); err != nil {
		t.Fatal(err)
	}
	cat, err := catdynamo.New(dc, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := registry.New(registry.Config{Store: cat})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix(RESTPrefix, REST(r)))
	defer srv.Close()

	out, err := exec.CommandContext(ctx, python, "testdata/confluent_client.py", srv.URL+RESTPrefix).CombinedOutput()
	if err != nil {
		t.Fatalf("Confluent's client failed: %v\n%s", err, out)
	}
	var res struct {
		Framed   string `json:"framed"`
		SchemaID int64  `json:"schema_id"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the client's output %q: %v", out, err)
	}
	framed, err := hex.DecodeString(res.Framed)
	if err != nil {
		t.Fatal(err)
	}
	id, payload, err := schema.ParseWire(framed)
	if err != nil || id != res.SchemaID {
		t.Fatalf("the frame %x: schema %d, %v; the client said %d", framed, id, err, res.SchemaID)
	}
	s, err := r.Compiled(ctx, res.SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(payload); err != nil {
		t.Fatalf("the serializer's datum does not validate against schema %d: %v", res.SchemaID, err)
	}
	if err := s.Validate(append(payload, 0)); err == nil {
		t.Fatal("a datum with a byte appended validated")
	}
	t.Logf("Confluent's client registered, serialized (%d bytes), read back and was refused as Confluent's registry would", len(framed))
}
