package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/auth"
	"github.com/sluicemq/sluice/internal/authz"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/admin"
)

// authFlags are the authentication and authorization flags of the public
// servers (ingest, fetch, dev): docs/DESIGN.md §2.12.
type authFlags struct {
	mode           string
	jwks           string
	issuer         string
	audience       string
	leeway         time.Duration
	principalClaim string
	authorization  string
	superUsers     string

	supers []string // from superUsers, by check
}

func (f *authFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.mode, "auth", "none", "none: callers without credentials are served (bad credentials are still refused); required: every call but the health check needs a bearer token or a client certificate")
	fs.StringVar(&f.jwks, "auth-jwks", "", "the token keys: a JWKS file (re-read when it changes) or an https:// URL (fetched again every 10 minutes, and for an unknown key id); enables bearer tokens")
	fs.StringVar(&f.issuer, "auth-issuer", "", "the iss a token must carry (with --auth-jwks)")
	fs.StringVar(&f.audience, "auth-audience", "", "a value a token's aud must hold (with --auth-jwks)")
	fs.DurationVar(&f.leeway, "auth-leeway", auth.DefaultLeeway, "clock skew allowed on a token's exp, nbf and iat (at most 1m)")
	fs.StringVar(&f.principalClaim, "auth-principal-claim", "sub", "the token claim that names the user (principal User:VALUE)")
	fs.StringVar(&f.authorization, "authorization", "none", "none: every caller may do anything; acl: the ACLs in the catalog decide (sluice acl), deny wins, and what none allows is denied")
	fs.StringVar(&f.superUsers, "super-users", "", "comma-separated principals that may do anything with --authorization acl (User:admin,...); the cluster's own processes (certificates of --tls-ca) always may")
}

// check checks the flags into c; tls is the process's TLS flags, peers
// whether other copies call this one (ingest, fetch: they must then
// authenticate by their certificates).
func (f *authFlags) check(c *flagCheck, tls *tlsFlags, peers bool) {
	switch f.mode {
	case "", "none", "required":
	default:
		c.badf("--auth %q: want none or required", f.mode)
	}
	if u, err := url.Parse(f.jwks); err == nil && u.Scheme == "http" && !isLoopback(u.Hostname()) {
		c.badf("--auth-jwks %s: fetch token keys over https (anyone on the path could swap them); http is for loopback only", f.jwks)
	}
	if f.jwks != "" && (f.issuer == "" || f.audience == "") {
		c.badf("--auth-jwks needs --auth-issuer and --auth-audience: a token must be meant for this cluster")
	}
	if f.jwks == "" && (f.issuer != "" || f.audience != "") {
		c.badf("--auth-issuer and --auth-audience apply with --auth-jwks only")
	}
	if f.leeway < 0 || f.leeway > auth.MaxLeeway {
		c.badf("--auth-leeway %v: want 0s..%v", f.leeway, auth.MaxLeeway)
	}
	switch f.authorization {
	case "", "none":
		if f.superUsers != "" {
			c.badf("--super-users applies with --authorization acl only")
		}
	case "acl":
	default:
		c.badf("--authorization %q: want none or acl", f.authorization)
	}
	f.supers = nil
	for _, s := range splitList(f.superUsers) {
		if err := catalog.ValidatePrincipal("super user", s, false); err != nil {
			c.badf("--super-users: %s", catalogReason(err))
			continue
		}
		f.supers = append(f.supers, s)
	}
	if f.mode != "required" {
		return
	}
	if f.jwks == "" && tls.ca == "" && tls.clientCA == "" {
		c.badf("--auth required needs a way to authenticate: --auth-jwks (bearer tokens) or --tls-client-ca (client certificates)")
	}
	if peers && (!tls.enabled() || tls.ca == "") {
		c.badf("--auth required needs --tls-cert, --tls-key and --tls-ca: the other copies authenticate by their certificates")
	}
}

// middleware is the rpcserver's Authenticate (nil with --auth none and no
// way to authenticate at all).
func (f *authFlags) middleware(ctx context.Context, tls *tlsFlags, log *slog.Logger) (func(http.Handler) http.Handler, error) {
	if f.mode != "required" && f.jwks == "" && tls.ca == "" && tls.clientCA == "" {
		return nil, nil
	}
	a, err := auth.New(ctx, auth.Config{
		Required: f.mode == "required",
		JWKS:     f.jwks, Issuer: f.issuer, Audience: f.audience, Leeway: f.leeway, PrincipalClaim: f.principalClaim,
		ServiceCAFile: tls.ca,
		OnError:       func(err error) { log.Error("JWKS reload failed", "err", err) },
	})
	if err != nil {
		return nil, err
	}
	return a.Middleware, nil
}

// authorizer is the ACL authorizer over acls (nil with --authorization
// none).
func (f *authFlags) authorizer(ctx context.Context, acls catalog.ACLs, log *slog.Logger) (*authz.Authorizer, error) {
	if f.authorization != "acl" {
		return nil, nil
	}
	return authz.New(ctx, authz.Config{ACLs: acls, SuperUsers: f.supers, Logger: log})
}

// secure applies the authorizer to a server's config and admin deps.
func secure(az *authz.Authorizer, rc *rpcserver.Config, ad *admin.Deps) {
	if az == nil {
		return
	}
	rc.Interceptors = append(rc.Interceptors, az.Interceptor())
	ad.ACLsChanged = func(ctx context.Context) { _ = az.Reload(ctx) }
}

// restWith puts the authorizer in front of the registry's REST API.
func restWith(az *authz.Authorizer, h http.Handler) http.Handler {
	if az == nil {
		return h
	}
	return az.REST(h)
}

// authorizeProduce is ingest's per-request check (nil without an
// authorizer).
func authorizeProduce(az *authz.Authorizer) func(context.Context, *sluicev1.ProduceStreamRequest) error {
	if az == nil {
		return nil
	}
	return func(ctx context.Context, req *sluicev1.ProduceStreamRequest) error {
		return az.CheckMessage(ctx, sluicev1connect.ProducerServiceProduceStreamProcedure, req)
	}
}
