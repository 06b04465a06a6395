package sluicedriver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/loadgen/sluicedriver"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// call is what the test server saw of one request.
type call struct {
	path, auth string
	tls, h2    bool
}

// With TLS and a token, every client of the driver — the SDK's admin
// calls, the schema registry's and the consumers' — reaches the server over
// https (HTTP/2) and sends the token. The server refuses every call; only
// what arrived matters.
func TestSluiceDriverTLSAndToken(t *testing.T) {
	var mu sync.Mutex
	var calls []call
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, call{path: r.URL.Path, auth: r.Header.Get("Authorization"), tls: r.TLS != nil, h2: r.ProtoMajor == 2})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "7") // permission denied
		w.Header().Set("Grpc-Message", "test")
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	addr := strings.TrimPrefix(srv.URL, "https://") // host:port: https with TLS

	drv, err := sluicedriver.New(sluicedriver.Config{Addr: addr, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Token: "tok.en", Schema: sluicedriver.SchemaAvro})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := drv.CreateTopic(ctx, "t", 1); err == nil {
		t.Error("CreateTopic: the server refuses everything, yet no error")
	}
	if err := drv.DeleteTopic(ctx, "t"); err == nil {
		t.Error("DeleteTopic: no error")
	}
	if _, err := drv.NewConsumer(ctx, "t", "g", func([]byte) {}); err == nil {
		t.Error("NewConsumer: no error")
	}

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.path] = true
		if !c.tls || !c.h2 || c.auth != "Bearer tok.en" {
			t.Errorf("%s: TLS %v, HTTP/2 %v, Authorization %q; want TLS, HTTP/2 and the token", c.path, c.tls, c.h2, c.auth)
		}
	}
	for _, p := range []string{sluicev1connect.SchemaServiceRegisterSchemaProcedure, sluicev1connect.AdminServiceDeleteTopicProcedure,
		sluicev1connect.ConsumerServiceSubscribeProcedure} {
		if !seen[p] {
			t.Errorf("no call of %s; calls: %+v", p, calls)
		}
	}
}

func TestSluiceDriverConfigChecksTLSAndToken(t *testing.T) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	for _, tc := range []struct {
		name string
		c    sluicedriver.Config
		want string // "" valid
	}{
		{"defaults", sluicedriver.Config{Addr: "127.0.0.1:7420"}, ""},
		{"token to loopback over h2c", sluicedriver.Config{Addr: "127.0.0.1:7420", Token: "t"}, ""},
		{"token over TLS", sluicedriver.Config{Addr: "sluice.example:443", TLS: cfg, Token: "t"}, ""},
		{"token over https", sluicedriver.Config{Addr: "https://sluice.example:443", Token: "t"}, ""},
		{"token in the clear", sluicedriver.Config{Addr: "sluice.example:7420", Token: "t"}, "Token:"},
		{"token to a cleartext fetch copy", sluicedriver.Config{Addr: "https://a.example:1", FetchAddr: "http://b.example:2", Token: "t"}, "Token:"},
		{"Bearer prefix", sluicedriver.Config{Addr: "127.0.0.1:7420", Token: "Bearer t"}, "white space"},
		{"TLS to http://", sluicedriver.Config{Addr: "http://127.0.0.1:7420", TLS: cfg}, "is cleartext, but TLS is set"},
	} {
		err := tc.c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}
