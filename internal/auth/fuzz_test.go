package auth_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/internal/auth/authtest"
)

// FuzzAuthenticate: any Authorization header is refused or, only if it is
// a token the provider signed, names alice; nothing panics, and an error
// never carries the header.
func FuzzAuthenticate(f *testing.F) {
	idp := authtest.New(f)
	a, err := auth.New(context.Background(), auth.Config{Required: true, JWKS: idp.WriteJWKS(f, f.TempDir()),
		Issuer: authtest.Issuer, Audience: authtest.Audience})
	if err != nil {
		f.Fatal(err)
	}
	good := idp.Token(f, "alice")
	f.Add("Bearer " + good)
	for _, b := range idp.BadTokens(f, "alice") {
		f.Add("Bearer " + b.Token)
	}
	f.Add("Basic YWxpY2U6cGFzcw==")
	f.Add("Bearer ")
	f.Add("bearer a.b.c")
	f.Add("Bearer eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, header string) {
		p, err := a.Authenticate(context.Background(), http.Header{"Authorization": {header}}, nil)
		if err != nil {
			if len(header) > 16 && strings.Contains(err.Error(), header) {
				t.Fatalf("the error echoes the header: %v", err)
			}
			return
		}
		if p.String() != "User:alice" || !strings.HasSuffix(header, good[strings.LastIndex(good, ".")+1:]) {
			t.Fatalf("header %q authenticated as %s", header, p)
		}
	})
}

// FuzzParsePrincipal: what parses prints back the same.
func FuzzParsePrincipal(f *testing.F) {
	for _, s := range []string{"User:alice", "Service:ingest-1", "User:*", "User:", "Group:x", "User:a b", "User:spiffe://x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := auth.ParsePrincipal(s)
		if err == nil && p.String() != s {
			t.Fatalf("ParsePrincipal(%q) = %s", s, p)
		}
	})
}
