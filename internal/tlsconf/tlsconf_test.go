package tlsconf

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/tlsconf/tlstest"
)

var write = tlstest.Write

// serve accepts TLS connections on 127.0.0.1 and completes handshakes.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake dials addr and returns the serial of the server's
// certificate, or the error.
func handshake(addr string, cfg *tls.Config) (int64, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	// TLS 1.3 reports a refused client certificate after the handshake.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil && !strings.Contains(err.Error(), "EOF") {
		return 0, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// A server serves its certificate, picks up a renewed one without a
// restart (within ReloadCheck of the files' change), keeps the old one
// when the new files do not load, and refuses TLS older than 1.2.
func TestServerReloadsItsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	certFile, keyFile := ca.Issue(t, dir, "server", 1)
	ca.WriteCA(t, dir, "ca")
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	var reloadErrs atomic.Int64
	cfg, err := Server{CertFile: certFile, KeyFile: keyFile, Now: func() time.Time { return time.Unix(0, now.Load()) },
		OnReloadError: func(error) { reloadErrs.Add(1) }}.Config()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	client, err := Client{CAFile: filepath.Join(dir, "ca.pem")}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if serial, err := handshake(addr, client); err != nil || serial != 1 {
		t.Fatalf("first handshake: serial %d, %v", serial, err)
	}
	// Renewed on disk: served after the next check.
	renewed := filepath.Join(dir, "renewed")
	if err := os.Mkdir(renewed, 0o700); err != nil {
		t.Fatal(err)
	}
	c2, k2 := ca.Issue(t, renewed, "server", 2)
	for _, mv := range [][2]string{{c2, certFile}, {k2, keyFile}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if serial, _ := handshake(addr, client); serial != 1 {
		t.Fatalf("within ReloadCheck: serial %d; want the old one still", serial)
	}
	now.Add(int64(ReloadCheck))
	if serial, err := handshake(addr, client); err != nil || serial != 2 {
		t.Fatalf("after the renewal: serial %d, %v; want 2", serial, err)
	}
	// A broken file keeps the certificate in service.
	write(t, keyFile, []byte("not a key"))
	now.Add(int64(ReloadCheck))
	if serial, err := handshake(addr, client); err != nil || serial != 2 || reloadErrs.Load() != 1 {
		t.Fatalf("after a broken key file: serial %d, %v, %d reload errors; want 2, nil, 1", serial, err, reloadErrs.Load())
	}
	old := client.Clone()
	old.MaxVersion = tls.VersionTLS11
	if _, err := handshake(addr, old); err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
}

// With client CAs, a client without a certificate, or with one from
// another CA, is refused; one with a certificate from either CA is served.
// With ClientCertOptional a client without a certificate is served too,
// but one from another CA still is not.
func TestServerChecksClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, users, other := tlstest.NewCA(t, "ca"), tlstest.NewCA(t, "users"), tlstest.NewCA(t, "other")
	caFile, usersFile := ca.WriteCA(t, dir, "ca"), users.WriteCA(t, dir, "users")
	certFile, keyFile := ca.Issue(t, dir, "server", 1)
	good, goodKey := ca.Issue(t, dir, "ingest", 10)
	user, userKey := users.Issue(t, dir, "alice", 12)
	stranger, strangerKey := other.Issue(t, dir, "stranger", 11)
	for _, optional := range []bool{false, true} {
		cfg, err := Server{CertFile: certFile, KeyFile: keyFile, ClientCAFiles: []string{caFile, usersFile}, ClientCertOptional: optional}.Config()
		if err != nil {
			t.Fatal(err)
		}
		addr := serve(t, cfg)
		for _, c := range []struct {
			name      string
			cert, key string
			ok        bool
		}{
			{"no certificate", "", "", optional},
			{"a certificate from another CA", stranger, strangerKey, false},
			{"a certificate from the first CA", good, goodKey, true},
			{"a certificate from the second CA", user, userKey, true},
		} {
			client, err := Client{CAFile: caFile, CertFile: c.cert, KeyFile: c.key}.Config()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := handshake(addr, client); (err == nil) != c.ok {
				t.Errorf("optional=%v, %s: %v; want ok=%v", optional, c.name, err, c.ok)
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "empty.pem"), []byte("nothing"))
	for _, c := range []struct {
		name string
		err  func() error
		says string
	}{
		{"server without a key", func() error { _, err := (Server{CertFile: "a"}).Config(); return err }, "both required"},
		{"missing files", func() error { _, err := (Server{CertFile: "/nope.crt", KeyFile: "/nope.key"}).Config(); return err }, "nope"},
		{"a CA file without certificates", func() error { _, err := (Client{CAFile: filepath.Join(dir, "empty.pem")}).Config(); return err }, "no PEM certificate"},
		{"optional client certificates without CAs", func() error {
			_, err := (Server{CertFile: "a", KeyFile: "b", ClientCertOptional: true}).Config()
			return err
		}, "need the CA files"},
		{"a client cert without its key", func() error { _, err := (Client{CertFile: "a"}).Config(); return err }, "both its certificate file and its key file"},
	} {
		if err := c.err(); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.says)
		}
	}
}
