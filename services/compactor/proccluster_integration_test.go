//go:build integration

package compactor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/localcluster"
	"github.com/sluicemq/sluice/harness/testenv"
	"github.com/sluicemq/sluice/pkg/catalog"
	catdynamo "github.com/sluicemq/sluice/pkg/catalog/dynamodb"
)

// procCluster is a harness/localcluster cluster of real processes for one
// test, wiped when it ends.
type procCluster struct {
	t   *testing.T
	ctx context.Context
	bin string
	cfg localcluster.Config
	st  localcluster.State
}

// startProcCluster builds sluice and starts cfg (its directory, table,
// keyspace and endpoints are filled in; name prefixes the table and
// keyspace) against the test environment's Cassandra and AWS emulator.
func startProcCluster(ctx context.Context, t *testing.T, name string, cfg localcluster.Config) *procCluster {
	t.Helper()
	dir := t.TempDir()
	bin, err := bookieproc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg.Dir = filepath.Join(dir, "cluster")
	cfg.Table, cfg.Keyspace = "sluice-"+name+"-"+suffix, "sluice_"+name+"_"+suffix
	cfg.AWSEndpoint, cfg.Cassandra = testenv.AWSEndpoint(t), testenv.Cassandra(t)
	c := &procCluster{t: t, ctx: ctx, bin: bin, cfg: cfg}
	c.st, err = localcluster.Up(ctx, cfg, localcluster.Options{Bin: bin})
	t.Cleanup(func() {
		if err := localcluster.Wipe(context.Background(), cfg.Dir, 10*time.Second); err != nil {
			t.Errorf("wipe the cluster: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// proc is the running process name.
func (c *procCluster) proc(name string) localcluster.Running {
	c.t.Helper()
	for _, r := range c.st.Procs {
		if r.Name == name {
			return r
		}
	}
	c.t.Fatalf("no process %s", name)
	return localcluster.Running{}
}

// run runs the sluice binary with args.
func (c *procCluster) run(args ...string) (string, error) {
	out, err := exec.CommandContext(c.ctx, c.bin, args...).CombinedOutput()
	return string(out), err
}

// sluice runs the sluice binary and fails the test if it fails.
func (c *procCluster) sluice(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// kill9 kills process name with SIGKILL and waits until it is gone.
func (c *procCluster) kill9(name string) {
	c.t.Helper()
	if err := syscall.Kill(c.proc(name).PID, syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	waitFor(c.t, 10*time.Second, func() bool { return !c.proc(name).Alive() })
}

// up starts again whatever is not running (localcluster.Up).
func (c *procCluster) up() {
	c.t.Helper()
	st, err := localcluster.Up(c.ctx, c.cfg, localcluster.Options{Bin: c.bin})
	if err != nil {
		c.t.Fatal(err)
	}
	c.st = st
}

// consumeOnce reads total records of topic through addr and fails the test
// on a record read twice; it returns how many distinct records it read.
func (c *procCluster) consumeOnce(topic string, total int, addr string) int {
	c.t.Helper()
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(c.sluice("consume", topic, "--count", strconv.Itoa(total), "--addr", addr)), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		key := f[0] + "/" + f[1]
		if seen[key] {
			c.t.Fatalf("record %s read twice", key)
		}
		seen[key] = true
	}
	return len(seen)
}

// destroy kills bookie name with SIGKILL and deletes its data: lost for
// good.
func (c *procCluster) destroy(name string) {
	c.t.Helper()
	c.kill9(name)
	if err := os.RemoveAll(filepath.Join(c.cfg.Dir, "data", name)); err != nil {
		c.t.Fatal(err)
	}
}

// catalog opens the cluster's catalog table.
func (c *procCluster) catalog() *catalog.Catalog {
	c.t.Helper()
	cat, err := catdynamo.New(catdynamo.NewClient(testenv.AWSConfig(c.t, c.cfg.AWSEndpoint)), catdynamo.Options{Table: c.cfg.Table})
	if err != nil {
		c.t.Fatal(err)
	}
	return cat
}
