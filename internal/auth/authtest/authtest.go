// Package authtest is an identity provider for tests: an RSA and an EC
// signing key published as a JWKS, and tokens signed by them — good ones,
// and every kind of bad one the servers must refuse.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// Issuer and Audience are the iss and aud of the tokens Provider signs.
const (
	Issuer   = "https://idp.sluice.test"
	Audience = "sluice"
)

// Provider signs tokens with its keys: "rsa-1" (RS256) and "ec-1"
// (ES256).
type Provider struct {
	RSA *rsa.PrivateKey
	EC  *ecdsa.PrivateKey
	// Now is the clock tokens are stamped with (default time.Now).
	Now func() time.Time
}

// New makes a provider with fresh keys.
func New(t testing.TB) *Provider {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Provider{RSA: rk, EC: ek, Now: time.Now}
}

// JWKS is the provider's public key set.
func (p *Provider) JWKS(t testing.TB) []byte {
	t.Helper()
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &p.RSA.PublicKey, KeyID: "rsa-1", Algorithm: "RS256", Use: "sig"},
		{Key: &p.EC.PublicKey, KeyID: "ec-1", Algorithm: "ES256", Use: "sig"},
	}}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteJWKS writes the key set to dir/jwks.json and returns the path.
func (p *Provider) WriteJWKS(t testing.TB, dir string) string {
	t.Helper()
	file := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(file, p.JWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Claims are a good token's claims for subject: the provider's issuer and
// the audience, issued now, expiring in an hour.
func (p *Provider) Claims(subject string) jwt.MapClaims {
	now := p.Now()
	return jwt.MapClaims{"iss": Issuer, "aud": []string{Audience}, "sub": subject,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// Sign signs claims with the RSA key (kid rsa-1, RS256).
func (p *Provider) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "rsa-1"
	s, err := tok.SignedString(p.RSA)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Token is a good token for subject.
func (p *Provider) Token(t testing.TB, subject string) string {
	return p.Sign(t, p.Claims(subject))
}

// Bad is a token a server must refuse, and why.
type Bad struct {
	Name  string
	Token string
}

// BadTokens are the tokens for subject that must be refused: expired, the
// wrong audience, the wrong issuer, alg none, HS256 signed with the RSA
// public key as the secret, a tampered payload, an unknown key id, no exp,
// signed by a key the set does not hold, not yet valid.
func (p *Provider) BadTokens(t testing.TB, subject string) []Bad {
	t.Helper()
	now := p.Now()
	with := func(k string, v any) jwt.MapClaims {
		c := p.Claims(subject)
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	// alg none.
	none := jwt.NewWithClaims(jwt.SigningMethodNone, p.Claims(subject))
	none.Header["kid"] = "rsa-1"
	noneTok, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// HS256 keyed with the RSA public key (the confusion attack).
	der, err := x509.MarshalPKIXPublicKey(&p.RSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, p.Claims(subject))
	hs.Header["kid"] = "rsa-1"
	hsTok, err := hs.SignedString(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	// A payload changed after signing (the subject made admin).
	good := p.Token(t, subject)
	parts := strings.Split(good, ".")
	forged := p.Sign(t, p.Claims("admin"))
	tampered := parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2]
	// An unknown kid, and a key the set does not hold.
	unknown := jwt.NewWithClaims(jwt.SigningMethodRS256, p.Claims(subject))
	unknown.Header["kid"] = "rsa-9"
	unknownTok, err := unknown.SignedString(p.RSA)
	if err != nil {
		t.Fatal(err)
	}
	stranger := New(t)
	strangerTok := stranger.Sign(t, p.Claims(subject))
	// ES256 under the RSA key's kid.
	es := jwt.NewWithClaims(jwt.SigningMethodES256, p.Claims(subject))
	es.Header["kid"] = "rsa-1"
	esTok, err := es.SignedString(p.EC)
	if err != nil {
		t.Fatal(err)
	}
	return []Bad{
		{"expired", p.Sign(t, with("exp", now.Add(-10*time.Minute).Unix()))},
		{"wrong audience", p.Sign(t, with("aud", []string{"someone-else"}))},
		{"wrong issuer", p.Sign(t, with("iss", "https://evil.test"))},
		{"alg none", noneTok},
		{"HS256 keyed with the RSA public key", hsTok},
		{"tampered payload", tampered},
		{"unknown key id", unknownTok},
		{"signed by another key", strangerTok},
		{"ES256 under an RS256 key id", esTok},
		{"no exp", p.Sign(t, with("exp", nil))},
		{"not valid yet", p.Sign(t, with("nbf", now.Add(10*time.Minute).Unix()))},
		{"no subject", p.Sign(t, with("sub", nil))},
		{"garbage", "not.a.jwt"},
	}
}
