// Command sluice is Sluice's one binary: servers (dev, and later bookie,
// ingest, fetch, compactor) and client commands.
//
// Run `sluice help` for the list of commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"dev", "run Sluice in one process with no dependencies (partial: see README status)", runDev},
		{"bookie", "run a ledger storage node (bookie)", runBookie},
		{"ingest", "run an ingest copy (the produce path) against a DynamoDB catalog", runIngest},
		{"fetch", "run a fetch copy (the consume path) against a DynamoDB catalog and Cassandra", runFetch},
		{"compactor", "run the compactor (offload to object storage, retention) against a DynamoDB catalog", runCompactor},
		{"topic", "create, describe, list or delete topics", runTopic},
		{"produce", "produce records (arguments or stdin), or a load run with --count", runProduce},
		{"consume", "print a topic's records, directly or as a member of a consumer group", runConsume},
		{"group", "list, describe or reset consumer groups", runGroup},
		{"bench", "run a benchmark workload (Kafka; Sluice soon); 'sluice bench ledger' benchmarks the ledger tier", runBench},
		{"version", "print the version", runVersion},
	}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			if err := c.run(ctx, args[1:], stdout, stderr); err != nil {
				fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q; run 'sluice help' for the list\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Sluice - a distributed, replicated log and message queue.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: sluice <command> [flags]   (sluice <command> -h for its flags)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	fmt.Fprintf(stdout, "sluice %s\n", version)
	return nil
}
