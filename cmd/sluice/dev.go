package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/services/compactor"
)

// devDefaultAddr is the fixed default address scripts and the client
// commands rely on (DESIGN.md §5).
const devDefaultAddr = "127.0.0.1:7420"

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", devDefaultAddr, "address to serve every public service on (Connect, gRPC, gRPC-web; HTTP/1.1 and h2c)")
	dataDir := fs.String("data-dir", "./sluice-data", "where dev mode keeps its data")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	offloadAge := fs.Duration("offload-age", compactor.DefaultOffloadAge, "the compactor moves a sealed ledger to the object store (DATA-DIR/objects) this long after it was sealed")
	cors := fs.String("cors-origins", "", "comma-separated extra browser origins allowed to call (localhost origins are always allowed in dev)")
	pprofOn := fs.Bool("pprof", false, "serve Go's runtime profiles under /debug/pprof/ on --addr (benchmarks, diagnosis)")
	maxRequest := fs.Int("max-request-bytes", 4<<20, "largest request message accepted, in bytes (at most 64 MiB); a larger one is refused with INVALID_ARGUMENT")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice dev [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs Sluice in one process on loopback with no external dependencies.")
		fmt.Fprintln(stderr, "Ready when grpc.health.v1.Health/Check answers SERVING.")
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
		return fmt.Errorf("unexpected arguments %q; see 'sluice dev -h'", fs.Args())
	}

	tel, err := telemetry.New(telemetry.Config{Service: "dev", Format: *logFormat, Output: stderr})
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()

	var origins []string
	if *cors != "" {
		origins = strings.Split(*cors, ",")
	}
	fmt.Fprintf(stdout, "sluice dev: opening 3 bookies, the catalog, bookkeeping, ingest, fetch and the compactor in %s ...\n", *dataDir)
	c, err := cluster.New(cluster.Config{
		Dir: *dataDir, Addr: *addr, Telemetry: tel,
		Server:    rpcserver.Config{AllowLocalhost: true, CORSOrigins: origins, Pprof: *pprofOn, MaxRequestBytes: *maxRequest},
		Compactor: compactor.Config{OffloadAge: *offloadAge},
	})
	if err != nil {
		if strings.Contains(err.Error(), "address already in use") {
			return fmt.Errorf("%w (is another sluice dev running? pick another with --addr)", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "sluice dev listening on http://%s (data in %s)\n", c.Addr(), *dataDir)
	tel.Logger.Warn("dev mode is partial: topics, produce, consume and the compactor (offload to DATA-DIR/objects, retention) run; function triggers are not implemented yet")
	return c.Run(ctx)
}
