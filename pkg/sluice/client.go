package sluice

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// maxListPages bounds ListTopics (pages of 1,000 topics).
const maxListPages = 10_000

// Client is a connection to a Sluice cluster: the admin helpers, and the
// factory of Producers. It is safe for concurrent use. Close it after the
// producers made from it.
type Client struct {
	base     string
	http     *http.Client
	ownsHTTP bool
	log      *slog.Logger
	admin    sluicev1connect.AdminServiceClient
	// groupAdmin serves the group calls (DescribeGroup, ...): admin, or
	// the consumer address's (WithConsumerAddr).
	groupAdmin sluicev1connect.AdminServiceClient
	producer   sluicev1connect.ProducerServiceClient
	consumer   sluicev1connect.ConsumerServiceClient
	// tracer starts the Client's spans (WithTracerProvider); nil: none.
	tracer trace.Tracer
}

// NewClient returns a Client for the server at addr: "host:port",
// "http://host:port" (cleartext HTTP/2) or "https://host:port" (host:port
// is https with WithTLS). It does no I/O; the first RPC connects.
func NewClient(addr string, opts ...ClientOption) (*Client, error) {
	cfg, err := newClientConfig(opts)
	if err != nil {
		return nil, err
	}
	base, err := baseURL(addr, cfg.tls != nil)
	if err != nil {
		return nil, err
	}
	c := &Client{base: base, http: cfg.http, log: cfg.logger}
	if c.http == nil {
		c.http, c.ownsHTTP = defaultHTTPClient(cfg.tls), true
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	// No gzip on the wire: record batches are compressed by the producer
	// (WithCompression), and gzip of fetched batches cost the server more
	// CPU than the network it saved on one machine. Kafka's protocol has no
	// transport compression either.
	copts := []connect.ClientOption{connect.WithAcceptCompression("gzip", nil, nil)}
	if cfg.protocol == ProtocolGRPC {
		copts = append(copts, connect.WithGRPC())
	}
	if cfg.token != nil {
		if err := CheckTokenTransport(base); err != nil {
			return nil, err
		}
		copts = append(copts, connect.WithInterceptors(bearer{source: cfg.token}))
	}
	if cfg.tracerProvider != nil {
		ic, err := rpcTracing(cfg.tracerProvider)
		if err != nil {
			return nil, fmt.Errorf("sluice: RPC tracing: %w", err)
		}
		copts = append(copts, connect.WithInterceptors(ic))
		c.tracer = cfg.tracerProvider.Tracer(tracerName)
	}
	c.admin = sluicev1connect.NewAdminServiceClient(c.http, base, copts...)
	c.producer = sluicev1connect.NewProducerServiceClient(c.http, base, copts...)
	c.consumer = sluicev1connect.NewConsumerServiceClient(c.http, base, copts...)
	c.groupAdmin = c.admin
	if cfg.consumerAddr != "" {
		cbase, err := baseURL(cfg.consumerAddr, cfg.tls != nil)
		if err != nil {
			return nil, fmt.Errorf("%w: WithConsumerAddr: %w", ErrInvalidOption, err)
		}
		if cfg.token != nil {
			if err := CheckTokenTransport(cbase); err != nil {
				return nil, err
			}
		}
		c.consumer = sluicev1connect.NewConsumerServiceClient(c.http, cbase, copts...)
		c.groupAdmin = sluicev1connect.NewAdminServiceClient(c.http, cbase, copts...)
	}
	return c, nil
}

// baseURL checks addr and returns the server's base URL; a host:port is
// https when secure, else http.
func baseURL(addr string, secure bool) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: address %q: %s", ErrInvalidOption, addr, why)
	}
	if addr == "" {
		return bad("empty")
	}
	if !strings.Contains(addr, "://") {
		if secure {
			addr = "https://" + addr
		} else {
			addr = "http://" + addr
		}
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return bad(err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("scheme must be http or https")
	case u.Host == "" || u.Port() == "":
		return bad("want host:port")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.User != nil:
		return bad("want only scheme://host:port")
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return bad(err.Error())
	}
	return u.Scheme + "://" + u.Host, nil
}

// defaultHTTPClient speaks HTTP/2 only: cleartext (h2c) for http://, TLS for
// https://. gRPC and bidirectional streams need HTTP/2. Idle connections are
// pinged so a dead server (or a cut network) is noticed within about 30 s
// even while a stream waits for answers.
func defaultHTTPClient(cfg *tls.Config) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	if cfg != nil {
		cfg = cfg.Clone()
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     cfg,
		Protocols:           &p,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: 15 * time.Second, PingTimeout: 15 * time.Second},
	}}
}

// Close releases the Client's idle connections (of the default HTTP client;
// one passed with WithHTTPClient is the caller's). Close producers first.
func (c *Client) Close() error {
	if c.ownsHTTP {
		c.http.CloseIdleConnections()
	}
	return nil
}

// CreateTopic creates a topic with the given number of partitions and
// config (see sluice.v1.CreateTopicRequest for the keys; nil for defaults).
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int32, config map[string]string) (*sluicev1.TopicInfo, error) {
	resp, err := c.admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: partitions, Config: config}))
	if err != nil {
		return nil, fmt.Errorf("sluice: create topic %q: %w", name, err)
	}
	return resp.Msg.GetTopic(), nil
}

// DescribeTopic returns a topic's config and partitions. An unknown topic is
// an error wrapping ErrUnknownTopic (and the server's NotFound).
func (c *Client) DescribeTopic(ctx context.Context, name string) (*sluicev1.TopicInfo, error) {
	resp, err := c.admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: name}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownTopic, name, err)
		}
		return nil, fmt.Errorf("sluice: describe topic %q: %w", name, err)
	}
	return resp.Msg.GetTopic(), nil
}

// DeleteTopic deletes a topic (its data is removed in the background).
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	if _, err := c.admin.DeleteTopic(ctx, connect.NewRequest(&sluicev1.DeleteTopicRequest{Name: name})); err != nil {
		return fmt.Errorf("sluice: delete topic %q: %w", name, err)
	}
	return nil
}

// ListTopics returns every topic (without partitions), in name order.
func (c *Client) ListTopics(ctx context.Context) ([]*sluicev1.TopicInfo, error) {
	var out []*sluicev1.TopicInfo
	token := ""
	for range maxListPages {
		resp, err := c.admin.ListTopics(ctx, connect.NewRequest(&sluicev1.ListTopicsRequest{PageSize: 1000, PageToken: token}))
		if err != nil {
			return nil, fmt.Errorf("sluice: list topics: %w", err)
		}
		out = append(out, resp.Msg.GetTopics()...)
		if token = resp.Msg.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
	return nil, fmt.Errorf("sluice: list topics: more than %d pages", maxListPages)
}
