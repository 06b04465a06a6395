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
	"strings"

	"github.com/sluicemq/sluice/pkg/catalog"
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

// ParsePrincipal parses "User:alice" or "Service:ingest-1" (the rule is
// catalog.ValidatePrincipal's).
func ParsePrincipal(s string) (Principal, error) {
	if err := catalog.ValidatePrincipal("principal", s, false); err != nil {
		return Principal{}, err
	}
	kind, name, _ := strings.Cut(s, ":")
	return Principal{Kind: Kind(kind), Name: name}, nil
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
