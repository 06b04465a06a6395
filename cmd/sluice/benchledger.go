package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/harness/ledgerbench"
)

// benchLedgerFlags are `sluice bench ledger`'s flags.
type benchLedgerFlags struct {
	dir              string
	duration, warmup time.Duration
	out              string
	quick            bool
}

func newBenchLedgerCmd() *cobra.Command {
	var f benchLedgerFlags
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "benchmark the ledger tier alone (3 bookie processes and the ledger client)",
		Long: `Starts 3 bookie processes (this binary) on loopback, writes E3/Qw3/Qa2 ledgers with the
ledger client (fsync before every acknowledgement) at 64 KiB and 1 KiB entries, first at
the maximum rate, then at half the 64 KiB maximum and at 5,000 entries/s of 1 KiB, and
prints entries/s, MB/s, add latency percentiles (from the intended send time) and bookie
CPU per GB, next to a raw write+fdatasync probe of the disk.`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var c flagCheck
			c.positive("duration", f.duration, 0)
			if f.warmup < 0 {
				c.badf("--warmup %v: want 0 or a positive duration", f.warmup)
			}
			for _, name := range []string{"duration", "warmup"} {
				if f.quick && cmd.Flags().Changed(name) {
					c.badf("--quick sets --duration 2s and --warmup 0s: drop --%s or --quick", name)
				}
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchLedger(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dir, "dir", "", "scratch directory for bookie data (default a new temporary directory, removed afterwards)")
	fs.DurationVar(&f.duration, "duration", 20*time.Second, "measured time per scenario")
	fs.DurationVar(&f.warmup, "warmup", 5*time.Second, "unmeasured warm-up per scenario")
	fs.StringVar(&f.out, "out", "", "write the markdown table to this file too")
	fs.BoolVar(&f.quick, "quick", false, "short smoke run (2 s per scenario, no warm-up)")
	return cmd
}

// runBenchLedger is `sluice bench ledger`.
func runBenchLedger(ctx context.Context, f benchLedgerFlags, stdout io.Writer) error {
	if f.quick {
		f.duration, f.warmup = 2*time.Second, 0
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	if f.dir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-ledger-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		f.dir = d
	}
	sc := func(name string, size, writers, window int, rate float64) ledgerbench.Scenario {
		return ledgerbench.Scenario{Name: name, EntryBytes: size, Writers: writers, Window: window, Rate: rate, Warmup: f.warmup, Duration: f.duration}
	}
	scenarios := []ledgerbench.Scenario{
		sc("64k-max", 64<<10, 4, 16, 0),
		sc("1k-max", 1<<10, 8, 128, 0),
	}
	fmt.Fprintf(stdout, "sluice bench ledger: 3 bookies in %s, %v per scenario after %v warm-up\n", f.dir, f.duration, f.warmup)
	results, probes, err := ledgerbench.Run(ctx, ledgerbench.Config{Bin: bin, Dir: filepath.Join(f.dir, "max"), Scenarios: scenarios, Progress: stdout})
	if err != nil {
		return err
	}
	// Half of the measured maximum at 64 KiB: the latency target's rate.
	if len(results) > 0 && results[0].EntriesPerSec > 0 {
		half := results[0].EntriesPerSec / 2
		more, _, err := ledgerbench.Run(ctx, ledgerbench.Config{Bin: bin, Dir: filepath.Join(f.dir, "half"), Scenarios: []ledgerbench.Scenario{
			sc("64k-half-rate", 64<<10, 4, 64, half),
			sc("1k-5000/s", 1<<10, 4, 256, 5000),
		}, Progress: stdout})
		if err != nil {
			return err
		}
		results = append(results, more...)
	}
	ledgerbench.Markdown(stdout, results, probes)
	if f.out != "" {
		f, err := os.Create(f.out)
		if err != nil {
			return err
		}
		defer f.Close()
		ledgerbench.Markdown(f, results, probes)
	}
	return nil
}
