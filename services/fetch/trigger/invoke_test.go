package trigger

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicemq/sluice/pkg/record"
)

// lambdaAnswer is how the fake Invoke API answers one function.
type lambdaAnswer struct {
	status    int
	header    map[string]string
	body      string
	hangUp    bool // close the connection without an answer
	requests  int
	lastCC    string
	lastType  string
	lastEvent []byte
}

// fakeLambda answers POST /2015-03-31/functions/<name>/invocations as the
// Lambda Invoke API does (rest-json: errors are a status, an
// X-Amzn-ErrorType header and a JSON body).
type fakeLambda struct {
	mu        sync.Mutex
	functions map[string]*lambdaAnswer
}

func (f *fakeLambda) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
	name, ok2 := strings.CutSuffix(name, "/invocations")
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	a := f.functions[name]
	if !ok || !ok2 || r.Method != http.MethodPost || a == nil {
		f.mu.Unlock()
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"Type":"User","message":"Function not found: `+name+`"}`)
		return
	}
	a.requests++
	a.lastCC = r.Header.Get("X-Amz-Client-Context")
	a.lastType = r.Header.Get("X-Amz-Invocation-Type")
	a.lastEvent = body
	f.mu.Unlock()
	if a.hangUp {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

// requests is how many invocations function got.
func (f *fakeLambda) requests(function string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.functions[function]; a != nil {
		return a.requests
	}
	return 0
}

func newFakeLambda(t *testing.T, functions map[string]*lambdaAnswer) (*Invoker, *fakeLambda) {
	t.Helper()
	fake := &fakeLambda{functions: functions}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	return NewInvoker(cfg, srv.URL), fake
}

func testBatch() Batch {
	return Batch{Topic: "orders", Partition: 0, Records: []record.Record{
		{Offset: 10, Value: []byte("a")}, {Offset: 11, Value: []byte("b")}, {Offset: 13, Value: []byte("c")},
	}}
}

func TestInvokerClassifies(t *testing.T) {
	ok := func(body string) *lambdaAnswer { return &lambdaAnswer{status: 200, body: body} }
	functions := map[string]*lambdaAnswer{
		"none":         ok(`{"records":3}`),
		"null":         ok(`null`),
		"string":       ok(`"done"`),
		"nullFail":     ok(`{"batchItemFailures":null}`),
		"emptyFail":    ok(`{"batchItemFailures":[]}`),
		"strFail":      ok(`{"batchItemFailures":[{"itemIdentifier":"13"},{"itemIdentifier":"11"},{"itemIdentifier":"13"}]}`),
		"numFail":      ok(`{"batchItemFailures":[{"itemIdentifier":10}]}`),
		"objFail":      ok(`{"batchItemFailures":[{"itemIdentifier":{"partition":"orders-0","offset":11}}]}`),
		"objNoPart":    ok(`{"batchItemFailures":[{"itemIdentifier":{"offset":"13"}}]}`),
		"badOffset":    ok(`{"batchItemFailures":[{"itemIdentifier":"12"}]}`),
		"badPart":      ok(`{"batchItemFailures":[{"itemIdentifier":{"partition":"orders-1","offset":11}}]}`),
		"nullID":       ok(`{"batchItemFailures":[{"itemIdentifier":null}]}`),
		"emptyID":      ok(`{"batchItemFailures":[{"itemIdentifier":""}]}`),
		"noID":         ok(`{"batchItemFailures":[{}]}`),
		"notList":      ok(`{"batchItemFailures":{"itemIdentifier":"10"}}`),
		"nested":       ok(`{"batchItemFailures":[{"itemIdentifier":{"offset":{"offset":11}}}]}`),
		"word":         ok(`{"batchItemFailures":[{"itemIdentifier":"ten"}]}`),
		"rieError":     ok(`{"errorMessage":"boom","errorType":"errorString"}`),
		"errorAndMore": ok(`{"errorMessage":"boom","records":3}`),
		"unhandled": {status: 200, header: map[string]string{"X-Amz-Function-Error": "Unhandled"},
			body: `{"errorMessage":"2026-12-05T13:00:00Z Task timed out after 3.00 seconds"}`},
		"throttled": {status: 429, header: map[string]string{"X-Amzn-ErrorType": "TooManyRequestsException", "Retry-After": "2"},
			body: `{"Type":"User","message":"Rate Exceeded.","Reason":"ReservedFunctionConcurrentInvocationLimitExceeded"}`},
		"throttled429": {status: 429, header: map[string]string{"X-Amzn-ErrorType": "SomethingNew"}, body: `{"message":"slow down"}`},
		"service":      {status: 500, header: map[string]string{"X-Amzn-ErrorType": "ServiceException"}, body: `{"Type":"Service","message":"internal"}`},
		"tooLarge":     {status: 413, header: map[string]string{"X-Amzn-ErrorType": "RequestTooLargeException"}, body: `{"Type":"User","message":"too large"}`},
		"hangUp":       {hangUp: true},
		"pending": {status: 409, header: map[string]string{"X-Amzn-ErrorType": "ResourceConflictException"},
			body: `{"Type":"User","message":"The function is currently in the following state: Pending"}`},
	}
	iv, fake := newFakeLambda(t, functions)
	cases := []struct {
		function string
		outcome  Outcome
		failed   []int64
	}{
		{"none", Success, nil},
		{"null", Success, nil},
		{"string", Success, nil},
		{"nullFail", Success, nil},
		{"emptyFail", Success, nil},
		{"strFail", Success, []int64{11, 13}},
		{"numFail", Success, []int64{10}},
		{"objFail", Success, []int64{11}},
		{"objNoPart", Success, []int64{13}},
		{"badOffset", FunctionError, nil},
		{"badPart", FunctionError, nil},
		{"nullID", FunctionError, nil},
		{"emptyID", FunctionError, nil},
		{"noID", FunctionError, nil},
		{"notList", FunctionError, nil},
		{"nested", FunctionError, nil},
		{"word", FunctionError, nil},
		{"rieError", FunctionError, nil},
		{"errorAndMore", Success, nil},
		{"unhandled", FunctionError, nil},
		{"throttled", Throttled, nil},
		{"throttled429", Throttled, nil},
		{"service", Transient, nil},
		{"tooLarge", Rejected, nil},
		{"missing", Rejected, nil},
		{"hangUp", Transient, nil},
		{"pending", Transient, nil},
	}
	for _, c := range cases {
		t.Run(c.function, func(t *testing.T) {
			before := fake.requests(c.function)
			res := iv.Invoke(context.Background(), c.function, "v1/tr/orders/id/0/10-13/1", testBatch(), []byte(`{}`))
			// One request per Invoke: the SDK does not retry behind the runtime's back.
			if n := fake.requests(c.function) - before; c.function != "missing" && n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			if res.Outcome != c.outcome || !slices.Equal(res.Failed, c.failed) {
				t.Fatalf("outcome %v failed %v (err %v), want %v %v", res.Outcome, res.Failed, res.Err, c.outcome, c.failed)
			}
			if (res.Err == nil) != (c.outcome == Success) {
				t.Fatalf("outcome %v with err %v", res.Outcome, res.Err)
			}
			var fe *FunctionErr
			if (c.outcome == FunctionError) != errors.As(res.Err, &fe) {
				t.Fatalf("outcome %v, err %T %v", res.Outcome, res.Err, res.Err)
			}
		})
	}
	if res := iv.Invoke(context.Background(), "throttled", "x", testBatch(), nil); res.RetryAfter != 2*time.Second {
		t.Errorf("throttled: RetryAfter %v, want 2s (Retry-After: 2)", res.RetryAfter)
	}
	if res := iv.Invoke(context.Background(), "throttled429", "x", testBatch(), nil); res.RetryAfter != 0 {
		t.Errorf("throttled without Retry-After: RetryAfter %v, want 0", res.RetryAfter)
	}
	if fe := (&FunctionErr{}); errors.As(iv.Invoke(context.Background(), "unhandled", "x", testBatch(), nil).Err, &fe) {
		if fe.Type != "Unhandled" || !strings.Contains(string(fe.Payload), "timed out") {
			t.Errorf("function error = %+v", fe)
		}
	}
}

// TestInvokerSends: synchronous invocation, the event as the payload, the
// invocation id in the client context.
func TestInvokerSends(t *testing.T) {
	fn := &lambdaAnswer{status: 200, body: `{}`}
	iv, fake := newFakeLambda(t, map[string]*lambdaAnswer{"fn": fn})
	batch, payload, err := mustEncoder(t, 10, MaxPayloadBytes).Take("orders", 0, testBatch().Records)
	if err != nil {
		t.Fatal(err)
	}
	id := InvocationID(InvocationKey{Trigger: "tr", Topic: "orders", TopicID: "id", FirstOffset: 10, LastOffset: 13, LeaseEpoch: 1})
	if res := iv.Invoke(context.Background(), "fn", id, batch, payload); res.Outcome != Success {
		t.Fatalf("outcome %v: %v", res.Outcome, res.Err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fn.lastType != "RequestResponse" || string(fn.lastEvent) != string(payload) {
		t.Fatalf("invocation type %q, event %s", fn.lastType, fn.lastEvent)
	}
	raw, err := base64.StdEncoding.DecodeString(fn.lastCC)
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Custom map[string]string `json:"custom"`
	}
	if err := json.Unmarshal(raw, &cc); err != nil || cc.Custom[ClientContextKey] != id {
		t.Fatalf("client context %s (err %v), want the id %q", raw, err, id)
	}
}

func TestInvokerCanceled(t *testing.T) {
	iv, _ := newFakeLambda(t, map[string]*lambdaAnswer{"fn": {status: 200}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := iv.Invoke(ctx, "fn", "x", testBatch(), nil)
	if res.Outcome != Transient || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("outcome %v err %v, want transient, canceled", res.Outcome, res.Err)
	}
}
