// Command clusterctl starts, stops and shows a local Sluice cluster of
// separate processes (harness/localcluster). Run it through
// localstack/cluster.sh, which starts the stack it needs and builds the
// sluice binary first.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/harness/localcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "clusterctl: error:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	var dir string
	r := &cobra.Command{
		Use:           "clusterctl",
		Short:         "start, stop and show a local Sluice cluster of separate processes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	r.PersistentFlags().StringVar(&dir, "dir", ".stack/cluster", "the cluster's folder: state (cluster.json), data/, log/")
	r.AddCommand(upCmd(&dir), downCmd(&dir), statusCmd(&dir), pidsCmd(&dir))
	return r
}

func upCmd(dir *string) *cobra.Command {
	cfg := localcluster.DefaultConfig()
	var bin string
	extra := map[string]*[]string{}
	c := &cobra.Command{
		Use:   "up",
		Short: "start every process that is not running, and wait until each serves",
		Long: `Starts ingest-1 (which creates the catalog table and the keyspace), then the bookies,
the other ingest copies, the fetch copies and the compactor, each detached with its output in
DIR/log/NAME.log, and waits until each answers its health check. Run again after a process
died: it starts the missing ones with the same flags and data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Dir = *dir
			cfg.Extra = map[string][]string{}
			for role, v := range extra {
				if len(*v) > 0 {
					cfg.Extra[role] = *v
				}
			}
			st, err := localcluster.Up(cmd.Context(), cfg, localcluster.Options{Bin: bin, Out: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			_, lines, err := localcluster.Status(cmd.Context(), st.Config.Dir)
			if err != nil {
				return err
			}
			printStatus(cmd, lines)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&bin, "bin", "", "the sluice binary (required)")
	f.IntVar(&cfg.Bookies, "bookies", cfg.Bookies, "sluice bookie processes (3..19)")
	f.IntVar(&cfg.Ingests, "ingests", cfg.Ingests, "sluice ingest processes (1..19)")
	f.IntVar(&cfg.Fetches, "fetches", cfg.Fetches, "sluice fetch processes (0..19)")
	f.IntVar(&cfg.Compactors, "compactors", cfg.Compactors, "sluice compactor processes (0 or 1)")
	f.StringVar(&cfg.Host, "host", localcluster.DefaultHost, "address every process listens on")
	f.IntVar(&cfg.BasePort, "base-port", localcluster.DefaultBasePort, "bookie-N listens on BASE+N, ingest-N on BASE+20+N, fetch-N on BASE+40+N")
	f.StringVar(&cfg.Table, "table", localcluster.DefaultTable, "DynamoDB catalog table")
	f.StringVar(&cfg.Keyspace, "keyspace", localcluster.DefaultKeyspace, "Cassandra keyspace")
	f.StringVar(&cfg.Bucket, "bucket", localcluster.DefaultBucket, "S3 bucket for the compactor's segments")
	f.StringVar(&cfg.Region, "region", localcluster.DefaultRegion, "AWS region")
	f.StringVar(&cfg.AWSEndpoint, "aws-endpoint", os.Getenv("SLUICE_TEST_AWS_ENDPOINT"), "S3/DynamoDB endpoint (default $SLUICE_TEST_AWS_ENDPOINT, from localstack/stack.sh env)")
	f.StringVar(&cfg.Cassandra, "cassandra", os.Getenv("SLUICE_TEST_CASSANDRA"), "Cassandra host:port (default $SLUICE_TEST_CASSANDRA)")
	f.StringVar(&cfg.LambdaEndpoint, "lambda-endpoint", os.Getenv("SLUICE_TEST_LAMBDA_ENDPOINT"), "Lambda Invoke endpoint for triggers (default $SLUICE_TEST_LAMBDA_ENDPOINT)")
	f.BoolVar(&cfg.Pprof, "pprof", false, "serve /debug/pprof on every listener")
	for _, role := range []string{localcluster.RoleBookie, localcluster.RoleIngest, localcluster.RoleFetch, localcluster.RoleCompactor} {
		extra[role] = f.StringArray(role+"-arg", nil, "an extra flag for every "+role+" process (repeat for more)")
	}
	_ = c.MarkFlagRequired("bin")
	return c
}

func downCmd(dir *string) *cobra.Command {
	var wipe bool
	var grace time.Duration
	c := &cobra.Command{
		Use:   "down",
		Short: "stop the processes this cluster started (SIGTERM, then SIGKILL after --grace)",
		Long: `Stops only the processes recorded in DIR/cluster.json whose pid still names the process
that was started. Keeps data, logs and state, so up starts the same cluster again; --wipe also
deletes the catalog table, the keyspace, the data and the logs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wipe {
				if err := localcluster.Wipe(cmd.Context(), *dir, grace); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "cluster in %s stopped and wiped\n", *dir)
				return nil
			}
			return localcluster.Down(*dir, grace, cmd.ErrOrStderr())
		},
	}
	c.Flags().BoolVar(&wipe, "wipe", false, "also delete the catalog table, the keyspace, the data and the logs")
	c.Flags().DurationVar(&grace, "grace", 20*time.Second, "how long a process has to stop after SIGTERM")
	return c
}

func statusCmd(dir *string) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "one line per process; exits 1 when any is down or not serving",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, lines, err := localcluster.Status(cmd.Context(), *dir)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no cluster was started from %s (localstack/cluster.sh up)", *dir)
			}
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(lines); err != nil {
					return err
				}
			} else {
				printStatus(cmd, lines)
			}
			for _, l := range lines {
				if !l.Up || l.Addr != "" && !l.Serving {
					return fmt.Errorf("%s is %s", l.Name, l.State)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func pidsCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "pids [NAME]",
		Short: "print name=pid,... of the running processes (for sluice bench --server-pids), or NAME's pid",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := localcluster.LoadState(*dir)
			if err != nil {
				return err
			}
			var parts []string
			for _, r := range st.Procs {
				if len(args) == 1 && r.Name == args[0] {
					if !r.Alive() {
						return fmt.Errorf("%s is not running", r.Name)
					}
					fmt.Fprintln(cmd.OutOrStdout(), r.PID)
					return nil
				}
				if len(args) == 0 && r.Alive() {
					parts = append(parts, fmt.Sprintf("%s=%d", r.Name, r.PID))
				}
			}
			if len(args) == 1 {
				return fmt.Errorf("no process named %q in %s", args[0], *dir)
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(parts, ","))
			return nil
		},
	}
}

// relative shortens path to one relative to the working directory when it
// is below it.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

func printStatus(cmd *cobra.Command, lines []localcluster.StatusLine) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%-12s %-11s %-8s %-16s %s\n", "PROCESS", "STATE", "PID", "ADDRESS", "LOG")
	for _, l := range lines {
		pid, addr := "-", l.Addr
		if l.Up {
			pid = fmt.Sprint(l.PID)
		}
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(w, "%-12s %-11s %-8s %-16s %s\n", l.Name, l.State, pid, addr, relative(l.Log))
	}
}
