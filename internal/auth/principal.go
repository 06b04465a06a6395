// Package auth authenticates the callers of Sluice's public servers
// (docs/DESIGN.md §2.12): a bearer token (a JWT checked against the keys
// of a JWKS file or URL) or a client certificate verified by TLS (mTLS)
// becomes a Principal, which rides in the request's context to the
// authorizer and the quotas.
//
// It is HTTP middleware, in front of every handler the rpcserver mounts
// (Connect, gRPC and gRPC-web RPCs, the registry's REST API, /metrics);
// only the health check is open, for load balancers. A refused call gets
// Unauthenticated in its own protocol, naming what was wrong (expired, the
// wrong audience, an unknown key id) and never the token itself.
package auth

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Kind is the kind of a principal.
type Kind string

const (
	// User is a person or an application outside the cluster: from a
	// token's subject, or a certificate of the clients' CA.
	User Kind = "User"
	// Service is one of the cluster's own processes: a certificate of the
	// cluster's CA. Services are super-users (forwarding, group
	// coordination, triggers).
	Service Kind = "Service"
)

// Principal is an authenticated caller: "User:alice", "Service:ingest-1".
type Principal struct {
	Kind Kind
	Name string
	// Via says how it was authenticated: "jwt" or "mtls".
	Via string
}

// String is the principal's name in ACLs and logs: Kind:Name.
func (p Principal) String() string { return string(p.Kind) + ":" + p.Name }

// IsZero reports whether p is no principal (an anonymous caller).
func (p Principal) IsZero() bool { return p.Kind == "" }

// MaxNameBytes bounds a principal's name.
const MaxNameBytes = 256

// nameRE is what a principal's name may hold: printable ASCII without
// spaces or commas, which would make ACL listings and flags ambiguous;
// e-mail addresses, URIs (spiffe://...) and DNS names pass.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9._@:/+=\-]{1,256}$`)

// ParsePrincipal parses "User:alice" or "Service:ingest-1" (ACLs,
// --super-users).
func ParsePrincipal(s string) (Principal, error) {
	for _, k := range []Kind{User, Service} {
		if rest, ok := strings.CutPrefix(s, string(k)+":"); ok {
			if !nameRE.MatchString(rest) {
				return Principal{}, fmt.Errorf("principal %q: the name after %s: must be 1..%d of A-Z a-z 0-9 . _ @ : / + = -", s, k, MaxNameBytes)
			}
			return Principal{Kind: k, Name: rest}, nil
		}
	}
	return Principal{}, fmt.Errorf("principal %q: want User:NAME or Service:NAME", s)
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal of the call ctx belongs to, if it was
// authenticated.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok && !p.IsZero()
}
