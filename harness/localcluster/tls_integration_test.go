//go:build integration

package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/internal/tlsconf"
	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
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
	st, err := Up(ctx, cfg, Options{Bin: bin})
	t.Cleanup(func() {
		if err := Wipe(context.Background(), cfg.Dir, 10*time.Second); err != nil {
			t.Errorf("wipe the cluster: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	addrOf := func(name string) string {
		for _, r := range st.Procs {
			if r.Name == name {
				return r.Addr
			}
		}
		t.Fatalf("no process %s", name)
		return ""
	}
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
