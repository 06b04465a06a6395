package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4"

	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/internal/auth/authtest"
	"github.com/sluicemq/sluice/internal/tlsconf"
	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// whoAmI answers ListTopics with the caller's principal as the one topic
// name ("-" for an anonymous caller).
type whoAmI struct {
	sluicev1connect.UnimplementedAdminServiceHandler
}

func (whoAmI) ListTopics(ctx context.Context, _ *connect.Request[sluicev1.ListTopicsRequest]) (*connect.Response[sluicev1.ListTopicsResponse], error) {
	name := "-"
	if p, ok := auth.FromContext(ctx); ok {
		name = p.String() + " via " + p.Via
	}
	return connect.NewResponse(&sluicev1.ListTopicsResponse{Topics: []*sluicev1.TopicInfo{{Name: name}}}), nil
}

// env is a TLS server (client certificates requested from the cluster's
// and the clients' CAs) with the authenticator in front of whoAmI.
type env struct {
	url      string
	idp      *authtest.Provider
	caFile   string
	certs    map[string][2]string // name → cert, key
	dir      string
	required bool
}

func newEnv(t *testing.T, required bool) *env {
	t.Helper()
	dir := t.TempDir()
	cluster, users, other := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "users"), tlstest.NewCA(t, "other")
	caFile, usersFile := cluster.WriteCA(t, dir, "cluster"), users.WriteCA(t, dir, "users")
	e := &env{idp: authtest.New(t), caFile: caFile, certs: map[string][2]string{}, dir: dir, required: required}
	for name, ca := range map[string]*tlstest.CA{"server": cluster, "ingest-2": cluster, "alice": users, "mallory": other} {
		c, k := ca.Issue(t, dir, name, int64(len(e.certs)+2))
		e.certs[name] = [2]string{c, k}
	}
	a, err := auth.New(context.Background(), auth.Config{Required: required, JWKS: e.idp.WriteJWKS(t, dir),
		Issuer: authtest.Issuer, Audience: authtest.Audience, ServiceCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	tcfg, err := tlsconf.Server{CertFile: e.certs["server"][0], KeyFile: e.certs["server"][1],
		ClientCAFiles: []string{caFile, usersFile}, ClientCertOptional: true}.Config()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(sluicev1connect.NewAdminServiceHandler(whoAmI{}))
	srv := &http.Server{Handler: a.Middleware(mux), TLSConfig: tcfg, ErrorLog: log.New(io.Discard, "", 0)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	e.url = "https://" + ln.Addr().String()
	return e
}

// call lists topics as the client with cert (a name in certs, or "") and
// token ("" for none).
func (e *env) call(t *testing.T, cert, token string) (string, error) {
	t.Helper()
	c := tlsconf.Client{CAFile: e.caFile}
	if cert != "" {
		c.CertFile, c.KeyFile = e.certs[cert][0], e.certs[cert][1]
	}
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	req := connect.NewRequest(&sluicev1.ListTopicsRequest{})
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	resp, err := sluicev1connect.NewAdminServiceClient(hc, e.url, connect.WithGRPC()).ListTopics(context.Background(), req)
	if err != nil {
		return "", err
	}
	return resp.Msg.GetTopics()[0].GetName(), nil
}

// Every bad token is refused with Unauthenticated, naming what was wrong
// and never echoing the token; a good token and a verified certificate
// name their principal (a certificate of the cluster's CA a Service); a
// certificate of another CA does not get through the handshake.
func TestAuthenticationCases(t *testing.T) {
	e := newEnv(t, true)
	refusedN := 0
	for _, bad := range e.idp.BadTokens(t, "alice") {
		_, err := e.call(t, "", bad.Token)
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%s: %v; want Unauthenticated", bad.Name, err)
			continue
		}
		if strings.Contains(err.Error(), bad.Token) {
			t.Errorf("%s: the error echoes the token: %v", bad.Name, err)
		}
		refusedN++
	}
	t.Logf("%d of %d bad tokens refused", refusedN, len(e.idp.BadTokens(t, "alice")))
	for _, c := range []struct {
		name, cert, token string
		want              string // the principal, or an error code
	}{
		{"no credentials", "", "", "unauthenticated"},
		{"a good token", "", e.idp.Token(t, "alice"), "User:alice via jwt"},
		{"a good token and a user certificate", "alice", e.idp.Token(t, "bob"), "User:bob via jwt"},
		{"a user certificate", "alice", "", "User:alice via mtls"},
		{"a cluster certificate", "ingest-2", "", "Service:ingest-2 via mtls"},
		{"a bad token and a good certificate", "alice", "x.y.z", "unauthenticated"},
		{"a certificate from another CA", "mallory", "", "handshake"},
	} {
		got, err := e.call(t, c.cert, c.token)
		switch {
		case c.want == "unauthenticated":
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("%s: %q, %v; want Unauthenticated", c.name, got, err)
			}
		case c.want == "handshake":
			if err == nil || connect.CodeOf(err) == connect.CodeUnauthenticated {
				t.Errorf("%s: %q, %v; want the handshake refused", c.name, got, err)
			}
		case err != nil || got != c.want:
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct{ token, says string }{
		{e.idp.BadTokens(t, "alice")[0].Token, "expired"},
		{e.idp.BadTokens(t, "alice")[1].Token, `audience does not hold "sluice"`},
		{e.idp.BadTokens(t, "alice")[6].Token, `unknown key id "rsa-9"`},
	} {
		if _, err := e.call(t, "", c.token); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("error %v does not say %q", err, c.says)
		}
	}
}

// Without Required, a caller with no credentials is served anonymously,
// but wrong credentials are still refused.
func TestAuthenticationOptional(t *testing.T) {
	e := newEnv(t, false)
	if got, err := e.call(t, "", ""); err != nil || got != "-" {
		t.Fatalf("no credentials: %q, %v; want anonymous", got, err)
	}
	if _, err := e.call(t, "", e.idp.BadTokens(t, "alice")[0].Token); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("an expired token: %v; want Unauthenticated", err)
	}
}

// A plain HTTP client (the REST registry) gets 401 with a JSON body; the
// health checks stay open.
func TestMiddlewareHTTP(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{Required: true, JWKS: authtest.New(t).WriteJWKS(t, t.TempDir()),
		Issuer: authtest.Issuer, Audience: authtest.Audience})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) }))
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/registry/subjects", 401},
		{http.MethodGet, "/metrics", 401},
		{http.MethodOptions, "/metrics", 401}, // any method: a handler that ignores it must not leak
		{http.MethodPost, auth.HealthPrefix + "Check", 200},
		{http.MethodGet, auth.HealthzPath, 200},
		{http.MethodGet, auth.HealthzPath + "x", 401}, // the exact path only
	} {
		path, want := c.path, c.want
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, path, nil))
		if rec.Code != want {
			t.Errorf("%s: %d; want %d (%s)", path, rec.Code, want, rec.Body)
		}
		if want == 401 && (!strings.Contains(rec.Body.String(), `"error_code":401`) || rec.Header().Get("WWW-Authenticate") == "") {
			t.Errorf("%s: body %q, WWW-Authenticate %q", path, rec.Body, rec.Header().Get("WWW-Authenticate"))
		}
	}
}

// A key set is refused when it holds what a verifier must not take.
func TestJWKSRefusals(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, c := range []struct {
		name string
		keys []jose.JSONWebKey
		says string
	}{
		{"a private key", []jose.JSONWebKey{{Key: rk, KeyID: "a"}}, "private key"},
		{"a symmetric key", []jose.JSONWebKey{{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "a"}}, "symmetric"},
		{"a short RSA key", []jose.JSONWebKey{{Key: &small.PublicKey, KeyID: "a"}}, "1024 bits"},
		{"no kid", []jose.JSONWebKey{{Key: &rk.PublicKey}}, "no kid"},
		{"a kid twice", []jose.JSONWebKey{{Key: &rk.PublicKey, KeyID: "a"}, {Key: &ek.PublicKey, KeyID: "a"}}, "twice"},
		{"an alg that does not fit", []jose.JSONWebKey{{Key: &ek.PublicKey, KeyID: "a", Algorithm: "RS256"}}, "does not fit"},
		{"no signing key", []jose.JSONWebKey{{Key: &rk.PublicKey, KeyID: "a", Use: "enc"}}, "no signing key"},
	} {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: c.keys})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "jwks.json")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = auth.New(context.Background(), auth.Config{JWKS: file, Issuer: "i", Audience: "a"})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.says)
		}
	}
	for _, c := range []struct {
		cfg  auth.Config
		says string
	}{
		{auth.Config{Required: true}, "neither tokens"},
		{auth.Config{JWKS: "x", Audience: "a"}, "issuer and the audience"},
		{auth.Config{ServiceCAFile: "x", Leeway: 2 * time.Minute}, "leeway"},
	} {
		if _, err := auth.New(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v; want %q", c.cfg, err, c.says)
		}
	}
}

// A JWKS file that changes is picked up (a rotated key verifies within
// JWKSFileCheck); one that stops parsing keeps the old keys. A JWKS URL is
// fetched once at start, and tokens with unknown key ids make at most one
// more fetch per JWKSMissRefresh.
func TestJWKSRotation(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	old, rotated := authtest.New(t), authtest.New(t)
	old.Now, rotated.Now = clock, clock
	dir := t.TempDir()
	file := old.WriteJWKS(t, dir)
	var reloadErrs atomic.Int64
	a, err := auth.New(context.Background(), auth.Config{JWKS: file, Issuer: authtest.Issuer, Audience: authtest.Audience, Now: clock,
		OnError: func(error) { reloadErrs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	verify := func(tok string) error {
		_, err := a.Authenticate(context.Background(), http.Header{"Authorization": {"Bearer " + tok}}, nil)
		return err
	}
	if err := verify(old.Token(t, "alice")); err != nil {
		t.Fatal(err)
	}
	if err := verify(rotated.Token(t, "alice")); err == nil {
		t.Fatal("a token of a key not yet published verified")
	}
	// Rotate: the new set on disk (a later mtime), the check interval on.
	rotated.WriteJWKS(t, dir)
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(auth.JWKSFileCheck))
	if err := verify(rotated.Token(t, "alice")); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if err := os.WriteFile(file, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(file, later.Add(time.Second), later.Add(time.Second))
	now.Add(int64(auth.JWKSFileCheck))
	if err := verify(rotated.Token(t, "alice")); err != nil || reloadErrs.Load() != 1 {
		t.Fatalf("after a broken file: %v, %d reload errors; want the old keys kept and 1 error", err, reloadErrs.Load())
	}

	// A URL.
	var fetches atomic.Int64
	idp := authtest.New(t)
	idp.Now = clock
	jwks := idp.JWKS(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		_, _ = w.Write(jwks)
	}))
	defer srv.Close()
	b, err := auth.New(context.Background(), auth.Config{JWKS: srv.URL, Issuer: authtest.Issuer, Audience: authtest.Audience, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	unknown := idp.BadTokens(t, "alice")[6].Token // kid rsa-9
	for range 50 {
		if _, err := b.Authenticate(context.Background(), http.Header{"Authorization": {"Bearer " + unknown}}, nil); err == nil {
			t.Fatal("an unknown kid verified")
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after 50 tokens with an unknown kid; want 2 (start, one miss)", n)
	}
	now.Add(int64(auth.JWKSMissRefresh))
	_, _ = b.Authenticate(context.Background(), http.Header{"Authorization": {"Bearer " + unknown}}, nil)
	if n := fetches.Load(); n != 3 {
		t.Fatalf("%d fetches a miss interval later; want 3", n)
	}
	if _, err := b.Authenticate(context.Background(), http.Header{"Authorization": {"Bearer " + idp.Token(t, "alice")}}, nil); err != nil {
		t.Fatal(err)
	}
	var ae *auth.Error
	if _, err := b.Authenticate(context.Background(), http.Header{"Authorization": {"Basic abc"}}, nil); !errors.As(err, &ae) {
		t.Fatalf("Basic: %v; want an auth.Error", err)
	}
}

// A verified token is remembered, but never past its expiry (with the
// leeway): the same token is refused once it has expired.
func TestTokenCacheHonoursExpiry(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	idp := authtest.New(t)
	idp.Now = clock
	a, err := auth.New(context.Background(), auth.Config{JWKS: idp.WriteJWKS(t, t.TempDir()), Issuer: authtest.Issuer, Audience: authtest.Audience,
		Leeway: time.Second, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	c := idp.Claims("alice")
	c["exp"] = clock().Add(10 * time.Second).Unix()
	tok := idp.Sign(t, c)
	check := func() error {
		_, err := a.Authenticate(context.Background(), http.Header{"Authorization": {"Bearer " + tok}}, nil)
		return err
	}
	for range 3 {
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}
	now.Add(int64(12 * time.Second))
	if err := check(); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired token, verified before: %v; want expired", err)
	}
}
