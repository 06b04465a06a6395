package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/bookkeeper/journal"
	"github.com/sluicemq/sluice/internal/rpcserver"
	"github.com/sluicemq/sluice/internal/telemetry"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// bookieFlags are `sluice bookie`'s flags.
type bookieFlags struct {
	dir, journalDir string
	addr, advertise string
	id, instance    string
	storageID       string
	table           string
	heartbeat       time.Duration
	gcInterval      time.Duration
	gcGrace         time.Duration
	groupWait       time.Duration
	recycle         int
	checkpoint      time.Duration
	logFormat       string
	pprof           bool
	tls             tlsFlags
	insecure        bool
}

func newBookieCmd() *cobra.Command {
	var f bookieFlags
	cmd := &cobra.Command{
		Use:   "bookie --dir DIR",
		Short: "run a ledger storage node (bookie)",
		Long: `Runs one ledger storage node (bookie). It acknowledges an add only after fsyncing it
in its journal. It refuses to start on swapped disks or on a wiped ledger or index
disk, and with --require-storage-id also when every disk was wiped at once. With
--catalog-table it registers in the catalog and heartbeats there, so that ingest,
fetch and the compactor find it, and deletes the ledgers the catalog no longer needs
on it (--catalog-gc-interval, --catalog-gc-grace).
Ready when grpc.health.v1.Health/Check answers SERVING.`,
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return f.check() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBookie(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.AddCommand(newBookieListCmd(), newBookieDecommissionCmd())
	fs := cmd.Flags()
	fs.StringVar(&f.dir, "dir", "", "data directory: journal, ledgers and index go in subdirectories (required)")
	fs.StringVar(&f.journalDir, "journal-dir", "", "journal directory, ideally its own disk (default DIR/journal)")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:3181", "address to serve sluice.bookie.v1.BookieService on (h2c; mTLS with --tls-cert)")
	fs.StringVar(&f.advertise, "advertise", "", "address other nodes reach this bookie at (default --addr)")
	fs.StringVar(&f.id, "id", "", "bookie id in the cluster (default the advertised address)")
	fs.StringVar(&f.instance, "instance", "sluice", "cluster instance id, recorded in every cookie")
	fs.StringVar(&f.storageID, "require-storage-id", "", "refuse to start unless the disks hold this storage id (as recorded when the bookie joined)")
	fs.StringVar(&f.table, "catalog-table", "", "DynamoDB catalog table to register in (endpoint and credentials from the AWS environment); empty: do not register")
	fs.DurationVar(&f.heartbeat, "heartbeat", bookie.DefaultHeartbeatInterval, "registry heartbeat interval (with --catalog-table; the registration lasts 3 heartbeats + 1s)")
	fs.DurationVar(&f.gcInterval, "catalog-gc-interval", bookie.DefaultCatalogGCInterval, "how often to look for ledgers the catalog no longer needs here: purged, offloaded, deleted, or naming other bookies (with --catalog-table; negative: never)")
	fs.DurationVar(&f.gcGrace, "catalog-gc-grace", bookie.DefaultCatalogGCGrace, "such a ledger is deleted here once it has been so this long")
	fs.DurationVar(&f.groupWait, "journal-max-group-wait", 0, "how long an idle journal waits to fill a group commit (0: write at once)")
	fs.IntVar(&f.recycle, "journal-recycle-files", journal.DefaultRecycleFiles, "checkpointed journal files kept for reuse, so appends overwrite allocated blocks (0: delete them instead)")
	fs.DurationVar(&f.checkpoint, "checkpoint-interval", bookie.DefaultCheckpointInterval, "checkpoint interval (storage flush, journal trim)")
	logFormatFlag(cmd, &f.logFormat)
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's runtime profiles under /debug/pprof/ (benchmarks, diagnosis)")
	f.tls.register(cmd, tlsBookie)
	insecureFlag(cmd, &f.insecure)
	return cmd
}

// maxBookieHeartbeat keeps the registration (3 heartbeats + 1s) within
// the catalog's bound on heartbeat TTLs (whole seconds).
const maxBookieHeartbeat = (catalog.MaxHeartbeatTTL - time.Second) / 3 / time.Second * time.Second

// check checks the flags and fills in the defaults that depend on others
// (--advertise, --id).
func (f *bookieFlags) check() error {
	var c flagCheck
	c.required("dir", f.dir)
	c.listenAddr("addr", f.addr)
	c.advertiseAddr("advertise", f.advertise)
	if f.advertise == "" {
		f.advertise = f.addr
	}
	idSet := f.id != ""
	if !idSet {
		f.id = f.advertise
	}
	if idSet || f.table != "" { // ids the catalog records follow its rule
		c.catalogID("id", f.id)
	}
	c.required("instance", f.instance)
	c.positive("heartbeat", f.heartbeat, maxBookieHeartbeat)
	if f.gcInterval == 0 {
		c.badf("--catalog-gc-interval 0: want a positive duration, or negative for never")
	}
	c.positive("catalog-gc-grace", f.gcGrace, 0)
	// The journal's own rules, for one field at a time.
	if err := (journal.Config{Dir: ".", MaxGroupWait: f.groupWait}).Validate(); err != nil {
		c.badf("--journal-max-group-wait %v: %v", f.groupWait, err)
	}
	if f.recycle < 0 {
		c.badf("--journal-recycle-files %d: want 0 (delete checkpointed files) or more", f.recycle)
	} else if err := (journal.Config{Dir: ".", RecycleFiles: recycleFiles(f.recycle)}).Validate(); err != nil {
		c.badf("--journal-recycle-files %d: %v", f.recycle, err)
	}
	c.positive("checkpoint-interval", f.checkpoint, 0)
	c.logFormat(f.logFormat)
	f.tls.check(&c)
	c.loopbackOnly(f.addr, f.tls.enabled(), f.insecure, "this bookie has no mTLS", "--tls-cert/--tls-key/--tls-ca")
	if err := c.err(); err != nil {
		return err
	}
	// What the flags cannot say alone (--journal-dir equal to DIR/ledgers).
	if err := f.config().Validate(); err != nil {
		return usageError{err: fmt.Errorf("the flags make an invalid bookie config: %w", err)}
	}
	return nil
}

// config is the bookie's config from the flags (Logger and FS are set
// when it opens).
func (f *bookieFlags) config() bookie.Config {
	return bookie.Config{
		ID: f.id, InstanceID: f.instance, Dir: f.dir, JournalDir: f.journalDir, RequireStorageID: f.storageID,
		JournalMaxGroupWait: f.groupWait, CheckpointInterval: f.checkpoint, JournalRecycleFiles: recycleFiles(f.recycle),
	}
}

func runBookie(ctx context.Context, f bookieFlags, stdout, stderr io.Writer) error {
	tel, err := telemetry.New(telemetry.Config{Service: "bookie", Format: f.logFormat, Output: stderr, TracesFromEnv: true})
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)

	cfg := f.config()
	cfg.Logger = tel.Logger
	cfg.MeterProvider, cfg.TracerProvider = tel.MeterProvider, tel.TracerProvider
	if cfg.FS, err = bookieFS(tel.Logger, cfg); err != nil {
		return err
	}
	b, err := bookie.Open(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := b.Close(); err != nil {
			tel.Logger.Error("bookie close failed", "err", err)
		}
	}()

	tlsCfg, err := f.tls.server(tel.Logger)
	if err != nil {
		return err
	}
	srv, err := rpcserver.New(rpcserver.Config{MaxRequestBytes: bookie.DefaultMaxEntryBytes + 64<<10, Pprof: f.pprof, TLS: tlsCfg}, tel)
	if err != nil {
		return err
	}
	srv.Handle(b.Handler(srv.HandlerOptions()...))
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another bookie running there? pick another with --addr)", f.addr, err)
	}
	fmt.Fprintf(stdout, "sluice bookie %s (storage %s) listening on %s, data in %s\n", f.id, b.Cookie().StorageID, ln.Addr(), f.dir)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
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
	if f.table != "" {
		cat, err := dynamoCatalog(ctx, f.table, false)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.Heartbeat(ctx, cat, f.advertise, f.heartbeat, 3*f.heartbeat+time.Second)
		}()
		if f.gcInterval > 0 {
			gc := b.NewCatalogGC(cat, bookie.CatalogGCConfig{Interval: f.gcInterval, Grace: f.gcGrace})
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- gc.Run(ctx)
			}()
		}
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
