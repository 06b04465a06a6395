package rpcclient

import (
	"crypto/tls"
	"net/http"
	"testing"
)

// Peers reach host:port addresses over https with a TLS config and over
// http without; addresses with a scheme keep it. The transport speaks
// HTTP/2 only, cleartext or on TLS.
func TestPeers(t *testing.T) {
	plain, secure := New(nil), New(&tls.Config{MinVersion: tls.VersionTLS12})
	for _, c := range []struct {
		p          Peers
		addr, want string
	}{
		{plain, "10.0.0.1:7421", "http://10.0.0.1:7421"},
		{secure, "10.0.0.1:7421", "https://10.0.0.1:7421"},
		{secure, "http://10.0.0.1:7421/", "http://10.0.0.1:7421"},
		{plain, "https://ingest-2:7421", "https://ingest-2:7421"},
	} {
		if got := c.p.URL(c.addr); got != c.want {
			t.Errorf("secure=%v URL(%q) = %q; want %q", c.p.Secure(), c.addr, got, c.want)
		}
	}
	for _, c := range []struct {
		p                Peers
		h1, h2, h2c, tls bool
	}{
		{plain, false, false, true, false},
		{secure, false, true, false, true},
	} {
		tr := c.p.HTTP.Transport.(*http.Transport)
		pr := tr.Protocols
		if pr.HTTP1() != c.h1 || pr.HTTP2() != c.h2 || pr.UnencryptedHTTP2() != c.h2c || (tr.TLSClientConfig != nil) != c.tls {
			t.Errorf("secure=%v: protocols %v, TLS config %v", c.p.Secure(), pr, tr.TLSClientConfig != nil)
		}
	}
}
