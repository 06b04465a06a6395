package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Bounds of a token.
const (
	// MaxTokenBytes bounds a bearer token.
	MaxTokenBytes = 8 << 10
	// MaxLeeway bounds the clock leeway on a token's exp, nbf and iat.
	MaxLeeway = time.Minute
	// DefaultLeeway is the leeway when Config.Leeway is zero.
	DefaultLeeway = 30 * time.Second
)

// Config configures an Authenticator.
type Config struct {
	// Required refuses every call (but the health check) without valid
	// credentials. Without it a call with no credentials is served
	// anonymously; wrong credentials are refused either way.
	Required bool

	// JWKS is where the token keys are: a file (re-read when it
	// changes) or an http(s) URL (fetched again every JWKSRefresh, and
	// for an unknown key id). Empty: tokens are not taken.
	JWKS string
	// Issuer and Audience are the iss a token must carry and a value its
	// aud must hold. Both required with JWKS.
	Issuer, Audience string
	// Leeway is the clock skew allowed on exp, nbf and iat: 0 means
	// DefaultLeeway, at most MaxLeeway.
	Leeway time.Duration
	// PrincipalClaim is the claim that names the User (default "sub").
	PrincipalClaim string
	// HTTPClient fetches a JWKS URL (default: one with the fetch timeout).
	HTTPClient *http.Client

	// ServiceCAFile holds the cluster's CA (PEM): a verified client
	// certificate that chains to it is a Service; any other verified
	// client certificate (the clients' CA) is a User. The TLS config
	// decides which certificates verify at all.
	ServiceCAFile string

	// OnError hears of a JWKS that failed to reload. Optional.
	OnError func(error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authenticator turns a request's credentials into a Principal.
type Authenticator struct {
	cfg      Config
	keys     *keySource // nil: tokens are not taken
	parser   *jwt.Parser
	services [][]byte // the raw certificates of the cluster's CA
	verified tokenCache
}

// Bounds of the verified-token cache: a token is checked once, then its
// principal is remembered until it expires, at most tokenCacheTTL (so a
// key removed from the JWKS stops its tokens within that), for at most
// tokenCacheMax tokens (a full cache is emptied).
const (
	tokenCacheTTL = time.Minute
	tokenCacheMax = 10_000
)

// tokenCache maps a token's SHA-256 to its principal and the time it
// stops being good.
type tokenCache struct {
	// mu guards m. Leaf lock.
	mu sync.Mutex
	m  map[[32]byte]cachedToken
}

type cachedToken struct {
	p     Principal
	until time.Time
}

func (c *tokenCache) get(k [32]byte, now time.Time) (Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.until) {
		return Principal{}, false
	}
	return e.p, true
}

func (c *tokenCache) put(k [32]byte, e cachedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= tokenCacheMax {
		c.m = make(map[[32]byte]cachedToken)
	}
	c.m[k] = e
}

// New loads the JWKS and the service CA, failing if they do not load.
func New(ctx context.Context, cfg Config) (*Authenticator, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	var errs []error
	if cfg.Leeway < 0 || cfg.Leeway > MaxLeeway {
		errs = append(errs, fmt.Errorf("auth: leeway %v: want 0..%v", cfg.Leeway, MaxLeeway))
	}
	if cfg.JWKS != "" && (cfg.Issuer == "" || cfg.Audience == "") {
		errs = append(errs, errors.New("auth: tokens need the issuer and the audience they must carry"))
	}
	if cfg.JWKS == "" && cfg.ServiceCAFile == "" && cfg.Required {
		errs = append(errs, errors.New("auth: required, but neither tokens (a JWKS) nor client certificates are configured"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a := &Authenticator{cfg: cfg}
	if cfg.JWKS != "" {
		hc := cfg.HTTPClient
		if hc == nil {
			hc = &http.Client{Timeout: jwksFetchTimeout}
		}
		ks, err := newKeySource(ctx, cfg.JWKS, hc, cfg.Now, cfg.OnError)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.keys = ks
		a.parser = jwt.NewParser(
			jwt.WithValidMethods(asymmetric),
			jwt.WithExpirationRequired(),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithIssuedAt(),
			jwt.WithTimeFunc(cfg.Now),
		)
	}
	if cfg.ServiceCAFile != "" {
		certs, err := readCerts(cfg.ServiceCAFile)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.services = certs
	}
	return a, nil
}

func readCerts(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			out = append(out, blk.Bytes)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return out, nil
}

// Error is a refused authentication: its message says what was wrong
// (never the token).
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func refused(format string, args ...any) *Error { return &Error{msg: fmt.Sprintf(format, args...)} }

// Authenticate returns the principal of a request: its bearer token's, or
// else its verified client certificate's; the zero Principal when it
// carries neither (and authentication is not required).
func (a *Authenticator) Authenticate(ctx context.Context, h http.Header, state *tls.ConnectionState) (Principal, error) {
	if authz := h.Values("Authorization"); len(authz) > 0 {
		if len(authz) > 1 {
			return Principal{}, refused("more than one Authorization header")
		}
		scheme, tok, ok := strings.Cut(authz[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Principal{}, refused("the Authorization header is not \"Bearer TOKEN\"")
		}
		return a.verifyToken(ctx, strings.TrimSpace(tok))
	}
	if state != nil && len(state.VerifiedChains) > 0 {
		return a.certPrincipal(state.VerifiedChains)
	}
	if a.cfg.Required {
		return Principal{}, refused("no credentials: send a bearer token (Authorization: Bearer) or a client certificate")
	}
	return Principal{}, nil
}

// verifyToken checks a JWT and returns its User.
func (a *Authenticator) verifyToken(ctx context.Context, raw string) (Principal, error) {
	if a.keys == nil {
		return Principal{}, refused("this server takes no bearer tokens (no JWKS configured)")
	}
	if raw == "" {
		return Principal{}, refused("empty bearer token")
	}
	if len(raw) > MaxTokenBytes {
		return Principal{}, refused("bearer token of %d bytes; at most %d", len(raw), MaxTokenBytes)
	}
	sum := sha256.Sum256([]byte(raw))
	now := a.cfg.Now()
	if p, ok := a.verified.get(sum, now); ok {
		return p, nil
	}
	var keyErr error
	tok, err := a.parser.Parse(raw, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			keyErr = refused("token has no kid (key id) header")
			return nil, keyErr
		}
		k, err := a.keys.key(ctx, kid)
		if err != nil {
			keyErr = refused("token names %v", err)
			return nil, keyErr
		}
		if !slices.Contains(k.algs, t.Method.Alg()) {
			keyErr = refused("token is signed with %s, which key %q does not verify (it takes %s)", t.Method.Alg(), kid, strings.Join(k.algs, ", "))
			return nil, keyErr
		}
		return k.key, nil
	})
	if err != nil {
		if keyErr != nil {
			return Principal{}, keyErr
		}
		return Principal{}, tokenError(err, a.cfg)
	}
	claims, _ := tok.Claims.(jwt.MapClaims)
	name, _ := claims[a.cfg.PrincipalClaim].(string)
	if name == "" {
		return Principal{}, refused("token has no %q claim to name its principal", a.cfg.PrincipalClaim)
	}
	if !catalog.ValidPrincipalName(name) {
		return Principal{}, refused("token's %q claim is not a principal name (1..%d of A-Z a-z 0-9 . _ @ : / + = -)", a.cfg.PrincipalClaim, catalog.MaxPrincipalNameLength)
	}
	p := Principal{Kind: User, Name: name, Via: "jwt"}
	until := now.Add(tokenCacheTTL)
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil && exp.Add(a.cfg.Leeway).Before(until) {
		until = exp.Add(a.cfg.Leeway)
	}
	a.verified.put(sum, cachedToken{p: p, until: until})
	return p, nil
}

// tokenError says what was wrong with a token in words a user can act on.
func tokenError(err error, cfg Config) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return refused("token is malformed (want a JWS compact serialization: three base64url parts)")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refused("token signature is invalid, or its alg is not one of %s", strings.Join(asymmetric, ", "))
	case errors.Is(err, jwt.ErrTokenExpired):
		return refused("token is expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refused("token is not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return refused("token is issued in the future (iat)")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return refused("token audience does not hold %q", cfg.Audience)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return refused("token issuer is not %q", cfg.Issuer)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return refused("token lacks a required claim (exp)")
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return refused("token cannot be verified: its alg is not one of %s", strings.Join(asymmetric, ", "))
	}
	return refused("token is invalid")
}

// certPrincipal names the owner of a verified client certificate: its
// first URI SAN, else its first DNS SAN, else its subject's CN. A chain to
// the cluster's CA makes a Service, any other a User.
func (a *Authenticator) certPrincipal(chains [][]*x509.Certificate) (Principal, error) {
	leaf := chains[0][0]
	var name string
	switch {
	case len(leaf.URIs) > 0:
		name = leaf.URIs[0].String()
	case len(leaf.DNSNames) > 0:
		name = leaf.DNSNames[0]
	default:
		name = leaf.Subject.CommonName
	}
	if !catalog.ValidPrincipalName(name) {
		return Principal{}, refused("client certificate names no principal (a URI or DNS SAN, or a CN, of 1..%d of A-Z a-z 0-9 . _ @ : / + = -)", catalog.MaxPrincipalNameLength)
	}
	kind := User
	for _, chain := range chains {
		root := chain[len(chain)-1]
		if slices.ContainsFunc(a.services, func(raw []byte) bool { return bytes.Equal(raw, root.Raw) }) {
			kind = Service
			break
		}
	}
	return Principal{Kind: kind, Name: name, Via: "mtls"}, nil
}

// HealthPrefix is the path of the health service, which stays open.
const HealthPrefix = "/grpc.health.v1.Health/"

// HealthzPath is the plain HTTP health check (GET, for load balancers
// whose checks cannot speak the health service), open as it is.
const HealthzPath = "/healthz"

// Middleware authenticates every request but the health checks (CORS
// preflights are answered by the CORS handler in front of it, and never
// reach it): the principal rides in the request's context; a refused
// request gets Unauthenticated in its protocol (Connect, gRPC, gRPC-web)
// or HTTP 401 with a JSON body (the REST registry, /metrics).
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter(connect.WithRequireConnectProtocolHeader()) // plain HTTP (REST, /metrics) gets its own body
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, HealthPrefix) || r.URL.Path == HealthzPath {
			next.ServeHTTP(w, r)
			return
		}
		p, err := a.Authenticate(r.Context(), r.Header, r.TLS)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			if ew.IsSupported(r) {
				_ = ew.Write(w, r, connect.NewError(connect.CodeUnauthenticated, err))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"error_code": http.StatusUnauthorized, "message": "unauthenticated: " + err.Error()})
			return
		}
		if !p.IsZero() {
			r = r.WithContext(WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}
