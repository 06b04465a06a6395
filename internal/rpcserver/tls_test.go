package rpcserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/internal/tlsconf"
	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
)

// With TLS the server answers HTTPS only — Connect over HTTP/2 and
// HTTP/1.1 by ALPN — and with a client CA only clients that present a
// certificate from it; a cleartext request gets no answer.
func TestServesTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	certFile, keyFile := ca.Issue(t, dir, "server", 1)
	clientCert, clientKey := ca.Issue(t, dir, "client", 2)
	tlsCfg, err := tlsconf.Server{CertFile: certFile, KeyFile: keyFile, ClientCAFiles: []string{caFile}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, rpcserver.Config{TLS: tlsCfg})
	addr := strings.TrimPrefix(base, "https://")

	client := func(withCert bool, http2 bool) *http.Client {
		c := tlsconf.Client{CAFile: caFile}
		if withCert {
			c.CertFile, c.KeyFile = clientCert, clientKey
		}
		cfg, err := c.Config()
		if err != nil {
			t.Fatal(err)
		}
		p := new(http.Protocols)
		if http2 {
			p.SetHTTP2(true)
		} else {
			p.SetHTTP1(true)
			cfg.NextProtos = []string{"http/1.1"}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Protocols: p}, Timeout: 10 * time.Second}
	}
	check := func(c *http.Client, url string) (int, string, error) {
		resp, err := c.Post(url+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader("{}"))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.ProtoMajor, string(b), nil
	}
	for _, h2 := range []bool{true, false} {
		proto, body, err := check(client(true, h2), "https://"+addr)
		want := 1
		if h2 {
			want = 2
		}
		if err != nil || proto != want || !strings.Contains(body, "SERVING") {
			t.Fatalf("HTTPS, HTTP/%d wanted: HTTP/%d %q, %v", want, proto, body, err)
		}
	}
	if _, _, err := check(client(false, true), "https://"+addr); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if _, body, err := check(plain, "http://"+addr); err == nil && strings.Contains(body, "SERVING") {
		t.Fatal("a cleartext request was answered")
	}
}

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Failed TLS handshakes reach the structured log, not stderr, and a burst
// of them makes one line: a client with the wrong CA, or a scanner, does
// not flood the log.
func TestHandshakeErrorsAreLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	certFile, keyFile := ca.Issue(t, dir, "server", 1)
	tlsCfg, err := tlsconf.Server{CertFile: certFile, KeyFile: keyFile, ClientCAFiles: []string{caFile}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	tel, err := telemetry.New(telemetry.Config{Service: "test", Format: "json", Output: &logs})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rpcserver.New(rpcserver.Config{TLS: tlsCfg}, tel)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	noCert, err := tlsconf.Client{CAFile: caFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		c, err := tls.Dial("tcp", ln.Addr().String(), noCert)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _ = c.Read(make([]byte, 1)) // TLS 1.3 reports the refusal here
			_ = c.Close()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "handshake error") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "handshake error"); n != 1 {
		t.Fatalf("%d log lines about failed handshakes after 5 of them; want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"http server error"`) {
		t.Fatalf("the handshake error is not a structured line:\n%s", logs.String())
	}
}

// With authentication in front of the handlers, a browser's CORS
// preflight is still answered (the CORS handler answers it before
// authentication) and offers the Authorization header; the call itself
// without credentials is refused.
func TestPreflightBeforeAuthentication(t *testing.T) {
	refuse := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	}
	const origin = "https://app.example"
	base, _ := start(t, rpcserver.Config{CORSOrigins: []string{origin}, Authenticate: refuse})
	pre, err := http.NewRequest(http.MethodOptions, base+"/sluice.v1.AdminService/ListTopics", nil)
	if err != nil {
		t.Fatal(err)
	}
	pre.Header.Set("Origin", origin)
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type") // lowercased and sorted, as browsers send it
	resp, err := http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Fatalf("preflight: %s, allow-origin %q, allow-headers %q", resp.Status, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Headers"))
	}
	call, err := http.NewRequest(http.MethodPost, base+"/sluice.v1.AdminService/ListTopics", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	call.Header.Set("Origin", origin)
	call.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(call)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the call without credentials: %s; want 401", resp.Status)
	}
}
