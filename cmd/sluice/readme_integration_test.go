//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/bookieproc"
)

// readmeStep is one "$ command" of a README console block and the output
// the README shows for it.
type readmeStep struct {
	cmd  string
	want []string
}

// readmeSteps returns the console blocks of a README section ("## Try
// it") in order.
func readmeSteps(t *testing.T, readme, section string) [][]readmeStep {
	t.Helper()
	start := strings.Index(readme, "\n"+section+"\n")
	if start < 0 {
		t.Fatalf("README: no %q section", section)
	}
	end := strings.Index(readme[start+1:], "\n## ")
	if end < 0 {
		end = len(readme)
	} else {
		end += start + 1
	}
	var blocks [][]readmeStep
	var cur []readmeStep
	in, cont := false, false
	sc := bufio.NewScanner(strings.NewReader(readme[start:end]))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && line == "```console":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, cur)
		case in && cont:
			cur[len(cur)-1].cmd += "\n" + line
			cont = strings.HasSuffix(line, `\`)
		case in && strings.HasPrefix(line, "$ "):
			cur = append(cur, readmeStep{cmd: strings.TrimPrefix(line, "$ ")})
			cont = strings.HasSuffix(line, `\`)
		case in && len(cur) > 0:
			cur[len(cur)-1].want = append(cur[len(cur)-1].want, line)
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("README: %d console blocks in %s", len(blocks), section)
	}
	return blocks
}

// The README's "Try it" walkthrough, followed literally from a fresh sluice
// dev: every command runs (go run ./cmd/sluice as the built binary, against
// this test's address) and prints what the README shows, up to times, ids
// and a load run's figures. Describes may be retried for a few seconds:
// the README says unwritten partitions are taken by the next balancing
// round. The long-poll Fetch is answered by the produce the README says
// another terminal runs.
func TestIntegrationReadmeWalkthrough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	blocks := readmeSteps(t, readme, "## Try it")
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	rewrite := readmeRewrite(bin, addr)

	// Block 1 starts sluice dev; the test starts it itself, in a fresh
	// data directory, and checks its first two lines.
	dev := blocks[0]
	if len(dev) != 1 || dev[0].cmd != "go run ./cmd/sluice dev" || len(dev[0].want) < 2 {
		t.Fatalf("README: the first console block should be `$ go run ./cmd/sluice dev` and its output; got %+v", dev)
	}
	var devOut, devLog bytes.Buffer
	devCmd := exec.Command(bin, "dev", "--addr", addr)
	devCmd.Dir = work
	devCmd.Stdout, devCmd.Stderr = &devOut, &devLog
	if err := devCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = devCmd.Process.Signal(syscall.SIGTERM); _ = devCmd.Wait() }()
	health := rewrite(blocks[1][0].cmd)
	if !strings.Contains(health, "grpc.health.v1.Health/Check") {
		t.Fatalf("README: the walkthrough should start with the health check; got %q", blocks[1][0].cmd)
	}
	run := func(cmd string) string {
		c := exec.CommandContext(ctx, "bash", "-c", cmd)
		c.Dir = work
		out, _ := c.CombinedOutput()
		return string(out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.TrimSpace(run(health)) == `{"status":"SERVING"}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice dev not SERVING after 60 s:\n%s%s", devOut.String(), devLog.String())
		}
	}
	for i, want := range dev[0].want[:2] {
		want = strings.ReplaceAll(want, "127.0.0.1:7420", addr)
		if got := strings.Split(devOut.String(), "\n")[i]; got != want {
			t.Errorf("sluice dev line %d:\n got %q\nwant %q", i+1, got, want)
		}
	}

	steps := runReadmeSteps(ctx, t, readme, blocks[1:], rewrite, run)
	t.Logf("%d README commands ran", steps)
	if t.Failed() {
		fmt.Fprintln(os.Stderr, devOut.String()+devLog.String())
	}
}

// runReadmeSteps runs README console steps and compares their output with
// the README's (normalized); a describe may be retried for 12 s. It returns
// how many ran.
func runReadmeSteps(ctx context.Context, t *testing.T, readme string, blocks [][]readmeStep, rewrite func(string) string, run func(string) string) int {
	t.Helper()
	other := regexp.MustCompile("another terminal runs\\s+`([^`]+)`").FindStringSubmatch(readme)
	steps := 0
	for _, block := range blocks {
		for _, st := range block {
			cmd := rewrite(st.cmd)
			want := normalize(st.want)
			var got string
			for deadline := time.Now().Add(12 * time.Second); ; time.Sleep(500 * time.Millisecond) {
				if strings.Contains(cmd, "maxWaitMs") {
					if other == nil {
						t.Fatal("README: a long-poll Fetch but no `another terminal runs` command")
					}
					done := make(chan string, 1)
					go func() { done <- run(cmd) }()
					time.Sleep(time.Second)
					if out := run(rewrite(other[1])); !strings.Contains(out, "offset") {
						t.Fatalf("the other terminal's produce: %s", out)
					}
					got = <-done
				} else {
					got = run(cmd)
				}
				var lines []string
				if got = strings.TrimRight(got, "\n"); got != "" {
					lines = strings.Split(got, "\n")
				}
				got = normalize(lines)
				if got == want || !strings.Contains(st.cmd, " describe ") || time.Now().After(deadline) {
					break
				}
			}
			if got != want {
				t.Errorf("README step %q:\n got:\n%s\nwant:\n%s", st.cmd, got, want)
			}
			steps++
		}
	}
	return steps
}

// readmeRewrite makes a README command a test's: the binary, the address.
func readmeRewrite(bin, addr string) func(string) string {
	return func(cmd string) string {
		cmd = strings.ReplaceAll(cmd, "127.0.0.1:7420", addr)
		var out []string
		for _, part := range strings.Split(cmd, "|") {
			if strings.Contains(part, "go run ./cmd/sluice ") {
				part = strings.Replace(part, "go run ./cmd/sluice", bin, 1)
				part = strings.TrimRight(part, " ") + " --addr " + addr
			}
			out = append(out, part)
		}
		return strings.Join(out, "|")
	}
}

// The README's schema registry section, followed literally against a fresh
// sluice dev: each command prints what the README shows — registering,
// refusing an incompatible version, producing valid values and an invalid
// one (refused), consuming with --decode.
func TestIntegrationReadmeSchemaRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	blocks := readmeSteps(t, readme, "## Schema registry")
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	devCmd := exec.Command(bin, "dev", "--addr", addr)
	devCmd.Dir = work
	var devLog bytes.Buffer
	devCmd.Stdout, devCmd.Stderr = &devLog, &devLog
	if err := devCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = devCmd.Process.Signal(syscall.SIGTERM); _ = devCmd.Wait() }()
	run := func(cmd string) string {
		c := exec.CommandContext(ctx, "bash", "-c", cmd)
		c.Dir = work
		out, _ := c.CombinedOutput()
		return string(out)
	}
	for deadline := time.Now().Add(60 * time.Second); strings.TrimSpace(run("curl -s http://"+addr+"/registry/")) != "{}"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sluice dev's registry not answering after 60 s:\n%s", devLog.String())
		}
	}
	if n := runReadmeSteps(ctx, t, readme, blocks, readmeRewrite(bin, addr), run); n != 7 {
		t.Errorf("%d README commands ran, want 7", n)
	}
}
