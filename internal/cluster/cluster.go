// Package cluster composes a whole Sluice in one process: bookies on local
// directories, the embedded catalog and bookkeeping, the ledger client,
// ingest, fetch and the admin API, all public services on one rpcserver address. `sluice dev` runs it,
// and end-to-end tests start it on temporary directories (STYLE.md: services
// are libraries; an in-process cluster composes them).
//
// Shutdown order (Run's context ending): the public server drains; fetch
// sessions end and the compactor stops (a pass in progress is cancelled;
// the next start repairs whatever it left); ingest
// hands its partitions over (writers drain and seal their ledgers); the
// ledger client closes; the bookies stop serving and close (a last
// checkpoint each); the catalog closes.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"gocloud.dev/blob"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/authz"
	"github.com/sluicemq/sluice/internal/rpcclient"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	bkembedded "github.com/sluicemq/sluice/pkg/bookkeeping/embedded"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/services/admin"
	"github.com/sluicemq/sluice/services/compactor"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/fetch/trigger"
	"github.com/sluicemq/sluice/services/ingest"
	"github.com/sluicemq/sluice/services/registry"
)

// Config configures an in-process cluster.
type Config struct {
	// Dir holds everything: catalog/, bookie-N/, objects/ (required).
	Dir string
	// Addr is the public address (default 127.0.0.1:7420; ":0" picks one).
	Addr string
	// Bookies is the number of bookies (default 3; at least the topics'
	// ensemble size).
	Bookies int
	// Server shapes the public RPC server (CORS, limits).
	Server rpcserver.Config
	// Ingest tunes the ingest service (OwnerID and Address are set here).
	Ingest ingest.Config
	// Fetch tunes the fetch service.
	Fetch fetch.Config
	// Compactor tunes the compactor (its defaults are conservative:
	// ledgers are offloaded minutes after they are sealed).
	Compactor compactor.Config
	// Objects is the object store URL of offloaded segments (pkg/objstore);
	// default file://<Dir>/objects.
	Objects string
	// ExtraIngest adds more ingest copies (ingest-2, ...), each serving
	// ProducerService and AdminService on its own loopback address: for
	// tests of forwarding, takeover and hand-over.
	ExtraIngest int
	// Lambda invokes the functions of triggers; nil runs no triggers.
	Lambda *trigger.Invoker
	// Telemetry is the observability set; nil discards.
	Telemetry *telemetry.Telemetry
	// Authorization, when set, makes the catalog's ACLs decide every call
	// (internal/authz) with these super-users.
	Authorization *Authorization
	// IngestCatalog, if set, wraps the catalog the ingest copies see: a
	// test seam (a slow catalog, injected errors).
	IngestCatalog func(ingest.Catalog) ingest.Catalog
}

// Authorization configures the ACL authorizer of a cluster.
type Authorization struct {
	SuperUsers []string
}

// Cluster is a running in-process Sluice.
type Cluster struct {
	cfg     Config
	tel     *telemetry.Telemetry
	log     *slog.Logger
	Catalog *catalog.Catalog
	Bookies []*bookie.Bookie
	Ledgers *client.Client
	Ingest  *ingest.Service
	Fetch   *fetch.Service
	Admin   *admin.Service
	// Objects holds the compactor's segments; fetch reads them.
	Objects   *blob.Bucket
	Compactor *compactor.Compactor
	// Authz decides calls when Config.Authorization is set.
	Authz *authz.Authorizer
	Extra []*Copy
	// Bookkeeping holds groups, leases and offsets (embedded, Pebble).
	Bookkeeping *bookkeeping.Store

	bookieSrv []*http.Server
	bookieLn  []net.Listener
	public    *rpcserver.Server
	publicLn  net.Listener
}

// New opens every part (replaying bookie journals, checking cookies) and
// binds the listeners; Run serves.
func New(cfg Config) (_ *Cluster, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("cluster: Dir is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:7420"
	}
	if cfg.Bookies == 0 {
		cfg.Bookies = 3
	}
	tel := cfg.Telemetry
	if tel == nil {
		tel = telemetry.Discard()
	}
	c := &Cluster{cfg: cfg, tel: tel, log: tel.Logger}
	pic, err := tel.ClientInterceptor()
	if err != nil {
		return nil, err
	}
	peers := sharedPeers.WithInterceptors(pic)
	defer func() {
		if err != nil {
			err = errors.Join(err, c.closeAll())
		}
	}()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if c.Catalog, err = embedded.Open(filepath.Join(cfg.Dir, "catalog"), embedded.Options{Logger: c.log}); err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	for i := range cfg.Bookies {
		id := fmt.Sprintf("bookie-%d", i+1)
		b, err := bookie.Open(bookie.Config{
			ID: id, InstanceID: "sluice-dev", Dir: filepath.Join(cfg.Dir, id),
			Logger:         c.log.With(slog.String("bookie", id)),
			TracerProvider: tel.TracerProvider, // a span per traced add's journal commit
			// Each bookie's series carry otel_scope_bookie="bookie-N".
			MeterProvider: telemetry.Scoped(tel.MeterProvider, attribute.String("bookie", id)),
		})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", id, err)
		}
		c.Bookies = append(c.Bookies, b)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		c.bookieLn = append(c.bookieLn, ln)
		mux := http.NewServeMux()
		mux.Handle(b.Handler())
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		c.bookieSrv = append(c.bookieSrv, &http.Server{Handler: mux, Protocols: &p, ReadHeaderTimeout: 10 * time.Second})
		// Register at once so writers can pick the bookie before Run's
		// first heartbeat.
		if _, err := c.Catalog.HeartbeatBookie(context.Background(), catalog.Bookie{ID: id, Address: ln.Addr().String()}, bookie.DefaultHeartbeatTTL); err != nil {
			return nil, err
		}
	}
	if c.Ledgers, err = client.New(client.Config{Ledgers: c.Catalog, Bookies: c.Catalog, Logger: c.log, TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider}); err != nil {
		return nil, err
	}
	if c.Bookkeeping, err = bkembedded.Open(filepath.Join(cfg.Dir, "bookkeeping"), bkembedded.WithLogger(c.log)); err != nil {
		return nil, fmt.Errorf("open bookkeeping: %w", err)
	}

	objURL := cfg.Objects
	if objURL == "" {
		if objURL, err = objstore.FileURL(filepath.Join(cfg.Dir, "objects")); err != nil {
			return nil, err
		}
	}
	if c.Objects, err = objstore.Open(context.Background(), objURL); err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	ccfg := cfg.Compactor
	if ccfg.Logger == nil {
		ccfg.Logger = c.log.With(slog.String("service", "compactor"))
	}
	if c.Compactor, err = compactor.New(ccfg, compactor.Deps{Catalog: c.Catalog, Ledgers: c.Ledgers, Objects: c.Objects, Meters: tel.MeterProvider}); err != nil {
		return nil, err
	}

	if cfg.Authorization != nil {
		if c.Authz, err = authz.New(context.Background(), authz.Config{ACLs: c.Catalog, SuperUsers: cfg.Authorization.SuperUsers, Logger: c.log}); err != nil {
			return nil, err
		}
		cfg.Server.Interceptors = append(slices.Clone(cfg.Server.Interceptors), c.Authz.Interceptor())
	}
	if c.public, err = rpcserver.New(cfg.Server, tel); err != nil {
		return nil, err
	}
	if c.publicLn, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	fcfg := cfg.Fetch
	if fcfg.Logger == nil {
		fcfg.Logger = c.log
	}
	if fcfg.Address == "" {
		fcfg.Address = c.publicLn.Addr().String()
	}
	var icat ingest.Catalog = c.Catalog
	if cfg.IngestCatalog != nil {
		icat = cfg.IngestCatalog(icat)
	}
	icfg := cfg.Ingest
	icfg.OwnerID, icfg.Address = "ingest-1", c.publicLn.Addr().String()
	if icfg.Logger == nil {
		icfg.Logger = c.log
	}
	if c.Ingest, err = ingest.New(icfg, ingest.Deps{Catalog: icat, Ledgers: ingest.LedgerClient(c.Ledgers), Forward: ingest.Forwarder(peers), Partitions: ingest.PartitionClients(peers), Producers: c.Bookkeeping, Schemas: c.Catalog, Authorize: c.authorizeProduce(),
		Meters: tel.MeterProvider, Tracer: tel.TracerProvider}); err != nil {
		return nil, err
	}
	// The fetch service's triggers send failed records to their DLQ
	// through this process's ingest service, in process.
	fdeps := fetch.Deps{Catalog: c.Catalog, Ledgers: c.Ledgers, Bookkeeping: c.Bookkeeping, Forward: fetch.Forwarder(peers), Objects: c.Objects,
		Producer: c.Ingest, Meters: tel.MeterProvider, Tracer: tel.TracerProvider}
	if cfg.Lambda != nil {
		fdeps.Lambda, fdeps.Triggers = cfg.Lambda, c.Catalog
	}
	if c.Authz != nil {
		fdeps.AuthorizeTrigger = c.Authz.AuthorizeTrigger
	}
	if c.Fetch, err = fetch.New(fcfg, fdeps); err != nil {
		return nil, err
	}
	if c.Admin, err = admin.New(admin.Deps{Catalog: c.Catalog, EndOffset: c.Ingest.EndOffset, StableOffset: c.Ingest.StableOffset, Groups: c.Fetch.GroupAdmin(), Ledgers: c.Ledgers, Bookies: c.Ledgers,
		TopicDeleted: func(t catalog.Topic) { c.Ingest.TopicDeleted(t); c.Fetch.TopicDeleted(t) }, TriggerStatus: c.Fetch.TriggerStatus,
		Owners: ingest.PartitionClients(peers), ACLs: c.Catalog, ACLsChanged: c.aclsChanged}); err != nil {
		return nil, err
	}
	c.public.Handle(c.Ingest.Handler(c.public.HandlerOptions()...))
	c.public.Handle(c.Ingest.PeerHandler(c.public.HandlerOptions()...))
	c.public.Handle(c.Fetch.Handler(c.public.HandlerOptions()...))
	c.public.Handle(c.Admin.Handler(c.public.HandlerOptions()...))
	reg, err := registry.New(c.Catalog)
	if err != nil {
		return nil, err
	}
	c.public.Handle(reg.Handler(c.public.HandlerOptions()...))
	var rest http.Handler = reg.REST()
	if c.Authz != nil {
		rest = c.Authz.REST(rest)
	}
	c.public.Mount(registry.RESTPrefix, rest)
	// Health stays NOT_SERVING until ingest took back the partitions this
	// data directory's previous run wrote: until then their last
	// acknowledged records may not be readable (ingest.Service.Ready).
	c.public.Gate(c.Ingest.Ready())
	for i := range cfg.ExtraIngest {
		e := &Copy{}
		if e.srv, err = rpcserver.New(cfg.Server, tel); err != nil {
			return nil, err
		}
		if e.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
		c.Extra = append(c.Extra, e)
		ec := cfg.Ingest
		ec.OwnerID, ec.Address = fmt.Sprintf("ingest-%d", i+2), e.ln.Addr().String()
		if ec.Logger == nil {
			ec.Logger = c.log.With(slog.String("copy", ec.OwnerID))
		}
		if e.Ingest, err = ingest.New(ec, ingest.Deps{Catalog: icat, Ledgers: ingest.LedgerClient(c.Ledgers), Forward: ingest.Forwarder(peers), Partitions: ingest.PartitionClients(peers), Producers: c.Bookkeeping, Schemas: c.Catalog, Authorize: c.authorizeProduce(), Tracer: tel.TracerProvider}); err != nil {
			return nil, err
		}
		ad, err := admin.New(admin.Deps{Catalog: c.Catalog, EndOffset: e.Ingest.EndOffset, StableOffset: e.Ingest.StableOffset, Groups: c.Fetch.GroupAdmin(), Ledgers: c.Ledgers, Bookies: c.Ledgers, TopicDeleted: e.Ingest.TopicDeleted,
			Owners: ingest.PartitionClients(peers)})
		if err != nil {
			return nil, err
		}
		e.srv.Handle(e.Ingest.Handler(e.srv.HandlerOptions()...))
		e.srv.Handle(e.Ingest.PeerHandler(e.srv.HandlerOptions()...))
		e.srv.Handle(ad.Handler(e.srv.HandlerOptions()...))
	}
	return c, nil
}

// Copy is an extra ingest copy.
type Copy struct {
	Ingest *ingest.Service
	srv    *rpcserver.Server
	ln     net.Listener
	stop   context.CancelFunc
	done   chan error
}

// Addr is the copy's address.
func (e *Copy) Addr() string { return e.ln.Addr().String() }

// Stop shuts the copy down gracefully (hand-over) and waits for it.
func (e *Copy) Stop() error {
	if e.stop == nil {
		return nil
	}
	e.stop()
	e.stop = nil
	return <-e.done
}

// authorizeProduce is ingest's per-request check (nil without
// authorization).
func (c *Cluster) authorizeProduce() func(context.Context, *sluicev1.ProduceStreamRequest) error {
	if c.Authz == nil {
		return nil
	}
	return func(ctx context.Context, req *sluicev1.ProduceStreamRequest) error {
		return c.Authz.CheckMessage(ctx, sluicev1connect.ProducerServiceProduceStreamProcedure, req)
	}
}

// aclsChanged has the authorizer read the ACLs again (a change made here
// holds at once).
func (c *Cluster) aclsChanged(ctx context.Context) {
	if c.Authz != nil {
		_ = c.Authz.Reload(ctx)
	}
}

// Addr is the public address.
func (c *Cluster) Addr() string { return c.publicLn.Addr().String() }

// Run serves until ctx ends, then shuts down in order (see the package doc).
func (c *Cluster) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, 3+3*len(c.Bookies))
	bctx, stopBookies := context.WithCancel(context.Background())
	for i, b := range c.Bookies {
		srv, ln := c.bookieSrv[i], c.bookieLn[i]
		wg.Add(3)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
		go func() { defer wg.Done(); errs <- b.Run(bctx) }()
		go func() {
			defer wg.Done()
			errs <- b.Heartbeat(bctx, c.Catalog, ln.Addr().String(), bookie.DefaultHeartbeatInterval, bookie.DefaultHeartbeatTTL)
		}()
	}
	ictx, stopIngest := context.WithCancel(context.Background())
	ingestDone := make(chan error, 1)
	go func() { ingestDone <- c.Ingest.Run(ictx) }()
	fctx, stopFetch := context.WithCancel(context.Background())
	fetchDone := make(chan error, 1)
	go func() { fetchDone <- c.Fetch.Run(fctx) }()
	cctx, stopCompactor := context.WithCancel(context.Background())
	compactorDone := make(chan error, 1)
	go func() { compactorDone <- c.Compactor.Run(cctx) }()
	for _, e := range c.Extra {
		ectx, cancel := context.WithCancel(context.Background())
		e.stop, e.done = cancel, make(chan error, 1)
		go func() {
			sctx, stopServe := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- e.srv.Serve(sctx, e.ln) }()
			err := e.Ingest.Run(ectx) // hands over first, then the server drains
			stopServe()
			e.done <- errors.Join(err, <-served)
		}()
	}

	// Sessions end first so the server's drain does not wait for streams.
	context.AfterFunc(ctx, stopFetch)
	serveErr := c.public.Serve(ctx, c.publicLn)
	stopFetch()
	stopCompactor()
	var all []error
	all = append(all, <-fetchDone, <-compactorDone)
	for _, e := range c.Extra {
		all = append(all, e.Stop())
	}
	stopIngest()
	all = append(all, serveErr, <-ingestDone)
	all = append(all, c.Ledgers.Close())
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, srv := range c.bookieSrv {
		all = append(all, srv.Shutdown(sctx))
	}
	stopBookies()
	wg.Wait()
	close(errs)
	for err := range errs {
		all = append(all, err)
	}
	for _, b := range c.Bookies {
		all = append(all, b.Close())
	}
	all = append(all, c.Bookkeeping.Close(), c.Objects.Close(), c.Catalog.Close())
	return errors.Join(all...)
}

// closeAll releases what New opened when New fails.
func (c *Cluster) closeAll() error {
	var errs []error
	if c.Ledgers != nil {
		errs = append(errs, c.Ledgers.Close())
	}
	if c.Bookkeeping != nil {
		errs = append(errs, c.Bookkeeping.Close())
	}
	if c.Objects != nil {
		errs = append(errs, c.Objects.Close())
	}
	for _, ln := range c.bookieLn {
		_ = ln.Close()
	}
	if c.publicLn != nil {
		_ = c.publicLn.Close()
	}
	for _, e := range c.Extra {
		if e.ln != nil {
			_ = e.ln.Close()
		}
	}
	for _, b := range c.Bookies {
		errs = append(errs, b.Close())
	}
	if c.Catalog != nil {
		errs = append(errs, c.Catalog.Close())
	}
	return errors.Join(errs...)
}

// sharedPeers carries the calls between the cluster's own parts
// (forwarding between ingest copies, trigger produces): cleartext HTTP/2 on
// loopback (Config.Server.TLS covers the public listener only). One HTTP
// client for every cluster of the process; each adds its tracing.
var sharedPeers = rpcclient.New(nil)
