package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Bounds and intervals of a JWKS source.
const (
	// MaxJWKSBytes bounds a JWKS document.
	MaxJWKSBytes = 1 << 20
	// MaxJWKSKeys bounds the keys of a JWKS document.
	MaxJWKSKeys = 100
	// MinRSABits is the smallest RSA key taken.
	MinRSABits = 2048
	// JWKSRefresh is how old a JWKS fetched from a URL may grow before the
	// next token makes it fetched again.
	JWKSRefresh = 10 * time.Minute
	// JWKSMissRefresh is the least time between two fetches for a key id
	// the JWKS does not hold (a key rotated in): tokens with made-up key
	// ids cannot make the server hammer the identity provider.
	JWKSMissRefresh = time.Minute
	// JWKSFileCheck is the least time between two looks at a JWKS file's
	// modification time.
	JWKSFileCheck = time.Second
	// jwksFetchTimeout bounds one fetch of a JWKS URL.
	jwksFetchTimeout = 5 * time.Second
)

// asymmetric lists the JWS algorithms Sluice verifies: never "none", never
// HMAC (a shared secret in a key set would let anyone who can read it mint
// tokens, and is the root of the HS256-with-the-RSA-key confusion).
var asymmetric = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// verifyKey is one key of a key set and the algorithms it verifies.
type verifyKey struct {
	key  any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

// parseJWKS reads a JWKS document into its signing keys by key id. It
// refuses what a verifier must not take: private keys, symmetric keys,
// short RSA keys, keys without an id, an id twice, an alg that does not
// fit the key.
func parseJWKS(b []byte) (map[string]verifyKey, error) {
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("JWKS of %d bytes; at most %d", len(b), MaxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	if len(set.Keys) > MaxJWKSKeys {
		return nil, fmt.Errorf("JWKS holds %d keys; at most %d", len(set.Keys), MaxJWKSKeys)
	}
	keys := make(map[string]verifyKey, len(set.Keys))
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue // an encryption key
		}
		if k.KeyID == "" {
			return nil, fmt.Errorf("JWKS key %d has no kid: tokens name their key by kid", i)
		}
		if _, dup := keys[k.KeyID]; dup {
			return nil, fmt.Errorf("JWKS holds kid %q twice", k.KeyID)
		}
		vk, err := verifyKeyOf(k)
		if err != nil {
			return nil, fmt.Errorf("JWKS key %q: %w", k.KeyID, err)
		}
		keys[k.KeyID] = vk
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS holds no signing key")
	}
	return keys, nil
}

func verifyKeyOf(k jose.JSONWebKey) (verifyKey, error) {
	var algs []string
	var pub any
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		if key.N.BitLen() < MinRSABits {
			return verifyKey{}, fmt.Errorf("RSA key of %d bits; at least %d", key.N.BitLen(), MinRSABits)
		}
		pub, algs = key, []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		switch key.Curve {
		case elliptic.P256():
			algs = []string{"ES256"}
		case elliptic.P384():
			algs = []string{"ES384"}
		case elliptic.P521():
			algs = []string{"ES512"}
		default:
			return verifyKey{}, errors.New("EC key on an unknown curve")
		}
		pub = key
	case ed25519.PublicKey:
		pub, algs = key, []string{"EdDSA"}
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return verifyKey{}, errors.New("a private key: publish only public keys in a JWKS")
	case []byte:
		return verifyKey{}, errors.New("a symmetric (oct) key: only RSA, EC and Ed25519 keys are taken")
	default:
		return verifyKey{}, fmt.Errorf("key type %T is not taken", k.Key)
	}
	if k.Algorithm != "" {
		if !slices.Contains(algs, k.Algorithm) {
			return verifyKey{}, fmt.Errorf("alg %q does not fit the key (want one of %s)", k.Algorithm, strings.Join(algs, ", "))
		}
		algs = []string{k.Algorithm} // pinned by the set
	}
	return verifyKey{key: pub, algs: algs}, nil
}

// keySource is a JWKS from a file (re-read when it changes) or a URL
// (fetched again when older than JWKSRefresh, or for an unknown key id at
// most once per JWKSMissRefresh). A document that fails to load keeps the
// keys in service and is reported through onErr.
type keySource struct {
	file, url string
	hc        *http.Client
	now       func() time.Time
	onErr     func(error)

	// fetchMu serializes loads (held across a file read or an HTTP
	// fetch), so concurrent misses make one fetch. Taken before mu.
	fetchMu sync.Mutex
	// mu guards the fields below. Leaf lock, never held across I/O.
	mu        sync.Mutex
	keys      map[string]verifyKey
	loadedAt  time.Time // of the keys (a URL's fetch)
	checkedAt time.Time // a file's last look, or a URL's last fetch attempt
	missAt    time.Time // the last fetch for an unknown kid
	stamp     fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// newKeySource loads where ("https://..." or "http://..." is fetched,
// anything else is a file) and fails if it does not load.
func newKeySource(ctx context.Context, where string, hc *http.Client, now func() time.Time, onErr func(error)) (*keySource, error) {
	ks := &keySource{hc: hc, now: now, onErr: onErr}
	if strings.HasPrefix(where, "https://") || strings.HasPrefix(where, "http://") {
		ks.url = where
	} else {
		ks.file = where
	}
	if err := ks.load(ctx); err != nil {
		return nil, err
	}
	return ks, nil
}

// load reads the document and swaps the keys in.
func (ks *keySource) load(ctx context.Context) error {
	var b []byte
	var st fileStamp
	var err error
	if ks.file != "" {
		b, st, err = readFile(ks.file)
	} else {
		b, err = ks.fetch(ctx)
	}
	if err != nil {
		return err
	}
	keys, err := parseJWKS(b)
	if err != nil {
		return fmt.Errorf("%s: %w", ks.where(), err)
	}
	ks.mu.Lock()
	ks.keys, ks.loadedAt, ks.stamp = keys, ks.now(), st
	ks.mu.Unlock()
	return nil
}

func (ks *keySource) where() string {
	if ks.file != "" {
		return ks.file
	}
	return ks.url
}

func readFile(file string) ([]byte, fileStamp, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("JWKS file: %w", err)
	}
	if fi.Size() > MaxJWKSBytes {
		return nil, fileStamp{}, fmt.Errorf("JWKS file %s is %d bytes; at most %d", file, fi.Size(), MaxJWKSBytes)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("JWKS file: %w", err)
	}
	return b, fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

func (ks *keySource) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.url, nil)
	if err != nil {
		return nil, fmt.Errorf("JWKS URL: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: %s", ks.url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", ks.url, err)
	}
	return b, nil
}

// errUnknownKID is a token naming a key the set does not hold.
var errUnknownKID = errors.New("unknown key id")

// key returns the key kid names, refreshing the set first when it is due
// (or, for a kid it lacks, when the miss interval allows).
func (ks *keySource) key(ctx context.Context, kid string) (verifyKey, error) {
	if ks.due() {
		ks.refresh(ctx, false)
	}
	if k, ok := ks.lookup(kid); ok {
		return k, nil
	}
	if ks.url != "" && ks.missAllowed() {
		ks.refresh(ctx, true)
		if k, ok := ks.lookup(kid); ok {
			return k, nil
		}
	}
	return verifyKey{}, fmt.Errorf("%w %q", errUnknownKID, kid)
}

func (ks *keySource) lookup(kid string) (verifyKey, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[kid]
	return k, ok
}

// due reports whether the set should be looked at again: a file whose
// check interval passed, a URL whose keys are older than JWKSRefresh.
func (ks *keySource) due() bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	now := ks.now()
	if ks.file != "" {
		return now.Sub(ks.checkedAt) >= JWKSFileCheck
	}
	// After a failed fetch, wait the miss interval before the next.
	return now.Sub(ks.loadedAt) >= JWKSRefresh && now.Sub(ks.checkedAt) >= JWKSMissRefresh
}

// missAllowed reports (and takes) a fetch for an unknown kid.
func (ks *keySource) missAllowed() bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	now := ks.now()
	if !ks.missAt.IsZero() && now.Sub(ks.missAt) < JWKSMissRefresh {
		return false
	}
	ks.missAt = now
	return true
}

// refresh loads the set again (a file only if it changed). One at a
// time; a caller that waited finds the work done.
func (ks *keySource) refresh(ctx context.Context, miss bool) {
	ks.fetchMu.Lock()
	defer ks.fetchMu.Unlock()
	if !miss && !ks.due() {
		return // another caller refreshed while this one waited
	}
	ks.mu.Lock()
	ks.checkedAt = ks.now()
	stamp := ks.stamp
	ks.mu.Unlock()
	if ks.file != "" {
		fi, err := os.Stat(ks.file)
		if err == nil && (fileStamp{mod: fi.ModTime(), size: fi.Size()}) == stamp {
			return
		}
	}
	if err := ks.load(ctx); err != nil && ks.onErr != nil {
		ks.onErr(fmt.Errorf("%w; the keys loaded before stay in service", err))
	}
}
