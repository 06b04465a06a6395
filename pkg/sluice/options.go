package sluice

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/pkg/record"
)

// Producer defaults and bounds. Every option is bounded; NewProducer checks
// them all at once (see producerConfig.validate) and names each option that
// is out of bounds.
const (
	// DefaultLinger is how long a partition's batch waits for more records
	// before it is sealed and sent, as Kafka's linger.ms (which now defaults
	// to 5 ms too): long enough to batch at high rates, short against the
	// latency goal.
	DefaultLinger = 5 * time.Millisecond
	// MaxLinger bounds WithLinger.
	MaxLinger = time.Minute

	// DefaultBatchBytes is the size at which a batch is sealed (before
	// compression). A single record larger than it still goes, in a batch of
	// its own, up to the topic's max.message.bytes.
	DefaultBatchBytes = 256 << 10
	// MinBatchBytes and MaxBatchBytes bound WithBatchBytes. The upper bound
	// keeps one batch under the server's 4 MiB request limit; the topic's
	// max.message.bytes (1 MiB by default) lowers it further at run time.
	MinBatchBytes = 1 << 10
	MaxBatchBytes = maxRequestBatchBytes

	// DefaultMaxInFlightPerPartition is the number of unacknowledged batches
	// per partition, and the bound with idempotence on: the server's dedup
	// window holds a producer's last 5 batches per partition (Kafka's
	// max.in.flight.requests.per.connection rule).
	DefaultMaxInFlightPerPartition = 5
	// MaxInFlightIdempotent bounds WithMaxInFlightPerPartition with
	// idempotence on; MaxInFlightPerPartition without (the server's per-stream
	// pipelining bound).
	MaxInFlightIdempotent   = 5
	MaxInFlightPerPartition = 64

	// DefaultMaxBufferedBytes bounds the record bytes buffered (produced but
	// not yet completed); Produce blocks beyond it.
	DefaultMaxBufferedBytes = 64 << 20
	// MaxMaxBufferedBytes bounds WithMaxBufferedBytes (at least the batch
	// size, at most 16 GiB).
	MaxMaxBufferedBytes = 16 << 30

	// DefaultDeliveryTimeout bounds how long a record may take from Produce
	// to its acknowledgement, retries included (Kafka's delivery.timeout.ms).
	DefaultDeliveryTimeout = 2 * time.Minute
	// MinDeliveryTimeout and MaxDeliveryTimeout bound WithDeliveryTimeout.
	// The upper bound is the server's producer-state expiry (24 h): a retry
	// later than that could not be deduplicated.
	MinDeliveryTimeout = 100 * time.Millisecond
	MaxDeliveryTimeout = 24 * time.Hour

	// DefaultRetryBackoff and DefaultMaxRetryBackoff are the first and the
	// largest delay before a retry (Kafka's retry.backoff.ms and
	// retry.backoff.max.ms); the delay doubles per consecutive failure, with
	// ±20% jitter. A server's RetryInfo delay takes precedence when longer.
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = time.Second
	// MinRetryBackoff and MaxRetryBackoff bound WithRetryBackoff.
	MinRetryBackoff = time.Millisecond
	MaxRetryBackoff = 5 * time.Minute
)

// DefaultCompression is LZ4: it costs about a nanosecond per byte to compress
// and less to decompress, and typical payloads (JSON, logs, protobuf with
// repeated strings) shrink 2-4x — which pays off because a batch crosses the
// network once to ingest and three times to bookies and is stored three
// times. The batch builder stores a batch uncompressed when LZ4 would not
// make it smaller, so incompressible data costs only the attempt. Use
// WithCompression(record.CodecZstd) for a better ratio at more CPU, or
// record.CodecNone for the least CPU.
const DefaultCompression = record.CodecLZ4

// maxRequestBatchBytes is the largest batch the producer builds: the
// server's 4 MiB request limit less room for the request's other fields.
const maxRequestBatchBytes = 4<<20 - 16<<10

// ProducerOption configures a Producer. Options only record values;
// NewProducer validates them together.
type ProducerOption func(*producerConfig)

// WithLinger sets how long a batch waits for more records before it is sent
// (default DefaultLinger; 0 sends every record at once; at most MaxLinger,
// and below the delivery timeout). Flush ignores it.
func WithLinger(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.linger = d }
}

// WithBatchBytes sets the size (before compression) at which a partition's
// batch is sealed (default DefaultBatchBytes; within [MinBatchBytes,
// MaxBatchBytes], and at most WithMaxBufferedBytes). The topic's
// max.message.bytes caps it at run time.
func WithBatchBytes(n int) ProducerOption {
	return func(c *producerConfig) { c.batchBytes = n }
}

// WithCompression sets the batch codec (default DefaultCompression, LZ4; see
// there why).
func WithCompression(codec record.Codec) ProducerOption {
	return func(c *producerConfig) { c.codec = codec }
}

// WithIdempotence turns the idempotent producer on or off (default on). With
// it, retries are deduplicated by the server and per-partition order holds
// across retries; without it, a retry may duplicate records and, with more
// than one batch in flight, reorder them.
func WithIdempotence(on bool) ProducerOption {
	return func(c *producerConfig) { c.idempotent = on }
}

// WithMaxInFlightPerPartition sets how many batches per partition may be
// unacknowledged at once (default 5; at most MaxInFlightIdempotent with
// idempotence, MaxInFlightPerPartition without).
func WithMaxInFlightPerPartition(n int) ProducerOption {
	return func(c *producerConfig) { c.maxInFlight = n }
}

// WithMaxBufferedBytes bounds the record bytes (keys, values, headers and a
// small per-record overhead) held between Produce and the callback (default
// DefaultMaxBufferedBytes; at least the batch size, at most
// MaxMaxBufferedBytes). When it is reached Produce blocks until space frees
// or its context ends (then the record fails with ErrBufferFull), as
// franz-go does. Memory use is up to about twice this: the records, which
// the producer references until their callback, plus their encoded batches.
func WithMaxBufferedBytes(n int64) ProducerOption {
	return func(c *producerConfig) { c.maxBuffered = n }
}

// WithDeliveryTimeout bounds the time from Produce to a record's outcome,
// retries included (default DefaultDeliveryTimeout; within
// [MinDeliveryTimeout, MaxDeliveryTimeout], and above the linger). A record
// past it fails with ErrDeliveryTimeout; it may or may not be stored.
func WithDeliveryTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.deliveryTimeout = d }
}

// WithRetryBackoff sets the first and the largest delay between retries of
// a partition's batches and between stream reconnects (defaults
// DefaultRetryBackoff and DefaultMaxRetryBackoff; both within
// [MinRetryBackoff, MaxRetryBackoff], initial ≤ max).
func WithRetryBackoff(initial, maxBackoff time.Duration) ProducerOption {
	return func(c *producerConfig) { c.backoffInitial, c.backoffMax = initial, maxBackoff }
}

// WithHooks installs observability callbacks (see Hooks). Later calls
// replace earlier ones.
func WithHooks(h Hooks) ProducerOption {
	return func(c *producerConfig) { c.hooks = h }
}

// producerConfig is a Producer's configuration, defaults filled in.
type producerConfig struct {
	linger          time.Duration
	batchBytes      int
	codec           record.Codec
	idempotent      bool
	maxInFlight     int
	maxBuffered     int64
	deliveryTimeout time.Duration
	backoffInitial  time.Duration
	backoffMax      time.Duration
	hooks           Hooks
}

func defaultProducerConfig() producerConfig {
	return producerConfig{
		linger:          DefaultLinger,
		batchBytes:      DefaultBatchBytes,
		codec:           DefaultCompression,
		idempotent:      true,
		maxInFlight:     DefaultMaxInFlightPerPartition,
		maxBuffered:     DefaultMaxBufferedBytes,
		deliveryTimeout: DefaultDeliveryTimeout,
		backoffInitial:  DefaultRetryBackoff,
		backoffMax:      DefaultMaxRetryBackoff,
	}
}

// newProducerConfig applies opts to the defaults and validates the result:
// the one place options are checked.
func newProducerConfig(opts []ProducerOption) (producerConfig, error) {
	c := defaultProducerConfig()
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c, c.validate()
}

// validate reports every option out of bounds, joined; each error wraps
// ErrInvalidOption and names the option.
func (c producerConfig) validate() error {
	var errs []error
	bad := func(option, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...)))
	}
	if c.linger < 0 || c.linger > MaxLinger {
		bad("WithLinger", "%v outside [0, %v]", c.linger, MaxLinger)
	}
	if c.batchBytes < MinBatchBytes || c.batchBytes > MaxBatchBytes {
		bad("WithBatchBytes", "%d outside [%d, %d]", c.batchBytes, MinBatchBytes, MaxBatchBytes)
	}
	switch c.codec {
	case record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd:
	default:
		bad("WithCompression", "unknown codec %d", c.codec)
	}
	maxFlight := MaxInFlightPerPartition
	if c.idempotent {
		maxFlight = MaxInFlightIdempotent
	}
	if c.maxInFlight < 1 || c.maxInFlight > maxFlight {
		bad("WithMaxInFlightPerPartition", "%d outside [1, %d] (idempotence %v)", c.maxInFlight, maxFlight, c.idempotent)
	}
	if c.maxBuffered < int64(c.batchBytes) || c.maxBuffered > MaxMaxBufferedBytes {
		bad("WithMaxBufferedBytes", "%d outside [batch bytes %d, %d]", c.maxBuffered, c.batchBytes, int64(MaxMaxBufferedBytes))
	}
	if c.deliveryTimeout < MinDeliveryTimeout || c.deliveryTimeout > MaxDeliveryTimeout {
		bad("WithDeliveryTimeout", "%v outside [%v, %v]", c.deliveryTimeout, MinDeliveryTimeout, MaxDeliveryTimeout)
	} else if c.deliveryTimeout <= c.linger {
		bad("WithDeliveryTimeout", "%v not above the linger %v", c.deliveryTimeout, c.linger)
	}
	if c.backoffInitial < MinRetryBackoff || c.backoffInitial > MaxRetryBackoff {
		bad("WithRetryBackoff", "initial %v outside [%v, %v]", c.backoffInitial, MinRetryBackoff, MaxRetryBackoff)
	}
	if c.backoffMax < c.backoffInitial || c.backoffMax > MaxRetryBackoff {
		bad("WithRetryBackoff", "max %v outside [initial %v, %v]", c.backoffMax, c.backoffInitial, MaxRetryBackoff)
	}
	return errors.Join(errs...)
}

// Protocol is the RPC protocol the Client speaks.
type Protocol uint8

const (
	// ProtocolGRPC is gRPC over HTTP/2 (the default).
	ProtocolGRPC Protocol = iota + 1
	// ProtocolConnect is the Connect protocol (also over HTTP/2 here, since
	// ProduceStream is a bidirectional stream).
	ProtocolConnect
)

// ClientOption configures a Client. Options only record values; NewClient
// validates them together.
type ClientOption func(*clientConfig)

// WithHTTPClient sets the HTTP client. It must speak HTTP/2 (ProduceStream
// is a bidirectional stream): for "http://" addresses, cleartext HTTP/2
// (http.Protocols.SetUnencryptedHTTP2). The default does, and pings idle
// connections to notice dead servers. The Client does not close a client
// given here.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *clientConfig) { c.http, c.httpSet = hc, true }
}

// WithTLS makes the default HTTP client use cfg for https:// addresses:
// its RootCAs check the server's certificate, and its certificates (or
// GetClientCertificate) answer a server that asks for one (mTLS). An
// address given as host:port is then reached over https. It cannot be
// combined with WithHTTPClient (configure that client's TLS instead).
func WithTLS(cfg *tls.Config) ClientOption {
	return func(c *clientConfig) { c.tls, c.tlsSet = cfg, true }
}

// WithToken sends token as a bearer token (Authorization: Bearer) on
// every call: a JWT from the cluster's identity provider. Tokens go only
// over TLS, or to a loopback address.
func WithToken(token string) ClientOption {
	return func(c *clientConfig) {
		c.tokenSet = true
		c.token = nil
		if token != "" {
			c.token = func(context.Context) (string, error) { return token, nil }
		}
	}
}

// WithTokenSource is WithToken with a token fetched per call, for tokens
// that expire and are renewed while the Client lives.
func WithTokenSource(src TokenSource) ClientOption {
	return func(c *clientConfig) { c.token, c.tokenSet = src, true }
}

// WithGRPC makes the Client speak gRPC (the default).
func WithGRPC() ClientOption {
	return func(c *clientConfig) { c.protocol = ProtocolGRPC }
}

// WithConnect makes the Client speak the Connect protocol.
func WithConnect() ClientOption {
	return func(c *clientConfig) { c.protocol = ProtocolConnect }
}

// WithLogger sets the logger for the Client and its producers (default: a
// logger that discards). Messages are static; details are attributes.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) { c.logger, c.loggerSet = l, true }
}

// WithConsumerAddr sends the consumer calls (Readers, Consumers) and the
// group calls (DescribeGroup, ListGroups, ResetGroupOffsets) to addr
// instead of the Client's address: for deployments whose fetch copies
// listen apart from the ingest copies (sluice dev serves both on one).
func WithConsumerAddr(addr string) ClientOption {
	return func(c *clientConfig) { c.consumerAddr = addr }
}

type clientConfig struct {
	consumerAddr string
	http         *http.Client
	httpSet      bool
	protocol     Protocol
	logger       *slog.Logger
	loggerSet    bool
	tls          *tls.Config
	tlsSet       bool
	token        TokenSource
	tokenSet     bool
	// tracerProvider traces the Client (WithTracerProvider); nil: no spans.
	tracerProvider trace.TracerProvider
	tracerSet      bool
}

func newClientConfig(opts []ClientOption) (clientConfig, error) {
	c := clientConfig{protocol: ProtocolGRPC}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	var errs []error
	if c.httpSet && c.http == nil {
		errs = append(errs, fmt.Errorf("%w: WithHTTPClient: nil client", ErrInvalidOption))
	}
	if c.tlsSet && c.tls == nil {
		errs = append(errs, fmt.Errorf("%w: WithTLS: nil config", ErrInvalidOption))
	}
	if c.tlsSet && c.httpSet {
		errs = append(errs, fmt.Errorf("%w: WithTLS and WithHTTPClient together: give the HTTP client its TLS config instead", ErrInvalidOption))
	}
	if c.tokenSet && c.token == nil {
		errs = append(errs, fmt.Errorf("%w: WithToken: empty token", ErrInvalidOption))
	}
	if c.tracerSet && c.tracerProvider == nil {
		errs = append(errs, fmt.Errorf("%w: WithTracerProvider: nil provider", ErrInvalidOption))
	}
	if c.loggerSet && c.logger == nil {
		errs = append(errs, fmt.Errorf("%w: WithLogger: nil logger", ErrInvalidOption))
	}
	if c.protocol != ProtocolGRPC && c.protocol != ProtocolConnect {
		errs = append(errs, fmt.Errorf("%w: protocol %d unknown", ErrInvalidOption, c.protocol))
	}
	return c, errors.Join(errs...)
}
