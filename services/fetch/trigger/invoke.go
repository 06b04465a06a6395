package trigger

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// Outcome is the class of an invocation's result: what the runtime does
// next depends on it alone.
type Outcome int

const (
	// Success: the function ran and returned normally. Result.Failed lists
	// the offsets it reported in batchItemFailures (none: the whole batch
	// succeeded).
	Success Outcome = iota + 1
	// FunctionError: the function failed the whole batch (it returned an
	// error, timed out, crashed, or answered batchItemFailures that do not
	// name records of the batch). Retried with backoff, spending a retry.
	FunctionError
	// Throttled: Lambda refused for concurrency or rate (429
	// TooManyRequestsException). Retried with backoff, spending no retry.
	Throttled
	// Transient: no answer, a Lambda service error (5xx) or a function
	// not ready yet (409): the function
	// may or may not have run. Retried with backoff, spending no retry —
	// the invocation id lets the function recognise a repeat.
	Transient
	// Rejected: Lambda refused the request itself (another 4xx: no such
	// function, payload too large, access denied). Waiting does not help;
	// the runtime reports it and stops the partition until the trigger
	// or the function changes.
	Rejected
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case FunctionError:
		return "function error"
	case Throttled:
		return "throttled"
	case Transient:
		return "transient"
	case Rejected:
		return "rejected"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is what one invocation came to.
type Result struct {
	Outcome Outcome
	// Failed are the offsets the function reported failed, ascending and
	// distinct, each an offset of the batch. Only with Success.
	Failed []int64
	// Err says what went wrong for every outcome but Success; a
	// *FunctionErr for FunctionError.
	Err error
	// RetryAfter is Lambda's hint on a Throttled answer (Retry-After), 0
	// without one; the runtime waits at least this long and at most its
	// backoff's Max.
	RetryAfter time.Duration
	// Payload is the function's answer (≤ 6 MB, Lambda's response limit)
	// when it ran: Success and FunctionError.
	Payload []byte
}

// FunctionErr is a function's failure of a whole batch.
type FunctionErr struct {
	// Type is Lambda's X-Amz-Function-Error ("Unhandled", "Handled"), or
	// "BatchItemFailures" for a response naming records not in the batch.
	Type string
	// Payload is the start of the function's answer (its errorMessage and
	// errorType), at most MaxErrorPayload bytes, for logs and DLQ headers.
	Payload []byte
}

// MaxErrorPayload bounds FunctionErr.Payload.
const MaxErrorPayload = 1024

func (e *FunctionErr) Error() string {
	return fmt.Sprintf("function error %s: %s", e.Type, e.Payload)
}

// Invoker invokes functions through the Lambda Invoke API. It is safe for
// concurrent use (the SDK client is). It never retries: the SDK's own
// retries are off, so the trigger runtime is the one retry layer and
// every attempt is counted and backed off by its policy.
type Invoker struct {
	client *lambda.Client
}

// NewInvoker returns an Invoker over cfg (region and credentials). A
// non-empty endpoint replaces Lambda's: LocalStack, or AWS's Runtime
// Interface Emulator (which serves one function, named "function").
func NewInvoker(cfg aws.Config, endpoint string) *Invoker {
	return &Invoker{client: lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 1
	})}
}

// Invoke invokes function synchronously with payload (an event of batch,
// from Encoder.Take) and the invocation id in the client context, and
// classifies the result. A canceled ctx gives Transient with ctx's error;
// the caller checks ctx.
func (iv *Invoker) Invoke(ctx context.Context, function, invocationID string, batch Batch, payload []byte) Result {
	if len(batch.Records) == 0 {
		panic("trigger: Invoke of an empty batch")
	}
	cc, err := ClientContext(invocationID)
	if err != nil {
		return Result{Outcome: Rejected, Err: err}
	}
	out, err := iv.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(function),
		InvocationType: types.InvocationTypeRequestResponse,
		ClientContext:  aws.String(cc),
		Payload:        payload,
	})
	return Classify(out, err, batch)
}

// Classify is the one place an Invoke's answer becomes an Outcome:
//
//   - an error of type TooManyRequestsException, or any HTTP 429: Throttled;
//   - HTTP 409 (ResourceConflictException: the function is Pending or
//     being updated): Transient;
//   - another HTTP 4xx: Rejected;
//   - any other error (5xx, no response, canceled): Transient;
//   - FunctionError set (X-Amz-Function-Error): FunctionError;
//   - a payload that is aws-lambda-go's error shape alone
//     ({"errorMessage", "errorType"[, "stackTrace"]}): FunctionError. Real
//     Lambda sets the header for these; the Runtime Interface Emulator
//     does not, and a handler's normal answer has no reason to be exactly
//     this shape;
//   - otherwise Success, with the batchItemFailures of checkFailures.
func Classify(out *lambda.InvokeOutput, err error, batch Batch) Result {
	if err != nil {
		var throttled *types.TooManyRequestsException
		var resp *awshttp.ResponseError
		switch {
		case errors.As(err, &throttled):
			return Result{Outcome: Throttled, Err: err, RetryAfter: retryAfter(throttled.RetryAfterSeconds)}
		case errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusTooManyRequests:
			return Result{Outcome: Throttled, Err: err}
		case errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusConflict:
			// ResourceConflictException: the function is Pending or
			// being updated; it passes.
			return Result{Outcome: Transient, Err: err}
		case errors.As(err, &resp) && resp.HTTPStatusCode() >= 400 && resp.HTTPStatusCode() < 500:
			return Result{Outcome: Rejected, Err: err}
		}
		return Result{Outcome: Transient, Err: err}
	}
	p := out.Payload
	if out.FunctionError != nil {
		return Result{Outcome: FunctionError, Payload: p, Err: &FunctionErr{Type: aws.ToString(out.FunctionError), Payload: clip(p)}}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(p, &obj) != nil {
		return Result{Outcome: Success, Payload: p} // null, a string, a list: no batchItemFailures
	}
	if isErrorShape(obj) {
		return Result{Outcome: FunctionError, Payload: p, Err: &FunctionErr{Type: "Unhandled", Payload: clip(p)}}
	}
	failed, err := checkFailures(obj["batchItemFailures"], batch)
	if err != nil {
		return Result{Outcome: FunctionError, Payload: p, Err: &FunctionErr{Type: "BatchItemFailures", Payload: []byte(err.Error())}}
	}
	return Result{Outcome: Success, Failed: failed, Payload: p}
}

// retryAfter reads a Retry-After of whole seconds; anything else is no
// hint.
func retryAfter(seconds *string) time.Duration {
	n, err := strconv.ParseInt(aws.ToString(seconds), 10, 64)
	if err != nil || n <= 0 || n > maxRetryAfterSeconds {
		return 0
	}
	return time.Duration(n) * time.Second
}

// maxRetryAfterSeconds bounds the hint: the longest backoff a trigger can
// have (catalog.MaxTriggerRetryBackoffMs).
const maxRetryAfterSeconds = catalog.MaxTriggerRetryBackoffMs / 1000

func isErrorShape(obj map[string]json.RawMessage) bool {
	if _, ok := obj["errorMessage"]; !ok {
		return false
	}
	for k := range obj {
		if k != "errorMessage" && k != "errorType" && k != "stackTrace" {
			return false
		}
	}
	return true
}

// checkFailures reads a response's batchItemFailures: absent or null
// means none; otherwise a list of {"itemIdentifier": id} where id names a
// record of the batch as
//
//   - the offset as a decimal string, "42" (Lambda's partial batch
//     response for Kinesis and SQS uses a string identifier), or a JSON
//     number, 42;
//   - an object {"partition": "<topic>-<partition>", "offset": 42}, as
//     AWS's Powertools for Lambda's Kafka sources and our echo function
//     shape it; the partition, if given, must be the batch's.
//
// Anything else — an identifier null, empty, malformed or naming an
// offset not in the batch — fails the whole batch, as Lambda does for
// Kinesis: the function did not say which records it processed, so none
// may be committed.
func checkFailures(raw json.RawMessage, batch Batch) ([]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []struct {
		ItemIdentifier json.RawMessage `json:"itemIdentifier"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("batchItemFailures is not a list of {itemIdentifier}: %w", err)
	}
	var failed []int64
	for i, it := range items {
		off, err := itemOffset(it.ItemIdentifier, batch)
		if err != nil {
			return nil, fmt.Errorf("batchItemFailures[%d]: %w", i, err)
		}
		if _, found := slices.BinarySearchFunc(batch.Records, off, func(r record.Record, o int64) int { return cmp.Compare(r.Offset, o) }); !found {
			return nil, fmt.Errorf("batchItemFailures[%d]: offset %d is not in the batch (%d..%d)", i, off, batch.FirstOffset(), batch.LastOffset())
		}
		failed = append(failed, off)
	}
	slices.Sort(failed)
	return slices.Compact(failed), nil
}

func itemOffset(id json.RawMessage, batch Batch) (int64, error) {
	id = bytes.TrimSpace(id)
	if len(id) == 0 || string(id) == "null" {
		return 0, errors.New("itemIdentifier is missing or null")
	}
	switch id[0] {
	case '"':
		var s string
		if err := json.Unmarshal(id, &s); err != nil {
			return 0, fmt.Errorf("itemIdentifier %s: %w", id, err)
		}
		return parseOffset(s)
	case '{':
		var o struct {
			Partition *string          `json:"partition"`
			Offset    *json.RawMessage `json:"offset"`
		}
		if err := json.Unmarshal(id, &o); err != nil || o.Offset == nil {
			return 0, fmt.Errorf("itemIdentifier %s: want {\"partition\", \"offset\"}", clip(id))
		}
		if o.Partition != nil && *o.Partition != RecordsKey(batch.Topic, batch.Partition) {
			return 0, fmt.Errorf("itemIdentifier partition %q is not the batch's %q", *o.Partition, RecordsKey(batch.Topic, batch.Partition))
		}
		if off := bytes.TrimSpace(*o.Offset); len(off) == 0 || off[0] == '{' || off[0] == '[' {
			return 0, fmt.Errorf("itemIdentifier %s: offset is not a number or a decimal string", clip(id))
		}
		return itemOffset(*o.Offset, batch)
	default:
		return parseOffset(string(id))
	}
}

func parseOffset(s string) (int64, error) {
	off, err := strconv.ParseInt(s, 10, 64)
	if err != nil || off < 0 {
		return 0, fmt.Errorf("itemIdentifier %q is not an offset", clipString(s))
	}
	return off, nil
}

func clip(b []byte) []byte {
	if len(b) > MaxErrorPayload {
		b = b[:MaxErrorPayload]
	}
	return bytes.Clone(b)
}

func clipString(s string) string { return string(clip([]byte(s))) }
