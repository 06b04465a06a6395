//go:build integration

package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/internal/auth/authtest"
	"github.com/sluicemq/sluice/internal/authz"
	"github.com/sluicemq/sluice/internal/tlsconf"
	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// A cluster of real processes with TLS everywhere (issue 26): bookies
// with mTLS, ingest and fetch serving HTTPS and requiring client
// certificates, every call between processes over mTLS. A user with a
// certificate from the clients' CA creates a topic, produces through the
// ingest copy that owns no partition (forwarding over mTLS) and reads it
// all back through fetch (bookie reads over mTLS). Callers without a
// certificate, with one from another CA, or in clear text are refused —
// at the public ports and at a bookie, where even a client certificate
// that the public ports take is refused (bookies take the cluster's CA
// only).
func TestIntegrationTLSCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := bookieproc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	certs := t.TempDir()
	clusterCA, usersCA, otherCA := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "users"), tlstest.NewCA(t, "other")
	caFile, usersFile := clusterCA.WriteCA(t, certs, "ca"), usersCA.WriteCA(t, certs, "users")
	nodeCert, nodeKey := clusterCA.Issue(t, certs, "node", 2)
	aliceCert, aliceKey := usersCA.Issue(t, certs, "alice", 3)
	malloryCert, malloryKey := otherCA.Issue(t, certs, "mallory", 4)

	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg := Config{
		Bookies: 3, Ingests: 2, Fetches: 1, Compactors: 1,
		BasePort: 28500, Dir: filepath.Join(dir, "cluster"),
		Table: "sluice-tls-" + suffix, Keyspace: "sluice_tls_" + suffix,
		AWSEndpoint: testenv.AWSEndpoint(t), Cassandra: testenv.Cassandra(t),
		TLS: &TLS{CAFile: caFile, CertFile: nodeCert, KeyFile: nodeKey, ClientCAFile: usersFile},
	}
	_, addrOf := upForTest(ctx, t, cfg, bin)
	ingest1, ingest2, fetch1, bookie1 := addrOf("ingest-1"), addrOf("ingest-2"), addrOf("fetch-1"), addrOf("bookie-1")

	run := func(stdin string, args ...string) (string, error) {
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	alice := []string{"--tls-ca", caFile, "--tls-cert", aliceCert, "--tls-key", aliceKey}
	sluice := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(stdin, append(args, alice...)...)
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	sluice("", "topic", "create", "secure", "--partitions", "4", "--addr", ingest1)
	var in strings.Builder
	for i := range 200 {
		fmt.Fprintf(&in, "s%04d\n", i)
	}
	// ingest-1 owns every partition (it created the topic); ingest-2
	// forwards each produce to it over mTLS.
	sluice(in.String(), "produce", "--topic", "secure", "--addr", ingest2)
	got := sluice("", "consume", "secure", "--count", "200", "--addr", fetch1)
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			seen[f[len(f)-1]]++
		}
	}
	for i := range 200 {
		if k := fmt.Sprintf("s%04d", i); seen[k] != 1 {
			t.Fatalf("record %s read %d times through fetch; want once. Output:\n%s", k, seen[k], got)
		}
	}

	// Refused at the public ports.
	for _, c := range []struct {
		name string
		args []string
	}{
		{"no client certificate", []string{"--tls-ca", caFile}},
		{"a certificate from another CA", []string{"--tls-ca", caFile, "--tls-cert", malloryCert, "--tls-key", malloryKey}},
		{"clear text", []string{"--addr", "http://" + ingest1}},
		{"a server certificate it cannot check", []string{"--tls-cert", aliceCert, "--tls-key", aliceKey}},
	} {
		args := append([]string{"topic", "list", "--addr", ingest1}, c.args...)
		if out, err := run("", args...); err == nil {
			t.Errorf("%s: topic list succeeded:\n%s", c.name, out)
		}
	}

	// Refused at a bookie: only the cluster's CA signs its callers.
	health := func(certFile, keyFile, scheme string) error {
		tcfg, err := tlsconf.Client{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}.Config()
		if err != nil {
			return err
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tcfg}, Timeout: 5 * time.Second}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+bookie1+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	if err := health(nodeCert, nodeKey, "https://"); err != nil {
		t.Fatalf("the bookie refused the cluster's certificate: %v", err)
	}
	for _, c := range []struct {
		name, cert, key, scheme string
	}{
		{"no client certificate", "", "", "https://"},
		{"a client certificate from the clients' CA", aliceCert, aliceKey, "https://"},
		{"a certificate from another CA", malloryCert, malloryKey, "https://"},
		{"clear text", "", "", "http://"},
	} {
		if err := health(c.cert, c.key, c.scheme); err == nil {
			t.Errorf("bookie: %s was served", c.name)
		}
	}
}

// The cluster of real processes with TLS, bearer tokens and ACLs (issue
// 26): ingest and fetch take tokens from the test's identity provider
// (--auth required, --authorization acl), a super-user creates the topic
// and grants alice; alice produces through the copy that owns nothing
// (forwarded over mTLS, as a Service) and reads through fetch; bob is
// refused, a caller without a token is unauthenticated; a browser-style
// gRPC-web call over HTTP/1.1 passes CORS with its Authorization header;
// no process logs a token.
func TestIntegrationSecureCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := bookieproc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	certs := t.TempDir()
	clusterCA := tlstest.NewCA(t, "cluster")
	caFile := clusterCA.WriteCA(t, certs, "ca")
	nodeCert, nodeKey := clusterCA.Issue(t, certs, "node", 2)
	idp := authtest.New(t)
	jwks := idp.WriteJWKS(t, certs)
	const origin = "https://app.example"
	secured := []string{"--auth", "required", "--auth-jwks", jwks, "--auth-issuer", authtest.Issuer, "--auth-audience", authtest.Audience,
		"--authorization", "acl", "--super-users", "User:admin", "--cors-origins", origin}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg := Config{
		Bookies: 3, Ingests: 2, Fetches: 1,
		BasePort: 28600, Dir: filepath.Join(dir, "cluster"),
		Table: "sluice-sec-" + suffix, Keyspace: "sluice_sec_" + suffix,
		AWSEndpoint: testenv.AWSEndpoint(t), Cassandra: testenv.Cassandra(t),
		TLS:   &TLS{CAFile: caFile, CertFile: nodeCert, KeyFile: nodeKey, ClientAuth: "request"},
		Extra: map[string][]string{RoleIngest: secured, RoleFetch: secured},
	}
	st, addrOf := upForTest(ctx, t, cfg, bin)
	ingest1, ingest2, fetch1 := addrOf("ingest-1"), addrOf("ingest-2"), addrOf("fetch-1")
	admin, alice, bob := idp.Token(t, "admin"), idp.Token(t, "alice"), idp.Token(t, "bob")
	run := func(stdin, token string, args ...string) (string, error) {
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, bin, append(args, "--tls-ca", caFile)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "SLUICE_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	as := func(stdin, token string, args ...string) string {
		t.Helper()
		out, err := run(stdin, token, args...)
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	as("", admin, "topic", "create", "orders", "--partitions", "3", "--addr", ingest1)
	as("", admin, "acl", "add", "--principal", "User:alice", "--topic", "orders", "--operation", "produce,consume", "--addr", ingest1)
	// The grant holds at once on ingest-1, which made it; the other
	// copies read the ACLs again within authz.DefaultRefresh.
	for _, at := range []string{ingest2, fetch1} {
		deadline := time.Now().Add(authz.DefaultRefresh + 5*time.Second)
		for {
			out, err := run("", alice, "topic", "describe", "orders", "--addr", at)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("alice's grant did not reach %s within %v: %s", at, authz.DefaultRefresh, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var in strings.Builder
	for i := range 100 {
		fmt.Fprintf(&in, "o%04d\n", i)
	}
	as(in.String(), alice, "produce", "--topic", "orders", "--addr", ingest2)
	got := as("", alice, "consume", "orders", "--count", "100", "--addr", fetch1)
	for i := range 100 {
		if k := fmt.Sprintf("o%04d", i); !strings.Contains(got, k) {
			t.Fatalf("alice read no %s through fetch:\n%s", k, got)
		}
	}
	if out, err := run("", bob, "consume", "orders", "--count", "1", "--addr", fetch1); err == nil || !strings.Contains(out, "User:bob may not") {
		t.Fatalf("bob consumed: %v\n%s", err, out)
	}
	if out, err := run("x\n", bob, "produce", "--topic", "orders", "--addr", ingest2); err == nil || !strings.Contains(out, "User:bob may not") {
		t.Fatalf("bob produced: %v\n%s", err, out)
	}
	if out, err := run("", "", "topic", "list", "--addr", ingest1); err == nil || !strings.Contains(out, "no credentials") {
		t.Fatalf("no token: %v\n%s", err, out)
	}

	// A browser: CORS preflight, then gRPC-web over HTTP/1.1 with the
	// token in the Authorization header.
	tcfg, err := tlsconf.Client{CAFile: caFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	var h1 http.Protocols
	h1.SetHTTP1(true)
	browser := &http.Client{Transport: &http.Transport{TLSClientConfig: tcfg, Protocols: &h1}, Timeout: 10 * time.Second}
	defer browser.CloseIdleConnections()
	pre, err := http.NewRequestWithContext(ctx, http.MethodOptions, "https://"+fetch1+sluicev1connect.ConsumerServiceFetchProcedure, nil)
	if err != nil {
		t.Fatal(err)
	}
	pre.Header.Set("Origin", origin)
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-grpc-web,x-user-agent")
	resp, err := browser.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Fatalf("preflight: %s, allow-origin %q, allow-headers %q", resp.Status, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Headers"))
	}
	web := sluicev1connect.NewConsumerServiceClient(browser, "https://"+fetch1, connect.WithGRPCWeb())
	records := 0
	for p := range int32(3) { // the CLI's producer is sticky: the records may be in any partition
		freq := connect.NewRequest(&sluicev1.FetchRequest{Topic: "orders", Partition: p, Offset: 0, MaxRecords: 500})
		freq.Header().Set("Origin", origin)
		freq.Header().Set("Authorization", "Bearer "+alice)
		fresp, err := web.Fetch(ctx, freq)
		if err != nil {
			t.Fatalf("gRPC-web Fetch with alice's token: %v", err)
		}
		if got := fresp.Header().Get("Access-Control-Allow-Origin"); got != origin {
			t.Fatalf("gRPC-web Fetch: allow-origin %q, want %q", got, origin)
		}
		records += len(fresp.Msg.GetRecords())
	}
	if records != 100 {
		t.Fatalf("gRPC-web Fetch read %d records of the 100", records)
	}
	freq := connect.NewRequest(&sluicev1.FetchRequest{Topic: "orders"})
	freq.Header().Set("Origin", origin)
	if _, err := web.Fetch(ctx, freq); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("gRPC-web Fetch without a token: %v; want Unauthenticated", err)
	}

	// No process logged a token.
	for _, r := range st.Procs {
		b, err := os.ReadFile(r.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{admin, alice, bob} {
			if strings.Contains(string(b), tok[strings.LastIndex(tok, ".")+1:]) {
				t.Fatalf("%s logged a token", r.Name)
			}
		}
	}
}

// upForTest starts the cluster cfg describes with the binary bin, wipes it
// when the test ends, and returns the address of a named process
// ("ingest-1").
func upForTest(ctx context.Context, t *testing.T, cfg Config, bin string) (State, func(name string) string) {
	t.Helper()
	st, err := Up(ctx, cfg, Options{Bin: bin})
	t.Cleanup(func() {
		if err := Wipe(context.Background(), cfg.Dir, 10*time.Second); err != nil {
			t.Errorf("wipe the cluster: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, func(name string) string {
		t.Helper()
		for _, r := range st.Procs {
			if r.Name == name {
				return r.Addr
			}
		}
		t.Fatalf("no process %s", name)
		return ""
	}
}
