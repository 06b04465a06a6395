package trigger

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluicemq/sluice/pkg/record"
)

// FuzzClassify: a function's answer is untrusted input. Whatever it is,
// Classify does not panic, and a Success names only offsets of the batch,
// ascending and distinct.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		`null`, `{}`, `"x"`, `[1]`, `{"batchItemFailures":[]}`,
		`{"batchItemFailures":[{"itemIdentifier":"11"}]}`,
		`{"batchItemFailures":[{"itemIdentifier":{"partition":"orders-0","offset":13}},{"itemIdentifier":10}]}`,
		`{"batchItemFailures":[{"itemIdentifier":{"offset":{"offset":1}}}]}`,
		`{"errorMessage":"x","errorType":"y"}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, payload []byte, functionError bool) {
		out := &lambda.InvokeOutput{StatusCode: 200, Payload: payload}
		if functionError {
			out.FunctionError = aws.String("Unhandled")
		}
		batch := testBatch()
		res := Classify(out, nil, batch)
		switch res.Outcome {
		case Success:
			if !slices.IsSorted(res.Failed) || len(slices.Compact(slices.Clone(res.Failed))) != len(res.Failed) {
				t.Fatalf("failed %v not ascending and distinct", res.Failed)
			}
			for _, off := range res.Failed {
				if !slices.ContainsFunc(batch.Records, func(r record.Record) bool { return r.Offset == off }) {
					t.Fatalf("failed offset %d is not in the batch", off)
				}
			}
		case FunctionError:
		default:
			t.Fatalf("outcome %v from an answer", res.Outcome)
		}
	})
}
