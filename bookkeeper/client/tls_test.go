package client

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/internal/tlsconf"
	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
)

// With Config.TLS the client reaches bookies that serve mTLS only: it
// writes a ledger (the AddEntries stream over HTTP/2 on TLS), seals it and
// reads it back. A client without a certificate, or with one from another
// CA, cannot add an entry.
func TestClientOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "other")
	caFile := ca.WriteCA(t, dir, "ca")
	bookieCert, bookieKey := ca.Issue(t, dir, "bookie", 2)
	ingestCert, ingestKey := ca.Issue(t, dir, "ingest", 3)
	strangerCert, strangerKey := other.Issue(t, dir, "stranger", 4)
	serverTLS, err := tlsconf.Server{CertFile: bookieCert, KeyFile: bookieKey, ClientCAFiles: []string{caFile}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	// httptest puts its own certificate in when the config has none (it
	// does not look at GetCertificate).
	kp, err := tls.LoadX509KeyPair(bookieCert, bookieKey)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS.Certificates = []tls.Certificate{kp}
	cat, err := embedded.Open("/catalog", embedded.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{t: t, cat: cat, bookies: map[string]*testBookie{}, serverTLS: serverTLS}
	t.Cleanup(cl.close)
	for _, id := range []string{"b1", "b2", "b3"} {
		cl.startBookie(id)
	}
	clientTLS := func(cert, key string) *tls.Config {
		cfg, err := tlsconf.Client{CAFile: caFile, CertFile: cert, KeyFile: key}.Config()
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	c := cl.client(t, func(cfg *Config) { cfg.TLS = clientTLS(ingestCert, ingestKey) })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 49)
	if _, err := w.Close(ctxT(t), 100+49); err != nil {
		t.Fatal(err)
	}
	readAll(t, c, w.ID(), 49)

	for name, cfg := range map[string]*tls.Config{
		"no client certificate":         clientTLS("", ""),
		"a certificate from another CA": clientTLS(strangerCert, strangerKey),
	} {
		bad := cl.client(t, func(c *Config) { c.TLS = cfg; c.AddTimeout = 500 * time.Millisecond })
		bw, err := bad.CreateLedger(ctxT(t), spec(catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}))
		if err != nil {
			t.Fatal(err) // the catalog alone: no bookie is asked yet
		}
		if e, err := bw.Append(ctxT(t), payload(0)); err == nil {
			t.Errorf("%s: added entry %d on bookies with mTLS", name, e)
		}
		if got, err := bad.ReadEntries(ctxT(t), w.ID(), 0, 0); err == nil {
			t.Errorf("%s: read %q from bookies with mTLS", name, got)
		}
	}
}
