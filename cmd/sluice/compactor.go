package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/services/compactor"
)

// compactorFlags are `sluice compactor`'s flags.
type compactorFlags struct {
	table, objects, prefix string
	interval               time.Duration
	offloadAge             time.Duration
	bookieGrace            time.Duration
	deleteGrace            time.Duration
	orphanGrace            time.Duration
	compactEvery           time.Duration
	tombstoneDelay         time.Duration
	rereplGrace            time.Duration
	rereplMiB              int
	workers, maxLedgers    int
	partMiB                int
	once                   bool
	metricsAddr            string
	logFormat              string
	tls                    tlsFlags
}

func newCompactorCmd() *cobra.Command {
	var f compactorFlags
	cmd := &cobra.Command{
		Use:   "compactor --catalog-table TABLE --objects URL",
		Short: "run the compactor (offload to object storage, retention, key compaction) against a DynamoDB catalog",
		Long: `Moves sealed ledgers from the bookies to segment objects, enforces retention
(retention.ms, retention.bytes), compacts the offloaded data of cleanup.policy=compact
topics by key, cleans up deleted topics and removes what it dropped, and rebuilds the
copies of closed ledgers on other bookies: those a lost bookie held (a bookie gone from the
registry for --rereplicate-grace is lost), those a live bookie no longer has (its audit asks
each bookie), and those a reader found damaged (marked in the catalog; see sluice ledger
under-replicated). One pass every --interval; a crash at any point is repaired by the next
pass. Bookies must be
registered in the same catalog. (The same pass runs as a Lambda function:
services/compactor/lambda.)`,
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return f.check() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCompactor(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.table, "catalog-table", "", "DynamoDB catalog table (endpoint and credentials from the AWS environment) (required)")
	fs.StringVar(&f.objects, "objects", "", "object store for segments: s3://BUCKET?region=R[&endpoint=URL&use_path_style=true] or file:///DIR (required)")
	fs.StringVar(&f.prefix, "prefix", "", "object key prefix (empty, or ending in /)")
	fs.DurationVar(&f.interval, "interval", compactor.DefaultInterval, "time between the starts of two passes")
	fs.DurationVar(&f.offloadAge, "offload-age", compactor.DefaultOffloadAge, "offload a closed ledger once it was sealed this long ago (0 or negative: at once)")
	fs.DurationVar(&f.bookieGrace, "bookie-delete-grace", compactor.DefaultBookieDeleteGrace, "bookies keep an offloaded ledger this long after the switch (0 or negative: no grace)")
	fs.DurationVar(&f.deleteGrace, "delete-grace", compactor.DefaultDeleteGrace, "a ledger dropped by retention keeps its data this long (0 or negative: no grace)")
	fs.DurationVar(&f.orphanGrace, "orphan-grace", compactor.DefaultOrphanGrace, "delete a segment object no ledger points at once it is this old (at least 1s)")
	fs.DurationVar(&f.compactEvery, "compact-interval", compactor.DefaultCompactInterval, "how often a partition of a cleanup.policy=compact topic is compacted")
	fs.DurationVar(&f.tombstoneDelay, "tombstone-delay", compactor.DefaultTombstoneDelay, "key compaction drops a tombstone once its ledger was sealed this long ago (0 or negative: at once)")
	fs.DurationVar(&f.rereplGrace, "rereplicate-grace", compactor.DefaultRereplicateGrace, "a bookie missing from the registry this long is lost: its copies of closed ledgers are rebuilt on other bookies (0 or negative: at once)")
	fs.IntVar(&f.rereplMiB, "rereplicate-mib-per-sec", compactor.DefaultRereplicateBytesPerSec>>20, "re-replication's rate bound in MiB/s, all ledgers together (1..10240)")
	fs.IntVar(&f.workers, "workers", compactor.DefaultWorkers, fmt.Sprintf("ledgers offloaded or purged at once (1..%d)", compactor.MaxWorkers))
	fs.IntVar(&f.maxLedgers, "max-ledgers-per-pass", compactor.DefaultMaxLedgersPerPass, fmt.Sprintf("ledgers one pass offloads (and, separately, purges) at most (1..%d)", compactor.MaxMaxLedgersPerPass))
	fs.IntVar(&f.partMiB, "upload-part-mib", compactor.DefaultUploadPartBytes>>20, fmt.Sprintf("object upload buffer in MiB: the multipart part size on S3 (%d..%d)", compactor.MinUploadPartBytes>>20, compactor.MaxUploadPartBytes>>20))
	fs.BoolVar(&f.once, "once", false, "run one pass, print its report as JSON and exit")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve the compactor's Prometheus metrics on http://ADDR/metrics (docs/metrics.md; e.g. :9466); empty: none")
	logFormatFlag(cmd, &f.logFormat)
	f.tls.register(cmd, tlsCaller)
	return cmd
}

func (f *compactorFlags) check() error {
	var c flagCheck
	c.required("catalog-table", f.table)
	c.required("objects", f.objects)
	c.objectsURL("objects", f.objects)
	// A zero age or grace means zero (the config's zero is its default).
	f.offloadAge, f.bookieGrace = noneIfZero(f.offloadAge), noneIfZero(f.bookieGrace)
	f.deleteGrace, f.tombstoneDelay = noneIfZero(f.deleteGrace), noneIfZero(f.tombstoneDelay)
	f.rereplGrace = noneIfZero(f.rereplGrace)
	c.intIn("rereplicate-mib-per-sec", f.rereplMiB, 1, 10<<10)
	c.positive("interval", f.interval, 0)
	c.positive("orphan-grace", f.orphanGrace, 0)
	c.positive("compact-interval", f.compactEvery, 0)
	c.intIn("workers", f.workers, 1, compactor.MaxWorkers)
	c.intIn("max-ledgers-per-pass", f.maxLedgers, 1, compactor.MaxMaxLedgersPerPass)
	c.intIn("upload-part-mib", f.partMiB, compactor.MinUploadPartBytes>>20, compactor.MaxUploadPartBytes>>20)
	c.logFormat(f.logFormat)
	f.tls.check(&c)
	if err := c.err(); err != nil {
		return err
	}
	// The compactor's own bounds (durations up to 30 days, the prefix),
	// one field at a time so that the message names the flag.
	for _, fc := range []struct {
		flag  string
		value any
		cfg   compactor.Config
	}{
		{"prefix", fmt.Sprintf("%q", f.prefix), compactor.Config{Prefix: f.prefix}},
		{"interval", f.interval, compactor.Config{Interval: f.interval}},
		{"offload-age", f.offloadAge, compactor.Config{OffloadAge: f.offloadAge}},
		{"bookie-delete-grace", f.bookieGrace, compactor.Config{BookieDeleteGrace: f.bookieGrace}},
		{"delete-grace", f.deleteGrace, compactor.Config{DeleteGrace: f.deleteGrace}},
		{"orphan-grace", f.orphanGrace, compactor.Config{OrphanGrace: f.orphanGrace}},
		{"compact-interval", f.compactEvery, compactor.Config{CompactInterval: f.compactEvery}},
		{"tombstone-delay", f.tombstoneDelay, compactor.Config{TombstoneDelay: f.tombstoneDelay}},
		{"rereplicate-grace", f.rereplGrace, compactor.Config{RereplicateGrace: f.rereplGrace}},
	} {
		if err := fc.cfg.Validate(); err != nil {
			c.badf("--%s %v: %v", fc.flag, fc.value, err)
		}
	}
	if err := c.err(); err != nil {
		return err
	}
	if err := f.config().Validate(); err != nil {
		return usageError{err: fmt.Errorf("the flags make an invalid compactor config: %w", err)}
	}
	return nil
}

// config is the compactor's config from the flags (Logger is set when it
// starts).
func (f *compactorFlags) config() compactor.Config {
	return compactor.Config{
		Interval: f.interval, OffloadAge: f.offloadAge, BookieDeleteGrace: f.bookieGrace, DeleteGrace: f.deleteGrace,
		OrphanGrace: f.orphanGrace, Workers: f.workers, MaxLedgersPerPass: f.maxLedgers, Prefix: f.prefix, UploadPartBytes: f.partMiB << 20,
		CompactInterval: f.compactEvery, TombstoneDelay: f.tombstoneDelay,
		RereplicateGrace: f.rereplGrace, RereplicateBytesPerSec: int64(f.rereplMiB) << 20, Now: wallNow,
	}
}

func runCompactor(ctx context.Context, f compactorFlags, stdout, stderr io.Writer) error {
	tel, err := telemetry.New(telemetry.Config{Service: "compactor", Format: f.logFormat, Output: stderr, TracesFromEnv: true})
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)
	cat, err := dynamoCatalog(ctx, f.table, false)
	if err != nil {
		return err
	}
	bucket, err := objstore.Open(ctx, f.objects)
	if err != nil {
		return err
	}
	defer bucket.Close()
	peerTLS, err := f.tls.client(tel.Logger)
	if err != nil {
		return err
	}
	ledgers, err := client.New(client.Config{Ledgers: cat, Bookies: cat, Logger: tel.Logger, TLS: peerTLS, MeterProvider: tel.MeterProvider, TracerProvider: tel.TracerProvider})
	if err != nil {
		return err
	}
	defer ledgers.Close()
	deps := compactor.Deps{Catalog: cat, Ledgers: ledgers, Objects: bucket, Meters: tel.MeterProvider}
	if v := os.Getenv(compactor.EnvExitAt); v != "" {
		// The process-level crash tests: die at a step like kill -9.
		step, err := compactor.ParseStep(v)
		if err != nil {
			return err
		}
		deps.Hooks.Step = func(s compactor.Step, _ catalog.LedgerID) error {
			if s == step {
				os.Exit(compactor.ExitAtStatus)
			}
			return nil
		}
	}
	cfg := f.config()
	cfg.Logger = tel.Logger
	c, err := compactor.New(cfg, deps)
	if err != nil {
		return err
	}
	if f.once {
		r, err := c.Pass(ctx)
		out, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	if f.metricsAddr != "" {
		stop, err := serveMetrics(f.metricsAddr, tel)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", f.metricsAddr)
	}
	fmt.Fprintf(stdout, "sluice compactor running (catalog table %s, objects %s, a pass every %v)\n", f.table, f.objects, f.interval)
	return c.Run(ctx)
}

// serveMetrics serves tel's metrics on http://addr/metrics until stop is
// called: the compactor has no RPC port to carry them.
func serveMetrics(addr string, tel *telemetry.Telemetry) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
