//go:build integration

package ingest_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/testenv"
)

// Values Confluent's own Avro, Protobuf and JSON Schema serializers framed, with the
// schemas they registered through Sluice's registry (the Protobuf one with
// a reference), are validated at ingest and stored as sent; invalid ones
// are refused, and so are incompatible Protobuf and JSON Schema versions
// (testdata/confluent_produce.py drives them over the Connect JSON API).
func TestIntegrationConfluentSerializerValuesValidated(t *testing.T) {
	python := testenv.ConfluentPython(t)
	e := newSchemaEnv(t)
	e.createTopic("payments", map[string]string{"schema.subject": "payments-value"})
	e.createTopic("pb-payments", map[string]string{"schema.subject": "pb-payments-value"})
	e.createTopic("json-refunds", map[string]string{"schema.subject": "json-refunds-value"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "testdata/confluent_produce.py", e.url).CombinedOutput()
	if err != nil {
		t.Fatalf("Confluent's serializer against Sluice: %v\n%s", err, out)
	}
	var res struct {
		Values     []string `json:"values"`
		PBValues   []string `json:"pb_values"`
		JSONValues []string `json:"json_values"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the script's output %q: %v", out, err)
	}
	for topic, want := range map[string][]string{"payments": res.Values, "pb-payments": res.PBValues, "json-refunds": res.JSONValues} {
		got := e.read(topic)
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("%s holds %d records; want the %d valid values only", topic, len(got), len(want))
		}
		for i, r := range got {
			if hex.EncodeToString(r.GetValue()) != want[i] {
				t.Fatalf("%s record %d = %x; want the serializer's %s", topic, i, r.GetValue(), want[i])
			}
		}
	}
	t.Logf("%d values from Confluent's AvroSerializer, %d from its ProtobufSerializer and %d from its JSONSerializer stored as sent; invalid ones refused",
		len(res.Values), len(res.PBValues), len(res.JSONValues))
}
