package sluice

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicemq/sluice/pkg/record"
)

// Errors of the SDK itself. Errors from the server are *connect.Error values
// (wrapped with the topic and partition): use connect.CodeOf for their code,
// and IsRetriable to decide whether producing again may succeed.
var (
	// ErrClosed: the Producer, Reader or Consumer (or the Client) is
	// closed, or a Producer's Close gave up waiting for the record (its
	// context ended first).
	ErrClosed = errors.New("sluice: closed")
	// ErrBufferFull: the record waited for buffer space (WithMaxBufferedBytes)
	// until its Produce context ended. The error also wraps the context's
	// error.
	ErrBufferFull = errors.New("sluice: producer buffer full")
	// ErrDeliveryTimeout: the record was not acknowledged within
	// WithDeliveryTimeout. It may or may not be stored. The error also
	// wraps the last attempt's error, if any.
	ErrDeliveryTimeout = errors.New("sluice: delivery timeout")
	// ErrRecordTooLarge: the record can never be sent: it is larger than
	// WithMaxBufferedBytes, or than the topic's max.message.bytes.
	ErrRecordTooLarge = errors.New("sluice: record too large")
	// ErrInvalidRecord: the record breaks a limit or rule of the record
	// format (see pkg/record.Limits); the error also wraps the
	// *record.FormatError naming the field.
	ErrInvalidRecord = errors.New("sluice: invalid record")
	// ErrUnknownTopic: the topic does not exist. The error also wraps the
	// server's NotFound *connect.Error.
	ErrUnknownTopic = errors.New("sluice: unknown topic")
	// ErrInvalidOption: an option given to NewClient or NewProducer is out of
	// its bounds; the message names the option.
	ErrInvalidOption = errors.New("sluice: invalid option")
)

// errClass is what the producer does about an error.
type errClass uint8

const (
	// classFatal: the records fail; sending them again cannot help.
	classFatal errClass = iota
	// classRetriable: send again (after a backoff, or the server's delay).
	classRetriable
	// classOutOfOrder: the server's idempotence state expected another
	// sequence number (a batch before this one is missing).
	classOutOfOrder
	// classUnknownProducer: the server has no state for the producer id
	// (expired or evicted) and the batch does not start at sequence 0.
	classUnknownProducer
	// classFenced: the server saw a newer epoch for the producer id.
	classFenced
)

// The google.rpc.ErrorInfo reasons (domain errorDomain) of the server's
// FailedPrecondition answers for idempotence (services/ingest).
const (
	reasonOutOfOrder      = "OUT_OF_ORDER_SEQUENCE"
	reasonUnknownProducer = "UNKNOWN_PRODUCER_ID"
	reasonFenced          = "PRODUCER_FENCED"
)

// classify is the SDK's one retryability classifier: every error a record or
// batch can meet goes through it, and the producer acts on its answer. It
// also returns the delay the server asked for (google.rpc.RetryInfo), if any.
func classify(err error) (errClass, time.Duration) {
	var fe *record.FormatError
	switch {
	case err == nil:
		return classRetriable, 0
	case errors.Is(err, ErrClosed), errors.Is(err, ErrRecordTooLarge),
		errors.Is(err, ErrInvalidRecord), errors.Is(err, ErrUnknownTopic),
		errors.Is(err, ErrInvalidOption), errors.As(err, &fe):
		return classFatal, 0
	case errors.Is(err, ErrDeliveryTimeout), errors.Is(err, ErrBufferFull):
		// The producer gave up; the caller may try again.
		return classRetriable, 0
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return classFatal, 0 // the caller's own context
		}
		return classRetriable, 0 // transport errors: connection refused, reset, ...
	}
	switch ce.Code() {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeOutOfRange:
		// Bad input: a record or request over a server limit
		// (reason LIMIT_EXCEEDED), an unknown topic, a partition out of
		// range. The same request can never succeed.
		return classFatal, 0
	case connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeAborted,
		connect.CodeDeadlineExceeded, connect.CodeCanceled, connect.CodeUnknown:
		// Canceled and Unknown come from the server here (e.g. a copy
		// shutting down); our own cancellations never reach classify.
		return classRetriable, retryDelay(ce)
	case connect.CodeInternal:
		// connect reports a stream cut mid-message (the server was
		// killed, the connection reset or closed) as Internal "protocol
		// error: incomplete envelope", wrapping the transport's error:
		// a transport failure like any other. Its envelope reader
		// writes that text only then; the transport's error differs
		// (unexpected EOF, a reset, HTTP/2's "client connection force
		// closed"), so the text decides when no known error is inside.
		// Internal errors the server sent stay fatal.
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
			strings.Contains(ce.Message(), "incomplete envelope") {
			return classRetriable, 0
		}
	case connect.CodeFailedPrecondition:
		switch errorReason(ce) {
		case reasonOutOfOrder:
			return classOutOfOrder, 0
		case reasonUnknownProducer:
			return classUnknownProducer, 0
		case reasonFenced:
			return classFenced, 0
		}
	}
	return classFatal, 0
}

// IsRetriable reports whether producing the record again may succeed: the
// server was unavailable or asked to slow down, the delivery timeout
// passed, or the buffer stayed full. It is false for bad input (invalid
// record, unknown topic, out-of-range partition), a closed producer and the
// caller's own context ending.
func IsRetriable(err error) bool {
	c, _ := classify(err)
	return c == classRetriable
}

// errorReason is the reason of ce's first google.rpc.ErrorInfo of Sluice's
// domain, or "".
func errorReason(ce *connect.Error) string { return errorInfo(ce).GetReason() }

// errorInfo is ce's first google.rpc.ErrorInfo of Sluice's domain, or nil.
func errorInfo(ce *connect.Error) *errdetails.ErrorInfo {
	for _, d := range ce.Details() {
		msg, err := d.Value()
		if err != nil {
			continue
		}
		if info, ok := msg.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			return info
		}
	}
	return nil
}

// reasonLimitExceeded is the ErrorInfo reason of the server's answer to a
// request over one of its limits (INVALID_ARGUMENT); metadata "limit" names
// the limit, "max" its value.
const reasonLimitExceeded = "LIMIT_EXCEEDED"

// requestLimit reports the server's request size limit when err is the
// server refusing a request message over it. The server cannot say which
// message of a stream that was (it did not read it), so the producer fails
// the batches whose requests are larger and resends the others.
func requestLimit(err error) (int, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		return 0, false
	}
	info := errorInfo(ce)
	if info.GetReason() != reasonLimitExceeded || info.GetMetadata()["limit"] != "request_bytes" {
		return 0, false
	}
	max, perr := strconv.Atoi(info.GetMetadata()["max"])
	return max, perr == nil
}

// retryDelay is the google.rpc.RetryInfo delay of a Connect error.
func retryDelay(ce *connect.Error) time.Duration {
	for _, d := range ce.Details() {
		msg, err := d.Value()
		if err != nil {
			continue
		}
		if ri, ok := msg.(*errdetails.RetryInfo); ok {
			return max(ri.GetRetryDelay().AsDuration(), 0)
		}
	}
	return 0
}

// streamError turns a per-request failure answered on ProduceStream into a
// *connect.Error like the unary API's, RetryInfo included, so classify has
// one input.
func streamError(code int32, msg string, retryAfterMs int32, reason string) *connect.Error {
	c := connect.Code(code)
	if c == 0 || c > connect.CodeUnauthenticated {
		c = connect.CodeUnknown
	}
	ce := connect.NewError(c, errors.New(msg))
	if retryAfterMs > 0 {
		if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(retryAfterMs) * time.Millisecond)}); err == nil {
			ce.AddDetail(d)
		}
	}
	if reason != "" {
		if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}); err == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}
