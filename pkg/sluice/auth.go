package sluice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"
)

// TokenSource returns the bearer token for a call: a fixed token
// (WithToken) or one the caller refreshes (an OAuth client, a file that a
// sidecar rewrites). It is called once per RPC; cache inside it.
type TokenSource func(ctx context.Context) (string, error)

// BearerInterceptor returns a connect client interceptor that sends the
// token of src in the Authorization header of every call, unary or stream:
// for generated clients used beside the SDK's (serde.NewRegistry, the
// AdminService). Pair it with CheckTokenTransport on the base URL.
func BearerInterceptor(src TokenSource) connect.Interceptor { return bearer{source: src} }

// bearer is the client interceptor that sends the token in the
// Authorization header of every call, unary or stream.
type bearer struct{ source TokenSource }

func (b bearer) header(ctx context.Context, h http.Header) error {
	tok, err := b.source(ctx)
	if err != nil {
		return fmt.Errorf("sluice: get the bearer token: %w", err)
	}
	if tok == "" {
		return errors.New("sluice: the token source gave an empty token")
	}
	h.Set("Authorization", "Bearer "+tok)
	return nil
}

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := b.header(ctx, req.Header()); err != nil {
			return nil, connect.NewError(connect.CodeUnauthenticated, err)
		}
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if err := b.header(ctx, conn.RequestHeader()); err != nil {
			return failedConn{StreamingClientConn: conn, err: connect.NewError(connect.CodeUnauthenticated, err)}
		}
		return conn
	}
}

func (bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// failedConn is a stream whose token could not be had: every send and
// receive fails with err, and nothing reaches the server.
type failedConn struct {
	connect.StreamingClientConn
	err error
}

func (c failedConn) Send(any) error              { return c.err }
func (c failedConn) Receive(any) error           { return c.err }
func (c failedConn) CloseRequest() error         { return nil }
func (c failedConn) CloseResponse() error        { return nil }
func (c failedConn) ResponseHeader() http.Header { return http.Header{} }

// CheckTokenTransport refuses to send a bearer token in clear text to
// anything but a loopback address: anyone on the path could replay it.
// base is a server's base URL (scheme://host:port).
func CheckTokenTransport(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "https" {
		return err
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: a bearer token goes only over TLS (an https:// address, WithTLS) or to a loopback address; %s is neither", ErrInvalidOption, base)
}
