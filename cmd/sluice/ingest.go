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
	"github.com/sluicemq/sluice/services/admin"
	"github.com/sluicemq/sluice/services/ingest"
)

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7421", "address to serve ProducerService and AdminService on (Connect, gRPC, gRPC-web; h2c)")
	advertise := fs.String("advertise", "", "address other ingest copies forward to (default --addr)")
	id := fs.String("id", "", "this copy's owner id in the catalog (default the advertised address)")
	table := fs.String("catalog-table", "", "DynamoDB catalog table (endpoint and credentials from the AWS environment) (required)")
	createTable := fs.Bool("create-table", false, "create the catalog table if it does not exist (development and benchmarks; deployments provision it with Terraform)")
	ownerTTL := fs.Duration("owner-ttl", ingest.DefaultOwnerTTL, "how long this copy's partitions stay its own after its last heartbeat")
	heartbeat := fs.Duration("heartbeat", ingest.DefaultHeartbeatInterval, "owner heartbeat interval (at most half of --owner-ttl)")
	balanceEvery := fs.Duration("balance-interval", ingest.DefaultBalanceInterval, "how often to even out partitions with the other copies (negative: never)")
	cors := fs.String("cors-origins", "", "comma-separated browser origins allowed to call")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	pprofOn := fs.Bool("pprof", false, "serve Go's runtime profiles under /debug/pprof/ (benchmarks, diagnosis)")
	maxRequest := fs.Int("max-request-bytes", 4<<20, "largest request message accepted, in bytes (at most 64 MiB); a larger one is refused with INVALID_ARGUMENT")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice ingest --catalog-table TABLE [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs one ingest copy: the produce path. Copies share partitions through writer leases in")
		fmt.Fprintln(stderr, "the catalog; any copy accepts any produce and forwards it to the partition's owner.")
		fmt.Fprintln(stderr, "Bookies must register in the same catalog (sluice bookie --catalog-table).")
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
		return fmt.Errorf("unexpected arguments %q; see 'sluice ingest -h'", fs.Args())
	}
	if *table == "" {
		return errors.New("--catalog-table is required; see 'sluice ingest -h'")
	}
	if *advertise == "" {
		*advertise = *addr
	}
	if *id == "" {
		*id = strings.NewReplacer(":", "-", ".", "-").Replace(*advertise)
	}
	tel, err := telemetry.New(telemetry.Config{Service: "ingest", Format: *logFormat, Output: stderr})
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()

	cat, err := dynamoCatalog(ctx, *table)
	if err != nil {
		return err
	}
	if *createTable {
		if err := cat.EnsureTable(ctx); err != nil {
			return fmt.Errorf("create catalog table %s: %w", *table, err)
		}
	}
	ledgers, err := client.New(client.Config{Ledgers: cat, Bookies: cat, Logger: tel.Logger})
	if err != nil {
		return err
	}
	defer ledgers.Close()
	svc, err := ingest.New(ingest.Config{
		OwnerID: *id, Address: *advertise, OwnerTTL: *ownerTTL, HeartbeatInterval: *heartbeat,
		BalanceInterval: *balanceEvery, Logger: tel.Logger,
	}, ingest.Deps{Catalog: cat, Ledgers: ingest.LedgerClient(ledgers), Forward: ingest.Forwarder(clientHTTP)})
	if err != nil {
		return err
	}
	ad, err := admin.New(admin.Deps{Catalog: cat, EndOffset: svc.EndOffset})
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
	fmt.Fprintf(stdout, "sluice ingest %s listening on http://%s (catalog table %s)\n", *id, ln.Addr(), *table)

	// Shutdown: stop taking requests... the ingest service hands its
	// partitions over first (so other copies take them at once), then the
	// server drains.
	ictx, stopIngest := context.WithCancel(context.Background())
	ingestDone := make(chan error, 1)
	go func() { ingestDone <- svc.Run(ictx) }()
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
	stopIngest()
	err = <-ingestDone
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
