package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/services/compactor"
	"github.com/sluicemq/sluice/services/ingest"
)

// `sluice bookie decommission ID --wait` on an in-process cluster of four
// bookies with an open ledger on the bookie: the partition rolls over, the
// compactor moves the sealed ledger's copies, and the command returns once
// no ledger names the bookie; `bookie list` says draining with 0 ledgers,
// every record still reads, and --cancel makes it writable again.
func TestBookieDecommissionCommand(t *testing.T) {
	c := startCLICluster(t, func(cfg *cluster.Config) {
		cfg.Bookies = 4
		cfg.Ingest = ingest.Config{BalanceInterval: 100 * time.Millisecond}
		cfg.Compactor = compactor.Config{Interval: 200 * time.Millisecond, OffloadAge: time.Hour}
	})
	addr := c.Addr()
	sluice := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args, "--addr", addr)
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("sluice %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	sluice("topic", "create", "t", "--partitions", "1")
	deadline := time.Now().Add(10 * time.Second)
	for run(context.Background(), []string{"produce", "--topic", "t", "a", "b", "c", "--addr", addr}, io.Discard, io.Discard) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("produce never succeeded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The bookie to drain: one the partition's open ledger names.
	p, err := c.Catalog.GetPartition(context.Background(), "t", 0)
	if err != nil || len(p.Ledgers) == 0 {
		t.Fatalf("partition: %+v, %v", p, err)
	}
	m, err := c.Catalog.GetLedger(context.Background(), p.Ledgers[len(p.Ledgers)-1].ID)
	if err != nil {
		t.Fatal(err)
	}
	drain := m.Ensembles[0].Bookies[0]

	out := sluice("bookie", "decommission", drain, "--wait", "--interval", "100ms", "--timeout", "30s")
	t.Logf("sluice bookie decommission %s --wait:\n%s", drain, out)
	for _, want := range []string{drain + ": draining since ", "still name", drain + ": drained: no ledger names it"} {
		if !strings.Contains(out, want) {
			t.Fatalf("decommission output lacks %q:\n%s", want, out)
		}
	}
	list := sluice("bookie", "list")
	if !strings.Contains(list, drain) || !hasFields(list, drain, "draining", "0") {
		t.Fatalf("bookie list after the drain:\n%s", list)
	}
	if got := sluice("consume", "t"); got != "0\t0\t\ta\n0\t1\t\tb\n0\t2\t\tc\n" {
		t.Fatalf("consume after the drain: %q", got)
	}
	// Records produced now avoid it.
	sluice("produce", "--topic", "t", "d")
	if got := sluice("consume", "t", "--from", "3"); got != "0\t3\t\td\n" {
		t.Fatalf("consume of the record produced after the drain: %q", got)
	}
	if !hasFields(sluice("bookie", "list"), drain, "draining", "0") {
		t.Fatal("a record produced after the drain went to the draining bookie")
	}
	if out := sluice("bookie", "decommission", drain, "--cancel"); !strings.Contains(out, "draining cancelled; it is writable") {
		t.Fatalf("decommission --cancel: %s", out)
	}

	// Refusals name the problem.
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"bookie", "decommission", "bookie-99", "--addr", addr}, io.Discard, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), `bookie "bookie-99" is not in the registry`) {
		t.Fatalf("decommission of an unknown bookie: exit %d: %s", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"bookie", "decommission", drain, "--wait", "--cancel", "--addr", addr}, io.Discard, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "--wait") {
		t.Fatalf("--wait with --cancel: exit %d: %s", code, errOut.String())
	}
}

// hasFields reports whether a line of out has exactly these leading fields
// and last field (sluice bookie list: BOOKIE STATE ... LEDGERS).
func hasFields(out, id, state, ledgers string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == id && f[1] == state && f[len(f)-1] == ledgers {
			return true
		}
	}
	return false
}
