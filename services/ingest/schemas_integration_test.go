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

// Values Confluent's own Avro serializer framed, with the schema it
// registered through Sluice's registry, are validated at ingest and stored
// as sent; a value it framed for another subject is refused
// (testdata/confluent_produce.py drives it over the Connect JSON API).
func TestIntegrationConfluentSerializerValuesValidated(t *testing.T) {
	python := testenv.ConfluentPython(t)
	e := newSchemaEnv(t)
	e.createTopic("payments", map[string]string{"schema.subject": "payments-value"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "testdata/confluent_produce.py", e.url).CombinedOutput()
	if err != nil {
		t.Fatalf("Confluent's serializer against Sluice: %v\n%s", err, out)
	}
	var res struct {
		Values []string `json:"values"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the script's output %q: %v", out, err)
	}
	got := e.read("payments")
	if len(got) != len(res.Values) {
		t.Fatalf("payments holds %d records; want the %d valid values only", len(got), len(res.Values))
	}
	for i, r := range got {
		if hex.EncodeToString(r.GetValue()) != res.Values[i] {
			t.Fatalf("record %d = %x; want the serializer's %s", i, r.GetValue(), res.Values[i])
		}
	}
	t.Logf("%d values from Confluent's AvroSerializer stored as sent; one framed for another subject refused", len(got))
}
