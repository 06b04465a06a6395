package lambdapool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// echoRIE answers with what the pool forwarded: the payload, the client
// context (decoded) and the request id.
func echoRIE(_ *fakeBackend, w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	cc, _ := base64.StdEncoding.DecodeString(r.Header.Get("X-Amz-Client-Context"))
	out, _ := json.Marshal(map[string]string{
		"payload": string(body), "clientContext": string(cc), "requestId": r.Header.Get("X-Amzn-RequestId"),
	})
	w.Write(out)
}

// batch is a one-record batch for trigger.Classify.
var batch = trigger.Batch{Topic: "t", Partition: 0, Records: []record.Record{{Offset: 1}}}

func TestInvokeForwardsPayloadClientContextAndRequestID(t *testing.T) {
	p := startFake(t, newFleet(t, map[string]fakeHandler{"echo": echoRIE}), Function{Name: "echo", Bootstrap: "/x/bootstrap"})
	c := sdkClient(p.Endpoint())
	cc := base64.StdEncoding.EncodeToString([]byte(`{"custom":{"sluice-invocation-id":"id-1"}}`))
	// Every spelling of the function's name reaches it.
	for _, name := range []string{
		"echo", "echo:live", "123456789012:function:echo", "123456789012:function:echo:7",
		"arn:aws:lambda:us-east-1:123456789012:function:echo", "arn:aws:lambda:eu-west-1:123456789012:function:echo:$LATEST",
	} {
		out, err := c.Invoke(context.Background(), &lambda.InvokeInput{
			FunctionName: aws.String(name), ClientContext: aws.String(cc), Payload: []byte(`{"a":1}`),
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got map[string]string
		if err := json.Unmarshal(out.Payload, &got); err != nil {
			t.Fatalf("%s: answer %s: %v", name, out.Payload, err)
		}
		if got["payload"] != `{"a":1}` || got["clientContext"] != `{"custom":{"sluice-invocation-id":"id-1"}}` {
			t.Fatalf("%s: the instance got %v", name, got)
		}
		if out.FunctionError != nil || out.StatusCode != http.StatusOK || aws.ToString(out.ExecutedVersion) != "$LATEST" {
			t.Fatalf("%s: FunctionError %v, status %d, version %v", name, out.FunctionError, out.StatusCode, out.ExecutedVersion)
		}
		if id, ok := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata); !ok || id != got["requestId"] || len(id) != 36 {
			t.Fatalf("%s: X-Amzn-RequestId %q, the instance got %q", name, id, got["requestId"])
		}
	}
}

func TestUnknownFunctionIsResourceNotFound(t *testing.T) {
	p := startFake(t, newFleet(t, map[string]fakeHandler{"echo": echoRIE}), Function{Name: "echo", Bootstrap: "/x/bootstrap"})
	out, err := sdkClient(p.Endpoint()).Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("nope:prod"), Payload: []byte(`{}`)})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("Invoke = %v, %v; want a *types.ResourceNotFoundException", out, err)
	}
	if want := "Function not found: arn:aws:lambda:us-east-1:" + accountID + ":function:nope:prod"; nf.ErrorMessage() != want {
		t.Fatalf("message %q, want %q", nf.ErrorMessage(), want)
	}
	if res := trigger.Classify(out, err, batch); res.Outcome != trigger.Rejected {
		t.Fatalf("Classify = %v, want rejected", res.Outcome)
	}
}

// TestThrottledWhenEveryInstanceIsBusy: with both instances running an
// invocation, a third gets Lambda's 429 for reserved concurrency, which
// the SDK decodes as *types.TooManyRequestsException and Classify reads as
// Throttled; once one finishes, invocations run again.
func TestThrottledWhenEveryInstanceIsBusy(t *testing.T) {
	release := make(chan struct{})
	blocking := func(_ *fakeBackend, w http.ResponseWriter, r *http.Request) {
		<-release
		w.Write([]byte(`"done"`))
	}
	p := startFake(t, newFleet(t, map[string]fakeHandler{"slow": blocking}), Function{Name: "slow", Bootstrap: "/x/bootstrap", Instances: 2})
	c := sdkClient(p.Endpoint())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{}`)})
			if err != nil || string(out.Payload) != `"done"` {
				t.Errorf("a running invocation: %v", err)
			}
		})
	}
	waitFor(t, "both instances busy", func() bool { return busy(p.Instances("slow")) == 2 })

	out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{}`)})
	var tm *types.TooManyRequestsException
	if !errors.As(err, &tm) {
		t.Fatalf("third invoke = %v, %v; want a *types.TooManyRequestsException", out, err)
	}
	if tm.Reason != types.ThrottleReasonReservedFunctionConcurrentInvocationLimitExceeded || aws.ToString(tm.Type) != "User" ||
		tm.ErrorMessage() != "Rate Exceeded." || tm.RetryAfterSeconds != nil {
		t.Fatalf("throttle = %+v", tm)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusTooManyRequests {
		t.Fatalf("throttle status: %v", err)
	}
	if res := trigger.Classify(out, err, batch); res.Outcome != trigger.Throttled || res.RetryAfter != 0 {
		t.Fatalf("Classify = %v (retry after %v), want throttled", res.Outcome, res.RetryAfter)
	}
	close(release)
	wg.Wait()
	if _, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{}`)}); err != nil {
		t.Fatalf("after the busy ones finished: %v", err)
	}
}

func busy(st []InstanceState) int {
	n := 0
	for _, s := range st {
		if s.Busy {
			n++
		}
	}
	return n
}

func TestPayloadOverSixMBIsRequestTooLarge(t *testing.T) {
	p := startFake(t, newFleet(t, map[string]fakeHandler{"echo": func(_ *fakeBackend, w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		json.NewEncoder(w).Encode(n)
	}}), Function{Name: "echo", Bootstrap: "/x/bootstrap"})
	c := sdkClient(p.Endpoint())
	jsonString := func(n int) []byte { return []byte(`"` + strings.Repeat("a", n-2) + `"`) }

	out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: jsonString(MaxPayloadBytes)})
	if err != nil || strings.TrimSpace(string(out.Payload)) != "6291456" {
		t.Fatalf("a payload of exactly 6 MB: %v (answer %s)", err, out.Payload)
	}
	out, err = c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: jsonString(MaxPayloadBytes + 1)})
	var tl *types.RequestTooLargeException
	if !errors.As(err, &tl) || !strings.Contains(tl.ErrorMessage(), "6291456 bytes") {
		t.Fatalf("6 MB + 1 = %v, %v; want a *types.RequestTooLargeException", out, err)
	}
	if res := trigger.Classify(out, err, batch); res.Outcome != trigger.Rejected {
		t.Fatalf("Classify = %v, want rejected", res.Outcome)
	}
}

// TestFunctionErrorsGetTheHeader: the RIE's answers to a handler's error
// (200), panic or exit (502), and timeout (200, plain text) all come out
// as Lambda's: 200 with X-Amz-Function-Error: Unhandled.
func TestFunctionErrorsGetTheHeader(t *testing.T) {
	answers := map[string]struct {
		status int
		body   string
	}{
		"error":   {200, `{"errorMessage":"boom","errorType":"errorString"}`},
		"panic":   {502, `{"errorMessage":"oh no","errorType":"string","stackTrace":[{"path":"x.go","line":1,"label":"f"}]}`},
		"exit":    {502, `{"errorType":"Runtime.ExitError","errorMessage":"RequestId: r Error: Runtime exited with error: exit status 3"}`},
		"timeout": {200, `Task timed out after 2.00 seconds`},
		"ok":      {200, `{"errorMessage":"a field of a normal answer","records":2}`},
	}
	p := startFake(t, newFleet(t, map[string]fakeHandler{"f": func(_ *fakeBackend, w http.ResponseWriter, r *http.Request) {
		var in string
		json.NewDecoder(r.Body).Decode(&in)
		a := answers[in]
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}}), Function{Name: "f", Bootstrap: "/x/bootstrap"})
	c := sdkClient(p.Endpoint())
	for mode, a := range answers {
		out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("f"), Payload: []byte(`"` + mode + `"`)})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		want := "Unhandled"
		if mode == "ok" {
			want = ""
		}
		if aws.ToString(out.FunctionError) != want || out.StatusCode != 200 {
			t.Fatalf("%s: FunctionError %q, status %d; want %q, 200", mode, aws.ToString(out.FunctionError), out.StatusCode, want)
		}
		switch mode {
		case "timeout":
			var e struct{ ErrorType, ErrorMessage string }
			if json.Unmarshal(out.Payload, &e) != nil || e.ErrorType != "Sandbox.Timedout" || !strings.HasSuffix(e.ErrorMessage, "Error: Task timed out after 2.00 seconds") {
				t.Fatalf("timeout answer %s", out.Payload)
			}
		default:
			if string(out.Payload) != a.body {
				t.Fatalf("%s: answer %s, want %s", mode, out.Payload, a.body)
			}
		}
		wantOutcome := trigger.FunctionError
		if mode == "ok" {
			wantOutcome = trigger.Success
		}
		if res := trigger.Classify(out, nil, batch); res.Outcome != wantOutcome {
			t.Fatalf("%s: Classify = %v, want %v", mode, res.Outcome, wantOutcome)
		}
	}
}

// TestDeadInstanceIsRestarted: an RIE that dies during an invocation
// gives that invocation a 5xx ServiceException (Classify: Transient), and
// is replaced; one that dies idle is replaced before anyone uses it.
func TestDeadInstanceIsRestarted(t *testing.T) {
	fleet := newFleet(t, map[string]fakeHandler{"f": func(fb *fakeBackend, w http.ResponseWriter, r *http.Request) {
		var in string
		json.NewDecoder(r.Body).Decode(&in)
		if in == "die" {
			fb.crash(w)
			return
		}
		w.Write([]byte(`"ok"`))
	}})
	p := startFake(t, fleet, Function{Name: "f", Bootstrap: "/x/bootstrap"})
	c := sdkClient(p.Endpoint())
	first := p.Instances("f")[0]

	out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("f"), Payload: []byte(`"die"`)})
	var se *types.ServiceException
	if !errors.As(err, &se) {
		t.Fatalf("invoke on a dying instance = %v, %v; want a *types.ServiceException", out, err)
	}
	if res := trigger.Classify(out, err, batch); res.Outcome != trigger.Transient {
		t.Fatalf("Classify = %v, want transient", res.Outcome)
	}
	waitFor(t, "the restart", func() bool {
		st := p.Instances("f")[0]
		return st.Restarts == 1 && st.PID != 0 && st.PID != first.PID
	})
	if _, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("f"), Payload: []byte(`"x"`)}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}

	// Dies while idle, and the first relaunch fails: it is retried.
	fleet.failNext.Store(1)
	fleet.all()[1].exit()
	waitFor(t, "the second restart", func() bool { st := p.Instances("f")[0]; return st.Restarts == 2 && st.PID != 0 })
	if _, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("f"), Payload: []byte(`"x"`)}); err != nil {
		t.Fatalf("after the second restart: %v", err)
	}
	for i, fb := range fleet.all()[:2] {
		if !fb.stopped.Load() {
			t.Fatalf("backend %d was not stopped", i)
		}
	}
}

func TestCloseStopsEveryInstance(t *testing.T) {
	fleet := newFleet(t, map[string]fakeHandler{"a": echoRIE, "b": echoRIE})
	p := startFake(t, fleet, Function{Name: "a", Bootstrap: "/x/a", Instances: 3}, Function{Name: "b", Bootstrap: "/x/b", Instances: 2})
	if n := len(fleet.all()); n != 5 {
		t.Fatalf("%d instances started, want 5", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fb := range fleet.all() {
		if !fb.stopped.Load() {
			t.Fatalf("instance %d of %s not stopped", fb.index, fb.fn.Name)
		}
	}
	if _, err := http.Post(p.Endpoint()+"/2015-03-31/functions/a/invocations", "application/json", nil); err == nil {
		t.Fatal("the pool still serves after Close")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestStartFailsWhenAnInstanceCannotStart(t *testing.T) {
	fleet := newFleet(t, map[string]fakeHandler{"a": echoRIE})
	fleet.failNext.Store(3) // every try of one instance
	cfg := Config{RIE: "/fake", Functions: []Function{{Name: "a", Bootstrap: "/x/a", Instances: 2}}}.withDefaults()
	if _, err := start(context.Background(), cfg, fleet.launch); !errors.Is(err, errFakeLaunch) {
		t.Fatalf("start = %v, want the launch error", err)
	}
	for _, fb := range fleet.all() {
		if !fb.stopped.Load() {
			t.Fatal("an instance started before the failure was left running")
		}
	}
}

func TestRefusals(t *testing.T) {
	p := startFake(t, newFleet(t, map[string]fakeHandler{"echo": echoRIE}), Function{Name: "echo", Bootstrap: "/x/bootstrap"})
	post := func(path string, hdr map[string]string, body string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, p.Endpoint()+path, bytes.NewBufferString(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), string(b)
	}
	inv := "/2015-03-31/functions/echo/invocations"
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       string
		status     int
		typ        string
	}{
		{"not JSON", inv, nil, `{`, 400, "InvalidRequestContentException"},
		{"client context not base64", inv, map[string]string{"X-Amz-Client-Context": "!!"}, `{}`, 400, "InvalidRequestContentException"},
		{"client context not JSON", inv, map[string]string{"X-Amz-Client-Context": base64.StdEncoding.EncodeToString([]byte("x"))}, `{}`, 400, "InvalidRequestContentException"},
		{"client context too long", inv, map[string]string{"X-Amz-Client-Context": strings.Repeat("A", MaxClientContextBytes+1)}, `{}`, 400, "InvalidRequestContentException"},
		{"async", inv, map[string]string{"X-Amz-Invocation-Type": "Event"}, `{}`, 400, "InvalidParameterValueException"},
		{"dry run", inv, map[string]string{"X-Amz-Invocation-Type": "DryRun"}, `{}`, 204, ""},
		{"bad name", "/2015-03-31/functions/" + url.PathEscape("a:b:c") + "/invocations", nil, `{}`, 400, "InvalidParameterValueException"},
		{"qualifiers differ", "/2015-03-31/functions/echo:1/invocations?Qualifier=2", nil, `{}`, 400, "InvalidParameterValueException"},
		{"qualifier in the query", "/2015-03-31/functions/echo/invocations?Qualifier=live", nil, `{}`, 200, ""},
		{"empty payload", inv, nil, ``, 200, ""},
		{"other operation", "/2015-03-31/functions", nil, `{}`, 404, "UnknownOperationException"},
	} {
		status, typ, body := post(tc.path, tc.hdr, tc.body)
		if status != tc.status || typ != tc.typ {
			t.Errorf("%s: %d %q %s; want %d %q", tc.name, status, typ, body, tc.status, tc.typ)
		}
	}
}
