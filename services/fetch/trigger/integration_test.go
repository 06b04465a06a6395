//go:build integration

package trigger

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/record"
)

// TestIntegrationInvokeEchoUnderEmulator invokes the real aws-lambda-go
// handler internal/functions/echo, which the stack runs under AWS's Runtime
// Interface Emulator (localstack/lambda.sh), through the Invoker: the
// event decodes in the handler as Lambda's Kafka event, the handler's
// batchItemFailures (records whose value is "fail") come back as failed
// offsets, and the invocation id reaches the handler through the client
// context — the same one when the batch is invoked again.
func TestIntegrationInvokeEchoUnderEmulator(t *testing.T) {
	endpoint := testenv.LambdaEndpoint(t)
	iv := NewInvoker(testenv.AWSConfig(t, endpoint), endpoint)

	recs := []record.Record{
		{Offset: 41, Timestamp: 1_700_000_000_000, Key: []byte("k1"), Value: []byte("a"), Headers: []record.Header{{Key: "h", Value: []byte{0xff}}}},
		{Offset: 42, Timestamp: 1_700_000_000_001, Key: []byte("k2"), Value: []byte("fail")},
		{Offset: 43, Timestamp: 1_700_000_000_002, Value: []byte("b")},
		{Offset: 44, Timestamp: 1_700_000_000_003, Key: []byte("k4"), Value: []byte("fail")},
		{Offset: 45, Timestamp: 1_700_000_000_004, Key: []byte("k5"), Value: []byte("not in this batch")},
	}
	enc, err := NewEncoder("127.0.0.1:9092", 4, MaxPayloadBytes)
	if err != nil {
		t.Fatal(err)
	}
	batch, payload, err := enc.Take("orders", 2, recs)
	if err != nil {
		t.Fatal(err)
	}
	id := InvocationID(InvocationKey{Trigger: "echo", Topic: "orders", TopicID: "t-1", Partition: 2,
		FirstOffset: batch.FirstOffset(), LastOffset: batch.LastOffset(), LeaseEpoch: 5})

	// The emulator serves exactly one function, named "function".
	for attempt := range 2 {
		res := iv.Invoke(context.Background(), "function", id, batch, payload)
		if res.Outcome != Success {
			t.Fatalf("attempt %d: outcome %v: %v", attempt, res.Outcome, res.Err)
		}
		if want := []int64{42, 44}; !slices.Equal(res.Failed, want) {
			t.Fatalf("attempt %d: failed %v, want %v (answer %s)", attempt, res.Failed, want, res.Payload)
		}
		var answer struct {
			Records      int      `json:"records"`
			Echo         []string `json:"echo"`
			InvocationID string   `json:"invocationId"`
		}
		if err := json.Unmarshal(res.Payload, &answer); err != nil {
			t.Fatalf("answer %s: %v", res.Payload, err)
		}
		if answer.Records != 4 || !slices.Equal(answer.Echo, []string{"a", "fail", "b", "fail"}) {
			t.Fatalf("attempt %d: answer %s, want the batch's 4 values echoed in offset order", attempt, res.Payload)
		}
		if answer.InvocationID != id {
			t.Fatalf("attempt %d: the handler saw invocation id %q, want %q", attempt, answer.InvocationID, id)
		}
	}
}
