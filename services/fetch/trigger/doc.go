// Package trigger is the invocation layer of Sluice's triggers (DESIGN
// §2.10, issue 22): what the fetch service's trigger runtime
// (services/fetch/triggers.go, trigger_worker.go) uses to turn a batch of
// one partition's records into a call of an AWS Lambda function, and to
// decide what to do with the answer. It is a library of pure pieces plus
// one I/O type, with no goroutines and no state between calls; the runtime
// that owns partitions, waits and commits is in package fetch.
//
// # One invocation
//
//  1. Encoder.Take cuts the next batch from a partition's records: at most
//     the trigger's BatchSize records and MaxBatchBytes bytes of *encoded*
//     event (≤ 6 MB, Lambda's synchronous payload limit), at least one
//     record; a record too large alone is a *RecordTooLargeError naming
//     it, never dropped. The payload is Lambda's self-managed Kafka event
//     (events.KafkaEvent of aws-lambda-go: eventSource "SelfManagedKafka",
//     bootstrapServers, records keyed "<topic>-<partition>", base64 key and
//     value, ms timestamp, timestampType "CREATE_TIME", headers as a list of
//     one-entry maps of name to byte values), so a handler written for
//     Lambda's Kafka source decodes it unchanged (testdata/event.golden.json).
//  2. InvocationID names the batch deterministically (trigger, topic, topic
//     id, partition, first and last offset, lease epoch; format on the
//     function): every retry of the batch carries the same id, so a
//     function can make its side effects idempotent. It travels in the
//     Invoke ClientContext as {"custom":{"sluice-invocation-id": id}}
//     (lambdacontext.FromContext(ctx).ClientContext.Custom in Go).
//  3. Invoker.Invoke calls the function synchronously (RequestResponse)
//     through aws-sdk-go-v2's Lambda client (endpoint configurable: AWS,
//     LocalStack or the Runtime Interface Emulator) with the SDK's retries
//     off, and Classify turns the answer into an Outcome: Success (with the
//     offsets named in batchItemFailures), FunctionError, Throttled (with
//     Lambda's Retry-After hint), Transient or Rejected. Classify is the
//     only place that looks at Lambda's errors and headers.
//  4. Run applies the retry rules to one batch, answer by answer (what to
//     invoke next, what to fail, when progress can be stored, how long to
//     wait), on RetryPolicy: Backoff (exponential from the trigger's
//     initial to max backoff, full jitter from an injected source),
//     CanRetry (function errors spend retries; throttling and transient
//     errors do not) and Split (bisect a failing batch of n > 1 into
//     halves when bisect_on_error).
//
// # Files
//
//	doc.go           this overview
//	event.go         Batch, Event, KafkaRecord, Encoder.Take (byte and count bounds), RecordTooLargeError
//	id.go            InvocationID (format), ClientContext (size limit)
//	invoke.go        Invoker, Outcome, Result, FunctionErr, Classify and the batchItemFailures rules
//	retry.go         RetryPolicy: Backoff, CanRetry, Split
//	run.go           Run: one batch's way through the retry rules, a pure state machine
//	                 (testdata/run.transcript)
//	example_test.go  how the runtime loop is meant to use them
//	*_test.go        golden event (-rewrite), bounds, id stability, classification against an
//	                 httptest server speaking the Invoke API, FuzzClassify (any answer), backoff
//	                 and bisect; and
//	                 integration_test.go (tag integration): a real aws-lambda-go handler
//	                 (internal/functions/echo) under the Runtime Interface Emulator
package trigger
