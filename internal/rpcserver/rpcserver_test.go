package rpcserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start serves an AdminService whose methods are all unimplemented: enough
// to exercise the shared plumbing (protocols, limits, health, metrics).
func start(t *testing.T, cfg rpcserver.Config) (base string, stop func() error) {
	t.Helper()
	s, err := rpcserver.New(cfg, telemetry.Discard())
	if err != nil {
		t.Fatal(err)
	}
	s.Handle(sluicev1connect.NewAdminServiceHandler(sluicev1connect.UnimplementedAdminServiceHandler{}, s.HandlerOptions()...))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
	}
	return scheme + ln.Addr().String(), stop
}

func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: 10 * time.Second}
}

// Connect JSON answers the standard proto3 JSON name of the enum value,
// which probes and scripts match on.
func TestHealthOverConnectJSON(t *testing.T) {
	base, _ := start(t, rpcserver.Config{})
	for req, want := range map[string]struct {
		code int
		body string
	}{
		`{}`:                                   {200, `{"status":"SERVING"}`},
		`{"service":"sluice.v1.AdminService"}`: {200, `{"status":"SERVING"}`},
		`{"service":"no.such.Service"}`:        {404, `"code":"not_found"`},
	} {
		resp, err := http.Post(base+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want.code || !strings.Contains(string(body), want.body) {
			t.Errorf("Check %s: status %d body %s, want %d %s", req, resp.StatusCode, body, want.code, want.body)
		}
	}
}

// TestHealthOverGRPCh2c speaks raw gRPC (length-prefixed frames over
// cleartext HTTP/2) to prove plain gRPC clients work without TLS.
func TestHealthOverGRPCh2c(t *testing.T) {
	base, _ := start(t, rpcserver.Config{})
	// Empty HealthCheckRequest: one uncompressed frame of length 0.
	req, _ := http.NewRequest("POST", base+"/grpc.health.v1.Health/Check", bytes.NewReader([]byte{0, 0, 0, 0, 0}))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("got HTTP/%d, want HTTP/2 (h2c)", resp.ProtoMajor)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("grpc-status %q, message %q", resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message"))
	}
	// HealthCheckResponse{status: SERVING(1)} encodes as field 1 varint 1.
	if len(body) != 7 || body[0] != 0 || binary.BigEndian.Uint32(body[1:5]) != 2 || !bytes.Equal(body[5:], []byte{0x08, 0x01}) {
		t.Fatalf("health frame = % x, want SERVING", body)
	}
}

// A real gRPC client (grpc-go, over h2c) and a gRPC-web client see the
// standard statuses and codes.
func TestHealthOverGRPCClients(t *testing.T) {
	base, _ := start(t, rpcserver.Config{})
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "sluice.v1.AdminService"} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("grpc Check(%q) = %v, %v; want SERVING", svc, resp.GetStatus(), err)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("grpc Check(unknown) err = %v, want NotFound", err)
	}

	web := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](h2cClient(), base+"/grpc.health.v1.Health/Check", connect.WithGRPCWeb())
	resp, err := web.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil || resp.Msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc-web Check = %v, %v; want SERVING", resp, err)
	}
	if _, err := web.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{Service: "no.such.Service"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("grpc-web Check(unknown) err = %v, want NotFound", err)
	}

	// Watch of an unknown service: SERVICE_UNKNOWN, and the stream stays
	// open (the standard's rule).
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w, err := hc.Watch(wctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Errorf("Watch(unknown) = %v, %v; want SERVICE_UNKNOWN", m.GetStatus(), err)
	}
}

// A Watch stream sees SERVING, then NOT_SERVING when the server drains,
// and then ends, so it does not hold up the shutdown.
func TestHealthWatchSeesDrain(t *testing.T) {
	base, stop := start(t, rpcserver.Config{ShutdownTimeout: 5 * time.Second})
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: "sluice.v1.AdminService"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch first = %v, %v; want SERVING", m.GetStatus(), err)
	}
	began := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after stop = %v, %v; want NOT_SERVING", m.GetStatus(), err)
	}
	if _, err := w.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Watch after NOT_SERVING: err = %v, want the stream to end (EOF)", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop = %v", err)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("shutdown took %v with a Watch stream open", d)
	}
}

func TestConnectAndGRPCClientsShareHandlers(t *testing.T) {
	base, _ := start(t, rpcserver.Config{})
	for name, opts := range map[string][]connect.ClientOption{
		"connect": nil,
		"grpc":    {connect.WithGRPC()},
		"grpcweb": {connect.WithGRPCWeb()},
	} {
		t.Run(name, func(t *testing.T) {
			c := sluicev1connect.NewAdminServiceClient(h2cClient(), base, opts...)
			_, err := c.ListTopics(context.Background(), connect.NewRequest(&sluicev1.ListTopicsRequest{}))
			if connect.CodeOf(err) != connect.CodeUnimplemented {
				t.Fatalf("err = %v, want Unimplemented from the registered handler", err)
			}
		})
	}
}

// A request message over MaxRequestBytes gets INVALID_ARGUMENT naming the
// limit and the flag that changes it, over every protocol, compressed or
// not — never RESOURCE_EXHAUSTED, which clients retry as throttling. A
// message at the limit passes.
func TestRequestSizeLimit(t *testing.T) {
	base, _ := start(t, rpcserver.Config{MaxRequestBytes: 1024})
	ctx := context.Background()
	const want = "request: %s the server's request size limit of 1024 bytes; send less per request, or raise the limit with the server's --max-request-bytes flag"
	for name, opts := range map[string][]connect.ClientOption{
		"connect":      nil,
		"connect+json": {connect.WithProtoJSON()},
		"connect+gzip": {connect.WithSendGzip()},
		"grpc":         {connect.WithGRPC()},
		"grpc+gzip":    {connect.WithGRPC(), connect.WithSendGzip()},
		"grpcweb":      {connect.WithGRPCWeb()},
	} {
		t.Run(name, func(t *testing.T) {
			c := sluicev1connect.NewAdminServiceClient(h2cClient(), base, opts...)
			// At the limit (a 1021-byte name encodes to 1024 bytes of
			// protobuf): the handler is reached.
			if _, err := c.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: strings.Repeat("x", 1021)})); connect.CodeOf(err) != connect.CodeUnimplemented && !strings.Contains(name, "json") {
				t.Errorf("a message at the limit: %v, want it to reach the handler (Unimplemented)", err)
			}
			_, err := c.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: strings.Repeat("x", 4096)}))
			size := "4099 bytes is over"
			if strings.Contains(name, "gzip") {
				size = "over" // known only decompressed, and not read to its end
			} else if strings.Contains(name, "json") {
				size = "4107 bytes is over"
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), fmt.Sprintf(want, size)) {
				t.Fatalf("err = %v\nwant InvalidArgument %q", err, fmt.Sprintf(want, size))
			}
			if apierr.Reason(err) != apierr.ReasonLimitExceeded {
				t.Errorf("ErrorInfo reason %q, want %s", apierr.Reason(err), apierr.ReasonLimitExceeded)
			}
		})
	}

	// As curl sends it: Connect JSON with a Content-Length, over HTTP/1.1.
	body := `{"name":"` + strings.Repeat("x", 20<<20) + `"}` // the 20 MB of issue 30
	resp, err := http.Post(base+"/sluice.v1.AdminService/CreateTopic", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), `"code":"invalid_argument"`) || !strings.Contains(string(got), fmt.Sprintf("%d bytes is over", len(body))) {
		t.Fatalf("curl-like post: %d %s; want 400 invalid_argument naming %d bytes", resp.StatusCode, got, len(body))
	}
}

func TestMetricsRecordRPCs(t *testing.T) {
	base, _ := start(t, rpcserver.Config{})
	c := sluicev1connect.NewAdminServiceClient(http.DefaultClient, base)
	_, _ = c.ListGroups(context.Background(), connect.NewRequest(&sluicev1.ListGroupsRequest{}))
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `rpc_method="sluice.v1.AdminService/ListGroups"`) {
		t.Fatalf("metrics do not mention the ListGroups call:\n%s", body)
	}
}

func TestCORS(t *testing.T) {
	base, _ := start(t, rpcserver.Config{AllowLocalhost: true, CORSOrigins: []string{"https://app.example"}})
	for origin, allowed := range map[string]bool{
		"http://localhost:5173": true,
		"https://app.example":   true,
		"https://evil.example":  false,
	} {
		req, _ := http.NewRequest("OPTIONS", base+"/sluice.v1.AdminService/ListTopics", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		// Browsers send the list lowercased and sorted.
		req.Header.Set("Access-Control-Request-Headers", "connect-protocol-version,content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("Access-Control-Allow-Origin") == origin
		if got != allowed {
			t.Errorf("origin %s: allowed=%v, want %v", origin, got, allowed)
		}
	}
}

func TestDrainTurnsHealthNotServingAndStops(t *testing.T) {
	base, stop := start(t, rpcserver.Config{ShutdownTimeout: time.Second})
	if err := stop(); err != nil {
		t.Fatalf("clean shutdown returned %v", err)
	}
	_, err := http.Post(base+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{}`))
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("after stop: err = %v, want connection refused", err)
	}
}

func TestConfigValidateReportsAll(t *testing.T) {
	err := rpcserver.Config{MaxRequestBytes: -1, IdleTimeout: -time.Second, CORSOrigins: []string{"nope"}}.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"MaxRequestBytes", "IdleTimeout", "CORS origin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		base, _ := start(t, rpcserver.Config{Pprof: on})
		resp, err := http.Get(base + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "goroutine profile")
		if served != on {
			t.Errorf("Pprof %v: GET /debug/pprof/goroutine = %d (profile served: %v)", on, resp.StatusCode, served)
		}
	}
}

// Reflection describes the health service too, so grpcurl and buf curl
// can call it without a local copy of health.proto.
func TestReflectionListsHealth(t *testing.T) {
	base, _ := start(t, rpcserver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := grpcreflect.NewClient(h2cClient(), base, connect.WithGRPC()).NewStream(ctx)
	defer cs.Close()
	files, err := cs.FileContainingSymbol(rpcserver.HealthService)
	if err != nil || len(files) == 0 || files[0].GetName() != "grpc/health/v1/health.proto" {
		t.Fatalf("reflection of %s: %d files, %v; want grpc/health/v1/health.proto", rpcserver.HealthService, len(files), err)
	}
}

// GET /healthz is the health check of load balancers that only send HTTP
// GETs: 503 NOT_SERVING until the readiness gate opens, 200 SERVING
// after, 503 again once the server drains; other methods are refused.
func TestHealthzFollowsTheGateAndDrain(t *testing.T) {
	s, err := rpcserver.New(rpcserver.Config{ShutdownTimeout: time.Second}, telemetry.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	s.Gate(ready)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(method string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	waitHealthz := func(wantCode int, wantBody string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			code, body := get(http.MethodGet)
			if code == wantCode && body == wantBody {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /healthz = %d %q, want %d %q", code, body, wantCode, wantBody)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitHealthz(http.StatusServiceUnavailable, "NOT_SERVING")
	close(ready)
	waitHealthz(http.StatusOK, "SERVING")
	if code, _ := get(http.MethodPost); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitHealthz(http.StatusServiceUnavailable, "NOT_SERVING")
}
