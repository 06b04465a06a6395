// Command orders is an example Lambda function for a Sluice trigger: an
// ordinary aws-lambda-go handler of Lambda's Kafka event
// (events.KafkaEvent), the same code that runs behind Lambda's own Kafka
// event source. The README's "Functions" walk-through builds it, runs it
// under AWS's Runtime Interface Emulator (cmd/lambdapool) and triggers it
// from `sluice dev`.
//
// Each record's value is an order, {"id": "...", "amount": N}. A valid
// order is "processed" (printed to standard output, which the emulator's
// log shows); a record that is not a valid order is reported in
// batchItemFailures, so Sluice retries from it and, once its retries are
// spent, sends it to the trigger's on_failure_topic while the orders after
// it go on.
//
// The invocation id Sluice sends in the client context
// ("sluice-invocation-id") is the same every time the same batch is
// invoked again — a retry, or the partition's new owner after a crash — so
// a function with side effects can record it and skip a batch it already
// did.
//
// Build it as Lambda's provided.al2023 runtime expects:
//
//	CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./examples/functions/orders
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Order is one record's value.
type Order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

// Response is Lambda's partial batch response: the records not processed.
type Response struct {
	BatchItemFailures []BatchItemFailure `json:"batchItemFailures"`
}

// BatchItemFailure names one record by its offset (Sluice also accepts
// {"partition": "<topic>-<partition>", "offset": N}).
type BatchItemFailure struct {
	ItemIdentifier string `json:"itemIdentifier"`
}

// Handle processes one batch.
func Handle(ctx context.Context, ev events.KafkaEvent) (Response, error) {
	id := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		id = lc.ClientContext.Custom["sluice-invocation-id"]
	}
	resp := Response{BatchItemFailures: []BatchItemFailure{}}
	keys := make([]string, 0, len(ev.Records))
	for k := range ev.Records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, r := range ev.Records[k] {
			order, err := parse(r.Value)
			if err != nil {
				fmt.Printf("invocation %s: %s offset %d: not an order (%v): reported as failed\n", id, k, r.Offset, err)
				resp.BatchItemFailures = append(resp.BatchItemFailures, BatchItemFailure{ItemIdentifier: fmt.Sprint(r.Offset)})
				continue
			}
			fmt.Printf("invocation %s: %s offset %d: order %s for %.2f processed\n", id, k, r.Offset, order.ID, order.Amount)
		}
	}
	return resp, nil
}

// parse decodes a record value (base64 in the event) as an order.
func parse(value string) (Order, error) {
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return Order{}, err
	}
	var o Order
	if err := json.Unmarshal(raw, &o); err != nil {
		return Order{}, err
	}
	if o.ID == "" {
		return Order{}, fmt.Errorf("no id")
	}
	return o, nil
}

func main() { lambda.Start(Handle) }
