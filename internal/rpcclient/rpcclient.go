// Package rpcclient is how Sluice's processes call each other: an ingest
// copy forwarding a produce to a partition's owner, a fetch copy forwarding
// a group call to its coordinator, fetch's triggers producing through
// ingest, and services reaching bookies (docs/DESIGN.md §2.12).
//
// Peers speak HTTP/2 only — the bidirectional streams (ProduceStream,
// AddEntries) cannot be carried by HTTP/1.1 — cleartext (h2c) without TLS
// and HTTPS with it, presenting the process's own certificate when the
// TLS configuration has one (mTLS).
package rpcclient

import (
	"crypto/tls"
	"net/http"
	"strings"
	"time"
)

// Peers is the HTTP client and URL scheme for calls to other Sluice
// processes. The zero value is not usable; build one with New.
type Peers struct {
	// HTTP carries the calls; it pools connections per address.
	HTTP *http.Client
	// secure says the peers serve HTTPS.
	secure bool
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
