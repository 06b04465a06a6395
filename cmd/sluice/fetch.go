package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/services/admin"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/ingest"
)

// fetchFlags are `sluice fetch`'s flags.
type fetchFlags struct {
	serverFlags
	advertise string
	table     string
	cassandraFlags
	objects  string
	cacheMiB int64
	balance  time.Duration
	ingest   string
	triggers runtimeFlags
	quota    quotaFlags
}

// maxFetchCacheMiB is partlog.Config's bound on the entry cache.
const maxFetchCacheMiB = 64 << 10

func newFetchCmd() *cobra.Command {
	var f fetchFlags
	cmd := &cobra.Command{
		Use:   "fetch --catalog-table TABLE --cassandra HOSTS",
		Short: "run a fetch copy (the consume path) against a DynamoDB catalog and Cassandra",
		Long: `Runs one fetch copy: the consume path (Fetch, group sessions with Subscribe, commits)
and the group half of the admin API. Copies are stateless apart from their sessions; a
session's GrantCredits and Commit calls that reach another copy are forwarded to the copy
serving its Subscribe stream (its --advertise address). Groups, leases and committed
offsets live in Cassandra; with --objects it also reads ledgers the compactor offloaded.

Every fetch copy also runs the catalog's enabled triggers (sluice trigger create): each
trigger is a consumer group of its own whose partitions spread over the copies; its
function is invoked through the Lambda Invoke API (AWS Lambda, or --lambda-endpoint).
Records a trigger sends to its on_failure_topic are produced through --ingest-address.`,
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return f.check() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFetch(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.serverFlags.register(cmd, "127.0.0.1:7422", "address to serve ConsumerService and AdminService on (Connect, gRPC, gRPC-web; h2c, or HTTPS with --tls-cert)", "comma-separated browser origins allowed to call")
	fs.StringVar(&f.advertise, "advertise", "", "address other fetch copies forward a session's calls to (default --addr)")
	fs.StringVar(&f.table, "catalog-table", "", "DynamoDB catalog table (endpoint and credentials from the AWS environment) (required)")
	f.cassandraFlags.register(cmd, "for groups, leases and offsets (required)")
	fs.StringVar(&f.objects, "objects", "", "object store the compactor offloads to (s3://BUCKET?region=R[&endpoint=URL&use_path_style=true] or file:///DIR); empty: offloaded ledgers cannot be read")
	fs.Int64Var(&f.cacheMiB, "cache-mib", 64, "entry cache size in MiB (shared read-ahead of tails and recent reads)")
	fs.DurationVar(&f.balance, "balance-interval", fetch.DefaultBalanceInterval, "how often each group session evens out its partition leases")
	fs.StringVar(&f.ingest, "ingest-address", "", "an ingest copy (host:port) to produce triggers' failed records to their on_failure_topic through; empty: a trigger with an on_failure_topic stops on a failure instead, and says why")
	addRuntimeFlags(cmd, &f.triggers)
	f.quota.register(cmd, "fetched bytes (Fetch)")
	return cmd
}

// check checks the flags and fills in --advertise's default.
func (f *fetchFlags) check() error {
	var c flagCheck
	f.serverFlags.check(&c, true)
	c.advertiseAddr("advertise", f.advertise)
	if f.advertise == "" {
		f.advertise = f.addr
	}
	c.required("catalog-table", f.table)
	f.quota.check(&c)
	f.cassandraFlags.check(&c, true)
	c.objectsURL("objects", f.objects)
	if f.cacheMiB < 1 || f.cacheMiB > maxFetchCacheMiB {
		c.badf("--cache-mib %d: want 1..%d", f.cacheMiB, maxFetchCacheMiB)
	}
	if f.balance <= 0 {
		c.badf("--balance-interval %v: want a positive duration", f.balance)
	} else if err := (fetch.Config{BalanceInterval: f.balance}).Validate(); err != nil {
		c.badf("--balance-interval %v: %v", f.balance, err)
	}
	if f.ingest != "" {
		c.advertiseAddr("ingest-address", f.ingest)
	}
	f.triggers.check(&c)
	if err := c.err(); err != nil {
		return err
	}
	if err := f.config().Validate(); err != nil {
		return usageError{err: fmt.Errorf("the flags make an invalid fetch config: %w", err)}
	}
	return nil
}

// config is the fetch service's config from the flags (Logger is set when
// it starts).
func (f *fetchFlags) config() fetch.Config {
	cfg := fetch.Config{Address: f.advertise, BalanceInterval: f.balance, TriggerRefresh: f.triggers.refresh, TriggerSessionTimeout: f.triggers.sessionTimeout, Now: wallNow,
		ClientQuota: f.quota.cfg}
	cfg.Log.CacheBytes = f.cacheMiB << 20
	return cfg
}

func runFetch(ctx context.Context, f fetchFlags, stdout, stderr io.Writer) error {
	tel, err := telemetry.New(telemetry.Config{Service: "fetch", Format: f.logFormat, Output: stderr, TracesFromEnv: true})
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)
	cat, err := dynamoCatalog(ctx, f.table, false)
	if err != nil {
		return err
	}
	bk, err := f.cassandraFlags.open(ctx, tel.Logger, tel.MeterProvider)
	if err != nil {
		return err
	}
	defer bk.Close()
	peerTLS, err := f.tls.client(tel.Logger)
	if err != nil {
		return err
	}
	peers, err := tracedPeers(tel, peerTLS)
	if err != nil {
		return err
	}
	defer peers.Close()
	ledgers, err := client.New(client.Config{Ledgers: cat, Bookies: cat, Logger: tel.Logger, TLS: peerTLS, MeterProvider: tel.MeterProvider, TracerProvider: tel.TracerProvider})
	if err != nil {
		return err
	}
	defer ledgers.Close()
	deps := fetch.Deps{Catalog: cat, Ledgers: ledgers, Bookkeeping: bk, Forward: fetch.Forwarder(peers), Meters: tel.MeterProvider, Tracer: tel.TracerProvider}
	if f.objects != "" {
		if deps.Objects, err = objstore.Open(ctx, f.objects); err != nil {
			return err
		}
		defer deps.Objects.Close()
	}
	if deps.Lambda, err = f.triggers.invoker(ctx); err != nil {
		return err
	}
	if deps.Lambda != nil {
		deps.Triggers = cat
	}
	if f.ingest != "" {
		deps.Producer = sluicev1connect.NewProducerServiceClient(peers.HTTP, peers.URL(f.ingest), peers.Options(connect.WithGRPC())...)
	}
	az, err := f.auth.authorizer(ctx, cat, tel.Logger)
	if err != nil {
		return err
	}
	if az != nil {
		deps.AuthorizeTrigger = az.AuthorizeTrigger
	}
	fcfg := f.config()
	fcfg.Logger = tel.Logger
	svc, err := fetch.New(fcfg, deps)
	if err != nil {
		return err
	}
	rc, err := f.rpcConfig(ctx, tel.Logger)
	if err != nil {
		return err
	}
	adDeps := admin.Deps{Catalog: cat, Groups: svc.GroupAdmin(), Ledgers: ledgers, Bookies: ledgers, TopicDeleted: svc.TopicDeleted, TriggerStatus: svc.TriggerStatus,
		Owners: ingest.PartitionClients(peers), ACLs: cat}
	secure(az, &rc, &adDeps)
	ad, err := admin.New(adDeps)
	if err != nil {
		return err
	}
	srv, err := rpcserver.New(rc, tel)
	if err != nil {
		return err
	}
	srv.Handle(svc.Handler(srv.HandlerOptions()...))
	srv.Handle(ad.Handler(srv.HandlerOptions()...))
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another with --addr)", f.addr, err)
	}
	fmt.Fprintf(stdout, "sluice fetch listening on %s://%s (catalog table %s, Cassandra %s; %s)\n", f.scheme(), ln.Addr(), f.table, f.cassandra, f.triggers.where())

	// Shutdown: sessions and trigger runners end first (members leave,
	// their leases free at once), then the server drains.
	return serveThenStop(ctx, srv, ln, svc.Run)
}
