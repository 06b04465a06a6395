package sluice_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/pkg/sluice/avroserde"
)

type order struct {
	ID   string `avro:"id"`
	Item string `avro:"item"`
}

const orderAvro = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"item","type":"string"}]}`

// The SDK against topics that validate records: values from the Avro
// serializer are stored; a value that is not refuses its batch for good
// (the idempotent producer bumps its epoch and goes on), or, with
// schema.validation=dlq and a producer without idempotence, lands in the
// dead-letter topic, which Result.DeadLetter says.
func TestProducerAgainstValidatingTopics(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, cfg := range map[string]map[string]string{
		"orders":    {"schema.subject": "orders-value"},
		"loose":     {"schema.subject": "orders-value", "schema.validation": "dlq", "schema.dlq.topic": "loose.dlq"},
		"loose.dlq": nil,
	} {
		if _, err := c.CreateTopic(ctx, name, 1, cfg); err != nil {
			t.Fatal(err)
		}
	}
	var prot http.Protocols
	prot.SetUnencryptedHTTP2(true)
	reg := avroserde.NewRegistry(&http.Client{Transport: &http.Transport{Protocols: &prot}}, "http://"+tc.addr)
	ser, err := avroserde.NewSerializer(reg, "orders-value", orderAvro, true)
	if err != nil {
		t.Fatal(err)
	}
	value := func(id string) []byte {
		t.Helper()
		b, err := ser.Serialize(ctx, order{ID: id, Item: "apple"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	p := producer(t, c, sluice.WithLinger(0))
	if r, err := p.ProduceSync(ctx, sluice.NewRecord("orders", nil, value("o-1"))); err != nil || r.Offset != 0 {
		t.Fatalf("a serialized value: %+v, %v", r, err)
	}
	_, err = p.ProduceSync(ctx, sluice.NewRecord("orders", nil, []byte(`{"id":"o-2"}`)))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || sluice.IsRetriable(err) || !strings.Contains(err.Error(), "magic byte") {
		t.Fatalf("a JSON value: %v; want a final INVALID_ARGUMENT saying why", err)
	}
	if r, err := p.ProduceSync(ctx, sluice.NewRecord("orders", nil, value("o-3"))); err != nil || r.Offset != 1 || r.DeadLetter != nil {
		t.Fatalf("the next value: %+v, %v; want offset 1", r, err)
	}

	plain := producer(t, c, sluice.WithLinger(0), sluice.WithIdempotence(false))
	r, err := plain.ProduceSync(ctx, sluice.NewRecord("loose", nil, []byte("nope")))
	if err != nil || r.Offset != -1 || r.DeadLetter == nil || r.DeadLetter.Topic != "loose.dlq" || r.DeadLetter.Offset != 0 || !strings.Contains(r.DeadLetter.Reason, "bytes, shorter than") {
		t.Fatalf("an invalid value to a dlq topic: %+v (dead letter %+v), %v", r, r.DeadLetter, err)
	}
	if r, err := plain.ProduceSync(ctx, sluice.NewRecord("loose", nil, value("o-4"))); err != nil || r.Offset != 0 || r.DeadLetter != nil {
		t.Fatalf("a valid value to a dlq topic: %+v, %v", r, err)
	}
	if got := tc.readPartition("loose.dlq", 0); len(got) != 1 || string(got[0].Value) != "nope" {
		t.Fatalf("loose.dlq holds %v", got)
	}
}
