//go:build integration

package compactor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/localcluster"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Decommissioning on real processes (harness/localcluster: 4 bookies, an
// ingest, a fetch and a compactor running its passes): `sluice bookie
// decommission B --wait` on the bookie the most ledgers name, while records
// are still being produced, returns once no ledger names B — the open
// ledgers rolled over, the closed ones' copies moved by the compactor
// without any grace. Then B is killed and its disk destroyed, and every
// acknowledged record reads back exactly once; no ledger on bookies names
// B, and every segment still has its three distinct bookies.
func TestIntegrationDecommissionBookie(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startProcCluster(ctx, t, "dc", localcluster.Config{
		Bookies: 4, Ingests: 1, Fetches: 1, Compactors: 1, BasePort: 27800,
		Extra: map[string][]string{
			localcluster.RoleBookie:    {"--heartbeat", "1s"},
			localcluster.RoleIngest:    {"--balance-interval", "1s"},
			localcluster.RoleCompactor: {"--interval", "2s", "--offload-age", "1h"},
		},
	})
	ingest, fetch, sluice := c.proc("ingest-1").Addr, c.proc("fetch-1").Addr, c.sluice
	sluice("topic", "create", "orders", "--partitions", "4", "--addr", ingest)
	sluice("produce", "--topic", "orders", "--count", "8000", "--size", "1024", "--addr", ingest)
	// kill -9 the ingest copy and bring it back, so there are closed
	// ledgers (recovered) as well as open ones.
	c.kill9("ingest-1")
	c.up()
	sluice("produce", "--topic", "orders", "--count", "2000", "--size", "1024", "--addr", ingest)

	// The bookie the most ledgers on bookies name, from `sluice bookie list`.
	counts := func() map[string][2]string {
		out := map[string][2]string{}
		for _, l := range strings.Split(sluice("bookie", "list", "--addr", ingest), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[0] != "BOOKIE" {
				out[f[0]] = [2]string{f[1], f[4]}
			}
		}
		return out
	}
	drain, most := "", -1
	for id, b := range counts() {
		if n, _ := strconv.Atoi(b[1]); n > most {
			drain, most = id, n
		}
	}
	if most < 2 {
		t.Fatalf("bookie list: at most %d ledgers on one bookie; want several", most)
	}

	// Records keep coming while it drains: every one acknowledged counts.
	var wg sync.WaitGroup
	produced := make(chan error, 1)
	wg.Go(func() {
		out, err := c.run("produce", "--topic", "orders", "--count", "3000", "--size", "1024", "--addr", ingest)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, out)
		}
		produced <- err
	})
	start := time.Now()
	out := sluice("bookie", "decommission", drain, "--wait", "--interval", "1s", "--timeout", "2m", "--addr", ingest)
	took := time.Since(start)
	wg.Wait()
	if err := <-produced; err != nil {
		t.Fatalf("produce during the drain: %v", err)
	}
	t.Logf("decommission of %s (%d ledgers) took %v:\n%s", drain, most, took, out)
	if !strings.Contains(out, drain+": drained") {
		t.Fatalf("decommission output does not say drained:\n%s", out)
	}
	if b := counts()[drain]; b[0] != "draining" || b[1] != "0" {
		t.Fatalf("bookie list after the drain: %s is %v; want draining with 0 ledgers", drain, b)
	}

	// Gone for good: nothing on bookies names it, every record reads.
	c.destroy(drain)
	cat := c.catalog()
	for _, state := range []catalog.LedgerState{catalog.LedgerOpen, catalog.LedgerInRecovery, catalog.LedgerClosed} {
		for token := ""; ; {
			page, err := cat.ListLedgersByState(ctx, state, token, catalog.MaxPageSize)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range page.Items {
				for _, seg := range m.Ensembles {
					if slices.Contains(seg.Bookies, drain) || len(seg.Bookies) != 3 || seg.Bookies[0] == seg.Bookies[1] ||
						seg.Bookies[1] == seg.Bookies[2] || seg.Bookies[0] == seg.Bookies[2] {
						t.Fatalf("ledger %d (%v) segment %+v after draining %s", m.ID, m.State, seg, drain)
					}
				}
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
	}
	const total = 13000
	if n := c.consumeOnce("orders", total, fetch); n != total {
		t.Fatalf("read %d records after decommissioning %s, want %d", n, drain, total)
	}
}
