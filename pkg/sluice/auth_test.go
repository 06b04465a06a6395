package sluice_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// authSeen is a ProducerService and AdminService that records the
// Authorization header of every call, and the TLS state of its stream.
type authSeen struct {
	sluicev1connect.UnimplementedProducerServiceHandler
	sluicev1connect.UnimplementedAdminServiceHandler
	mu   sync.Mutex
	seen []string // "procedure header"
}

func (s *authSeen) note(proc string, h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, proc+" "+h.Get("Authorization"))
}

func (s *authSeen) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func (s *authSeen) DescribeTopic(_ context.Context, req *connect.Request[sluicev1.DescribeTopicRequest]) (*connect.Response[sluicev1.DescribeTopicResponse], error) {
	s.note("DescribeTopic", req.Header())
	return connect.NewResponse(&sluicev1.DescribeTopicResponse{Topic: &sluicev1.TopicInfo{Name: "t", Partitions: []*sluicev1.PartitionInfo{{}}}}), nil
}

func (s *authSeen) ProduceStream(_ context.Context, st *connect.BidiStream[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse]) error {
	s.note("ProduceStream", st.RequestHeader())
	for {
		req, err := st.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out := &sluicev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(),
			Response: &sluicev1.ProduceResponse{Results: []*sluicev1.ProduceResult{{Offset: 0}}}}
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

// serveTLS serves srv over HTTPS (HTTP/2 by ALPN) on a loopback port with
// a certificate from a test CA; it returns the address and the client TLS
// config that trusts the CA.
func serveTLS(t *testing.T, srv *authSeen) (string, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	certFile, keyFile := ca.Issue(t, dir, "server", 2)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(sluicev1connect.NewProducerServiceHandler(srv))
	mux.Handle(sluicev1connect.NewAdminServiceHandler(srv))
	hs := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = hs.Close(); <-done })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	return ln.Addr().String(), &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// WithTLS reaches a host:port over HTTPS, and WithToken and
// WithTokenSource send the token on unary calls and on the produce
// stream; without WithTLS the same server cannot be reached.
func TestClientTLSAndToken(t *testing.T) {
	srv := &authSeen{}
	addr, tcfg := serveTLS(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	produce := func(c *sluice.Client) error {
		p, err := c.NewProducer(sluice.WithLinger(0))
		if err != nil {
			return err
		}
		defer p.Close(ctx)
		_, err = p.ProduceSync(ctx, &sluice.Record{Topic: "t", Value: []byte("v")})
		return err
	}
	n := 0
	src := func(context.Context) (string, error) { n++; return "renewed", nil }
	for _, c := range []struct {
		name string
		opt  sluice.ClientOption
		want string
	}{
		{"WithToken", sluice.WithToken("tok-1"), "Bearer tok-1"},
		{"WithTokenSource", sluice.WithTokenSource(src), "Bearer renewed"},
	} {
		srv.mu.Lock()
		srv.seen = nil
		srv.mu.Unlock()
		cl, err := sluice.NewClient(addr, sluice.WithTLS(tcfg), c.opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := produce(cl); err != nil {
			t.Fatalf("%s: produce over TLS: %v", c.name, err)
		}
		cl.Close()
		calls := srv.calls()
		var stream bool
		for _, call := range calls {
			proc, h, _ := strings.Cut(call, " ")
			if h != c.want {
				t.Errorf("%s: %s carried Authorization %q; want %q", c.name, proc, h, c.want)
			}
			stream = stream || proc == "ProduceStream"
		}
		if !stream {
			t.Errorf("%s: no produce stream reached the server: %q", c.name, calls)
		}
	}
	if n == 0 {
		t.Error("the token source was never called")
	}

	cl, err := sluice.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.DescribeTopic(ctx, "t"); err == nil {
		t.Error("a client without WithTLS reached the HTTPS server over h2c")
	}
}

// A token goes only over TLS or to loopback; options that cannot work
// together are refused with ErrInvalidOption.
func TestClientTokenNeedsTLS(t *testing.T) {
	for _, c := range []struct {
		addr string
		opts []sluice.ClientOption
		ok   bool
	}{
		{"10.0.0.1:7420", []sluice.ClientOption{sluice.WithToken("t")}, false},
		{"http://sluice.example:7420", []sluice.ClientOption{sluice.WithToken("t")}, false},
		{"https://sluice.example:7420", []sluice.ClientOption{sluice.WithToken("t")}, true},
		{"sluice.example:7420", []sluice.ClientOption{sluice.WithToken("t"), sluice.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12})}, true},
		{"127.0.0.1:7420", []sluice.ClientOption{sluice.WithToken("t")}, true},
		{"localhost:7420", []sluice.ClientOption{sluice.WithToken("t")}, true},
		{"[::1]:7420", []sluice.ClientOption{sluice.WithToken("t")}, true},
		{"https://sluice.example:7420", []sluice.ClientOption{sluice.WithToken("t"), sluice.WithConsumerAddr("10.0.0.2:7422")}, false},
		{"127.0.0.1:7420", []sluice.ClientOption{sluice.WithToken("")}, false},
		{"127.0.0.1:7420", []sluice.ClientOption{sluice.WithTLS(nil)}, false},
		{"127.0.0.1:7420", []sluice.ClientOption{sluice.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}), sluice.WithHTTPClient(http.DefaultClient)}, false},
	} {
		c2, err := sluice.NewClient(c.addr, c.opts...)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, sluice.ErrInvalidOption)) {
			t.Errorf("%s with %d options: %v; want ok=%v (or ErrInvalidOption)", c.addr, len(c.opts), err, c.ok)
		}
		if c2 != nil {
			c2.Close()
		}
	}
}
