// Package apierr maps Sluice's error taxonomy to Connect codes at the RPC edge
// of the public services (DESIGN.md §3): one place, so ingest, fetch and
// admin answer the same condition with the same code.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Invalid is an InvalidArgument error naming the field.
func Invalid(field, format string, args ...any) *connect.Error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// Exhausted is a ResourceExhausted error carrying google.rpc.RetryInfo with
// the delay the client should wait before retrying.
func Exhausted(retryAfter time.Duration, err error) *connect.Error {
	ce := connect.NewError(connect.CodeResourceExhausted, err)
	if d, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// RetryDelay returns the RetryInfo delay an error carries, if any.
func RetryDelay(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, false
	}
	for _, d := range ce.Details() {
		msg, derr := d.Value()
		if derr != nil {
			continue
		}
		if ri, ok := msg.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// FromCatalog maps a catalog error (and context errors) to a Connect error.
// Errors it does not know become Unavailable: the catalog is a remote
// service and its operational failures are worth retrying.
func FromCatalog(err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var ve *catalog.ValidationError
	switch {
	case errors.As(err, &ve):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, catalog.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, catalog.ErrAlreadyExists):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, catalog.ErrFenced), errors.Is(err, catalog.ErrVersionConflict):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, catalog.ErrLimitExceeded):
		return connect.NewError(connect.CodeResourceExhausted, err)
	default:
		return Otherwise(err)
	}
}

// Otherwise is the end of every error mapping, for an error no store- or
// service-specific rule named: a canceled or expired context keeps its
// code, anything else is UNAVAILABLE (retry).
func Otherwise(err error) *connect.Error {
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	default:
		return connect.NewError(connect.CodeUnavailable, err)
	}
}

// Domain is the google.rpc.ErrorInfo domain of Sluice's error reasons.
const Domain = "sluice.dev"

// WithReason attaches a google.rpc.ErrorInfo with reason (an
// UPPER_SNAKE_CASE constant clients match on, never the message) and
// optional metadata to ce, and returns ce.
func WithReason(ce *connect.Error, reason string, md map[string]string) *connect.Error {
	if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md}); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

// Reason returns the reason of the first google.rpc.ErrorInfo of domain
// Domain that err carries, or "".
func Reason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		msg, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := msg.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info.GetReason()
		}
	}
	return ""
}
