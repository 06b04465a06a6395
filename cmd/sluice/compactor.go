package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicemq/sluice/bookkeeper/client"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/objstore"
	"github.com/sluicemq/sluice/services/compactor"
)

func runCompactor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice compactor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("catalog-table", "", "DynamoDB catalog table (endpoint and credentials from the AWS environment) (required)")
	objects := fs.String("objects", "", "object store for segments: s3://BUCKET?region=R[&endpoint=URL&use_path_style=true] or file:///DIR (required)")
	prefix := fs.String("prefix", "", "object key prefix (empty, or ending in /)")
	interval := fs.Duration("interval", compactor.DefaultInterval, "time between the starts of two passes")
	offloadAge := fs.Duration("offload-age", compactor.DefaultOffloadAge, "offload a closed ledger once it was sealed this long ago")
	bookieGrace := fs.Duration("bookie-delete-grace", compactor.DefaultBookieDeleteGrace, "bookies keep an offloaded ledger this long after the switch (negative: no grace)")
	deleteGrace := fs.Duration("delete-grace", compactor.DefaultDeleteGrace, "a ledger dropped by retention keeps its data this long (negative: no grace)")
	orphanGrace := fs.Duration("orphan-grace", compactor.DefaultOrphanGrace, "delete a segment object no ledger points at once it is this old")
	compactEvery := fs.Duration("compact-interval", compactor.DefaultCompactInterval, "how often a partition of a cleanup.policy=compact topic is compacted")
	tombstoneDelay := fs.Duration("tombstone-delay", compactor.DefaultTombstoneDelay, "key compaction drops a tombstone once its ledger was sealed this long ago (negative: at once)")
	workers := fs.Int("workers", compactor.DefaultWorkers, "ledgers offloaded or purged at once")
	maxLedgers := fs.Int("max-ledgers-per-pass", compactor.DefaultMaxLedgersPerPass, "ledgers one pass offloads (and, separately, purges) at most")
	partMiB := fs.Int("upload-part-mib", compactor.DefaultUploadPartBytes>>20, "object upload buffer in MiB: the multipart part size on S3 (5..512)")
	once := fs.Bool("once", false, "run one pass, print its report as JSON and exit")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice compactor --catalog-table TABLE --objects URL [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Moves sealed ledgers from the bookies to segment objects, enforces retention")
		fmt.Fprintln(stderr, "(retention.ms, retention.bytes) and removes what it dropped. One pass every")
		fmt.Fprintln(stderr, "--interval; a crash at any point is repaired by the next pass. Bookies must be")
		fmt.Fprintln(stderr, "registered in the same catalog. (The same pass runs as a Lambda function:")
		fmt.Fprintln(stderr, "services/compactor/lambda.)")
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
		return fmt.Errorf("unexpected arguments %q; see 'sluice compactor -h'", fs.Args())
	}
	if *table == "" || *objects == "" {
		return errors.New("--catalog-table and --objects are required; see 'sluice compactor -h'")
	}
	tel, err := telemetry.New(telemetry.Config{Service: "compactor", Format: *logFormat, Output: stderr})
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	cat, err := dynamoCatalog(ctx, *table)
	if err != nil {
		return err
	}
	bucket, err := objstore.Open(ctx, *objects)
	if err != nil {
		return err
	}
	defer bucket.Close()
	ledgers, err := client.New(client.Config{Ledgers: cat, Bookies: cat, Logger: tel.Logger})
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
	c, err := compactor.New(compactor.Config{
		Interval: *interval, OffloadAge: *offloadAge, BookieDeleteGrace: *bookieGrace, DeleteGrace: *deleteGrace,
		OrphanGrace: *orphanGrace, Workers: *workers, MaxLedgersPerPass: *maxLedgers, Prefix: *prefix, UploadPartBytes: *partMiB << 20,
		CompactInterval: *compactEvery, TombstoneDelay: *tombstoneDelay, Logger: tel.Logger,
	}, deps)
	if err != nil {
		return err
	}
	if *once {
		r, err := c.Pass(ctx)
		out, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	fmt.Fprintf(stdout, "sluice compactor running (catalog table %s, objects %s, a pass every %v)\n", *table, *objects, *interval)
	return c.Run(ctx)
}
