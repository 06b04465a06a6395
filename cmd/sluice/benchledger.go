package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicemq/sluice/internal/ledgerbench"
)

// runBenchLedger is `sluice bench ledger`: the ledger tier on its own.
func runBenchLedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice bench ledger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "scratch directory for bookie data (default a new temporary directory, removed afterwards)")
	duration := fs.Duration("duration", 20*time.Second, "measured time per scenario")
	warmup := fs.Duration("warmup", 5*time.Second, "unmeasured warm-up per scenario")
	out := fs.String("out", "", "write the markdown table to this file too")
	quick := fs.Bool("quick", false, "short smoke run (2 s per scenario, no warm-up)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice bench ledger [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Starts 3 bookie processes (this binary) on loopback, writes E3/Qw3/Qa2 ledgers with the")
		fmt.Fprintln(stderr, "ledger client (fsync before every acknowledgement) at 1 KiB and 64 KiB, at the maximum")
		fmt.Fprintln(stderr, "rate and at fixed rates, and prints entries/s, MB/s, add latency percentiles (from the")
		fmt.Fprintln(stderr, "intended send time) and bookie CPU per GB, next to a raw write+fdatasync probe.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *quick {
		*duration, *warmup = 2*time.Second, 0
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-ledger-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	sc := func(name string, size, writers, window int, rate float64) ledgerbench.Scenario {
		return ledgerbench.Scenario{Name: name, EntryBytes: size, Writers: writers, Window: window, Rate: rate, Warmup: *warmup, Duration: *duration}
	}
	scenarios := []ledgerbench.Scenario{
		sc("64k-max", 64<<10, 4, 16, 0),
		sc("1k-max", 1<<10, 8, 128, 0),
	}
	fmt.Fprintf(stdout, "sluice bench ledger: 3 bookies in %s, %v per scenario after %v warm-up\n", *dir, *duration, *warmup)
	results, probes, err := ledgerbench.Run(ctx, ledgerbench.Config{Bin: bin, Dir: filepath.Join(*dir, "max"), Scenarios: scenarios, Progress: stdout})
	if err != nil {
		return err
	}
	// Half of the measured maximum at 64 KiB: the latency target's rate.
	if len(results) > 0 && results[0].EntriesPerSec > 0 {
		half := results[0].EntriesPerSec / 2
		more, _, err := ledgerbench.Run(ctx, ledgerbench.Config{Bin: bin, Dir: filepath.Join(*dir, "half"), Scenarios: []ledgerbench.Scenario{
			sc("64k-half-rate", 64<<10, 4, 64, half),
			sc("1k-5000/s", 1<<10, 4, 256, 5000),
		}, Progress: stdout})
		if err != nil {
			return err
		}
		results = append(results, more...)
	}
	ledgerbench.Markdown(stdout, results, probes)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		ledgerbench.Markdown(f, results, probes)
	}
	return nil
}
