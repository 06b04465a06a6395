package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

func newLedgerCmd() *cobra.Command {
	cmd := holdsCommands(&cobra.Command{
		Use:   "ledger",
		Short: "inspect the ledgers that hold the topics' data (under-replicated ones)",
		Long:  "Inspects ledgers through the admin API of a Sluice (sluice dev, an ingest or a fetch copy).",
	})
	cmd.AddCommand(newListCmdNamed("under-replicated", "list the ledgers with a copy on a bookie missing from the registry, or a damaged copy",
		`Lists the ledgers still on bookies (OPEN, IN_RECOVERY, CLOSED) whose ensembles name a bookie
that is not in the bookie registry, with those bookies. The compactor rebuilds a CLOSED ledger's
missing copies on other bookies once the bookie has been missing for its --rereplicate-grace;
an open ledger's writer replaces the bookie for new entries, and its older copies move once it
is sealed. Also lists the closed ledgers with a copy that a reader found bad on a live bookie
(an entry missing or failing its checksum), one "damaged copy" line each; the compactor moves
those copies at once. Prints nothing but a summary line when every ledger is fully replicated.`,
		ledgerUnderReplicated))
	return cmd
}

// newListCmdNamed is newListCmd under another name, with a long help.
func newListCmdNamed(use, short, long string, run func(ctx context.Context, ep endpoint, stdout io.Writer) error) *cobra.Command {
	cmd := newListCmd(short, run)
	cmd.Use, cmd.Long = use, long
	return cmd
}

func ledgerUnderReplicated(ctx context.Context, ep endpoint, stdout io.Writer) error {
	admin := ep.admin()
	token, n, scanned := "", 0, 0
	var live []string
	for {
		resp, err := admin.ListUnderReplicatedLedgers(ctx, connect.NewRequest(&sluicev1.ListUnderReplicatedLedgersRequest{PageToken: token}))
		if err != nil {
			return explain(err, ep.addr)
		}
		live = resp.Msg.GetLiveBookies()
		scanned += int(resp.Msg.GetScanned())
		for _, l := range resp.Msg.GetLedgers() {
			if n == 0 {
				fmt.Fprintf(stdout, "%-10s %-28s %-12s %-24s %s\n", "LEDGER", "TOPIC/PARTITION", "STATE", "OFFSETS", "MISSING BOOKIES")
			}
			n++
			offsets := fmt.Sprintf("%d..%d", l.GetFirstOffset(), l.GetLastOffset())
			if l.GetLastOffset() < l.GetFirstOffset() {
				offsets = fmt.Sprintf("%d.. (open)", l.GetFirstOffset())
			}
			fmt.Fprintf(stdout, "%-10d %-28s %-12s %-24s %s\n", l.GetLedgerId(), fmt.Sprintf("%s/%d", l.GetTopic(), l.GetPartition()),
				l.GetState(), offsets, cmp.Or(strings.Join(l.GetMissingBookies(), ","), "-"))
			for _, d := range l.GetDamagedCopies() {
				fmt.Fprintf(stdout, "%-10s damaged copy on %s: %s at entry %d, reported %s\n", "", d.GetBookie(), d.GetReason(), d.GetEntry(),
					time.UnixMilli(d.GetReportedAtMs()).UTC().Format(time.RFC3339))
			}
		}
		if token = resp.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	fmt.Fprintf(stdout, "%d under-replicated of %d ledgers on bookies; live bookies: %s\n", n, scanned, strings.Join(live, ", "))
	return nil
}

// newBookieListCmd is `sluice bookie list` (under the server command
// `sluice bookie`, which runs a bookie when given no subcommand).
func newBookieListCmd() *cobra.Command {
	return newListCmdNamed("list", "list the bookies: registered ones and missing ones, with their ledger counts",
		`Lists the bookies in the registry (writable; read-only: near disk-full or failed; draining:
being decommissioned, see sluice bookie decommission) and the missing ones — named by ledgers still on bookies, but not registered: dead, or stopped
longer than their registration lasts — each with the number of ledgers on bookies (OPEN,
IN_RECOVERY, CLOSED) whose ensembles name it. A missing bookie's count falls to 0 as the
compactor re-replicates its closed ledgers (sluice ledger under-replicated lists them), and a
draining bookie's as the compactor moves them off it.`,
		bookieList)
}

func bookieList(ctx context.Context, ep endpoint, stdout io.Writer) error {
	resp, err := ep.admin().ListBookies(ctx, connect.NewRequest(&sluicev1.ListBookiesRequest{}))
	if err != nil {
		return explain(err, ep.addr)
	}
	fmt.Fprintf(stdout, "%-24s %-10s %-24s %-18s %s\n", "BOOKIE", "STATE", "ADDRESS", "FREE/TOTAL GiB", "LEDGERS")
	for _, b := range resp.Msg.GetBookies() {
		addr, space := b.GetAddress(), "-"
		if addr == "" {
			addr = "-"
		}
		if b.GetTotalBytes() > 0 {
			space = fmt.Sprintf("%.1f/%.1f", float64(b.GetFreeBytes())/(1<<30), float64(b.GetTotalBytes())/(1<<30))
		}
		ledgers := fmt.Sprint(b.GetLedgers())
		if resp.Msg.GetLedgersTruncated() {
			ledgers = ">=" + ledgers
		}
		fmt.Fprintf(stdout, "%-24s %-10s %-24s %-18s %s\n", b.GetId(), b.GetState(), addr, space, ledgers)
	}
	if resp.Msg.GetLedgersTruncated() {
		fmt.Fprintf(stdout, "counted over the first %d ledgers on bookies only (the scan's bound)\n", resp.Msg.GetScanned())
	}
	return nil
}
