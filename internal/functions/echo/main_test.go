package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestHandleEchoesAndReportsFailures(t *testing.T) {
	ev := events.KafkaEvent{
		EventSource: "SelfManagedKafka",
		Records: map[string][]events.KafkaRecord{
			"orders-1": {
				{Topic: "orders", Partition: 1, Offset: 7, Value: b64("c")},
			},
			"orders-0": {
				{Topic: "orders", Partition: 0, Offset: 11, Value: b64("b")},
				{Topic: "orders", Partition: 0, Offset: 10, Value: b64("a")},
				{Topic: "orders", Partition: 0, Offset: 12, Value: b64("fail")},
			},
		},
	}
	got, err := Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	want := Response{
		Records: 4,
		BatchItemFailures: []BatchItemFailure{
			{ItemIdentifier: KafkaItemIdentifier{Partition: "orders-0", Offset: 12}},
		},
		Echo: []string{"a", "b", "fail", "c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Handle = %+v, want %+v", got, want)
	}
}

func TestHandleBadBase64IsAFailure(t *testing.T) {
	ev := events.KafkaEvent{Records: map[string][]events.KafkaRecord{
		"t-3": {{Topic: "t", Partition: 3, Offset: 1, Value: "!!not base64!!"}, {Topic: "t", Partition: 3, Offset: 2}},
	}}
	got, _ := Handle(context.Background(), ev)
	if got.Records != 2 || len(got.BatchItemFailures) != 1 ||
		got.BatchItemFailures[0].ItemIdentifier != (KafkaItemIdentifier{Partition: "t-3", Offset: 1}) ||
		!reflect.DeepEqual(got.Echo, []string{""}) {
		t.Fatalf("Handle = %+v", got)
	}
}

// TestWireShape decodes the JSON Lambda would send and checks the JSON the
// function answers, field names included: the fetch service parses these bytes.
func TestWireShape(t *testing.T) {
	in := `{"eventSource":"aws:kafka","bootstrapServers":"b:9092","records":{"logs-0":[
	  {"topic":"logs","partition":0,"offset":5,"timestamp":1700000000000,"timestampType":"CREATE_TIME",
	   "value":"` + b64("hello") + `","headers":[{"h":[104,105]}]},
	  {"topic":"logs","partition":0,"offset":6,"timestamp":1700000000001,"timestampType":"CREATE_TIME",
	   "value":"` + b64("fail") + `","headers":[]}]}}`
	var ev events.KafkaEvent
	if err := json.Unmarshal([]byte(in), &ev); err != nil {
		t.Fatalf("unmarshal event: %v", err)
	}
	resp, err := Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	out, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"records":2,"batchItemFailures":[{"itemIdentifier":{"partition":"logs-0","offset":6}}],"echo":["hello","fail"]}`
	if string(out) != want {
		t.Fatalf("response JSON\n got %s\nwant %s", out, want)
	}
}

func TestHandleEmptyEvent(t *testing.T) {
	got, err := Handle(context.Background(), events.KafkaEvent{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(got)
	if string(out) != `{"records":0,"batchItemFailures":[],"echo":[]}` {
		t.Fatalf("empty event answered %s", out)
	}
}

// TestHandleEchoesInvocationID: the id in the client context's custom map,
// as aws-lambda-go hands it to the handler, comes back in invocationId.
func TestHandleEchoesInvocationID(t *testing.T) {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{
		ClientContext: lambdacontext.ClientContext{Custom: map[string]string{InvocationIDKey: "v1/tr/t/id/0/1-1/3"}},
	})
	got, err := Handle(ctx, events.KafkaEvent{})
	if err != nil || got.InvocationID != "v1/tr/t/id/0/1-1/3" {
		t.Fatalf("Handle = %+v, %v", got, err)
	}
}
