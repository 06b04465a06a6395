// Command echo is the example and test Lambda function of Sluice: a real
// aws-lambda-go handler that the fetch service's Lambda triggers and the
// smoke tests (harness/stacktest) invoke, locally through AWS's Runtime
// Interface Emulator (localstack/lambda.sh) and unchanged on real Lambda.
//
// It takes the event Lambda's Kafka event source mappings send
// (events.KafkaEvent: records grouped by "<topic>-<partition>", each value
// base64-encoded) and answers with
//
//	{"records": N,
//	 "batchItemFailures": [{"itemIdentifier": {"partition": "<topic>-<partition>", "offset": N}}],
//	 "echo": ["<decoded value>", ...],
//	 "invocationId": "<id>"}
//
// echo lists every record's decoded value, in topic-partition then offset
// order. A record whose decoded value is exactly "fail", or whose value is not
// valid base64 (then it is left out of echo), is reported in
// batchItemFailures, so a caller can exercise partial-batch retries.
//
// invocationId is the "sluice-invocation-id" of the invocation's client
// context (Lambda's ClientContext.Custom, through lambdacontext), the
// idempotency key Sluice's triggers send with every batch; it is left out
// when the caller sent none (a direct invoke, the stack's probe).
//
// The identifier is an object, as AWS's own libraries for Lambda's Kafka
// partial batch response (Powertools) shape it, so Sluice's fetch service
// parses exactly what functions written for Lambda's Kafka event sources
// return.
//
// Build it as Lambda's provided.al2023 runtime expects:
//
//	CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./internal/functions/echo
package main

import (
	"context"
	"encoding/base64"
	"sort"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// FailValue is the decoded record value that the function reports as a failure.
const FailValue = "fail"

// InvocationIDKey is the client context's custom key of the invocation id
// (services/fetch/trigger.ClientContextKey; a function does not import
// Sluice).
const InvocationIDKey = "sluice-invocation-id"

// KafkaItemIdentifier names one record of a Kafka batch.
type KafkaItemIdentifier struct {
	// Partition is the records map key: "<topic>-<partition>".
	Partition string `json:"partition"`
	// Offset is the record's offset.
	Offset int64 `json:"offset"`
}

// BatchItemFailure is one failed record.
type BatchItemFailure struct {
	ItemIdentifier KafkaItemIdentifier `json:"itemIdentifier"`
}

// Response is the function's answer.
type Response struct {
	Records           int                `json:"records"`
	BatchItemFailures []BatchItemFailure `json:"batchItemFailures"`
	Echo              []string           `json:"echo"`
	InvocationID      string             `json:"invocationId,omitempty"`
}

// Handle processes one Kafka batch. It never returns an error: bad records are
// reported per item, so the rest of the batch still counts as processed.
func Handle(ctx context.Context, ev events.KafkaEvent) (Response, error) {
	resp := Response{BatchItemFailures: []BatchItemFailure{}, Echo: []string{}}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		resp.InvocationID = lc.ClientContext.Custom[InvocationIDKey]
	}
	keys := make([]string, 0, len(ev.Records))
	for k := range ev.Records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		recs := append([]events.KafkaRecord(nil), ev.Records[key]...)
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
		for _, r := range recs {
			resp.Records++
			v, err := base64.StdEncoding.DecodeString(r.Value)
			if err == nil {
				resp.Echo = append(resp.Echo, string(v))
			}
			if err != nil || string(v) == FailValue {
				resp.BatchItemFailures = append(resp.BatchItemFailures, BatchItemFailure{
					ItemIdentifier: KafkaItemIdentifier{Partition: partitionKey(key, r), Offset: r.Offset},
				})
			}
		}
	}
	return resp, nil
}

// partitionKey is the records map key Lambda groups by; rebuilt from the
// record when a hand-made event left it empty.
func partitionKey(key string, r events.KafkaRecord) string {
	if key != "" {
		return key
	}
	return r.Topic + "-" + strconv.FormatInt(r.Partition, 10)
}

func main() { lambda.Start(Handle) }
