// Package rpcserver is the HTTP front every Sluice service shares: one
// address serving Connect, gRPC and gRPC-web from the same handlers over
// HTTP/1.1 and cleartext HTTP/2 (h2c), plus gRPC health, gRPC reflection,
// Prometheus metrics and CORS for browser clients.
//
// A service registers its Connect handlers with Handle, using the options
// from HandlerOptions (telemetry interceptor and the request size limit),
// then calls Serve.
//
// # Readiness
//
// grpc.health.v1.Health (health.go) speaks the standard messages: Check
// over Connect JSON answers {"status":"SERVING"}, over gRPC and gRPC-web
// the same enum value 1. The contract probes can rely on:
//
//   - NOT_SERVING from the moment Serve accepts connections while a
//     readiness gate (Gate) is open: start-up work without which answers
//     would be wrong, such as an ingest copy taking back the partitions
//     its owner id held before a restart (ingest.Service.Ready; until then
//     their last acknowledged records may not be readable).
//   - SERVING, for "" (the server as a whole) and for every registered
//     service ("sluice.v1.ProducerService", ...), once Serve accepts
//     connections and every gate closed: the handlers are registered and
//     the stores their constructors opened are open. Other start-up work
//     (an ingest copy taking over further partitions by balancing) is not
//     waited for: a call that meets it waits or answers UNAVAILABLE, which
//     clients retry.
//   - NOT_SERVING once Serve's context has ended: the server drains. It
//     takes no new connections, in-flight calls get ShutdownTimeout to
//     finish, Watch streams get NOT_SERVING and end. Route traffic
//     elsewhere; the process is going away.
//   - NOT_FOUND (Check) or SERVICE_UNKNOWN (Watch) for a service this
//     server does not serve, as the standard says.
//   - No answer at all (connection refused) before Serve and after it
//     returns.
package rpcserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	connectcors "connectrpc.com/cors"
	"connectrpc.com/grpcreflect"
	"github.com/rs/cors"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicemq/sluice/internal/logevery"
	"github.com/sluicemq/sluice/internal/telemetry"
)

// Config bounds and shapes the server. Zero values take the documented defaults.
type Config struct {
	// MaxRequestBytes caps one request message (before decompression and
	// after); a larger one gets INVALID_ARGUMENT naming the limit
	// (apierr.RequestBytes: the mains set it with --max-request-bytes).
	// Default 4 MiB; at most 64 MiB.
	MaxRequestBytes int
	// ReadHeaderTimeout bounds reading request headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default 2 min.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long in-flight calls get after the context
	// ends. Default 10 s.
	ShutdownTimeout time.Duration
	// MaxConcurrentStreams bounds HTTP/2 streams per connection. Default 1,000.
	MaxConcurrentStreams int
	// CORSOrigins lists browser origins allowed to call the APIs ("*" allows
	// any). Empty means no cross-origin access except AllowLocalhost.
	CORSOrigins []string
	// AllowLocalhost lets any http(s)://localhost or 127.0.0.1 origin call
	// (dev mode).
	AllowLocalhost bool
	// Pprof serves Go's runtime profiles under /debug/pprof/ (off by
	// default: a CPU profile costs CPU, and heap profiles show data). For
	// benchmarks and for finding out where a server's time goes.
	Pprof bool
	// TLS, when set, serves HTTPS only — HTTP/2 and HTTP/1.1 by ALPN —
	// instead of cleartext HTTP/1.1 and h2c (internal/tlsconf builds it;
	// with its ClientCAs, clients need a certificate).
	TLS *tls.Config
	// Authenticate, when set, wraps every handler (inside CORS, so
	// preflights pass): internal/auth's middleware, which puts the
	// caller's principal in the request context and refuses bad
	// credentials.
	Authenticate func(http.Handler) http.Handler
	// Interceptors run inside the telemetry interceptor on every Connect
	// handler registered with HandlerOptions (internal/authz's).
	Interceptors []connect.Interceptor
}

const (
	defaultMaxRequestBytes = 4 << 20
	maxMaxRequestBytes     = 64 << 20
)

func (c Config) withDefaults() Config {
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = defaultMaxRequestBytes
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = 1000
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxRequestBytes < 0 || c.MaxRequestBytes > maxMaxRequestBytes {
		errs = append(errs, fmt.Errorf("rpcserver: MaxRequestBytes %d: want 0..%d", c.MaxRequestBytes, maxMaxRequestBytes))
	}
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": c.ReadHeaderTimeout, "IdleTimeout": c.IdleTimeout, "ShutdownTimeout": c.ShutdownTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("rpcserver: %s %v: must not be negative", name, d))
		}
	}
	if c.MaxConcurrentStreams < 0 {
		errs = append(errs, fmt.Errorf("rpcserver: MaxConcurrentStreams %d: must not be negative", c.MaxConcurrentStreams))
	}
	for _, o := range c.CORSOrigins {
		if o == "*" {
			continue
		}
		if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("rpcserver: CORS origin %q: want scheme://host[:port] or *", o))
		}
	}
	return errors.Join(errs...)
}

// Server is one service's RPC endpoint.
type Server struct {
	cfg      Config
	tel      *telemetry.Telemetry
	mux      *http.ServeMux
	services []string
	opts     []connect.HandlerOption
	health   *health
	gates    []<-chan struct{} // health says NOT_SERVING until all are closed
}

// New builds a Server. Register handlers with Handle before Serve.
func New(cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ic, err := tel.Interceptor()
	if err != nil {
		return nil, fmt.Errorf("rpcserver: telemetry interceptor: %w", err)
	}
	s := &Server{
		cfg: cfg,
		tel: tel,
		mux: http.NewServeMux(),
		opts: append([]connect.HandlerOption{
			connect.WithInterceptors(append([]connect.Interceptor{ic}, cfg.Interceptors...)...),
			connect.WithReadMaxBytes(cfg.MaxRequestBytes), // a backstop: limit.go answers first
			connect.WithCompressMinBytes(1024),
		}, gzipWithin(int64(cfg.MaxRequestBytes))...),
	}
	s.mux.Handle("/metrics", tel.MetricsHandler())
	if cfg.Pprof {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return s, nil
}

// HandlerOptions are the options every Connect handler on this server must use.
func (s *Server) HandlerOptions() []connect.HandlerOption { return slices.Clone(s.opts) }

// Handle registers a Connect handler as returned by a generated
// NewXxxServiceHandler: path is the service prefix ("/pkg.Service/").
//
// A request message over MaxRequestBytes gets INVALID_ARGUMENT naming the
// limit (apierr.RequestBytes; see limit.go), never connect's
// RESOURCE_EXHAUSTED.
func (s *Server) Handle(path string, h http.Handler) {
	s.mux.Handle(path, limitRequests(h, int64(s.cfg.MaxRequestBytes)))
	s.services = append(s.services, strings.Trim(path, "/"))
}

// Mount serves a plain HTTP API (not Connect: the schema registry's REST
// facade) under prefix ("/registry"): a request for prefix/... reaches h
// with the prefix stripped. It bounds its own request bodies, and it is not
// a service of health or reflection.
func (s *Server) Mount(prefix string, h http.Handler) {
	s.mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
}

// Gate keeps health NOT_SERVING (for the server and every service) until
// ready is closed: a service whose reads or writes are not correct yet
// (ingest taking back its partitions after a restart) holds the server
// back. Call before Serve.
func (s *Server) Gate(ready <-chan struct{}) { s.gates = append(s.gates, ready) }

// Services lists the fully-qualified names of the registered services.
func (s *Server) Services() []string { return slices.Clone(s.services) }

// healthzPath is the plain HTTP health check (internal/auth.HealthzPath,
// open without credentials as the health service is).
const healthzPath = "/healthz"

// Handler returns the complete HTTP handler: registered services, health
// (the health service, and GET /healthz), reflection, metrics and CORS.
// Call after every Handle.
func (s *Server) Handler() http.Handler {
	if s.health == nil {
		// Health and reflection: the request limit, without telemetry.
		max := int64(s.cfg.MaxRequestBytes)
		limits := append([]connect.HandlerOption{connect.WithReadMaxBytes(s.cfg.MaxRequestBytes)}, gzipWithin(max)...)
		s.health = newHealth(s.services)
		reflector := grpcreflect.NewStaticReflector(append(s.Services(), HealthService)...)
		for _, ph := range []func() (string, http.Handler){
			func() (string, http.Handler) { return s.health.handler(limits...) },
			func() (string, http.Handler) { return grpcreflect.NewHandlerV1(reflector, limits...) },
			func() (string, http.Handler) { return grpcreflect.NewHandlerV1Alpha(reflector, limits...) },
		} {
			path, h := ph()
			s.mux.Handle(path, limitRequests(h, max))
		}
		s.mux.HandleFunc("GET "+healthzPath, s.health.healthz)
	}
	var h http.Handler = s.mux
	if s.cfg.Authenticate != nil {
		h = s.cfg.Authenticate(h)
	}
	return s.withCORS(h)
}

func (s *Server) withCORS(h http.Handler) http.Handler {
	if len(s.cfg.CORSOrigins) == 0 && !s.cfg.AllowLocalhost {
		return h
	}
	origins := s.cfg.CORSOrigins
	allowLocal := s.cfg.AllowLocalhost
	c := cors.New(cors.Options{
		AllowOriginFunc: func(origin string) bool {
			if slices.Contains(origins, "*") || slices.Contains(origins, origin) {
				return true
			}
			return allowLocal && isLocalOrigin(origin)
		},
		AllowedMethods: connectcors.AllowedMethods(),
		AllowedHeaders: append(connectcors.AllowedHeaders(), "Authorization"), // bearer tokens from browsers
		ExposedHeaders: connectcors.ExposedHeaders(),
		MaxAge:         7200,
	})
	return c.Handler(h)
}

func isLocalOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// Serve answers on ln until ctx ends, then drains and returns. It returns
// nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if s.cfg.TLS != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		Protocols:         protocols,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: s.cfg.MaxConcurrentStreams},
		ErrorLog:          log.New(&serverErrors{log: s.tel.Logger, every: logevery.Limiter{Every: serverErrorsEvery}}, "", 0),
	}
	gctx, stopGates := context.WithCancel(ctx)
	gated := make(chan struct{})
	if len(s.gates) > 0 {
		s.health.setAll(healthpb.HealthCheckResponse_NOT_SERVING)
		go func() { // owned here: stopped and joined before health turns NOT_SERVING
			defer close(gated)
			for _, g := range s.gates {
				select {
				case <-g:
				case <-gctx.Done():
					return
				}
			}
			s.health.setAll(healthpb.HealthCheckResponse_SERVING)
		}()
	} else {
		close(gated)
	}
	endGates := func() { stopGates(); <-gated }
	defer endGates()
	errc := make(chan error, 1)
	go func() { // owned here: joined below on every path
		if s.cfg.TLS != nil {
			srv.TLSConfig = s.cfg.TLS.Clone()
			errc <- srv.ServeTLS(ln, "", "") // the certificate comes from TLSConfig
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("rpcserver: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.tel.Logger.Info("rpc server draining", "addr", ln.Addr().String())
	endGates()
	s.health.drain()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("rpcserver: serve %s: %w", ln.Addr(), err)
	}
	if shutdownErr != nil {
		_ = srv.Close()
		return fmt.Errorf("rpcserver: shutdown %s: %w", ln.Addr(), shutdownErr)
	}
	return nil
}

// serverErrors carries net/http's own error lines (TLS handshakes that
// failed, a panic in a handler) to the structured log, at most one line
// per serverErrorsEvery with the count of those held back: a scanner or a
// client with the wrong CA must not flood the log.
type serverErrors struct {
	log   *slog.Logger
	every logevery.Limiter
}

// serverErrorsEvery is the least time between two of net/http's lines.
const serverErrorsEvery = 10 * time.Second

func (w *serverErrors) Write(p []byte) (int, error) {
	if ok, held := w.every.Allow(time.Now()); ok {
		w.log.Warn("http server error", "err", strings.TrimSpace(string(p)), "held_back", held)
	}
	return len(p), nil
}
