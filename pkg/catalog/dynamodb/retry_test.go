package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// scripted answers GetItem from a list of errors (nil = success), counting
// calls. Only the decorator is under test here; the catalog itself is
// tested against a real endpoint.
type scripted struct {
	API
	errs  []error
	calls int
}

func (s *scripted) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	err := s.errs[min(s.calls, len(s.errs)-1)]
	s.calls++
	if err != nil {
		return nil, err
	}
	return &dynamodb.GetItemOutput{}, nil
}

func (s *scripted) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	err := s.errs[min(s.calls, len(s.errs)-1)]
	s.calls++
	if err != nil {
		return nil, err
	}
	return &dynamodb.PutItemOutput{}, nil
}

func newTestRetrying(t *testing.T, next API, attempts int) (*Retrying, *[]time.Duration) {
	r, err := NewRetrying(next, RetryPolicy{MaxAttempts: attempts, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	r.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	return r, &slept
}

var (
	throttled       = &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	genericThrottle = &smithy.GenericAPIError{Code: "ThrottlingException"}
	conditionFailed = &types.ConditionalCheckFailedException{Message: aws.String("no")}
	serverError     = &smithy.GenericAPIError{Code: "InternalServerError"}
)

func TestRetryingRetriesThrottlingUntilSuccess(t *testing.T) {
	api := &scripted{errs: []error{throttled, genericThrottle, &types.RequestLimitExceeded{}, nil}}
	r, slept := newTestRetrying(t, api, 5)
	if _, err := r.GetItem(context.Background(), &dynamodb.GetItemInput{}); err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if api.calls != 4 || len(*slept) != 3 {
		t.Fatalf("calls = %d, sleeps = %v; want 4 calls, 3 sleeps", api.calls, *slept)
	}
	for i, d := range *slept {
		if d < 0 || d > 4*time.Millisecond {
			t.Errorf("sleep %d = %v, outside the [0, MaxDelay] jitter range", i, d)
		}
	}
}

func TestRetryingIsBounded(t *testing.T) {
	api := &scripted{errs: []error{throttled}}
	r, _ := newTestRetrying(t, api, 3)
	_, err := r.GetItem(context.Background(), &dynamodb.GetItemInput{})
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) || api.calls != 3 {
		t.Fatalf("err = %v after %d calls; want the throttling error after 3", err, api.calls)
	}
}

func TestRetryingLeavesOtherWriteErrorsAlone(t *testing.T) {
	for _, e := range []error{conditionFailed, serverError, syscall.ECONNRESET, net.ErrClosed, context.DeadlineExceeded} {
		api := &scripted{errs: []error{e, nil}}
		r, _ := newTestRetrying(t, api, 5)
		if _, err := r.PutItem(context.Background(), &dynamodb.PutItemInput{}); !errors.Is(err, e) || api.calls != 1 {
			t.Errorf("%v: err = %v after %d calls; want it returned after 1 (it may have been applied)", e, err, api.calls)
		}
	}
}

func TestRetryingRetriesTransientReadFailures(t *testing.T) {
	deser := &smithy.DeserializationError{Err: fmt.Errorf("read tcp: %w", net.ErrClosed)}
	for _, e := range []error{serverError, syscall.ECONNRESET, net.ErrClosed, deser, io.ErrUnexpectedEOF} {
		api := &scripted{errs: []error{e, e, nil}}
		r, _ := newTestRetrying(t, api, 5)
		if _, err := r.GetItem(context.Background(), &dynamodb.GetItemInput{}); err != nil || api.calls != 3 {
			t.Errorf("%v: err = %v after %d calls; want success on the 3rd (a read may be sent again)", e, err, api.calls)
		}
	}
	// Answers are not transient, nor is the caller's own deadline.
	for _, e := range []error{conditionFailed, context.DeadlineExceeded, errors.New("something else")} {
		api := &scripted{errs: []error{e, nil}}
		r, _ := newTestRetrying(t, api, 5)
		if _, err := r.GetItem(context.Background(), &dynamodb.GetItemInput{}); !errors.Is(err, e) || api.calls != 1 {
			t.Errorf("%v: err = %v after %d calls; want it returned after 1", e, err, api.calls)
		}
	}
}

func TestRetryingStopsWhenTheContextEnds(t *testing.T) {
	api := &scripted{errs: []error{throttled}}
	r, err := NewRetrying(api, RetryPolicy{MaxAttempts: 20, BaseDelay: 10 * time.Second, MaxDelay: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.GetItem(ctx, &dynamodb.GetItemInput{}); !errors.Is(err, context.Canceled) || api.calls != 1 {
		t.Fatalf("err = %v after %d calls; want context.Canceled after 1", err, api.calls)
	}
}

func TestRetryPolicyValidation(t *testing.T) {
	for _, p := range []RetryPolicy{{MaxAttempts: -1}, {MaxAttempts: 21}, {BaseDelay: -1}, {BaseDelay: 2 * time.Second, MaxDelay: time.Second}, {MaxDelay: time.Hour}} {
		if _, err := NewRetrying(&scripted{}, p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	p, err := RetryPolicy{}.withDefaults()
	if err != nil || p.MaxAttempts != 5 {
		t.Fatalf("defaults = %+v, %v", p, err)
	}
}

func canceled(codes ...string) error {
	tc := &types.TransactionCanceledException{Message: aws.String("canceled")}
	for _, c := range codes {
		tc.CancellationReasons = append(tc.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return tc
}

func TestIsThrottleForTransactions(t *testing.T) {
	cases := map[error]bool{
		canceled("None", "ThrottlingError"):                           true,
		canceled("ProvisionedThroughputExceeded", "None"):             true,
		canceled("None", "ThrottlingError", "ConditionalCheckFailed"): false,
		canceled("TransactionConflict"):                               false,
		canceled("None", "None"):                                      false,
		conditionFailed:                                               false,
	}
	for err, want := range cases {
		if got := IsThrottle(err); got != want {
			t.Errorf("IsThrottle(%v %v) = %v, want %v", err, reasonsOf(err), got, want)
		}
	}
}

func reasonsOf(err error) []string {
	var tc *types.TransactionCanceledException
	var out []string
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			out = append(out, aws.ToString(r.Code))
		}
	}
	return out
}

// TestCancellationErrorMapsTheFailingItem: the first item whose condition
// failed decides the typed error; a conflict is a lost race.
func TestCancellationErrorMapsTheFailingItem(t *testing.T) {
	onFail := []error{catalog.ErrNotFound, catalog.ErrOwnerExpired, catalog.ErrOwned, catalog.ErrVersionConflict}
	cases := []struct {
		err  error
		want error
	}{
		{canceled("None", "None", "ConditionalCheckFailed", "None"), catalog.ErrOwned},
		{canceled("None", "None", "None", "ConditionalCheckFailed"), catalog.ErrVersionConflict},
		{canceled("ConditionalCheckFailed", "None", "ConditionalCheckFailed", "None"), catalog.ErrNotFound},
		{canceled("None", "ConditionalCheckFailed", "None", "None"), catalog.ErrOwnerExpired},
		{canceled("None", "TransactionConflict", "None", "None"), catalog.ErrVersionConflict},
	}
	for _, c := range cases {
		if got := cancellationError(c.err, onFail); !errors.Is(got, c.want) {
			t.Errorf("reasons %v: %v, want %v", reasonsOf(c.err), got, c.want)
		}
	}
	other := canceled("None", "ValidationError")
	if got := cancellationError(other, onFail); got != other {
		t.Errorf("a validation cancellation became %v", got)
	}
	if got := cancellationError(nil, onFail); got != nil {
		t.Errorf("nil became %v", got)
	}
}

// TestIsTransientOnSDKErrors classifies what the real SDK client returns
// when an answer is lost or damaged in transit, served by a local HTTP
// server: those are transient (a read may be sent again), an answer is not.
// (An answer read whole whose X-Amz-Crc32 does not match is no error at all:
// the SDK checks the checksum when the body is closed and ignores that
// close's error on success.)
func TestIsTransientOnSDKErrors(t *testing.T) {
	const okCRC = "2745614147" // CRC-32 of "{}"
	cases := []struct {
		name      string
		serve     func(w http.ResponseWriter)
		transient bool
	}{
		{"body cut short", func(w http.ResponseWriter) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Crc32: "+okCRC+"\r\nContent-Length: 2\r\n\r\n")
			_ = buf.Flush()
			_ = conn.Close()
		}, true},
		{"5xx", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}`)
		}, true},
		{"an answer", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"no"}`)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				c.serve(w)
			}))
			defer srv.Close()
			client := NewClient(aws.Config{
				Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
				Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
			})
			_, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{}})
			if err == nil {
				t.Fatal("GetItem succeeded")
			}
			if IsTransient(err) != c.transient {
				t.Errorf("IsTransient(%v) = %v, want %v", err, !c.transient, c.transient)
			}
		})
	}
}
