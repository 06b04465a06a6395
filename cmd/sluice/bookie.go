package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/bookkeeper/journal"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
)

func runBookie(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice bookie", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "data directory: journal, ledgers and index go in subdirectories (required)")
	journalDir := fs.String("journal-dir", "", "journal directory, ideally its own disk (default DIR/journal)")
	addr := fs.String("addr", "127.0.0.1:3181", "address to serve sluice.bookie.v1.BookieService on (h2c)")
	advertise := fs.String("advertise", "", "address other nodes reach this bookie at (default --addr)")
	id := fs.String("id", "", "bookie id in the cluster (default the advertised address)")
	instance := fs.String("instance", "sluice", "cluster instance id, recorded in every cookie")
	storageID := fs.String("require-storage-id", "", "refuse to start unless the disks hold this storage id (as recorded when the bookie joined)")
	table := fs.String("catalog-table", "", "DynamoDB catalog table to register in (endpoint and credentials from the AWS environment); empty: do not register")
	heartbeat := fs.Duration("heartbeat", bookie.DefaultHeartbeatInterval, "registry heartbeat interval")
	groupWait := fs.Duration("journal-max-group-wait", 0, "how long an idle journal waits to fill a group commit (0: write at once)")
	recycle := fs.Int("journal-recycle-files", journal.DefaultRecycleFiles, "checkpointed journal files kept for reuse, so appends overwrite allocated blocks (0: delete them instead)")
	ckpt := fs.Duration("checkpoint-interval", bookie.DefaultCheckpointInterval, "checkpoint interval (storage flush, journal trim)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	pprofOn := fs.Bool("pprof", false, "serve Go's runtime profiles under /debug/pprof/ (benchmarks, diagnosis)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice bookie --dir DIR [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs one ledger storage node (bookie). It acknowledges an add only after")
		fmt.Fprintln(stderr, "fsyncing it in its journal, and refuses to start on wiped or swapped disks.")
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
		return fmt.Errorf("unexpected arguments %q; see 'sluice bookie -h'", fs.Args())
	}
	if *dir == "" {
		return errors.New("--dir is required; see 'sluice bookie -h'")
	}
	if *advertise == "" {
		*advertise = *addr
	}
	if *id == "" {
		*id = *advertise
	}

	tel, err := telemetry.New(telemetry.Config{Service: "bookie", Format: *logFormat, Output: stderr})
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()

	b, err := bookie.Open(bookie.Config{
		ID: *id, InstanceID: *instance, Dir: *dir, JournalDir: *journalDir,
		RequireStorageID: *storageID, Logger: tel.Logger, FS: bookieFS(tel.Logger),
		JournalMaxGroupWait: *groupWait, CheckpointInterval: *ckpt, JournalRecycleFiles: recycleFiles(*recycle),
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := b.Close(); err != nil {
			tel.Logger.Error("bookie close failed", "err", err)
		}
	}()

	srv, err := rpcserver.New(rpcserver.Config{MaxRequestBytes: bookie.DefaultMaxEntryBytes + 64<<10, Pprof: *pprofOn}, tel)
	if err != nil {
		return err
	}
	srv.Handle(b.Handler(srv.HandlerOptions()...))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another bookie running there? pick another with --addr)", *addr, err)
	}
	fmt.Fprintf(stdout, "sluice bookie %s (storage %s) listening on %s, data in %s\n", *id, b.Cookie().StorageID, ln.Addr(), *dir)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- srv.Serve(ctx, ln)
		cancel()
	}()
	go func() {
		defer wg.Done()
		errs <- b.Run(ctx)
		cancel()
	}()
	if *table != "" {
		cat, err := dynamoCatalog(ctx, *table)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.Heartbeat(ctx, cat, *advertise, *heartbeat, 3**heartbeat+time.Second)
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// recycleFiles maps --journal-recycle-files to bookie.Config: 0 (or less)
// turns reuse off, which the config spells as negative (its zero is the
// default).
func recycleFiles(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
