package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/auth/authtest"
)

// startDev runs sluice dev in-process with extra flags until the test
// ends; it returns the address and dev's stderr (its logs).
func startDev(t *testing.T, flags ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"dev", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json"}, flags...), &out, &logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("dev did not stop")
		}
	})
	re := regexp.MustCompile(`listening on https?://(\S+)`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], &logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev did not print its address; output %q, logs %q", out.String(), logs.String())
		}
	}
}

// sluice dev with --auth required: the client commands work with a good
// token (--token or SLUICE_TOKEN) and fail without one, or with a bad
// one, with a message that says what was wrong; the log of the run holds
// none of the tokens.
func TestDevRequiresTokens(t *testing.T) {
	idp := authtest.New(t)
	jwks := idp.WriteJWKS(t, t.TempDir())
	addr, logs := startDev(t, "--auth", "required", "--auth-jwks", jwks, "--auth-issuer", authtest.Issuer, "--auth-audience", authtest.Audience)
	good := idp.Token(t, "alice")
	bad := idp.BadTokens(t, "alice")

	// Health turns SERVING a moment after the address is printed.
	var code int
	var stderr string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, _, stderr = runCLI("topic", "create", "orders", "--addr", addr, "--token", good)
		if code == 0 || time.Now().After(deadline) {
			break
		}
	}
	if code != 0 {
		t.Fatalf("topic create with a good token: exit %d, %s", code, stderr)
	}
	t.Setenv(tokenEnv, good)
	if code, out, stderr := runCLI("topic", "list", "--addr", addr); code != 0 || !strings.Contains(out, "orders") {
		t.Fatalf("topic list with SLUICE_TOKEN: exit %d, %q, %s", code, out, stderr)
	}
	t.Setenv(tokenEnv, "")
	if code, _, stderr := runCLI("topic", "list", "--addr", addr); code == 0 || !strings.Contains(stderr, "no credentials") {
		t.Fatalf("topic list without a token: exit %d, %s; want a refusal saying no credentials", code, stderr)
	}
	if code, _, stderr := runCLI("topic", "list", "--addr", addr, "--token", bad[0].Token); code == 0 || !strings.Contains(stderr, "expired") {
		t.Fatalf("topic list with an expired token: exit %d, %s; want a refusal saying expired", code, stderr)
	}
	if code, _, stderr := runCLI("produce", "--topic", "orders", "--addr", addr, "--token", bad[3].Token, "v"); code == 0 || !strings.Contains(strings.ToLower(stderr), "unauthenticated") {
		t.Fatalf("produce with an alg-none token: exit %d, %s; want unauthenticated", code, stderr)
	}
	if code, _, stderr := runCLI("produce", "--topic", "orders", "--addr", addr, "--token", good, "v1", "v2"); code != 0 {
		t.Fatalf("produce with a good token: exit %d, %s", code, stderr)
	}
	if code, out, stderr := runCLI("consume", "orders", "--count", "2", "--addr", addr, "--token", good); code != 0 || !strings.Contains(out, "v2") {
		t.Fatalf("consume with a good token: exit %d, %q, %s", code, out, stderr)
	}
	for _, tok := range append([]string{good}, bad[0].Token, bad[3].Token) {
		sig := tok[strings.LastIndex(tok, ".")+1:]
		if sig != "" && strings.Contains(logs.String(), sig) {
			t.Fatalf("dev's log holds a token:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), tok[:strings.Index(tok, ".")+10]) {
			t.Fatalf("dev's log holds a token's header:\n%s", logs.String())
		}
	}
}
