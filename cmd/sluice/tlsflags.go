package main

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/logevery"
	"github.com/sluicemq/sluice/internal/tlsconf"
)

// tlsRole is what a process does with its TLS flags.
type tlsRole uint8

const (
	// tlsPublic serves clients and calls peers (ingest, fetch, dev).
	tlsPublic tlsRole = iota + 1
	// tlsBookie serves the bookie port: mTLS only.
	tlsBookie
	// tlsCaller only calls peers (the compactor).
	tlsCaller
)

// tlsFlags are the TLS flags of the processes that serve or call other
// Sluice processes (docs/DESIGN.md §2.12): one certificate per process,
// served on --addr and presented to the bookies and copies it calls, and
// the cluster's CA, which checks those peers both ways.
type tlsFlags struct {
	role                    tlsRole
	cert, key, ca, clientCA string
	clientAuth              string
}

// register adds the flags for role.
func (f *tlsFlags) register(cmd *cobra.Command, role tlsRole) {
	f.role = role
	fs := cmd.Flags()
	switch role {
	case tlsCaller:
		fs.StringVar(&f.cert, "tls-cert", "", "this process's certificate (PEM), presented to the bookies it calls (mTLS); with --tls-key")
		fs.StringVar(&f.ca, "tls-ca", "", "the cluster's CA certificates (PEM): reach bookies over TLS and check their certificates")
	default:
		fs.StringVar(&f.cert, "tls-cert", "", "this process's certificate (PEM): --addr serves HTTPS only, and the bookies and copies it calls get it as its client certificate (mTLS); with --tls-key")
		fs.StringVar(&f.ca, "tls-ca", "", "the cluster's CA certificates (PEM): check the certificates of the bookies and copies this process calls, and take theirs as clients")
	}
	fs.StringVar(&f.key, "tls-key", "", "the key of --tls-cert (PEM)")
	if role == tlsPublic {
		fs.StringVar(&f.clientCA, "tls-client-ca", "", "CA certificates (PEM) of clients' certificates (mTLS clients), beside --tls-ca's")
		fs.StringVar(&f.clientAuth, "tls-client-auth", "require", "with --tls-ca or --tls-client-ca: require a client certificate from every caller, or request one (callers without one authenticate with a bearer token)")
	}
}

// check checks the flags into c.
func (f *tlsFlags) check(c *flagCheck) {
	if (f.cert == "") != (f.key == "") {
		c.badf("--tls-cert and --tls-key go together (a certificate and its key)")
	}
	switch f.role {
	case tlsBookie:
		if f.cert != "" && f.ca == "" {
			c.badf("--tls-cert needs --tls-ca on a bookie: its port takes only callers with a certificate from the cluster's CA (mTLS)")
		}
		if f.ca != "" && f.cert == "" {
			c.badf("--tls-ca needs --tls-cert and --tls-key: a bookie with mTLS serves TLS")
		}
	case tlsCaller:
		if f.ca != "" && f.cert == "" {
			c.badf("--tls-ca needs --tls-cert and --tls-key: bookies with TLS take only callers with a certificate (mTLS)")
		}
	case tlsPublic:
		if f.cert == "" && (f.ca != "" || f.clientCA != "") {
			c.badf("--tls-ca and --tls-client-ca need --tls-cert and --tls-key: without them this process serves no TLS")
		}
		if f.clientAuth != "require" && f.clientAuth != "request" {
			c.badf("--tls-client-auth %q: want require or request", f.clientAuth)
		}
	}
}

// enabled says whether this process uses TLS.
func (f *tlsFlags) enabled() bool { return f.cert != "" }

// server is the TLS config of --addr (nil without TLS).
func (f *tlsFlags) server(log *slog.Logger) (*tls.Config, error) {
	if !f.enabled() {
		return nil, nil
	}
	s := tlsconf.Server{CertFile: f.cert, KeyFile: f.key, OnReloadError: reloadLogger(log)}
	for _, ca := range []string{f.ca, f.clientCA} {
		if ca != "" {
			s.ClientCAFiles = append(s.ClientCAFiles, ca)
		}
	}
	s.ClientCertOptional = f.role == tlsPublic && f.clientAuth == "request" && len(s.ClientCAFiles) > 0
	return s.Config()
}

// client is the TLS config this process calls its peers with (nil
// without TLS): the cluster's CA as roots, its own certificate.
func (f *tlsFlags) client(log *slog.Logger) (*tls.Config, error) {
	if !f.enabled() && f.ca == "" {
		return nil, nil
	}
	return tlsconf.Client{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, OnReloadError: reloadLogger(log)}.Config()
}

// reloadLogger reports certificate files that changed but failed to load
// (the previous certificate stays in service), at most once a minute.
func reloadLogger(log *slog.Logger) func(error) {
	every := &logevery.Limiter{Every: time.Minute}
	return func(err error) {
		if ok, held := every.Allow(time.Now()); ok {
			log.Error("TLS certificate change failed to load", "err", err, "held_back", held)
		}
	}
}
