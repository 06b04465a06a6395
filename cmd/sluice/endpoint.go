package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/pflag"

	"github.com/sluicemq/sluice/internal/tlsconf"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/pkg/sluice/serde"
)

// tokenEnv names the environment variable that --token defaults to.
const tokenEnv = "SLUICE_TOKEN"

// endpoint is where a client command reaches Sluice, and how: --addr, the
// TLS files and the bearer token.
type endpoint struct {
	addr                   string
	tlsCA, tlsCert, tlsKey string
	token                  string

	tls *tls.Config // from the TLS flags, by check; nil: none given
}

// register adds --addr, --tls-ca, --tls-cert, --tls-key and --token.
func (e *endpoint) register(fs *pflag.FlagSet) {
	fs.StringVar(&e.addr, "addr", devDefaultAddr, "Sluice address, HOST:PORT or http(s)://HOST:PORT (sluice dev's default; HOST:PORT is https with --tls-ca)")
	fs.StringVar(&e.tlsCA, "tls-ca", "", "CA certificates (PEM) that sign the server's certificate; connects over TLS (default for https://: the system's roots)")
	fs.StringVar(&e.tlsCert, "tls-cert", "", "client certificate (PEM) for servers that take mTLS, with --tls-key")
	fs.StringVar(&e.tlsKey, "tls-key", "", "the key of --tls-cert (PEM)")
	fs.StringVar(&e.token, "token", "", "bearer token (a JWT) sent on every call (default $"+tokenEnv+"); only over TLS or to loopback")
}

// check checks the flags into c and loads the TLS files.
func (e *endpoint) check(c *flagCheck) {
	c.serverAddr("addr", e.addr)
	if e.token == "" {
		e.token = strings.TrimSpace(os.Getenv(tokenEnv))
	}
	if (e.tlsCert == "") != (e.tlsKey == "") {
		c.badf("--tls-cert and --tls-key go together (a client certificate and its key)")
		return
	}
	defer func() {
		if e.token != "" && c.err() == nil {
			if sluice.CheckTokenTransport(e.url()) != nil {
				c.badf("--token: a bearer token goes only over TLS (an https:// --addr, or --tls-ca) or to a loopback address; %s is neither", e.url())
			}
		}
	}()
	e.tls = nil
	if e.tlsCA == "" && e.tlsCert == "" && !strings.HasPrefix(e.addr, "https://") {
		return
	}
	cfg, err := tlsconf.Client{CAFile: e.tlsCA, CertFile: e.tlsCert, KeyFile: e.tlsKey}.Config()
	if err != nil {
		c.badf("--tls-ca/--tls-cert/--tls-key: %v", err)
		return
	}
	if strings.HasPrefix(e.addr, "http://") {
		c.badf("--addr %s is cleartext; the TLS flags need an https:// address (or HOST:PORT)", e.addr)
		return
	}
	e.tls = cfg
}

// url is the server's base URL.
func (e endpoint) url() string {
	if strings.HasPrefix(e.addr, "http://") || strings.HasPrefix(e.addr, "https://") {
		return strings.TrimSuffix(e.addr, "/")
	}
	if e.tls != nil {
		return "https://" + e.addr
	}
	return "http://" + e.addr
}

// httpClient speaks HTTP/2 (gRPC): over TLS with the TLS flags, cleartext
// (h2c) otherwise.
func (e endpoint) httpClient() *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	if e.tls != nil {
		tr.TLSClientConfig = e.tls.Clone()
	}
	return &http.Client{Transport: tr}
}

// options are the connect options of the command's RPC clients: gRPC, and
// the bearer token when there is one.
func (e endpoint) options() []connect.ClientOption {
	opts := []connect.ClientOption{connect.WithGRPC()}
	if e.token != "" {
		tok := e.token
		opts = append(opts, connect.WithInterceptors(sluice.BearerInterceptor(func(context.Context) (string, error) { return tok, nil })))
	}
	return opts
}

func (e endpoint) admin() sluicev1connect.AdminServiceClient {
	return sluicev1connect.NewAdminServiceClient(e.httpClient(), e.url(), e.options()...)
}

func (e endpoint) producer() sluicev1connect.ProducerServiceClient {
	return sluicev1connect.NewProducerServiceClient(e.httpClient(), e.url(), e.options()...)
}

func (e endpoint) schemas() sluicev1connect.SchemaServiceClient {
	return sluicev1connect.NewSchemaServiceClient(e.httpClient(), e.url(), e.options()...)
}

func (e endpoint) registry() *serde.Registry {
	return serde.NewRegistry(e.httpClient(), e.url(), e.options()...)
}

// client is an SDK client for the endpoint.
func (e endpoint) client(opts ...sluice.ClientOption) (*sluice.Client, error) {
	if e.tls != nil {
		opts = append(opts, sluice.WithTLS(e.tls))
	}
	if e.token != "" {
		opts = append(opts, sluice.WithToken(e.token))
	}
	return sluice.NewClient(e.url(), opts...)
}
