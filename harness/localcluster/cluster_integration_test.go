//go:build integration

package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/testenv"
)

// The README's "Run the real stack locally", as a user follows it: bring
// the cluster up with localstack/cluster.sh, create a topic, produce
// through one ingest copy and read everything back through the fetch copy,
// describe from every copy (the same exact ends everywhere), kill -9 an
// ingest copy, see status report it, bring it back with `up`, produce
// through it and read to the end again, then `down --wipe` leaves none of
// the processes running.
func TestIntegrationLocalCluster(t *testing.T) {
	testenv.Cassandra(t)
	testenv.AWSEndpoint(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	const base = 27500 // away from the default 17500, so a developer's own cluster is left alone
	script := func(args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{filepath.Join(root, "localstack/cluster.sh")}, args...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "SLUICE_CLUSTER_DIR="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := script("down", "--wipe"); err != nil {
			t.Errorf("cluster.sh down --wipe: %v\n%s", err, out)
		}
	})
	out, err := script("up", "--base-port", strconv.Itoa(base), "--table", "sluice-it-"+suffix, "--keyspace", "sluice_it_"+suffix)
	if err != nil {
		t.Fatalf("cluster.sh up: %v\n%s", err, out)
	}
	for _, want := range []string{"ingest-1     serving", "bookie-3     serving", "ingest-2     serving", "fetch-1      serving", "compactor-1  running"} {
		if !strings.Contains(out, want) {
			t.Fatalf("cluster.sh up printed no %q:\n%s", want, out)
		}
	}
	addr := func(role, n int) string { return fmt.Sprintf("127.0.0.1:%d", base+20*role+n) }
	ingest1, ingest2, fetch1 := addr(1, 1), addr(1, 2), addr(2, 1)
	bin := filepath.Join(root, ".cache/bin/sluice")
	sluice := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	lines := func(from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, "r%04d\n", i)
		}
		return b.String()
	}
	// readAll reads the whole topic through the fetch copy and checks it
	// holds r0000..r(n-1), each once.
	readAll := func(n int) {
		t.Helper()
		got := sluice("", "consume", "orders", "--count", strconv.Itoa(n), "--addr", fetch1)
		seen := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
			if f := strings.Fields(l); len(f) > 0 { // partition, offset, key (empty), value
				seen[f[len(f)-1]]++
			}
		}
		for i := range n {
			if k := fmt.Sprintf("r%04d", i); seen[k] != 1 {
				t.Fatalf("record %s read %d times; want once. Output:\n%s", k, seen[k], got)
			}
		}
	}
	// describeEnds sums the END column of `topic describe` from addr.
	describeEnds := func(at string) int {
		t.Helper()
		out := sluice("", "topic", "describe", "orders", "--addr", at)
		sum, table := 0, false
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) > 0 && f[0] == "PARTITION" {
				table = true
				continue
			}
			if !table || len(f) != 5 {
				continue
			}
			end, err := strconv.Atoi(f[4])
			if err != nil {
				t.Fatalf("describe from %s: END %q is not exact:\n%s", at, f[4], out)
			}
			sum += end
		}
		return sum
	}

	sluice("", "topic", "create", "orders", "--partitions", "3", "--addr", ingest1)
	sluice(lines(0, 300), "produce", "--topic", "orders", "--addr", ingest2)
	readAll(300)
	for _, at := range []string{ingest1, ingest2, fetch1} {
		if got := describeEnds(at); got != 300 {
			t.Fatalf("describe from %s: ends add up to %d, want 300", at, got)
		}
	}

	// kill -9 ingest-1, as a user would with the pid cluster.sh gives.
	pidOut, err := script("pids", "ingest-1")
	if err != nil {
		t.Fatalf("cluster.sh pids ingest-1: %v\n%s", err, pidOut)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(pidOut))
	if err != nil {
		t.Fatalf("cluster.sh pids ingest-1 printed %q", pidOut)
	}
	if err := exec.Command("kill", "-9", strconv.Itoa(pid)).Run(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		out, err := script("status")
		return err != nil && strings.Contains(out, "ingest-1     DOWN")
	})
	if out, err := script("up", "--base-port", strconv.Itoa(base), "--table", "sluice-it-"+suffix, "--keyspace", "sluice_it_"+suffix); err != nil ||
		!strings.Contains(out, "ingest-1     started") || !strings.Contains(out, "bookie-1     already running") {
		t.Fatalf("cluster.sh up after the kill: %v\n%s", err, out)
	}
	sluice(lines(300, 200), "produce", "--topic", "orders", "--addr", ingest1)
	readAll(500)
	if got := describeEnds(fetch1); got != 500 {
		t.Fatalf("describe from fetch-1 after the restart: ends add up to %d, want 500", got)
	}

	// A different cluster in the same folder is refused while this one runs.
	if out, err := script("up", "--base-port", strconv.Itoa(base), "--bookies", "4"); err == nil || !strings.Contains(out, "a cluster with other settings runs") {
		t.Fatalf("cluster.sh up with other settings: %v\n%s", err, out)
	}

	st, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := script("down"); err != nil {
		t.Fatalf("cluster.sh down: %v\n%s", err, out)
	}
	for _, r := range st.Procs {
		if r.Alive() {
			t.Errorf("%s (pid %d) still runs after down", r.Name, r.PID)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
