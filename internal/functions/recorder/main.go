// Command recorder is a test Lambda function for Sluice's triggers: a real
// aws-lambda-go handler of Lambda's Kafka event (events.KafkaEvent) that
// writes down every invocation it gets, so a test can check what was
// delivered, in which order, how often and under which invocation id, and
// that behaves as each record's value tells it.
//
// # The record of invocations
//
// When RECORDER_DIR is set, each invocation appends one JSON line to
// $RECORDER_DIR/<pid>.jsonl (one file per process, so concurrent instances
// never interleave; a restarted process starts a new file), with one write
// and an fsync before the function answers:
//
//	{"invocationId": "<client context custom sluice-invocation-id, or empty>",
//	 "requestId": "<Lambda request id>",
//	 "startedUnixNano": <when the handler started, Unix ns>,
//	 "outcome": "ok" | "poison" | "fail-first",
//	 "records": [{"topic": "t", "partition": 0, "offset": 7, "key": "k", "value": "v"}, ...]}
//
// Records are in topic-partition then offset order, key and value decoded
// from base64 (a JSON string: bytes that are not UTF-8 become U+FFFD; a
// value that is not valid base64 is recorded as sent). Without RECORDER_DIR
// nothing is written: a no-op function.
//
// # Behaviour by record value (decoded)
//
//   - "fail": the record is reported in batchItemFailures, as
//     {"itemIdentifier": {"partition": "<topic>-<partition>", "offset": N}}
//     (the shape of internal/functions/echo and AWS's Powertools); so is a
//     value that is not valid base64;
//   - "poison": the whole invocation fails: the handler returns a
//     *PoisonError (Lambda: X-Amz-Function-Error: Unhandled);
//   - "sleep:<ms>": the function sleeps that long before answering (the
//     sleeps of a batch add up, to at most 900 s). It ignores the
//     invocation's deadline, so a sleep past the function's timeout makes
//     Lambda (or the RIE) time the invocation out;
//   - anything else: processed.
//
// RECORDER_FAIL_FIRST=N makes the first N invocations of each process fail
// with a *TransientError (after sleeping and recording, outcome
// "fail-first"), whatever the records: a function that fails for a while.
//
// It answers {"records": N, "batchItemFailures": [...], "invocationId": "<id>"}.
//
// Build it as Lambda's provided.al2023 runtime expects:
//
//	CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./internal/functions/recorder
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Record values with a meaning.
const (
	FailValue   = "fail"
	PoisonValue = "poison"
	SleepPrefix = "sleep:"
)

// MaxSleep bounds one "sleep:<ms>" (Lambda's longest timeout).
const MaxSleep = 900 * time.Second

// InvocationIDKey is the client context's custom key of Sluice's
// invocation id (services/fetch/trigger.ClientContextKey).
const InvocationIDKey = "sluice-invocation-id"

// Line is one invocation in the record file.
type Line struct {
	InvocationID    string   `json:"invocationId"`
	RequestID       string   `json:"requestId"`
	StartedUnixNano int64    `json:"startedUnixNano"`
	Outcome         string   `json:"outcome"`
	Records         []Record `json:"records"`
}

// Record is one record of an invocation, key and value decoded.
type Record struct {
	Topic     string `json:"topic"`
	Partition int64  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Value     string `json:"value"`
}

// Outcomes.
const (
	OutcomeOK        = "ok"
	OutcomePoison    = "poison"
	OutcomeFailFirst = "fail-first"
)

// KafkaItemIdentifier names one record of a Kafka batch.
type KafkaItemIdentifier struct {
	Partition string `json:"partition"`
	Offset    int64  `json:"offset"`
}

// BatchItemFailure is one failed record.
type BatchItemFailure struct {
	ItemIdentifier KafkaItemIdentifier `json:"itemIdentifier"`
}

// Response is the function's answer.
type Response struct {
	Records           int                `json:"records"`
	BatchItemFailures []BatchItemFailure `json:"batchItemFailures"`
	InvocationID      string             `json:"invocationId,omitempty"`
}

// PoisonError fails an invocation whose batch holds a "poison" record.
type PoisonError struct {
	Partition string // "<topic>-<partition>"
	Offset    int64
}

func (e *PoisonError) Error() string {
	return fmt.Sprintf("poison record at %s offset %d", e.Partition, e.Offset)
}

// TransientError fails one of the first RECORDER_FAIL_FIRST invocations.
type TransientError struct{ N, Of int }

func (e *TransientError) Error() string {
	return fmt.Sprintf("failing invocation %d of the first %d (RECORDER_FAIL_FIRST)", e.N, e.Of)
}

// Recorder is the handler. Safe for concurrent use, though Lambda gives a
// process one invocation at a time.
type Recorder struct {
	// Dir is where the record file goes; "" records nothing.
	Dir string
	// FailFirst is how many first invocations fail.
	FailFirst int

	mu   sync.Mutex
	n    int      // invocations so far
	file *os.File // Dir/<pid>.jsonl, opened on first use
}

// Handle runs one invocation.
func (r *Recorder) Handle(ctx context.Context, ev events.KafkaEvent) (Response, error) {
	line := Line{StartedUnixNano: time.Now().UnixNano(), Outcome: OutcomeOK, Records: []Record{}}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		line.RequestID = lc.AwsRequestID
		line.InvocationID = lc.ClientContext.Custom[InvocationIDKey]
	}
	r.mu.Lock()
	n := r.n
	r.n++
	r.mu.Unlock()

	resp := Response{BatchItemFailures: []BatchItemFailure{}, InvocationID: line.InvocationID}
	var poison *PoisonError
	var sleep time.Duration
	keys := make([]string, 0, len(ev.Records))
	for k := range ev.Records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		recs := append([]events.KafkaRecord(nil), ev.Records[key]...)
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
		for _, kr := range recs {
			resp.Records++
			partition := key
			if partition == "" {
				partition = kr.Topic + "-" + strconv.FormatInt(kr.Partition, 10)
			}
			k, _ := base64.StdEncoding.DecodeString(kr.Key)
			v, err := base64.StdEncoding.DecodeString(kr.Value)
			value := string(v)
			if err != nil {
				value = kr.Value
			}
			line.Records = append(line.Records, Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Key: string(k), Value: value})
			switch {
			case err != nil || value == FailValue:
				resp.BatchItemFailures = append(resp.BatchItemFailures, BatchItemFailure{
					ItemIdentifier: KafkaItemIdentifier{Partition: partition, Offset: kr.Offset},
				})
			case value == PoisonValue && poison == nil:
				poison = &PoisonError{Partition: partition, Offset: kr.Offset}
			case strings.HasPrefix(value, SleepPrefix):
				if ms, err := strconv.ParseInt(value[len(SleepPrefix):], 10, 64); err == nil && ms > 0 {
					sleep = min(sleep+time.Duration(min(ms, MaxSleep.Milliseconds()))*time.Millisecond, MaxSleep)
				}
			}
		}
	}
	var fail error
	switch {
	case n < r.FailFirst:
		line.Outcome, fail = OutcomeFailFirst, &TransientError{N: n + 1, Of: r.FailFirst}
	case poison != nil:
		line.Outcome, fail = OutcomePoison, poison
	}
	time.Sleep(sleep) // past the deadline too: see the package doc
	if err := r.record(line); err != nil {
		return Response{}, err
	}
	if fail != nil {
		return Response{}, fail
	}
	return resp, nil
}

// record appends line to the record file with one write, then fsyncs.
func (r *Recorder) record(line Line) error {
	if r.Dir == "" {
		return nil
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("recorder: encode the line: %w", err)
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		if err := os.MkdirAll(r.Dir, 0o755); err != nil {
			return fmt.Errorf("recorder: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(r.Dir, strconv.Itoa(os.Getpid())+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("recorder: %w", err)
		}
		r.file = f
	}
	if _, err := r.file.Write(b); err != nil {
		return fmt.Errorf("recorder: write: %w", err)
	}
	if err := r.file.Sync(); err != nil {
		return fmt.Errorf("recorder: fsync: %w", err)
	}
	return nil
}

// FromEnv reads RECORDER_DIR and RECORDER_FAIL_FIRST.
func FromEnv() (*Recorder, error) {
	r := &Recorder{Dir: os.Getenv("RECORDER_DIR")}
	if s := os.Getenv("RECORDER_FAIL_FIRST"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("RECORDER_FAIL_FIRST=%q is not a count", s)
		}
		r.FailFirst = n
	}
	return r, nil
}

func main() {
	r, err := FromEnv()
	if err != nil {
		log.Fatal(err) // an init error: every invocation reports it
	}
	lambda.Start(r.Handle)
}
