package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/auth"
)

// The auth commands make what an identity provider would, for trying
// authentication out and for tests: a JWKS from a signing key, and tokens
// signed with it. Production tokens come from the identity provider.

func newAuthCmd() *cobra.Command {
	cmd := holdsCommands(&cobra.Command{
		Use:   "auth",
		Short: "make a JWKS and bearer tokens from a signing key (to try authentication out)",
		Long: `Makes what an identity provider would: the JWKS that servers check tokens with
(--auth-jwks) from a signing key, and tokens signed with that key. For trying
authentication out and for tests; in production the identity provider issues tokens.
Keys are PEM files (EC P-256/P-384/P-521, RSA of 2048 bits or more, or Ed25519), e.g.
openssl ecparam -name prime256v1 -genkey -noout -out idp.key`,
	})
	cmd.AddCommand(newAuthJWKSCmd(), newAuthTokenCmd())
	return cmd
}

type authKeyFlags struct {
	key, kid string
}

func (f *authKeyFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.key, "key", "", "the signing key (PEM private key) (required)")
	cmd.Flags().StringVar(&f.kid, "kid", "", "the key id tokens name (required)")
}

func (f *authKeyFlags) check(c *flagCheck) {
	c.required("key", f.key)
	c.required("kid", f.kid)
}

// signingKey reads a PEM private key and names its JWS algorithm.
func signingKey(file string) (crypto.Signer, jwt.SigningMethod, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM block", file)
	}
	var key any
	switch blk.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	default:
		return nil, nil, fmt.Errorf("%s: a %q block is not a private key", file, blk.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return k, jwt.SigningMethodES256, nil
		case elliptic.P384():
			return k, jwt.SigningMethodES384, nil
		case elliptic.P521():
			return k, jwt.SigningMethodES512, nil
		}
	case *rsa.PrivateKey:
		if k.N.BitLen() < auth.MinRSABits {
			return nil, nil, fmt.Errorf("%s: an RSA key of %d bits; servers take %d or more", file, k.N.BitLen(), auth.MinRSABits)
		}
		return k, jwt.SigningMethodRS256, nil
	case ed25519.PrivateKey:
		return k, jwt.SigningMethodEdDSA, nil
	}
	return nil, nil, fmt.Errorf("%s: %T keys are not taken (EC, RSA or Ed25519)", file, key)
}

func newAuthJWKSCmd() *cobra.Command {
	var f authKeyFlags
	cmd := &cobra.Command{
		Use:     "jwks --key KEY --kid KID",
		Short:   "print the JWKS (the public key) that checks tokens of a signing key",
		Example: "  sluice auth jwks --key idp.key --kid idp-1 > jwks.json",
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var c flagCheck
			f.check(&c)
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, method, err := signingKey(f.key)
			if err != nil {
				return err
			}
			set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: f.kid, Algorithm: method.Alg(), Use: "sig"}}}
			b, err := json.Marshal(set)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
	f.register(cmd)
	return cmd
}

func newAuthTokenCmd() *cobra.Command {
	var f authKeyFlags
	var issuer, audience, subject string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:     "token --key KEY --kid KID --issuer ISS --audience AUD --subject SUB",
		Short:   "print a bearer token (a JWT) signed with a key",
		Example: "  sluice auth token --key idp.key --kid idp-1 --issuer https://idp.example --audience sluice --subject alice > alice.jwt",
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var c flagCheck
			f.check(&c)
			c.required("issuer", issuer)
			c.required("audience", audience)
			c.required("subject", subject)
			if ttl <= 0 || ttl > 24*time.Hour {
				c.badf("--ttl %v: want a positive duration up to 24h", ttl)
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, method, err := signingKey(f.key)
			if err != nil {
				return err
			}
			now := time.Now()
			tok := jwt.NewWithClaims(method, jwt.RegisteredClaims{Issuer: issuer, Audience: jwt.ClaimStrings{audience}, Subject: subject,
				IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl))})
			tok.Header["kid"] = f.kid
			s, err := tok.SignedString(key)
			if err != nil {
				return errors.New("sign the token: " + err.Error())
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), s)
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&issuer, "issuer", "", "the token's iss: the servers' --auth-issuer (required)")
	cmd.Flags().StringVar(&audience, "audience", "", "the token's aud: the servers' --auth-audience (required)")
	cmd.Flags().StringVar(&subject, "subject", "", "the token's sub: the principal User:SUBJECT (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid (at most 24h)")
	return cmd
}
