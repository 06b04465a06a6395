package main

import (
	"context"
	"encoding/base64"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// Valid orders are processed; a value that is not an order is reported by
// its offset in batchItemFailures.
func TestHandleReportsRecordsThatAreNotOrders(t *testing.T) {
	rec := func(off int64, v string) events.KafkaRecord {
		return events.KafkaRecord{Topic: "orders", Partition: 0, Offset: off, Value: base64.StdEncoding.EncodeToString([]byte(v))}
	}
	ev := events.KafkaEvent{Records: map[string][]events.KafkaRecord{"orders-0": {
		rec(4, `{"id":"a-1","amount":12.5}`), rec(5, `not json`), rec(6, `{"amount":3}`), rec(7, `{"id":"a-2","amount":1}`),
	}}}
	got, err := Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	want := []BatchItemFailure{{ItemIdentifier: "5"}, {ItemIdentifier: "6"}}
	if !reflect.DeepEqual(got.BatchItemFailures, want) {
		t.Fatalf("batchItemFailures %v, want %v", got.BatchItemFailures, want)
	}
}
