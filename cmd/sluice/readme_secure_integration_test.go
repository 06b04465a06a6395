//go:build integration

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/bookieproc"
)

// The README's "Run it securely", followed literally: its openssl and
// sluice auth commands make the certificates, the JWKS and the tokens; the
// test starts the README's sluice dev command (TLS, tokens, ACLs) on its
// own address; then every client command prints what the README shows —
// refused without a token, the admin's topic and grant, alice's produce and
// consume, and the refusal of her delete.
func TestIntegrationReadmeSecure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	const section = "## Run it securely"
	blocks := readmeSteps(t, readme, section)
	if len(blocks) != 2 {
		t.Fatalf("README: %d console blocks in %s, want 2 (setup, clients)", len(blocks), section)
	}
	devLine := regexp.MustCompile("(?s)```sh\n(go run ./cmd/sluice dev .*?)\n```").FindStringSubmatch(readme[strings.Index(readme, section):])
	if devLine == nil {
		t.Fatalf("README: no sluice dev command in a sh block of %s", section)
	}
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	rewrite := func(cmd string) string {
		cmd = strings.ReplaceAll(cmd, "go run ./cmd/sluice", bin)
		if !strings.Contains(cmd, bin+" auth ") && strings.Contains(cmd, bin+" ") {
			cmd = strings.TrimRight(cmd, " ") + " --addr " + addr
		}
		return cmd
	}
	run := func(cmd string) string {
		c := exec.CommandContext(ctx, "bash", "-c", cmd)
		c.Dir = work
		c.Env = append(os.Environ(), "SLUICE_TOKEN=")
		out, _ := c.CombinedOutput()
		return string(out)
	}
	if n := runReadmeSteps(ctx, t, readme, blocks[:1], rewrite, run); n != 7 {
		t.Fatalf("%d setup commands ran, want 7", n)
	}
	if t.Failed() {
		return
	}

	dev := strings.ReplaceAll(devLine[1], "\\\n", " ")
	devCmd := exec.Command("bash", "-c", "exec "+rewrite(dev))
	devCmd.Dir = work
	var devLog bytes.Buffer
	devCmd.Stdout, devCmd.Stderr = &devLog, &devLog
	if err := devCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = devCmd.Process.Signal(syscall.SIGTERM); _ = devCmd.Wait() }()
	health := "curl -s --cacert ca.pem -X POST -H 'Content-Type: application/json' -d '{}' https://" + addr + "/grpc.health.v1.Health/Check"
	for deadline := time.Now().Add(60 * time.Second); strings.TrimSpace(run(health)) != `{"status":"SERVING"}`; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the secure sluice dev is not SERVING after 60 s:\n%s", devLog.String())
		}
	}
	if n := runReadmeSteps(ctx, t, readme, blocks[1:], rewrite, run); n != 6 {
		t.Errorf("%d client commands ran, want 6", n)
	}
	for _, tok := range []string{"admin.jwt", "alice.jwt"} {
		b, err := os.ReadFile(filepath.Join(work, tok))
		if err != nil {
			t.Fatal(err)
		}
		jwt := strings.TrimSpace(string(b))
		if strings.Contains(devLog.String(), jwt[strings.LastIndex(jwt, ".")+1:]) {
			t.Fatalf("sluice dev logged %s", tok)
		}
	}
	if t.Failed() {
		t.Log(devLog.String())
	}
}
