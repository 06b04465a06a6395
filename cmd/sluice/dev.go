package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/services/compactor"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/ingest"
)

// devDefaultAddr is the fixed default address scripts and the client
// commands rely on (DESIGN.md §5).
const devDefaultAddr = "127.0.0.1:7420"

// devFlags are `sluice dev`'s flags.
type devFlags struct {
	serverFlags
	dataDir    string
	offloadAge time.Duration
	triggers   runtimeFlags
	quota      quotaFlags
}

func newDevCmd() *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run Sluice in one process with no dependencies",
		Long: `Runs a whole Sluice in one process with no external dependencies: 3 bookies, the
embedded catalog and bookkeeping, ingest, fetch and the compactor. Every public service
(topics, produce, consume and consumer groups) is served on --addr: Connect, gRPC and
gRPC-web over HTTP/1.1 and h2c, with health, reflection and /metrics. Data lives in
--data-dir and survives restarts (kill -9 included); sealed ledgers move to
DATA-DIR/objects after --offload-age.

Triggers (sluice trigger create) run in its fetch service and invoke their functions
through the Lambda Invoke API: AWS Lambda, or with --lambda-endpoint an emulator
(localstack/lambda.sh runs aws-lambda-go handlers under AWS's Runtime Interface Emulator).
Records a trigger sends to its on_failure_topic go through its own ingest service.
Ready when grpc.health.v1.Health/Check answers SERVING.`,
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return f.check() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.register(cmd, devDefaultAddr, "address to serve every public service on (Connect, gRPC, gRPC-web; HTTP/1.1 and h2c)",
		"comma-separated extra browser origins allowed to call (localhost origins are always allowed in dev)")
	fs.StringVar(&f.dataDir, "data-dir", "./sluice-data", "where dev mode keeps its data")
	fs.DurationVar(&f.offloadAge, "offload-age", compactor.DefaultOffloadAge, "the compactor moves a sealed ledger to the object store (DATA-DIR/objects) this long after it was sealed (0: at once)")
	addRuntimeFlags(cmd, &f.triggers)
	f.quota.register(cmd, "produced and of fetched bytes (each)")
	return cmd
}

func (f *devFlags) check() error {
	var c flagCheck
	f.serverFlags.check(&c, false)
	c.required("data-dir", f.dataDir)
	f.offloadAge = noneIfZero(f.offloadAge)
	if err := (compactor.Config{OffloadAge: f.offloadAge}).Validate(); err != nil {
		c.badf("--offload-age %v: %v", f.offloadAge, err)
	}
	f.triggers.check(&c)
	f.quota.check(&c)
	return c.err()
}

func runDev(ctx context.Context, f devFlags, stdout, stderr io.Writer) error {
	tel, err := telemetry.New(telemetry.Config{Service: "dev", Format: f.logFormat, Output: stderr, TracesFromEnv: true})
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)

	lambda, err := f.triggers.invoker(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sluice dev: opening 3 bookies, the catalog, bookkeeping, ingest, fetch and the compactor in %s ...\n", f.dataDir)
	server, err := f.rpcConfig(ctx, tel.Logger)
	if err != nil {
		return err
	}
	server.AllowLocalhost = true
	c, err := cluster.New(cluster.Config{
		Dir: f.dataDir, Addr: f.addr, Telemetry: tel,
		Server:    server,
		Compactor: compactor.Config{OffloadAge: f.offloadAge},
		Ingest:    ingest.Config{Quota: f.quota.cfg},
		Fetch:     fetch.Config{TriggerRefresh: f.triggers.refresh, TriggerSessionTimeout: f.triggers.sessionTimeout, ClientQuota: f.quota.cfg},
		Lambda:    lambda,
		Authorization: func() *cluster.Authorization {
			if f.auth.authorization != "acl" {
				return nil
			}
			return &cluster.Authorization{SuperUsers: f.auth.supers}
		}(),
	})
	if err != nil {
		if strings.Contains(err.Error(), "address already in use") {
			return fmt.Errorf("%w (is another sluice dev running? pick another with --addr)", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "sluice dev listening on %s://%s (data in %s; %s)\n", f.scheme(), c.Addr(), f.dataDir, f.triggers.where())
	return c.Run(ctx)
}
