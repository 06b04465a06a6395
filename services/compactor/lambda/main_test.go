package main

import (
	"testing"

	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
	"github.com/sluicemq/sluice/services/compactor"
)

// The Lambda reaches bookies over mTLS when SLUICE_TLS_* name its files,
// in clear text without them, and refuses a certificate without the CA.
func TestTLSFromEnv(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Issue(t, dir, "compactor", 2)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	cfg, err := tlsFromEnv(env(map[string]string{compactor.EnvTLSCA: caFile, compactor.EnvTLSCert: cert, compactor.EnvTLSKey: key}))
	if err != nil || cfg == nil || cfg.RootCAs == nil || cfg.GetClientCertificate == nil {
		t.Fatalf("with the three files: %v, %v; want roots and a client certificate", cfg, err)
	}
	if cfg, err := tlsFromEnv(env(nil)); cfg != nil || err != nil {
		t.Fatalf("without them: %v, %v; want none", cfg, err)
	}
	if _, err := tlsFromEnv(env(map[string]string{compactor.EnvTLSCert: cert, compactor.EnvTLSKey: key})); err == nil {
		t.Fatal("a certificate without the CA was taken")
	}
	if _, err := tlsFromEnv(env(map[string]string{compactor.EnvTLSCA: dir + "/missing.pem"})); err == nil {
		t.Fatal("a missing CA file was taken")
	}
}
