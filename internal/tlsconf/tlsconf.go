// Package tlsconf builds the TLS configurations of Sluice's servers and
// clients from PEM files (issue 26, docs/open-work.md "Security"):
// certificates are re-read when their files change, so a renewed
// certificate takes effect without a restart; TLS 1.2 is the minimum and
// 1.3 is preferred (Go's defaults for the rest); servers offer HTTP/2 and
// HTTP/1.1 by ALPN (gRPC and Connect over h2, gRPC-web and Connect from
// browsers over either), and clients leave ALPN to their HTTP transport,
// which offers only what it speaks.
//
// A reload is checked at most once per ReloadCheck, on a handshake: the
// files' modification times and sizes are compared with those loaded. A
// pair that fails to load (half-written, mismatched) keeps the previous
// certificate in service and is tried again on the next check; the error is
// reported through OnReloadError.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ReloadCheck is the least time between two looks at a certificate's files.
const ReloadCheck = time.Second

// Server names a server's TLS files.
type Server struct {
	// CertFile and KeyFile are the server's certificate chain and key
	// (PEM). Required.
	CertFile, KeyFile string
	// ClientCAFiles, if any, hold the CAs whose client certificates are
	// accepted (mTLS); every client must then present one, unless
	// ClientCertOptional.
	ClientCAFiles []string
	// ClientCertOptional lets clients without a certificate in (they
	// authenticate otherwise: a bearer token); a certificate presented is
	// still verified against ClientCAFiles.
	ClientCertOptional bool
	// OnReloadError hears of a certificate change that failed to load
	// (the previous certificate stays in service). Optional.
	OnReloadError func(error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Config loads the files (failing if they do not load) and returns the
// server configuration.
func (s Server) Config() (*tls.Config, error) {
	if s.CertFile == "" || s.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are both required")
	}
	if s.ClientCertOptional && len(s.ClientCAFiles) == 0 {
		return nil, errors.New("tls: optional client certificates need the CA files to check them against")
	}
	kp, err := newKeyPair(s.CertFile, s.KeyFile, s.OnReloadError, s.Now)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get(), nil },
	}
	if len(s.ClientCAFiles) > 0 {
		pool := x509.NewCertPool()
		for _, f := range s.ClientCAFiles {
			if err := appendCerts(pool, f); err != nil {
				return nil, err
			}
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if s.ClientCertOptional {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return cfg, nil
}

// Client names a client's TLS files.
type Client struct {
	// CAFile holds the CAs that sign the servers' certificates (PEM);
	// empty: the system's roots.
	CAFile string
	// CertFile and KeyFile, if set, are the client's own certificate for
	// mTLS, re-read on change as a server's is.
	CertFile, KeyFile string
	// ServerName overrides the name checked in the server's certificate
	// (default: the host dialed).
	ServerName string
	// OnReloadError as Server's.
	OnReloadError func(error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Config loads the files and returns the client configuration.
func (c Client) Config() (*tls.Config, error) {
	// No NextProtos: the HTTP transport offers what it speaks (a
	// transport that speaks HTTP/1.1 only must not offer h2).
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pool, err := certPool(c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		kp, err := newKeyPair(c.CertFile, c.KeyFile, c.OnReloadError, c.Now)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get(), nil }
	case c.CertFile != "" || c.KeyFile != "":
		return nil, errors.New("tls: a client certificate needs both its certificate file and its key file")
	}
	return cfg, nil
}

// certPool reads a PEM bundle of CA certificates.
func certPool(file string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	return pool, appendCerts(pool, file)
}

// appendCerts adds a PEM bundle of CA certificates to pool.
func appendCerts(pool *x509.CertPool, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("tls: read CA file: %w", err)
	}
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("tls: %s holds no PEM certificate", file)
	}
	return nil
}

// keyPair is a certificate and key re-read when their files change.
type keyPair struct {
	certFile, keyFile string
	onErr             func(error)
	now               func() time.Time

	// mu guards the fields below. Leaf lock; held across a reload's
	// file reads (small files, once per ReloadCheck at most).
	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp // of the files loaded
	checked time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(file string) (fileStamp, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

func newKeyPair(certFile, keyFile string, onErr func(error), now func() time.Time) (*keyPair, error) {
	if now == nil {
		now = time.Now
	}
	kp := &keyPair{certFile: certFile, keyFile: keyFile, onErr: onErr, now: now}
	if err := kp.load(); err != nil {
		return nil, err
	}
	kp.checked = now()
	return kp, nil
}

// load reads both files. Called with mu held (or before kp is shared).
func (kp *keyPair) load() error {
	var stamps [2]fileStamp
	for i, f := range []string{kp.certFile, kp.keyFile} {
		st, err := stampOf(f)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		stamps[i] = st
	}
	cert, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", kp.certFile, kp.keyFile, err)
	}
	kp.cert, kp.stamp = &cert, stamps
	return nil
}

// get returns the certificate in service, reloading it first if its files
// changed since the last check (at most once per ReloadCheck).
func (kp *keyPair) get() *tls.Certificate {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	now := kp.now()
	if now.Sub(kp.checked) < ReloadCheck {
		return kp.cert
	}
	kp.checked = now
	for i, f := range []string{kp.certFile, kp.keyFile} {
		st, err := stampOf(f)
		if err != nil || st != kp.stamp[i] {
			if err := kp.load(); err != nil && kp.onErr != nil {
				kp.onErr(fmt.Errorf("%w; the previous certificate stays in service", err))
			}
			break
		}
	}
	return kp.cert
}
