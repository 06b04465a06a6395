// Package rpcclient is how Sluice's processes call each other: an ingest
// copy forwarding a produce to a partition's owner, a fetch copy forwarding
// a group call to its coordinator, fetch's triggers producing through
// ingest, and services reaching bookies (docs/DESIGN.md §2.12).
//
// Peers speak HTTP/2 only — the bidirectional streams (ProduceStream,
// AddEntries) cannot be carried by HTTP/1.1 — cleartext (h2c) without TLS
// and HTTPS with it, presenting the process's own certificate when the
// TLS configuration has one (mTLS). Every client built on Peers takes
// Options: the process's interceptors (tracing: a client span per call,
// its context sent in the request headers so the peer's spans join the
// caller's trace).
package rpcclient

import (
	"crypto/tls"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// Peers is the HTTP client and URL scheme for calls to other Sluice
// processes. The zero value is not usable; build one with New.
type Peers struct {
	// HTTP carries the calls; it pools connections per address.
	HTTP *http.Client
	// secure says the peers serve HTTPS.
	secure bool
	// interceptors go on every client built with Options.
	interceptors []connect.Interceptor
}

// New returns the Peers of a process: over TLS with cfg (its roots, its
// client certificate) when cfg is non-nil, cleartext HTTP/2 otherwise.
func New(cfg *tls.Config) Peers {
	var p http.Protocols
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}
	if cfg != nil {
		p.SetHTTP2(true)
		tr.TLSClientConfig = cfg.Clone()
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = &p
	return Peers{HTTP: &http.Client{Transport: tr}, secure: cfg != nil}
}

// WithInterceptors returns p whose clients (Options) also run ics, as
// telemetry's ClientInterceptor. The HTTP client stays shared.
func (p Peers) WithInterceptors(ics ...connect.Interceptor) Peers {
	p.interceptors = append(slices.Clone(p.interceptors), ics...)
	return p
}

// Options returns the options of a client of a peer: p's interceptors,
// then opts.
func (p Peers) Options(opts ...connect.ClientOption) []connect.ClientOption {
	if len(p.interceptors) == 0 {
		return opts
	}
	return append([]connect.ClientOption{connect.WithInterceptors(p.interceptors...)}, opts...)
}

// Secure reports whether the peers are reached over TLS.
func (p Peers) Secure() bool { return p.secure }

// URL is the base URL of the peer at address ("host:port"). An address
// that already names its scheme is returned as given (without a trailing
// slash).
func (p Peers) URL(address string) string {
	if strings.HasPrefix(address, "http://") || strings.HasPrefix(address, "https://") {
		return strings.TrimSuffix(address, "/")
	}
	if p.secure {
		return "https://" + address
	}
	return "http://" + address
}

// Close closes the idle connections.
func (p Peers) Close() { p.HTTP.CloseIdleConnections() }
