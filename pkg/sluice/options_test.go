package sluice

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/pkg/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every option out of bounds is reported at once, each naming its option.
func TestProducerOptionsValidatedTogether(t *testing.T) {
	c, err := NewClient("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.NewProducer(
		WithLinger(-time.Millisecond),
		WithBatchBytes(10),
		WithCompression(record.Codec(7)),
		WithMaxInFlightPerPartition(6),
		WithMaxBufferedBytes(1<<40),
		WithDeliveryTimeout(time.Millisecond),
		WithRetryBackoff(0, time.Hour),
	)
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("NewProducer: %v; want ErrInvalidOption", err)
	}
	for _, name := range []string{"WithLinger", "WithBatchBytes", "WithCompression", "WithMaxInFlightPerPartition",
		"WithMaxBufferedBytes", "WithDeliveryTimeout", "WithRetryBackoff"} {
		if !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}

	// Cross-checks: in-flight above the dedup window only without
	// idempotence; the buffer holds at least a batch; the delivery timeout
	// exceeds the linger.
	for _, tc := range []struct {
		opts []ProducerOption
		want string // "" = valid
	}{
		{nil, ""},
		{[]ProducerOption{WithIdempotence(false), WithMaxInFlightPerPartition(20)}, ""},
		{[]ProducerOption{WithMaxInFlightPerPartition(20)}, "WithMaxInFlightPerPartition"},
		{[]ProducerOption{WithIdempotence(false), WithMaxInFlightPerPartition(65)}, "WithMaxInFlightPerPartition"},
		{[]ProducerOption{WithBatchBytes(1 << 20), WithMaxBufferedBytes(1 << 19)}, "WithMaxBufferedBytes"},
		{[]ProducerOption{WithLinger(time.Second), WithDeliveryTimeout(time.Second)}, "WithDeliveryTimeout"},
		{[]ProducerOption{WithRetryBackoff(time.Second, time.Millisecond)}, "WithRetryBackoff"},
		{[]ProducerOption{WithBatchBytes(MaxBatchBytes + 1)}, "WithBatchBytes"},
		{[]ProducerOption{WithLinger(0), WithCompression(record.CodecZstd), WithDeliveryTimeout(MaxDeliveryTimeout)}, ""},
	} {
		cfg, err := newProducerConfig(tc.opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", cfg, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want+":")):
			t.Errorf("%+v: %v; want an error naming %s", cfg, err, tc.want)
		}
	}

	d := defaultProducerConfig()
	if d.linger != 5*time.Millisecond || d.batchBytes != 256<<10 || d.codec != record.CodecLZ4 || !d.idempotent ||
		d.maxInFlight != 5 || d.maxBuffered != 64<<20 || d.deliveryTimeout != 2*time.Minute {
		t.Errorf("defaults changed: %+v (update the docs)", d)
	}
}

func TestNewClientChecksAddressAndOptions(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:7420", "http://localhost:7420", "https://sluice.internal:443", "http://[::1]:7420/"} {
		c, err := NewClient(addr)
		if err != nil {
			t.Errorf("NewClient(%q): %v", addr, err)
			continue
		}
		_ = c.Close()
	}
	for _, addr := range []string{"", "localhost", "ftp://h:1", "http://h:1/path", "http://h", "http://u@h:1"} {
		if _, err := NewClient(addr); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("NewClient(%q): %v; want ErrInvalidOption", addr, err)
		}
	}
	_, err := NewClient("h:1", WithHTTPClient(nil), WithLogger(nil))
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "WithHTTPClient") || !strings.Contains(err.Error(), "WithLogger") {
		t.Errorf("nil options: %v", err)
	}
	if _, err := NewClient("h:1", WithConnect(), WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		t.Error(err)
	}
}

// The one classifier: what the producer retries, and what IsRetriable says.
func TestClassify(t *testing.T) {
	exhausted := streamError(int32(connect.CodeResourceExhausted), "busy", 250, "")
	for _, tc := range []struct {
		err   error
		class errClass
		delay time.Duration
	}{
		{connect.NewError(connect.CodeUnavailable, errors.New("partition moving")), classRetriable, 0},
		{exhausted, classRetriable, 250 * time.Millisecond},
		{streamError(int32(connect.CodeFailedPrecondition), "dedup: out of order sequence: producer 7 epoch 0: sequence 9, expected 6", 0, reasonOutOfOrder), classOutOfOrder, 0},
		{streamError(int32(connect.CodeFailedPrecondition), "dedup: unknown producer id: producer 7", 0, reasonUnknownProducer), classUnknownProducer, 0},
		{streamError(int32(connect.CodeFailedPrecondition), "dedup: producer fenced by a newer epoch: producer 7", 0, reasonFenced), classFenced, 0},
		// The reason decides, not the message.
		{streamError(int32(connect.CodeFailedPrecondition), "dedup: out of order sequence", 0, ""), classFatal, 0},
		{streamError(int32(connect.CodeFailedPrecondition), "text that changed", 0, reasonOutOfOrder), classOutOfOrder, 0},
		{streamError(int32(connect.CodeFailedPrecondition), "catalog: version conflict", 0, ""), classFatal, 0},
		{connect.NewError(connect.CodeInvalidArgument, errors.New("batches[0].data.records[0].value: too long")), classFatal, 0},
		{connect.NewError(connect.CodeNotFound, errors.New("topic")), classFatal, 0},
		{connect.NewError(connect.CodeInternal, errors.New("bug")), classFatal, 0},
		// What connect says when the server dies mid-stream (seen against
		// a SIGKILLed sluice dev): the transport's error is inside.
		{connect.NewError(connect.CodeInternal, fmt.Errorf("protocol error: incomplete envelope: %w", io.ErrUnexpectedEOF)), classRetriable, 0},
		{connect.NewError(connect.CodeInternal, fmt.Errorf("read: %w", syscall.ECONNRESET)), classRetriable, 0},
		{connect.NewError(connect.CodeInternal, fmt.Errorf("protocol error: incomplete envelope: %w", errors.New("http2: client connection force closed via ClientConn.Close"))), classRetriable, 0},
		{streamError(99, "from the future", 0, ""), classRetriable, 0}, // unknown codes are Unknown
		{ErrClosed, classFatal, 0},
		{ErrDeliveryTimeout, classRetriable, 0},
		{ErrBufferFull, classRetriable, 0},
		{&record.FormatError{Field: "key", Reason: "too long", Err: record.ErrLimit}, classFatal, 0},
		{errors.New("dial tcp: connection refused"), classRetriable, 0},
	} {
		c, d := classify(tc.err)
		if c != tc.class || d != tc.delay {
			t.Errorf("classify(%v) = %d, %v; want %d, %v", tc.err, c, d, tc.class, tc.delay)
		}
		if IsRetriable(tc.err) != (tc.class == classRetriable) {
			t.Errorf("IsRetriable(%v) = %v", tc.err, IsRetriable(tc.err))
		}
	}
}

func TestAddSeqWraps(t *testing.T) {
	if got := addSeq(1<<31-2, 3); got != 1 {
		t.Fatalf("addSeq wraps to %d; want 1", got)
	}
	if got := addSeq(5, 0); got != 5 {
		t.Fatal(got)
	}
}
