package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/cluster"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
)

// startCLICluster runs an in-process cluster (sluice dev's) for the client
// commands' tests until the test ends; tune adjusts its config.
func startCLICluster(t *testing.T, tune ...func(*cluster.Config)) *cluster.Cluster {
	t.Helper()
	cfg := cluster.Config{Dir: t.TempDir(), Addr: "127.0.0.1:0"}
	cfg.Server.ShutdownTimeout = 300 * time.Millisecond
	for _, f := range tune {
		f(&cfg)
	}
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// The client commands against an in-process cluster: produce with flags
// after the values and after --, read a topic directly and as a group,
// describe the group, reset it.
func TestConsumeAndGroupCommands(t *testing.T) {
	c := startCLICluster(t)
	addr := c.Addr()
	sluice := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args, "--addr", addr) // flags follow the arguments, produce's values too
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("sluice %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	sluice("topic", "create", "t", "--partitions", "2")
	// The first produce may race the ingest copy's registration: retry.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var errOut bytes.Buffer
		if run(context.Background(), []string{"produce", "--topic", "t", "--partition", "0", "a", "b", "c", "--addr", addr}, io.Discard, &errOut) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce: %s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sluice("produce", "--topic", "t", "d", "--partition", "1", "--key", "k")
	// After --, flags are values: here --addr comes first.
	sluice("topic", "create", "lit")
	if code := run(context.Background(), []string{"produce", "--addr", addr, "--topic", "lit", "--", "--literal", "--key", "k"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("produce with --: exit %d", code)
	}
	if got, want := sluice("consume", "lit"), "0\t0\t\t--literal\n0\t1\t\t--key\n0\t2\t\tk\n"; got != want {
		t.Fatalf("consume lit:\n%q\nwant\n%q", got, want)
	}

	if got, want := sluice("consume", "t"), "0\t0\t\ta\n0\t1\t\tb\n0\t2\t\tc\n1\t0\tk\td\n"; got != want {
		t.Fatalf("consume t:\n%q\nwant\n%q", got, want)
	}
	if got, want := sluice("consume", "t", "--partition", "0", "--from", "1", "--count", "1"), "0\t1\t\tb\n"; got != want {
		t.Fatalf("consume --from 1 --count 1: %q; want %q", got, want)
	}
	// An offset is a partition's: on a topic of two it needs --partition.
	var offErr bytes.Buffer
	if code := run(context.Background(), []string{"consume", "t", "--from", "1", "--addr", addr}, io.Discard, &offErr); code == 0 ||
		!strings.Contains(offErr.String(), "--from 1 is an offset, and offsets are per partition: topic t has 2; name one with --partition N (0..1)") {
		t.Fatalf("consume --from 1 on two partitions: exit %d: %s", code, offErr.String())
	}
	if got := sluice("consume", "t", "--format", "json", "--partition", "1"); !strings.Contains(got, `"key":"k"`) || !strings.Contains(got, `"value":"d"`) {
		t.Fatalf("json: %s", got)
	}
	got := sluice("consume", "t", "--group", "g", "--idle", "500ms")
	if n := strings.Count(got, "\n"); n != 4 {
		t.Fatalf("consume --group printed %d records; want 4:\n%s", n, got)
	}
	if got := sluice("group", "list"); !strings.Contains(got, "g\n") {
		t.Fatalf("group list: %q", got)
	}
	desc := sluice("group", "describe", "g")
	if !strings.Contains(desc, "0 live members") {
		t.Fatalf("describe:\n%s", desc)
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"group", "describe", "nope", "--addr", addr}, io.Discard, &errOut); code == 0 || !strings.Contains(errOut.String(), `group "nope" does not exist`) {
		t.Fatalf("group describe of an unknown group: exit %d: %s", code, errOut.String())
	}
	// Everything is committed: the group reads nothing more...
	if got := sluice("consume", "t", "--group", "g", "--idle", "300ms"); got != "" {
		t.Fatalf("second group consume printed %q", got)
	}
	// ...until it is reset.
	if got := sluice("group", "reset", "g", "--topic", "t", "--to", "earliest", "--dry-run"); !strings.Contains(got, "dry run") {
		t.Fatalf("reset --dry-run: %s", got)
	}
	sluice("group", "reset", "g", "--topic", "t", "--to", "1")
	got = sluice("consume", "t", "--group", "g", "--idle", "500ms")
	if n := strings.Count(got, "\n"); n != 2 { // offsets 1 and 2 of partition 0 (partition 1 has one record)
		t.Fatalf("after reset to 1: %d records:\n%s", n, got)
	}
}

// sluice copy copies a topic exactly once: run twice over the same group,
// the second run finds nothing left, and a read_committed consume of the
// copy prints every value of the source once.
func TestCopyCommand(t *testing.T) {
	c := startCLICluster(t)
	addr := c.Addr()
	sluice := func(args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args, "--addr", addr)
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("sluice %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String(), errOut.String()
	}
	sluice("topic", "create", "src", "--partitions", "3")
	sluice("topic", "create", "dst", "--partitions", "3")
	deadline := time.Now().Add(10 * time.Second)
	for run(context.Background(), []string{"produce", "--topic", "src", "--key", "k1", "a", "b", "c", "--addr", addr}, io.Discard, io.Discard) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("produce did not succeed within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sluice("produce", "--topic", "src", "--key", "k2", "d", "e")
	_, progress := sluice("copy", "src", "dst", "--group", "mirror", "--transactional-id", "mirror", "--idle", "2s", "--tag-transactions")
	if !strings.Contains(progress, "copied 5 records") {
		t.Fatalf("copy's progress: %q; want it to say 5 records were copied", progress)
	}
	if _, progress := sluice("copy", "src", "dst", "--group", "mirror", "--transactional-id", "mirror", "--idle", "1s"); !strings.Contains(progress, "copied 0 records") {
		t.Fatalf("a second copy of the same group: %q; want nothing left to copy", progress)
	}
	out, _ := sluice("consume", "dst", "--isolation", "read_committed", "--format", "json")
	var values []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(line, `"key":"k`) || !strings.Contains(line, TxnTagHeader) {
			t.Fatalf("copied record %s: want its key and a %s header", line, TxnTagHeader)
		}
		var rec struct{ Value string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		values = append(values, rec.Value)
	}
	sort.Strings(values)
	if got := strings.Join(values, ""); got != "abcde" {
		t.Fatalf("read_committed copy holds %q; want abcde, each once", got)
	}
}

// `sluice produce` sends each line of stdin as it is read and prints its
// offset once it is durable, before the next line comes: `tail -f log |
// sluice produce` works.
func TestProduceStreamsStdin(t *testing.T) {
	c := startCLICluster(t)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"topic", "create", "t", "--addr", c.Addr()}, &out, &errOut); code != 0 {
		t.Fatalf("topic create: exit %d: %s", code, errOut.String())
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cmd := newProduceCmd(produce)
	cmd.SetIn(inR)
	cmd.SetOut(outW)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--topic", "t", "--addr", c.Addr()})
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(context.Background())
		_ = outW.Close()
		done <- err
	}()
	lines := bufio.NewScanner(outR)
	for i := range 3 {
		if _, err := fmt.Fprintf(inW, "line-%d\n", i); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			if lines.Scan() {
				got <- lines.Text()
			}
			close(got)
		}()
		select {
		case l := <-got:
			if want := fmt.Sprintf("partition 0 offset %d", i); l != want {
				t.Fatalf("after line %d: %q; want %q", i, l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("line %d written, stdin still open: no offset printed within 10 s", i)
		}
	}
	_ = inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A line longer than any record is refused, naming the limit.
	cmd = newProduceCmd(produce)
	cmd.SetIn(strings.NewReader(strings.Repeat("x", maxStdinLine+1) + "\n"))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--topic", "t", "--addr", c.Addr()})
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line 1 of stdin is longer than %d bytes", maxStdinLine)) {
		t.Fatalf("a line over %d bytes: %v; want an error naming the limit", maxStdinLine, err)
	}
}

// `sluice produce` goes through the SDK's idempotent producer (its batches
// carry a producer id, so a retry is stored once); --idempotent=false
// sends a plain request.
func TestProduceIsIdempotent(t *testing.T) {
	c := startCLICluster(t)
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(args, "--addr", c.Addr()), &out, &errOut); code != 0 {
			t.Fatalf("sluice %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	cli("topic", "create", "t")
	if got, want := cli("produce", "--topic", "t", "a", "b", "c"), "partition 0 offset 0\npartition 0 offset 1\npartition 0 offset 2\n"; got != want {
		t.Fatalf("produce: %q, want %q", got, want)
	}
	if got, want := cli("produce", "--topic", "t", "d", "--idempotent=false"), "partition 0 offset 3\n"; got != want {
		t.Fatalf("produce --idempotent=false: %q, want %q", got, want)
	}
	cons := sluicev1connect.NewConsumerServiceClient(http.DefaultClient, "http://"+c.Addr())
	resp, err := cons.Fetch(context.Background(), connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: 0, Offset: 0, RecordBatches: true}))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int64
	for _, data := range resp.Msg.GetRecordBatches() {
		for rest := data; len(rest) > 0; {
			b, r, err := record.Split(rest)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, record.Batch(b).ProducerID())
			rest = r
		}
	}
	if len(pids) != 2 || pids[0] < 0 || pids[1] != -1 {
		t.Fatalf("producer ids of the stored batches: %v; want [an id, -1]: a, b, c from the idempotent producer, d plain", pids)
	}
}
