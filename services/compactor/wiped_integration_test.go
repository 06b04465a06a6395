//go:build integration

package compactor

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicemq/sluice/harness/localcluster"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// A bookie restarted on wiped disks, on real processes (4 bookies at E2:
// each entry has two copies): it registers as before, so nothing but the
// compactor's audit (BookieService.MissingLedgers) notices that the copies
// the catalog names it for are gone. Within a few passes no CLOSED ledger
// that should hold entries on it names it; then a second bookie is
// destroyed for good and every record still reads back exactly once.
// Without the audit the ledgers whose two copies were on these two
// bookies would be lost.
func TestIntegrationRefillWipedBookie(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startProcCluster(ctx, t, "wb", localcluster.Config{
		Bookies: 4, Ingests: 1, Fetches: 1, Compactors: 1, BasePort: 27900,
		Extra: map[string][]string{
			localcluster.RoleBookie:    {"--heartbeat", "1s"},
			localcluster.RoleCompactor: {"--interval", "1s", "--offload-age", "1h", "--metrics-addr", wipedMetricsAddr},
		},
	})
	ingest, fetch, sluice := c.proc("ingest-1").Addr, c.proc("fetch-1").Addr, c.sluice
	sluice("topic", "create", "orders", "--partitions", "4", "--addr", ingest,
		"--config", "replication.ensemble=2,replication.write.quorum=2,replication.ack.quorum=2")
	const total = 6000
	sluice("produce", "--topic", "orders", "--count", "3000", "--size", "512", "--addr", ingest)
	c.kill9("ingest-1") // its takeover seals the ledgers it wrote
	c.up()
	sluice("produce", "--topic", "orders", "--count", "3000", "--size", "512", "--addr", ingest)
	c.kill9("ingest-1") // and again: every ledger with entries is CLOSED
	c.up()

	cat := c.catalog()
	closed := func() []catalog.LedgerMetadata {
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
	// The bookie that should hold entries of the most ledgers.
	counts := map[string]int{}
	for _, m := range closed() {
		for _, b := range ledgerBookies(m) {
			if holdsEntries(m, b) {
				counts[b]++
			}
		}
	}
	wiped, most := "", 0
	for _, b := range slices.Sorted(maps.Keys(counts)) {
		if counts[b] > most {
			wiped, most = b, counts[b]
		}
	}
	if most < 2 {
		t.Fatalf("at most %d ledgers hold entries on one bookie (%v); want several", most, counts)
	}
	// The second loss: the bookie that shares the most segments with it
	// (at E2, their entries' only two copies).
	partners := map[string]int{}
	for _, m := range closed() {
		for _, seg := range m.Ensembles {
			if i := slices.Index(seg.Bookies, wiped); i >= 0 {
				partners[seg.Bookies[1-i]]++
			}
		}
	}
	second, shared := "", 0
	for _, b := range slices.Sorted(maps.Keys(partners)) {
		if partners[b] > shared {
			second, shared = b, partners[b]
		}
	}
	c.destroy(wiped)
	c.up() // the same id and address, empty disks
	start := time.Now()
	waitFor(t, 90*time.Second, func() bool {
		for _, m := range closed() {
			if slices.Contains(ledgerBookies(m), wiped) && holdsEntries(m, wiped) {
				return false
			}
		}
		return true
	})
	t.Logf("the %d ledgers with entries on wiped bookie %s moved in %v; now destroying %s (%d segments shared)",
		most, wiped, time.Since(start).Round(100*time.Millisecond), second, shared)
	c.destroy(second)
	if n := c.consumeOnce("orders", total, fetch); n != total {
		t.Fatalf("read %d records after wiping %s and destroying %s, want %d", n, wiped, second, total)
	}
	// The compactor process served its metrics all along (--metrics-addr):
	// its passes and the copies it rebuilt.
	m := scrapeMetrics(t, "http://"+wipedMetricsAddr+"/metrics")
	if m["sluice_compactor_pass_duration_seconds_count"] < 5 || m["sluice_compactor_ledgers_rereplicated_total"] < 1 {
		t.Fatalf("the compactor's metrics: passes %v, ledgers re-replicated %v; want passes and copies rebuilt",
			m["sluice_compactor_pass_duration_seconds_count"], m["sluice_compactor_ledgers_rereplicated_total"])
	}
}

// wipedMetricsAddr is where the compactor of TestIntegrationRefillWipedBookie
// serves its metrics: a port of its cluster's range that no process uses.
const wipedMetricsAddr = "127.0.0.1:27979"

// scrapeMetrics reads url's Prometheus text and returns each unlabelled
// series' value, and each labelled one's summed under its name.
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
