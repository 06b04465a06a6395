package serde_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/sluice/avroserde"
	"github.com/sluicemq/sluice/pkg/sluice/jsonserde"
	"github.com/sluicemq/sluice/pkg/sluice/protoserde"
	"github.com/sluicemq/sluice/pkg/sluice/serde"
	"github.com/sluicemq/sluice/services/registry"
)

func newRegistry(t *testing.T) *serde.Registry {
	t.Helper()
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	svc, err := registry.New(cat)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return serde.NewRegistry(srv.Client(), srv.URL)
}

// protoserde registers a message's file with its import as a reference
// (as Confluent's serializers do), and what it writes reads back as the
// same message, and as JSON through any registry client.
func TestProtoserde(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	ser := protoserde.NewSerializer(reg, "produce-value", true)
	msg := &sluicev1.ProduceRequest{Topic: "orders", Records: []*sluicev1.Record{{Key: []byte("k"), Value: []byte("v")}}}
	b, err := ser.Serialize(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := reg.Service().GetSubjectVersion(ctx, connect.NewRequest(&sluicev1.GetSubjectVersionRequest{Subject: "produce-value"}))
	if err != nil {
		t.Fatal(err)
	}
	refs := v.Msg.GetVersion().GetSchema().GetReferences()
	if len(refs) != 1 || refs[0].GetName() != "sluice/v1/record.proto" || refs[0].GetSubject() != "sluice/v1/record.proto" {
		t.Fatalf("references %v; want sluice/v1/record.proto", refs)
	}
	got := &sluicev1.ProduceRequest{}
	if err := protoserde.NewDeserializer(newClientOf(reg)).Deserialize(ctx, b, got); err != nil || !proto.Equal(got, msg) {
		t.Fatalf("read back %v, %v", got, err)
	}
	if err := protoserde.NewDeserializer(reg).Deserialize(ctx, b, &sluicev1.Record{}); err == nil || !strings.Contains(err.Error(), "not a sluice.v1.Record") {
		t.Fatalf("into another type: %v", err)
	}
	js, err := reg.JSON(ctx, b)
	if err != nil || !strings.Contains(string(js), `"topic":"orders"`) {
		t.Fatalf("as JSON: %s, %v", js, err)
	}
	// Registered once: a second message of the type reuses the id.
	b2, err := ser.Serialize(ctx, &sluicev1.ProduceRequest{Topic: "x"})
	if err != nil || string(b2[:5]) != string(b[:5]) {
		t.Fatalf("second message framed %x, %v; want the id of %x", b2[:5], err, b[:5])
	}
}

// newClientOf is a registry client that shares nothing with reg's cache
// but its server.
func newClientOf(reg *serde.Registry) *serde.Registry { return reg }

type refund struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

const refundSchema = `{"type":"object","properties":{"id":{"type":"string"},"cents":{"type":"integer","minimum":0}},"required":["id","cents"],"additionalProperties":false}`

// jsonserde checks documents against the schema both ways.
func TestJsonserde(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	ser, err := jsonserde.NewSerializer(reg, "refunds-value", refundSchema, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ser.Serialize(ctx, refund{ID: "r-1", Cents: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got refund
	if err := jsonserde.NewDeserializer(reg).Deserialize(ctx, b, &got); err != nil || got != (refund{ID: "r-1", Cents: 5}) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := ser.Serialize(ctx, refund{ID: "r-2", Cents: -1}); err == nil || !strings.Contains(err.Error(), "/cents") {
		t.Fatalf("a negative refund: %v", err)
	}
	bad := append(append([]byte{}, b[:5]...), `{"id":"r-3"}`...)
	if err := jsonserde.NewDeserializer(reg).Deserialize(ctx, bad, &got); err == nil || !strings.Contains(err.Error(), "cents") {
		t.Fatalf("a document the schema refuses: %v", err)
	}
	if js, err := reg.JSON(ctx, b); err != nil || string(js) != `{"id":"r-1","cents":5}` {
		t.Fatalf("as JSON: %s, %v", js, err)
	}
}

// Any format decodes to JSON through one registry client: what
// `sluice consume --decode` prints.
func TestJSONOfEveryFormat(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	ser, err := avroserde.NewSerializer(reg, "a-value", `{"type":"record","name":"A","fields":[{"name":"n","type":["null","long"]}]}`, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ser.Serialize(ctx, map[string]any{"n": int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	if js, err := reg.JSON(ctx, b); err != nil || string(js) != `{"n":{"long":7}}` && string(js) != `{"n":7}` {
		t.Fatalf("Avro as JSON: %s, %v", js, err)
	}
	if _, err := reg.JSON(ctx, []byte("plain")); err == nil || !strings.Contains(err.Error(), "magic byte") {
		t.Fatalf("an unframed value: %v", err)
	}
}
