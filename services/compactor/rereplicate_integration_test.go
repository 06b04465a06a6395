//go:build integration

package compactor

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/localcluster"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Issue 28's proof, on real processes (harness/localcluster): 4 bookies,
// topics at E3/Qw3/Qa2, records produced and their ledgers closed; one
// bookie is killed and its disk destroyed; once it is gone from the
// registry (and the ingest copy rolled the open ledgers naming it), one
// `sluice compactor --once` pass rebuilds every copy it held of a closed
// ledger on the fourth bookie (its rate is logged); no closed
// ledger names it afterwards. Then a second original bookie is destroyed
// as well, and every record still reads back, exactly once.
func TestIntegrationRereplicateLostBookies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startProcCluster(ctx, t, "rr", localcluster.Config{
		Bookies: 4, Ingests: 1, Fetches: 1, BasePort: 27700,
		Extra: map[string][]string{localcluster.RoleBookie: {"--heartbeat", "1s"}}, // a dead bookie leaves the registry in ~4 s
	})
	ingest, fetch, sluice := c.proc("ingest-1").Addr, c.proc("fetch-1").Addr, c.sluice
	sluice("topic", "create", "orders", "--partitions", "4", "--addr", ingest)
	sluice("produce", "--topic", "orders", "--count", "20000", "--size", "1024", "--addr", ingest)
	// kill -9 the ingest copy and bring it back: its successor recovers
	// and closes the ledgers it wrote, and opens new ones for the rest.
	c.kill9("ingest-1")
	c.up()
	sluice("produce", "--topic", "orders", "--count", "2000", "--size", "1024", "--addr", ingest)

	cat := c.catalog()
	closed := func() []catalog.LedgerMetadata {
		t.Helper()
		var out []catalog.LedgerMetadata
		for token := ""; ; {
			page, err := cat.ListLedgersByState(ctx, catalog.LedgerClosed, token, catalog.MaxPageSize)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Items...)
			if token = page.NextPageToken; token == "" {
				return out
			}
		}
	}
	// The bookie holding the most closed ledgers is lost for good.
	holds := map[string]int{}
	before := closed()
	for _, m := range before {
		for _, b := range ledgerBookies(m) {
			holds[b]++
		}
	}
	if len(before) < 4 {
		t.Fatalf("%d closed ledgers after the restart; want one per partition at least", len(before))
	}
	ids := slices.Collect(func(yield func(string) bool) {
		for b := range holds {
			if !yield(b) {
				return
			}
		}
	})
	slices.SortFunc(ids, func(a, b string) int { return holds[b] - holds[a] })
	destroy := func(name string) {
		t.Helper()
		c.destroy(name)
		waitFor(t, 20*time.Second, func() bool {
			live, err := cat.ListLiveBookies(ctx)
			return err == nil && !slices.ContainsFunc(live, func(b catalog.Bookie) bool { return b.ID == name })
		})
	}
	lost := ids[0]
	destroy(lost)
	// The ingest copy rolls its partitions' open ledgers that name the
	// missing bookie (partition.Writer.RollOffLeaving), so they too are
	// CLOSED and re-replicated: wait for that, then count again.
	waitFor(t, 30*time.Second, func() bool {
		for token := ""; ; {
			page, err := cat.ListLedgersByState(ctx, catalog.LedgerOpen, token, catalog.MaxPageSize)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range page.Items {
				if slices.Contains(ledgerBookies(m), lost) {
					return false
				}
			}
			if token = page.NextPageToken; token == "" {
				return true
			}
		}
	})
	holds[lost] = 0
	for _, m := range closed() {
		if slices.Contains(ledgerBookies(m), lost) {
			holds[lost]++
		}
	}
	// `sluice ledger under-replicated` names it for every closed ledger
	// it held (and any open one).
	closedListed := func() int {
		n := 0
		for _, l := range strings.Split(sluice("ledger", "under-replicated", "--addr", ingest), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[2] == "CLOSED" {
				if f[4] != lost {
					t.Fatalf("under-replicated line %q: want the missing bookie %s", l, lost)
				}
				n++
			}
		}
		return n
	}
	if got := closedListed(); got != holds[lost] {
		t.Fatalf("sluice ledger under-replicated lists %d closed ledgers, want %d", got, holds[lost])
	}
	// `sluice bookie list` shows it missing, named by at least those.
	missingCount := func(absentOK bool) int {
		for _, l := range strings.Split(sluice("bookie", "list", "--addr", ingest), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[0] == lost {
				n, err := strconv.Atoi(f[4])
				if f[1] != "missing" || err != nil {
					t.Fatalf("bookie list line %q: want %s missing with a count", l, lost)
				}
				return n
			}
		}
		if !absentOK {
			t.Fatalf("bookie list does not show %s", lost)
		}
		return 0 // no ledger names it: the list leaves it out
	}
	named := missingCount(false)
	if named < holds[lost] {
		t.Fatalf("bookie list: %s named by %d ledgers, want at least its %d closed ones", lost, named, holds[lost])
	}

	start := time.Now()
	cmd := exec.CommandContext(ctx, c.bin, "compactor", "--once", "--catalog-table", c.cfg.Table, "--objects", c.cfg.ObjectsURL(),
		"--rereplicate-grace", "0", "--offload-age", "1h")
	cmd.Env = append(os.Environ(), c.cfg.Env()...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("compactor --once: %v\n%s\n%s", err, out, stderr.String())
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("compactor report %q: %v", out, err)
	}
	if r.Rereplicated != holds[lost] || r.UnderReplicated != holds[lost] || r.Errors != 0 {
		t.Fatalf("pass report %+v; want %d closed ledgers under-replicated and re-replicated, no error", r, holds[lost])
	}
	t.Logf("re-replicated %d ledgers, %.1f MiB, in %v of a %v pass: %.1f MiB/s (the pass's own bound: %d MiB/s)",
		r.Rereplicated, float64(r.RereplicatedBytes)/(1<<20), r.Duration, took, float64(r.RereplicatedBytes)/(1<<20)/r.Duration.Seconds(),
		DefaultRereplicateBytesPerSec>>20)
	for _, m := range closed() {
		if slices.Contains(ledgerBookies(m), lost) {
			t.Fatalf("ledger %d still names the lost bookie %s: %v", m.ID, lost, m.Ensembles)
		}
	}
	if got := closedListed(); got != 0 {
		t.Fatalf("after the pass, sluice ledger under-replicated still lists %d closed ledgers", got)
	}
	if after := missingCount(true); after != named-holds[lost] {
		t.Fatalf("bookie list after the pass: %s named by %d ledgers, want %d (open ones created meanwhile)", lost, after, named-holds[lost])
	}

	// A second original bookie lost: every record still reads back once.
	second := ids[1]
	destroy(second)
	total := 0
	for _, l := range strings.Split(sluice("topic", "describe", "orders", "--addr", fetch), "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] != "PARTITION" {
			n, err := strconv.Atoi(f[4])
			if err != nil {
				t.Fatalf("describe: END %q", f[4])
			}
			total += n
		}
	}
	if total != 22000 {
		t.Fatalf("the topic ends add up to %d, want 22,000 acknowledged records", total)
	}
	if n := c.consumeOnce("orders", total, fetch); n != total {
		t.Fatalf("read %d records after losing %s and %s, want %d", n, lost, second, total)
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
