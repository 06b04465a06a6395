package avroserde_test

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	"github.com/sluicemq/sluice/pkg/schema"
	"github.com/sluicemq/sluice/pkg/sluice/avroserde"
	"github.com/sluicemq/sluice/services/registry"
)

// orderV1 is the schema services/registry/testdata/confluent_client.py
// registers first, and confluentOrder the bytes Confluent's AvroSerializer
// (confluent-kafka 2.16.1) wrote for {"id": "o-1", "cents": 1250} under
// schema id 1 in that test.
const (
	orderV1        = `{"type": "record", "name": "Order", "namespace": "acme", "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}]}`
	confluentOrder = "0000000001066f2d31c413"
)

type order struct {
	ID    string `avro:"id"`
	Cents int64  `avro:"cents"`
}

func newRegistry(t *testing.T) *avroserde.Registry {
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
	return avroserde.NewRegistry(srv.Client(), srv.URL)
}

// A record serialized here is byte for byte what Confluent's serializer
// wrote for it, and Confluent's bytes deserialize here.
func TestSerializerMatchesConfluents(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	ser, err := avroserde.NewSerializer(reg, avroserde.ValueSubject("orders"), orderV1, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ser.Serialize(ctx, order{ID: "o-1", Cents: 1250})
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != confluentOrder {
		t.Fatalf("serialized %s, Confluent's serializer wrote %s", got, confluentOrder)
	}
	theirs, _ := hex.DecodeString(confluentOrder)
	var o order
	if err := avroserde.NewDeserializer(reg).Deserialize(ctx, theirs, &o); err != nil || o != (order{"o-1", 1250}) {
		t.Fatalf("deserialized %+v, %v", o, err)
	}
	var m map[string]any
	if err := avroserde.NewDeserializer(reg).Deserialize(ctx, theirs, &m); err != nil || m["id"] != "o-1" || m["cents"] != int64(1250) {
		t.Fatalf("into a map: %v, %v", m, err)
	}
}

// Without auto-registration the subject must have the schema; bad frames,
// unknown ids and data that is not a datum of its schema are errors, never
// a hang (the deserializer validates before decoding).
func TestSerdeErrors(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	lookup, err := avroserde.NewSerializer(reg, "orders-value", orderV1, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lookup.Serialize(ctx, order{}); err == nil {
		t.Fatal("a lookup of a schema never registered succeeded")
	}
	if _, err := avroserde.NewSerializer(reg, "s", `{"type":`, true); err == nil {
		t.Fatal("a schema that does not parse was accepted")
	}
	ser, _ := avroserde.NewSerializer(reg, "orders-value", orderV1, true)
	if _, err := ser.Serialize(ctx, order{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	d := avroserde.NewDeserializer(reg)
	var o order
	if err := d.Deserialize(ctx, []byte(`{"id":"x"}`), &o); !errors.Is(err, schema.ErrInvalidPayload) {
		t.Fatalf("a value without the frame: %v", err)
	}
	if err := d.Deserialize(ctx, schema.AppendWire(nil, 77, []byte{0}), &o); err == nil {
		t.Fatal("an unknown schema id decoded")
	}
	// id 1 with a string length of 2^31 and nothing after it.
	if err := d.Deserialize(ctx, schema.AppendWire(nil, 1, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}), &o); !errors.Is(err, schema.ErrInvalidPayload) {
		t.Fatalf("a datum claiming more than it holds: %v", err)
	}
}
