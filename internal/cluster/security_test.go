package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/internal/auth/authtest"
	"github.com/sluicemq/sluice/internal/authz"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/internal/tlsconf"
	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// outcome is what a call came to.
type outcome string

const (
	passed      outcome = "passed" // through authentication and authorization (the handler may still refuse the empty request)
	unauthentic outcome = "Unauthenticated"
	denied      outcome = "PermissionDenied"
	noHandshake outcome = "refused by TLS"
)

// The C9 matrix (issue 26): every RPC of the public servers — the rules
// table of internal/authz, so an RPC added without a rule is in it and
// fails — called with each kind of credential, over TLS with client
// certificates requested, --auth required and ACL authorization. Every
// bad credential is Unauthenticated (or refused by TLS); a good token
// without ACLs is PermissionDenied wherever the rule needs an action; with
// ACLs for everything it passes, except the peer RPCs, which only the
// cluster's own processes (certificates of the cluster's CA) may call.
func TestSecurityMatrix(t *testing.T) {
	dir := t.TempDir()
	clusterCA, usersCA, otherCA := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "users"), tlstest.NewCA(t, "other")
	caFile, usersFile := clusterCA.WriteCA(t, dir, "cluster-ca"), usersCA.WriteCA(t, dir, "users-ca")
	serverCert, serverKey := clusterCA.Issue(t, dir, "server", 2)
	nodeCert, nodeKey := clusterCA.Issue(t, dir, "ingest-9", 3)
	strangerCert, strangerKey := otherCA.Issue(t, dir, "mallory", 4)
	idp := authtest.New(t)
	serverTLS, err := tlsconf.Server{CertFile: serverCert, KeyFile: serverKey, ClientCAFiles: []string{caFile, usersFile}, ClientCertOptional: true}.Config()
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.New(context.Background(), auth.Config{Required: true, JWKS: idp.WriteJWKS(t, dir),
		Issuer: authtest.Issuer, Audience: authtest.Audience, ServiceCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := startWith(t, Config{Dir: dir + "/data", Addr: "127.0.0.1:0",
		Server:        serverTLSConfig(serverTLS, authn.Middleware),
		Authorization: &Authorization{SuperUsers: []string{"User:root"}}})
	base := "https://" + c.Addr()
	// alice may do everything to everything; bob nothing.
	var all []catalog.ACL
	for _, rt := range catalog.ResourceTypes {
		all = append(all, catalog.ACL{Principal: "User:alice", ResourceType: rt, PatternType: catalog.PatternLiteral, ResourceName: "*", Operation: catalog.OpAll, Permission: catalog.Allow})
	}
	if err := c.Catalog.CreateACLs(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	if err := c.Authz.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}

	client := func(cert, key string) *http.Client {
		cfg, err := tlsconf.Client{CAFile: caFile, CertFile: cert, KeyFile: key}.Config()
		if err != nil {
			t.Fatal(err)
		}
		var p http.Protocols
		p.SetHTTP2(true)
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Protocols: &p}}
	}
	plain, service, stranger := client("", ""), client(nodeCert, nodeKey), client(strangerCert, strangerKey)
	t.Cleanup(func() {
		for _, hc := range []*http.Client{plain, service, stranger} {
			hc.CloseIdleConnections()
		}
	})
	bad := idp.BadTokens(t, "alice")
	byName := func(n string) string {
		for _, b := range bad {
			if b.Name == n {
				return b.Token
			}
		}
		t.Fatalf("no bad token %q", n)
		return ""
	}
	type credential struct {
		name  string
		hc    *http.Client
		token string
	}
	creds := []credential{
		{"no credentials", plain, ""},
		{"expired token", plain, byName("expired")},
		{"wrong audience", plain, byName("wrong audience")},
		{"wrong issuer", plain, byName("wrong issuer")},
		{"alg none", plain, byName("alg none")},
		{"HS256 keyed with the RS public key", plain, byName("HS256 keyed with the RSA public key")},
		{"tampered signature", plain, byName("tampered payload")},
		{"unknown key id", plain, byName("unknown key id")},
		{"valid token without ACL", plain, idp.Token(t, "bob")},
		{"valid token with ACL", plain, idp.Token(t, "alice")},
		{"valid mTLS certificate", service, ""},
		{"certificate from another CA", stranger, ""},
	}
	expect := func(cr credential, rule authz.Rule, msg any) outcome {
		switch {
		case cr.name == "certificate from another CA":
			return noHandshake
		case cr.name == "valid mTLS certificate":
			return passed
		case cr.token == "" || (cr.name != "valid token without ACL" && cr.name != "valid token with ACL"):
			return unauthentic
		case rule.ServiceOnly:
			return denied
		case cr.name == "valid token with ACL":
			return passed
		case rule.Actions == nil || len(rule.Actions(msg)) == 0:
			return passed
		}
		return denied
	}

	procs := slices.Sorted(func(yield func(string) bool) {
		for p := range authz.Rules {
			if !yield(p) {
				return
			}
		}
	})
	var negatives, refused, total int
	for _, proc := range procs {
		md := methodOf(t, proc)
		msg := newRequest(t, md)
		for _, cr := range creds {
			want := expect(cr, authz.Rules[proc], msg)
			got, detail := call(cr.hc, base, proc, md, msg, cr.token)
			total++
			if want != passed {
				negatives++
				if got != passed {
					refused++
				}
			}
			if got != want {
				t.Errorf("%s with %s: %s (%s); want %s", proc, cr.name, got, detail, want)
			}
		}
	}
	// The bookie protocol: a bookie with mTLS takes the cluster's own
	// certificates only, whatever else a caller brings.
	bookieAddr := serveTLSBookie(t, dir, serverCert, serverKey, caFile)
	bookieProcs := servicesProcedures(t, "sluice.bookie.v1.BookieService")
	for _, proc := range bookieProcs {
		md := methodOf(t, proc)
		for _, cr := range creds {
			want := noHandshake
			if cr.name == "valid mTLS certificate" {
				want = passed
			}
			got, detail := call(cr.hc, "https://"+bookieAddr, proc, md, nil, cr.token)
			total++
			if want != passed {
				negatives++
				if got != passed {
					refused++
				}
			}
			if got != want {
				t.Errorf("%s with %s: %s (%s); want %s", proc, cr.name, got, detail, want)
			}
		}
	}
	t.Logf("security matrix: %d public and peer procedures and %d bookie procedures × %d credentials = %d calls; %d of %d negative cases refused",
		len(procs), len(bookieProcs), len(creds), total, refused, negatives)
	if refused != negatives {
		t.Errorf("%d negative cases were let through", negatives-refused)
	}
}

// serveTLSBookie serves a bookie with mTLS (the cluster's CA) on a loopback
// port until the test ends.
func serveTLSBookie(t *testing.T, dir, certFile, keyFile, caFile string) string {
	t.Helper()
	b, err := bookie.Open(bookie.Config{ID: "tls-bookie", InstanceID: "matrix", Dir: filepath.Join(dir, "tls-bookie")})
	if err != nil {
		t.Fatal(err)
	}
	tcfg, err := tlsconf.Server{CertFile: certFile, KeyFile: keyFile, ClientCAFiles: []string{caFile}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rpcserver.New(rpcserver.Config{TLS: tcfg}, telemetry.Discard())
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle(b.Handler(srv.HandlerOptions()...))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = b.Close()
	})
	return ln.Addr().String()
}

// servicesProcedures lists the procedures of a service.
func servicesProcedures(t *testing.T, service string) []string {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		t.Fatal(err)
	}
	ms := d.(protoreflect.ServiceDescriptor).Methods()
	var out []string
	for i := range ms.Len() {
		out = append(out, "/"+service+"/"+string(ms.Get(i).Name()))
	}
	return out
}

// serverTLSConfig is a public server config with TLS and authentication.
func serverTLSConfig(cfg *tls.Config, authn func(http.Handler) http.Handler) rpcserver.Config {
	return rpcserver.Config{TLS: cfg, Authenticate: authn}
}

// methodOf finds the descriptor of a procedure ("/pkg.Service/Method").
func methodOf(t *testing.T, proc string) protoreflect.MethodDescriptor {
	t.Helper()
	svc, method, ok := strings.Cut(strings.TrimPrefix(proc, "/"), "/")
	if !ok {
		t.Fatalf("procedure %q", proc)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		t.Fatalf("%s: %v", proc, err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if md == nil {
		t.Fatalf("%s: no such method", proc)
	}
	return md
}

// newRequest is an empty request message of md, of its generated type.
func newRequest(t *testing.T, md protoreflect.MethodDescriptor) any {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

// call calls proc once with msg and the token, and says what it came to.
func call(hc *http.Client, base, proc string, md protoreflect.MethodDescriptor, msg any, token string) (outcome, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// An empty message of any type is zero bytes: the server reads the
	// request type's zero value.
	cl := connect.NewClient[emptypb.Empty, emptypb.Empty](hc, base+proc, connect.WithGRPC())
	set := func(h http.Header) {
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
	}
	req := &emptypb.Empty{}
	var err error
	switch {
	case md.IsStreamingClient() && md.IsStreamingServer():
		if _, ok := msg.(*sluicev1.ProduceStreamRequest); ok {
			return callProduceStream(ctx, hc, base+proc, token)
		}
		st := cl.CallBidiStream(ctx)
		set(st.RequestHeader())
		// A Send that finds the stream over (io.EOF) leaves the server's
		// answer to Receive.
		if err = st.Send(req); err == nil || errors.Is(err, io.EOF) {
			_ = st.CloseRequest()
			_, err = st.Receive()
		}
		_ = st.CloseResponse()
	case md.IsStreamingServer():
		r := connect.NewRequest(req)
		set(r.Header())
		var st *connect.ServerStreamForClient[emptypb.Empty]
		if st, err = cl.CallServerStream(ctx, r); err == nil {
			if !st.Receive() {
				err = st.Err()
			}
			_ = st.Close()
		}
	default:
		r := connect.NewRequest(req)
		set(r.Header())
		_, err = cl.CallUnary(ctx, r)
	}
	return outcomeOf(err)
}

// callProduceStream sends one empty request on ProduceStream: a refusal is
// that request's answer (the stream goes on), not the stream's end.
func callProduceStream(ctx context.Context, hc *http.Client, url, token string) (outcome, string) {
	cl := connect.NewClient[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse](hc, url, connect.WithGRPC())
	st := cl.CallBidiStream(ctx)
	if token != "" {
		st.RequestHeader().Set("Authorization", "Bearer "+token)
	}
	if err := st.Send(&sluicev1.ProduceStreamRequest{CorrelationId: 7, Request: &sluicev1.ProduceRequest{Topic: "matrix"}}); err != nil && !errors.Is(err, io.EOF) {
		return outcomeOf(err)
	}
	_ = st.CloseRequest()
	resp, err := st.Receive()
	_ = st.CloseResponse()
	if err != nil {
		return outcomeOf(err)
	}
	if e := resp.GetError(); e != nil && connect.Code(e.GetCode()) == connect.CodePermissionDenied {
		return denied, e.GetMessage()
	}
	return passed, fmt.Sprintf("answer %v", resp)
}

func outcomeOf(err error) (outcome, string) {
	if err == nil {
		return passed, "ok"
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		return unauthentic, err.Error()
	case connect.CodePermissionDenied:
		return denied, err.Error()
	}
	// TLS 1.3 tells a client its certificate was refused after the
	// handshake: its first write finds the connection closed — or, when
	// the server's close wins the race with the request, the HTTP/2
	// transport finds its new connection closed already.
	if s := err.Error(); strings.Contains(s, "tls:") || strings.Contains(s, "certificate") ||
		strings.Contains(s, "client conn could not be established") || strings.Contains(s, "http2: client conn is closed") || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		return noHandshake, s
	}
	return passed, err.Error() // the handler's own answer to an empty request
}
