package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	bkcassandra "github.com/sluicemq/sluice/pkg/bookkeeping/cassandra"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/services/admin"
	"github.com/sluicemq/sluice/services/fetch"
)

func runFetch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice fetch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7422", "address to serve ConsumerService and AdminService on (Connect, gRPC, gRPC-web; h2c)")
	advertise := fs.String("advertise", "", "address other fetch copies forward a session's calls to (default --addr)")
	table := fs.String("catalog-table", "", "DynamoDB catalog table (endpoint and credentials from the AWS environment) (required)")
	cassandra := fs.String("cassandra", "", "comma-separated Cassandra contact points host[:port] for groups, leases and offsets (required)")
	keyspace := fs.String("keyspace", "sluice", "Cassandra keyspace (created and migrated at start-up)")
	rf := fs.Int("replication-factor", 3, "replication factor of the keyspace when this copy creates it (per data center; 1 for a single-node Cassandra)")
	objects := fs.String("objects", "", "object store the compactor offloads to (s3://BUCKET?region=R[&endpoint=URL&use_path_style=true] or file:///DIR); empty: offloaded ledgers cannot be read")
	cacheMiB := fs.Int64("cache-mib", 64, "entry cache size in MiB (shared read-ahead of tails and recent reads)")
	balance := fs.Duration("balance-interval", fetch.DefaultBalanceInterval, "how often each group session evens out its partition leases")
	cors := fs.String("cors-origins", "", "comma-separated browser origins allowed to call")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	pprofOn := fs.Bool("pprof", false, "serve Go's runtime profiles under /debug/pprof/ (benchmarks, diagnosis)")
	maxRequest := fs.Int("max-request-bytes", 4<<20, "largest request message accepted, in bytes (at most 64 MiB); a larger one is refused with INVALID_ARGUMENT")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice fetch --catalog-table TABLE --cassandra HOSTS [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs one fetch copy: the consume path (Fetch, group sessions with Subscribe, commits)")
		fmt.Fprintln(stderr, "and the group half of the admin API. Copies are stateless apart from their sessions; a")
		fmt.Fprintln(stderr, "session's GrantCredits and Commit calls that reach another copy are forwarded to the copy")
		fmt.Fprintln(stderr, "serving its Subscribe stream (its --advertise address).")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q; see 'sluice fetch -h'", fs.Args())
	}
	if *table == "" || *cassandra == "" {
		return errors.New("--catalog-table and --cassandra are required; see 'sluice fetch -h'")
	}
	tel, err := telemetry.New(telemetry.Config{Service: "fetch", Format: *logFormat, Output: stderr})
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	cat, err := dynamoCatalog(ctx, *table)
	if err != nil {
		return err
	}
	bk, err := bkcassandra.Open(ctx, bkcassandra.Config{Hosts: strings.Split(*cassandra, ","), Keyspace: *keyspace,
		Replication: bkcassandra.Replication{Factor: *rf}, Logger: tel.Logger})
	if err != nil {
		return fmt.Errorf("open Cassandra bookkeeping at %s: %w (is Cassandra up? localstack/stack.sh up cassandra)", *cassandra, err)
	}
	defer bk.Close()
	ledgers, err := client.New(client.Config{Ledgers: cat, Bookies: cat, Logger: tel.Logger})
	if err != nil {
		return err
	}
	defer ledgers.Close()
	deps := fetch.Deps{Catalog: cat, Ledgers: ledgers, Bookkeeping: bk, Forward: fetch.Forwarder(clientHTTP)}
	if *objects != "" {
		if deps.Objects, err = objstore.Open(ctx, *objects); err != nil {
			return err
		}
		defer deps.Objects.Close()
	}
	if *advertise == "" {
		*advertise = *addr
	}
	fcfg := fetch.Config{Address: *advertise, BalanceInterval: *balance, Logger: tel.Logger}
	fcfg.Log.CacheBytes = *cacheMiB << 20
	svc, err := fetch.New(fcfg, deps)
	if err != nil {
		return err
	}
	ad, err := admin.New(admin.Deps{Catalog: cat, Groups: svc.GroupAdmin()})
	if err != nil {
		return err
	}
	var origins []string
	if *cors != "" {
		origins = strings.Split(*cors, ",")
	}
	srv, err := rpcserver.New(rpcserver.Config{CORSOrigins: origins, Pprof: *pprofOn, MaxRequestBytes: *maxRequest}, tel)
	if err != nil {
		return err
	}
	srv.Handle(svc.Handler(srv.HandlerOptions()...))
	srv.Handle(ad.Handler(srv.HandlerOptions()...))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another with --addr)", *addr, err)
	}
	fmt.Fprintf(stdout, "sluice fetch listening on http://%s (catalog table %s, Cassandra %s)\n", ln.Addr(), *table, *cassandra)

	// Shutdown: sessions end first (members leave, their leases free at
	// once), then the server drains.
	fctx, stopFetch := context.WithCancel(context.Background())
	fetchDone := make(chan error, 1)
	go func() { fetchDone <- svc.Run(fctx) }()
	sctx, stopServe := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	served := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); served <- srv.Serve(sctx, ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	stopFetch()
	err = <-fetchDone
	stopServe()
	wg.Wait()
	if serveErr == nil {
		select {
		case serveErr = <-served:
		default:
		}
	}
	return errors.Join(err, serveErr)
}
