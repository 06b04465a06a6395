package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/services/admin"
	"github.com/sluicemq/sluice/services/ingest"
	"github.com/sluicemq/sluice/services/registry"
)

// ingestFlags are `sluice ingest`'s flags.
type ingestFlags struct {
	serverFlags
	cassandraFlags
	advertise, id       string
	table               string
	createTable         bool
	ownerTTL, heartbeat time.Duration
	balance             time.Duration
	quota               quotaFlags
}

func newIngestCmd() *cobra.Command {
	var f ingestFlags
	cmd := &cobra.Command{
		Use:   "ingest --catalog-table TABLE",
		Short: "run an ingest copy (the produce path) against a DynamoDB catalog",
		Long: `Runs one ingest copy: the produce path (ProducerService) and the topic half of the admin
API. Copies share partitions through writer leases in the catalog; any copy accepts any
produce and forwards it to the partition's owner. Bookies must register in the same
catalog (sluice bookie --catalog-table).`,
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return f.check() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runIngest(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.serverFlags.register(cmd, "127.0.0.1:7421", "address to serve ProducerService and AdminService on (Connect, gRPC, gRPC-web; h2c, or HTTPS with --tls-cert)", "comma-separated browser origins allowed to call")
	fs.StringVar(&f.advertise, "advertise", "", "address other ingest copies forward to (default --addr)")
	fs.StringVar(&f.id, "id", "", "this copy's owner id in the catalog (default the advertised address, with - for : and .)")
	fs.StringVar(&f.table, "catalog-table", "", "DynamoDB catalog table (endpoint and credentials from the AWS environment) (required)")
	fs.BoolVar(&f.createTable, "create-table", false, "create the catalog table if it does not exist (development and benchmarks; deployments provision it with Terraform)")
	fs.DurationVar(&f.ownerTTL, "owner-ttl", ingest.DefaultOwnerTTL, "how long this copy's partitions stay its own after its last heartbeat")
	fs.DurationVar(&f.heartbeat, "heartbeat", ingest.DefaultHeartbeatInterval, "owner heartbeat interval (at most half of --owner-ttl)")
	f.cassandraFlags.register(cmd, "for producer ids (InitProducer); without it, InitProducer answers UNIMPLEMENTED and SDK producers pick random ids")
	fs.DurationVar(&f.balance, "balance-interval", ingest.DefaultBalanceInterval, "how often to even out partitions with the other copies (negative: never)")
	f.quota.register(cmd, "produced bytes")
	return cmd
}

// check checks the flags and fills in the defaults that depend on others
// (--advertise, --id).
func (f *ingestFlags) check() error {
	var c flagCheck
	f.serverFlags.check(&c, true)
	f.cassandraFlags.check(&c, false)
	c.advertiseAddr("advertise", f.advertise)
	if f.advertise == "" {
		f.advertise = f.addr
	}
	if f.id == "" {
		f.id = strings.NewReplacer(":", "-", ".", "-").Replace(f.advertise)
	}
	c.catalogID("id", f.id)
	c.required("catalog-table", f.table)
	f.quota.check(&c)
	if f.ownerTTL < catalog.MinHeartbeatTTL || f.ownerTTL > catalog.MaxHeartbeatTTL {
		c.badf("--owner-ttl %v: want %v..%v", f.ownerTTL, catalog.MinHeartbeatTTL, catalog.MaxHeartbeatTTL)
	}
	if f.heartbeat <= 0 || 2*f.heartbeat > f.ownerTTL {
		c.badf("--heartbeat %v: want a positive duration up to half of --owner-ttl (%v)", f.heartbeat, f.ownerTTL)
	}
	if f.balance == 0 {
		c.badf("--balance-interval 0s: want a positive interval, or a negative one for never")
	}
	if err := c.err(); err != nil {
		return err
	}
	if err := f.config().Validate(); err != nil {
		return usageError{err: fmt.Errorf("the flags make an invalid ingest config: %w", err)}
	}
	return nil
}

// config is the ingest service's config from the flags (Logger is set
// when it starts).
func (f *ingestFlags) config() ingest.Config {
	return ingest.Config{
		OwnerID: f.id, Address: f.advertise, OwnerTTL: f.ownerTTL, HeartbeatInterval: f.heartbeat,
		BalanceInterval: f.balance, Now: wallNow, Quota: f.quota.cfg,
	}
}

func runIngest(ctx context.Context, f ingestFlags, stdout, stderr io.Writer) error {
	tel, err := telemetry.New(telemetry.Config{Service: "ingest", Format: f.logFormat, Output: stderr, TracesFromEnv: true})
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)

	cat, err := dynamoCatalog(ctx, f.table, f.createTable)
	if err != nil {
		return err
	}
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
	cfg := f.config()
	cfg.Logger = tel.Logger
	az, err := f.auth.authorizer(ctx, cat, tel.Logger)
	if err != nil {
		return err
	}
	deps := ingest.Deps{Catalog: cat, Ledgers: ingest.LedgerClient(ledgers), Forward: ingest.Forwarder(peers), Partitions: ingest.PartitionClients(peers), Schemas: cat,
		Authorize: authorizeProduce(az), Meters: tel.MeterProvider, Tracer: tel.TracerProvider}
	bk, err := f.cassandraFlags.open(ctx, tel.Logger, tel.MeterProvider)
	if err != nil {
		return err
	}
	if bk != nil {
		defer bk.Close()
		deps.Producers = bk
	}
	svc, err := ingest.New(cfg, deps)
	if err != nil {
		return err
	}
	rc, err := f.rpcConfig(ctx, tel.Logger)
	if err != nil {
		return err
	}
	adDeps := admin.Deps{Catalog: cat, EndOffset: svc.EndOffset, StableOffset: svc.StableOffset, Ledgers: ledgers, Bookies: ledgers, TopicDeleted: svc.TopicDeleted,
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
	srv.Handle(svc.PeerHandler(srv.HandlerOptions()...))
	srv.Handle(ad.Handler(srv.HandlerOptions()...))
	reg, err := registry.New(cat)
	if err != nil {
		return err
	}
	srv.Handle(reg.Handler(srv.HandlerOptions()...))
	srv.Mount(registry.RESTPrefix, restWith(az, reg.REST()))
	srv.Gate(svc.Ready()) // NOT_SERVING until a restarted copy took back its partitions
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another with --addr)", f.addr, err)
	}
	fmt.Fprintf(stdout, "sluice ingest %s listening on %s://%s (catalog table %s)\n", f.id, f.scheme(), ln.Addr(), f.table)

	// Shutdown: the ingest service hands its partitions over first (so
	// other copies take them at once), then the server drains.
	return serveThenStop(ctx, srv, ln, svc.Run)
}
