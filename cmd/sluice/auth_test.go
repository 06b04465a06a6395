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

// sluice dev with --authorization acl: a super-user creates topics and
// grants; a user may do what the ACLs allow and nothing else (refused with
// PermissionDenied naming what), sees only the topics it may describe, and
// a deny wins over an allow; removing the grant takes effect at once.
func TestDevACLs(t *testing.T) {
	idp := authtest.New(t)
	jwks := idp.WriteJWKS(t, t.TempDir())
	addr, _ := startDev(t, "--auth", "required", "--auth-jwks", jwks, "--auth-issuer", authtest.Issuer, "--auth-audience", authtest.Audience,
		"--authorization", "acl", "--super-users", "User:admin")
	admin, alice := idp.Token(t, "admin"), idp.Token(t, "alice")
	as := func(tok string, args ...string) (int, string, string) {
		return runCLI(append(args, "--addr", addr, "--token", tok)...)
	}
	must := func(tok string, args ...string) string {
		t.Helper()
		code, out, stderr := as(tok, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d, %s", args, code, stderr)
		}
		return out
	}
	refused := func(tok, says string, args ...string) {
		t.Helper()
		code, _, stderr := as(tok, args...)
		if code == 0 || !strings.Contains(stderr, "permission_denied") && !strings.Contains(stderr, "permission denied") || !strings.Contains(stderr, says) {
			t.Fatalf("%q: exit %d, %s; want a refusal saying %q", args, code, stderr, says)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _, _ := as(admin, "topic", "create", "orders"); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the super-user cannot create a topic")
		}
	}
	must(admin, "topic", "create", "secret")
	// The producer describes the topic first: that is what is refused.
	refused(alice, `User:alice may not describe on topic "orders"`, "produce", "--topic", "orders", "v")
	refused(alice, `User:alice may not create on topic "mine"`, "topic", "create", "mine")
	refused(alice, `may not alter on cluster`, "acl", "add", "--principal", "User:alice", "--topic", "*", "--operation", "all")
	out := must(admin, "acl", "add", "--principal", "User:alice", "--topic", "ord", "--prefix", "--operation", "produce,consume")
	if !strings.Contains(out, `added: User:alice allow produce on topic names starting "ord"`) {
		t.Fatalf("acl add printed %q", out)
	}
	must(alice, "produce", "--topic", "orders", "a1", "a2")
	if out := must(alice, "consume", "orders", "--count", "2"); !strings.Contains(out, "a2") {
		t.Fatalf("consume printed %q", out)
	}
	refused(alice, `User:alice may not describe on topic "secret"`, "produce", "--topic", "secret", "v")
	if out := must(alice, "topic", "list"); !strings.Contains(out, "orders") || strings.Contains(out, "secret") {
		t.Fatalf("alice's topic list %q: want orders (describe implied by produce) and not secret", out)
	}
	if out := must(admin, "topic", "list"); !strings.Contains(out, "secret") {
		t.Fatalf("the super-user's topic list %q lacks secret", out)
	}
	must(admin, "acl", "add", "--principal", "User:alice", "--topic", "orders", "--operation", "consume", "--deny")
	refused(alice, `User:alice may not consume on topic "orders"`, "consume", "orders", "--count", "1")
	out = must(admin, "acl", "list", "--principal", "User:alice")
	if strings.Count(out, "User:alice") != 3 || !strings.Contains(out, "deny") {
		t.Fatalf("acl list printed:\n%s", out)
	}
	if out := must(admin, "acl", "remove", "--principal", "User:alice"); !strings.Contains(out, "3 ACLs removed") {
		t.Fatalf("acl remove printed %q", out)
	}
	refused(alice, `User:alice may not describe on topic "orders"`, "produce", "--topic", "orders", "v")
	// Describe alone: the produce stream's records are refused.
	must(admin, "acl", "add", "--principal", "User:alice", "--topic", "orders", "--operation", "describe")
	refused(alice, `User:alice may not produce on topic "orders"`, "produce", "--topic", "orders", "v")
	if code, _, stderr := as(admin, "acl", "remove"); code != 2 || !strings.Contains(stderr, "--all") {
		t.Fatalf("acl remove with no selection: exit %d, %s", code, stderr)
	}
}
