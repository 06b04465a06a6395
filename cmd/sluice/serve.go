package main

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/rpcserver"
)

// serverFlags are the flags the public servers (dev, ingest, fetch) share:
// where they listen, how they log, and what their RPC server allows.
type serverFlags struct {
	addr       string
	cors       string
	logFormat  string
	pprof      bool
	maxRequest int
	tls        tlsFlags
	auth       authFlags
	insecure   bool

	origins []string // from cors, by check
}

// register adds the flags; the address default and the wording of
// --addr and --cors-origins are the command's.
func (f *serverFlags) register(cmd *cobra.Command, defaultAddr, addrUsage, corsUsage string) {
	fs := cmd.Flags()
	fs.StringVar(&f.addr, "addr", defaultAddr, addrUsage)
	fs.StringVar(&f.cors, "cors-origins", "", corsUsage)
	logFormatFlag(cmd, &f.logFormat)
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's runtime profiles under /debug/pprof/ on --addr (benchmarks, diagnosis)")
	maxRequestBytesFlag(cmd, &f.maxRequest)
	f.tls.register(cmd, tlsPublic)
	f.auth.register(cmd)
	insecureFlag(cmd, &f.insecure)
}

// insecureFlag registers --insecure.
func insecureFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "insecure", false, "serve a non-loopback --addr without TLS and authentication (anyone who can reach it may do anything)")
}

// loopbackOnly checks that a listener without TLS and authentication
// stays on loopback unless insecure says otherwise: why says what is
// missing, fix the flags that add it.
func (c *flagCheck) loopbackOnly(addr string, secured, insecure bool, why, fix string) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || secured || insecure || isLoopback(host) {
		return
	}
	c.badf("--addr %s is not a loopback address, and %s: anyone who can reach it could do anything. Add %s, or --insecure to serve it anyway", addr, why, fix)
}

// isLoopback reports whether host names this machine only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// check checks the flags into c and parses --cors-origins; peers says
// whether other copies call this server (ingest, fetch).
func (f *serverFlags) check(c *flagCheck, peers bool) {
	c.listenAddr("addr", f.addr)
	f.origins = c.origins("cors-origins", f.cors)
	c.logFormat(f.logFormat)
	c.maxRequestBytes(f.maxRequest)
	f.tls.check(c)
	f.auth.check(c, &f.tls, peers)
	c.loopbackOnly(f.addr, f.tls.enabled() && f.auth.mode == "required", f.insecure,
		"this server lacks TLS or --auth required", "--tls-cert/--tls-key and --auth required")
}

// rpcConfig is the RPC server's config from the flags (it loads the TLS
// files and the token keys).
func (f *serverFlags) rpcConfig(ctx context.Context, log *slog.Logger) (rpcserver.Config, error) {
	tlsCfg, err := f.tls.server(log)
	if err != nil {
		return rpcserver.Config{}, err
	}
	authn, err := f.auth.middleware(ctx, &f.tls, log)
	if err != nil {
		return rpcserver.Config{}, err
	}
	return rpcserver.Config{CORSOrigins: f.origins, Pprof: f.pprof, MaxRequestBytes: f.maxRequest, TLS: tlsCfg, Authenticate: authn}, nil
}

// scheme is the URL scheme --addr serves.
func (f *serverFlags) scheme() string {
	if f.tls.enabled() {
		return "https"
	}
	return "http"
}

// serveThenStop serves srv on ln and runs a service's Run beside it until
// ctx ends or the server fails. Then the service stops first — it hands
// its work over (ingest: its partitions; fetch: its sessions and trigger
// partitions), so other copies take it at once — and the server drains
// after, answering what was in flight. It returns the errors of both.
func serveThenStop(ctx context.Context, srv *rpcserver.Server, ln net.Listener, run func(context.Context) error) error {
	rctx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- run(rctx) }()
	sctx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	var serveErr error
	serving := true
	select {
	case <-ctx.Done():
	case serveErr = <-served:
		serving = false
	}
	stopRun()
	runErr := <-runDone
	stopServe()
	if serving {
		serveErr = <-served
	}
	return errors.Join(runErr, serveErr)
}
