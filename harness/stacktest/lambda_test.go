//go:build integration

package stacktest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluicemq/sluice/harness/testenv"
)

// TestIntegrationLambdaInvokeRealHandler invokes the example aws-lambda-go function
// (internal/functions/echo) running under AWS's Runtime Interface Emulator,
// through the same Lambda Invoke API client the fetch service will use.
func TestIntegrationLambdaInvokeRealHandler(t *testing.T) {
	endpoint := testenv.LambdaEndpoint(t)
	c := lambda.NewFromConfig(testenv.AWSConfig(t, endpoint))

	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	event := events.KafkaEvent{
		EventSource: "aws:kafka",
		Records: map[string][]events.KafkaRecord{
			"orders-0": {
				{Topic: "orders", Partition: 0, Offset: 41, Key: b64("k1"), Value: b64("hello")},
				{Topic: "orders", Partition: 0, Offset: 42, Key: b64("k2"), Value: b64("fail")},
			},
		},
	}
	payload, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	// The emulator serves exactly one function, named "function".
	out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("function"), Payload: payload})
	if err != nil {
		t.Fatalf("invoke through %s: %v", endpoint, err)
	}
	if out.FunctionError != nil {
		t.Fatalf("function error %q: %s", aws.ToString(out.FunctionError), out.Payload)
	}
	var resp struct {
		Records           int      `json:"records"`
		Echo              []string `json:"echo"`
		BatchItemFailures []struct {
			ItemIdentifier struct {
				Partition string `json:"partition"`
				Offset    int64  `json:"offset"`
			} `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out.Payload, &resp); err != nil {
		t.Fatalf("response %s: %v", out.Payload, err)
	}
	if resp.Records != 2 || len(resp.Echo) != 2 || resp.Echo[0] != "hello" {
		t.Fatalf("response = %s, want 2 records echoed", out.Payload)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier.Partition != "orders-0" || resp.BatchItemFailures[0].ItemIdentifier.Offset != 42 {
		t.Fatalf("batchItemFailures = %+v, want exactly orders-0 offset 42", resp.BatchItemFailures)
	}
}
