package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// RetryPolicy bounds the throttling retries. The zero value means the defaults.
type RetryPolicy struct {
	MaxAttempts int           // total attempts, first included; default 5, at most 20
	BaseDelay   time.Duration // first backoff cap; default 25ms
	MaxDelay    time.Duration // backoff cap; default 1s, at most 30s
}

func (p RetryPolicy) withDefaults() (RetryPolicy, error) {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 5
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = 25 * time.Millisecond
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = time.Second
	}
	var errs []error
	if p.MaxAttempts < 1 || p.MaxAttempts > 20 {
		errs = append(errs, fmt.Errorf("retry MaxAttempts %d is outside [1, 20]", p.MaxAttempts))
	}
	if p.BaseDelay < 0 || p.MaxDelay < p.BaseDelay || p.MaxDelay > 30*time.Second {
		errs = append(errs, fmt.Errorf("retry delays base %v, max %v: want 0 <= base <= max <= 30s", p.BaseDelay, p.MaxDelay))
	}
	return p, errors.Join(errs...)
}

// delay is the full-jitter backoff before retry number attempt (1-based).
func (p RetryPolicy) delay(attempt int) time.Duration {
	d := p.BaseDelay << min(attempt-1, 20)
	if d <= 0 || d > p.MaxDelay {
		d = p.MaxDelay
	}
	return rand.N(d + 1)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retrying wraps an API so that calls rejected for throttling are retried
// with bounded, jittered exponential backoff. It is the only retry layer:
// build the client with NewClient (SDK retries off) and retry nothing
// above it.
//
// Writes retry only throttling, because only throttling is known not to
// have been applied, so a retried conditional write cannot trip over its
// own first attempt; their timeouts, 5xx and network errors are returned.
// Reads (GetItem, Query, BatchGetItem, DescribeTable) change nothing, so
// they also retry transient failures (IsTransient): a dropped connection
// or a 5xx must not fail a lookup the next attempt would answer.
type Retrying struct {
	next   API
	policy RetryPolicy
	sleep  func(context.Context, time.Duration) error
}

var _ API = (*Retrying)(nil)

// NewRetrying returns next with throttling retries under policy.
func NewRetrying(next API, policy RetryPolicy) (*Retrying, error) {
	p, err := policy.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Retrying{next: next, policy: p, sleep: sleep}, nil
}

// IsThrottle reports whether err is DynamoDB rejecting a request for
// capacity: the request was not applied and may be sent again.
func IsThrottle(err error) bool {
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		// Retry only if throttling is all that stopped the transaction.
		throttled := false
		for _, r := range tc.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "", "None":
			case "ThrottlingError", "ProvisionedThroughputExceeded":
				throttled = true
			default:
				return false
			}
		}
		return throttled
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
			return true
		}
	}
	return false
}

// IsTransient reports whether err is a failure of the transport or of the
// service rather than an answer: a 5xx, a connection refused, reset or
// closed, a response that could not be read. A write that failed so may
// or may not have been applied; a read may simply be sent again.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InternalServerError", "ServiceUnavailable":
			return true
		}
		return false
	}
	var de *smithy.DeserializationError
	var ne net.Error
	return errors.As(err, &de) || errors.As(err, &ne) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

func do[T any](ctx context.Context, r *Retrying, call func() (T, error)) (T, error) {
	return retry(ctx, r, IsThrottle, call)
}

// doRead is do for reads: transient failures are retried too.
func doRead[T any](ctx context.Context, r *Retrying, call func() (T, error)) (T, error) {
	return retry(ctx, r, func(err error) bool { return IsThrottle(err) || IsTransient(err) }, call)
}

func retry[T any](ctx context.Context, r *Retrying, retriable func(error) bool, call func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		out, err := call()
		if err == nil || !retriable(err) || attempt >= r.policy.MaxAttempts {
			if err != nil && retriable(err) {
				err = fmt.Errorf("still failing after %d attempts: %w", attempt, err)
			}
			return out, err
		}
		if serr := r.sleep(ctx, r.policy.delay(attempt)); serr != nil {
			var zero T
			return zero, fmt.Errorf("%w (while backing off from: %v)", serr, err)
		}
	}
}

// GetItem implements API.
func (r *Retrying) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return doRead(ctx, r, func() (*dynamodb.GetItemOutput, error) { return r.next.GetItem(ctx, in, o...) })
}

// PutItem implements API.
func (r *Retrying) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return do(ctx, r, func() (*dynamodb.PutItemOutput, error) { return r.next.PutItem(ctx, in, o...) })
}

// UpdateItem implements API.
func (r *Retrying) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return do(ctx, r, func() (*dynamodb.UpdateItemOutput, error) { return r.next.UpdateItem(ctx, in, o...) })
}

// DeleteItem implements API.
func (r *Retrying) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return do(ctx, r, func() (*dynamodb.DeleteItemOutput, error) { return r.next.DeleteItem(ctx, in, o...) })
}

// Query implements API.
func (r *Retrying) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return doRead(ctx, r, func() (*dynamodb.QueryOutput, error) { return r.next.Query(ctx, in, o...) })
}

// BatchGetItem implements API.
func (r *Retrying) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return doRead(ctx, r, func() (*dynamodb.BatchGetItemOutput, error) { return r.next.BatchGetItem(ctx, in, o...) })
}

// BatchWriteItem implements API.
func (r *Retrying) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return do(ctx, r, func() (*dynamodb.BatchWriteItemOutput, error) { return r.next.BatchWriteItem(ctx, in, o...) })
}

// TransactWriteItems implements API.
func (r *Retrying) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return do(ctx, r, func() (*dynamodb.TransactWriteItemsOutput, error) { return r.next.TransactWriteItems(ctx, in, o...) })
}

// CreateTable implements API.
func (r *Retrying) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return do(ctx, r, func() (*dynamodb.CreateTableOutput, error) { return r.next.CreateTable(ctx, in, o...) })
}

// DescribeTable implements API.
func (r *Retrying) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return doRead(ctx, r, func() (*dynamodb.DescribeTableOutput, error) { return r.next.DescribeTable(ctx, in, o...) })
}
