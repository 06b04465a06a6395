package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
)

// decommissionOpts are `sluice bookie decommission`'s flags.
type decommissionOpts struct {
	ep       endpoint
	id       string
	wait     bool
	cancel   bool
	interval time.Duration
	timeout  time.Duration
	// reportWithin bounds the wait for the bookie's heartbeat to say
	// "draining" (a test shortens it).
	reportWithin time.Duration
}

// newBookieDecommissionCmd is `sluice bookie decommission ID`.
func newBookieDecommissionCmd() *cobra.Command {
	o := decommissionOpts{interval: 2 * time.Second, reportWithin: time.Minute}
	cmd := &cobra.Command{
		Use:   "decommission ID",
		Short: "drain a bookie: move every ledger's copies off it so it can be removed",
		Long: `Starts draining bookie ID, which must be running: from then on it takes no new entries
(writers replace it in their ensembles, and partitions whose open ledger names it roll over
to a new ledger), while it still serves reads; the compactor moves every sealed ledger's
copies off it at once, to other bookies, at its --rereplicate-mib-per-sec. The bookie keeps
the state across restarts. With --wait, prints the number of ledgers still naming it until
there are none; then stop the bookie's process, and its registration expires.
--cancel stops draining (copies already moved stay where they are).`,
		PreRunE: func(_ *cobra.Command, args []string) error {
			var c flagCheck
			o.ep.check(&c)
			o.id = c.name("bookie", args)
			c.positive("interval", o.interval, time.Hour)
			if o.timeout < 0 {
				c.badf("--timeout %v: want 0 (no limit) or a positive duration", o.timeout)
			}
			if o.cancel && o.wait {
				c.badf("--wait waits for a drain to finish; it does not go with --cancel")
			}
			return c.err()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.timeout)
				defer cancel()
			}
			return bookieDecommission(ctx, o, cmd.OutOrStdout())
		},
	}
	o.ep.register(cmd.Flags())
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until no ledger names the bookie, printing progress")
	cmd.Flags().BoolVar(&o.cancel, "cancel", false, "stop draining: the bookie takes new entries again")
	cmd.Flags().DurationVar(&o.interval, "interval", o.interval, "with --wait: how often to count the ledgers left")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "with --wait: give up after this long (0: no limit); draining goes on")
	return cmd
}

func bookieDecommission(ctx context.Context, o decommissionOpts, stdout io.Writer) error {
	admin := o.ep.admin()
	resp, err := admin.DecommissionBookie(ctx, connect.NewRequest(&sluicev1.DecommissionBookieRequest{BookieId: o.id, Cancel: o.cancel}))
	if err != nil {
		return explain(err, o.ep.addr)
	}
	if o.cancel {
		fmt.Fprintf(stdout, "%s: draining cancelled; it is %s\n", o.id, resp.Msg.GetState())
		return nil
	}
	since := time.UnixMilli(resp.Msg.GetDrainingSinceMs()).UTC().Format(time.RFC3339)
	fmt.Fprintf(stdout, "%s: draining since %s: it takes no new entries; its ledgers' copies move to other bookies\n", o.id, since)
	if !o.wait {
		fmt.Fprintf(stdout, "follow it with: sluice bookie list (its LEDGERS count falls to 0)\n")
		return nil
	}
	return waitDrained(ctx, admin, o, stdout)
}

// waitDrained polls ListBookies until no ledger on bookies names o.id.
func waitDrained(ctx context.Context, admin sluicev1connect.AdminServiceClient, o decommissionOpts, stdout io.Writer) error {
	start, reported, last := time.Now(), false, int32(-1)
	for {
		resp, err := admin.ListBookies(ctx, connect.NewRequest(&sluicev1.ListBookiesRequest{}))
		if err != nil {
			if ctx.Err() != nil {
				return waitEnded(ctx, o, last)
			}
			return explain(err, o.ep.addr)
		}
		var b *sluicev1.BookieInfo
		for _, x := range resp.Msg.GetBookies() {
			if x.GetId() == o.id {
				b = x
			}
		}
		state, n := "missing", int32(0)
		if b != nil {
			state, n = b.GetState(), b.GetLedgers()
		}
		switch {
		case state == "draining":
			reported = true
		case state == "missing" && n == 0:
			// Gone from the registry with nothing left on it: done.
		case state == "missing":
			return fmt.Errorf("bookie %s left the registry with %d ledgers still naming it (stopped before it was drained?): "+
				"start it again to finish draining, or they are re-replicated from the other copies after the compactor's --rereplicate-grace", o.id, n)
		case reported:
			return fmt.Errorf("bookie %s is %s again: its draining was cancelled (%d ledgers still name it)", o.id, state, n)
		case time.Since(start) > o.reportWithin:
			return fmt.Errorf("bookie %s still reports %s after %v: its heartbeat does not carry the draining state (is it an older build?)", o.id, state, o.reportWithin)
		}
		truncated := resp.Msg.GetLedgersTruncated()
		if n != last {
			more := ""
			if truncated {
				more = " (at least: counted over the first ledgers only)"
			}
			what := "ledgers still name"
			if n == 1 {
				what = "ledger still names"
			}
			fmt.Fprintf(stdout, "%s: %d %s%s it (%s, %s)\n", o.id, n, what, more, state, time.Since(start).Round(time.Second))
			last = n
		}
		if n == 0 && !truncated && (reported || state == "missing") {
			fmt.Fprintf(stdout, "%s: drained: no ledger names it. Stop its process; its registration then expires.\n", o.id)
			return nil
		}
		select {
		case <-ctx.Done():
			return waitEnded(ctx, o, last)
		case <-time.After(o.interval):
		}
	}
}

func waitEnded(ctx context.Context, o decommissionOpts, last int32) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("bookie %s not drained within --timeout %v (%d ledgers left at the last count); draining goes on — run the command again to follow it", o.id, o.timeout, last)
	}
	return ctx.Err()
}
