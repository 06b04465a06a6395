//go:build integration

package observability

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicemq/sluice/harness/bookieproc"
)

// eventOnly are metrics that appear only once their event happens — a
// series per event's labels, nothing to start at zero — and that the
// workload below cannot cause in sluice dev (three bookies and ensembles
// of three: no spare bookie for an ensemble change). Each must still be
// an instrument of the code: its dotted name is looked up in the sources.
var eventOnly = map[string]struct{ file, instrument string }{
	"sluice_ledger_ensemble_changes_total": {"bookkeeper/client/metrics.go", "sluice.ledger.ensemble_changes"},
}

// Every metric the dashboard and the rules use is served by a running
// `sluice dev` driven as users drive it: a topic produced to and read by
// Fetch and by a group that keeps running (lag, sessions), a
// transactional copy (transactions), a trigger whose function cannot be
// reached (invocations failing), the compactor's passes, the bookies'
// journals. Prometheus's own `up` is not Sluice's.
func TestIntegrationDashboardAndRulesMetricsAreServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	used := assetNames(t)
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	nowhere, err := bookieproc.FreeAddr() // nothing listens: every invocation fails
	if err != nil {
		t.Fatal(err)
	}
	dev := exec.CommandContext(ctx, bin, "dev", "--data-dir", t.TempDir(), "--addr", addr, "--lambda-endpoint", "http://"+nowhere)
	logf, err := os.Create(filepath.Join(t.TempDir(), "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	dev.Stdout, dev.Stderr = logf, logf
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dev.Process.Signal(os.Interrupt)
		_ = dev.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("sluice dev's log:\n%s", tail(string(b), 60))
		}
	})
	url := "http://" + addr + "/metrics"
	waitServed(ctx, t, url)

	sluice := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--addr", addr)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var lines strings.Builder
	for i := range 200 {
		fmt.Fprintf(&lines, "v%d\n", i)
	}
	// A refused produce (no such topic): the errors by code.
	refused := exec.CommandContext(ctx, bin, "produce", "--topic", "missing", "--idempotent=false", "--addr", addr)
	refused.Stdin = strings.NewReader("x\n")
	if out, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(out), "missing") {
		t.Fatalf("a produce to a missing topic: %v\n%s", err, out)
	}
	sluice("", "topic", "create", "orders", "--partitions", "2")
	sluice("", "topic", "create", "mirror", "--partitions", "2")
	sluice("", "trigger", "create", "orders-fn", "--topic", "orders", "--function", "orders-handler", "--start", "earliest")
	sluice(lines.String(), "produce", "--topic", "orders")
	sluice("", "consume", "orders", "--partition", "0", "--count", "1")
	sluice("", "copy", "orders", "mirror", "--group", "mirror", "--transactional-id", "mirror", "--idle", "2s")
	// A member that stays, and has not committed everything: lag.
	member := exec.CommandContext(ctx, bin, "consume", "orders", "--group", "readers", "--follow", "--addr", addr)
	if err := member.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Process.Kill(); _ = member.Wait() })
	sluice(lines.String(), "produce", "--topic", "orders")

	var missing []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		served := scrape(ctx, t, url)
		missing = missing[:0]
		for name := range used {
			if _, ok := eventOnly[name]; !served[name] && !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	sort.Strings(missing)
	for _, name := range missing {
		t.Errorf("%s uses %s; sluice dev does not serve it", used[name], name)
	}
	for name, e := range eventOnly {
		src, err := os.ReadFile(filepath.Join("..", "..", e.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), `"`+e.instrument+`"`) {
			t.Errorf("%s: no instrument %q in %s", name, e.instrument, e.file)
		}
	}
}

// waitServed waits for url to answer 200.
func waitServed(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered: %v", url, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrape returns the metric families url serves, by the names a query
// uses: a histogram's family name stands for its _bucket, _count and _sum.
func scrape(ctx context.Context, t *testing.T, url string) map[string]bool {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	served := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) > 0 {
			served[name] = true
		}
	}
	return served
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The rules pass `promtool check rules` and their unit tests pass
// `promtool test rules`, promtool being built from the Prometheus module
// (internal/tools/promtool).
func TestIntegrationPromtoolChecksTheRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	modfile, err := filepath.Abs("../../internal/tools/promtool/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	promtool := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "-modfile=" + modfile, "promtool"}, args...)...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := promtool("check", "rules", filepath.Base(RulesFile)); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	if out := promtool("test", "rules", filepath.Base(RuleTestsFile)); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	if out := promtool("check", "config", filepath.Base(ScrapeFile)); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check config:\n%s", out)
	}
}
