//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/lambdatest"
)

// The README's "Functions" walk-through, followed literally: the example
// function is built as the README builds it, served by cmd/lambdapool under
// the real Runtime Interface Emulator with the README's flags, sluice dev
// starts with --lambda-endpoint, and every command after prints what the
// README shows (up to times and ids): the trigger invokes the real handler,
// retries the record it reports failed, sends it to the DLQ, and describe
// shows the partitions done.
func TestIntegrationReadmeFunctions(t *testing.T) {
	rie := lambdatest.RIE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	blocks := readmeSteps(t, readme, "## Functions")
	if len(blocks) < 5 {
		t.Fatalf("README Functions: %d console blocks, want build, pool, dev, commands, describe", len(blocks))
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := bookieproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	poolBin := filepath.Join(t.TempDir(), "lambdapool")
	if out, err := exec.CommandContext(ctx, "go", "build", "-C", repo, "-o", poolBin, "./cmd/lambdapool").CombinedOutput(); err != nil {
		t.Fatalf("build cmd/lambdapool: %v\n%s", err, out)
	}
	work := t.TempDir()

	// Block 1: build the function (in the module, into the work
	// directory); the emulator is installed already (localstack/lambda.sh).
	build := blocks[0]
	if len(build) != 2 || !strings.Contains(build[0].cmd, "go build") || !strings.Contains(build[1].cmd, "go install") {
		t.Fatalf("README Functions: the first block should build the function and install the emulator; got %+v", build)
	}
	bcmd := strings.Replace(build[0].cmd, "go build", "go build -C "+repo, 1)
	bcmd = strings.Replace(bcmd, "-o orders-fn/", "-o "+work+"/orders-fn/", 1)
	if out, err := exec.CommandContext(ctx, "bash", "-c", bcmd).CombinedOutput(); err != nil {
		t.Fatalf("README build %q: %v\n%s", bcmd, err, out)
	}

	// Block 2: the pool, on a free port instead of 9100.
	poolAddr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	pool := blocks[1]
	if len(pool) != 1 || !strings.HasPrefix(pool[0].cmd, "go run ./cmd/lambdapool ") || len(pool[0].want) != 1 {
		t.Fatalf("README Functions: the second block should start cmd/lambdapool; got %+v", pool)
	}
	pcmd := strings.Replace(pool[0].cmd, "go run ./cmd/lambdapool", poolBin, 1)
	pcmd = strings.Replace(pcmd, `"$(go env GOPATH)/bin/aws-lambda-rie"`, rie, 1)
	pcmd += " --listen " + poolAddr
	poolLine := startBackground(ctx, t, work, pcmd)
	if want := strings.ReplaceAll(pool[0].want[0], "127.0.0.1:9100", poolAddr); poolLine != want {
		t.Fatalf("lambdapool printed %q, want %q", poolLine, want)
	}

	// Block 3: sluice dev pointed at it.
	addr, err := bookieproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dev := blocks[2]
	if len(dev) != 1 || !strings.HasPrefix(dev[0].cmd, "go run ./cmd/sluice dev --lambda-endpoint ") || len(dev[0].want) != 2 {
		t.Fatalf("README Functions: the third block should start sluice dev with --lambda-endpoint; got %+v", dev)
	}
	dcmd := strings.Replace(dev[0].cmd, "go run ./cmd/sluice", bin, 1)
	dcmd = strings.ReplaceAll(dcmd, "127.0.0.1:9100", poolAddr) + " --addr " + addr
	devCmd := exec.Command("bash", "-c", "exec "+dcmd)
	devCmd.Dir = work
	var devOut, devLog bytes.Buffer
	devCmd.Stdout, devCmd.Stderr = &devOut, &devLog
	if err := devCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = devCmd.Process.Signal(syscall.SIGTERM); _ = devCmd.Wait() }()
	rewrite := func(cmd string) string {
		cmd = strings.ReplaceAll(cmd, "127.0.0.1:7420", addr)
		if strings.HasPrefix(cmd, "go run ./cmd/sluice ") {
			cmd = strings.Replace(cmd, "go run ./cmd/sluice", bin, 1) + " --addr " + addr
		}
		return cmd
	}
	run := func(cmd string) string {
		c := exec.CommandContext(ctx, "bash", "-c", cmd)
		c.Dir = work
		out, _ := c.CombinedOutput()
		return string(out)
	}
	health := "curl -s -H 'Content-Type: application/json' http://" + addr + "/grpc.health.v1.Health/Check -d '{}'"
	for deadline := time.Now().Add(60 * time.Second); strings.TrimSpace(run(health)) != `{"status":"SERVING"}`; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sluice dev not SERVING after 60 s:\n%s%s", devOut.String(), devLog.String())
		}
	}
	for i, want := range dev[0].want {
		want = strings.ReplaceAll(strings.ReplaceAll(want, "127.0.0.1:7420", addr), "127.0.0.1:9100", poolAddr)
		if got := strings.Split(devOut.String(), "\n")[i]; got != want {
			t.Errorf("sluice dev line %d:\n got %q\nwant %q", i+1, got, want)
		}
	}
	steps := runReadmeSteps(ctx, t, readme, blocks[3:], rewrite, run)
	t.Logf("%d README commands ran", steps)
	if t.Failed() {
		t.Log(devOut.String() + devLog.String())
	}
}

// startBackground starts cmd (bash) in dir in its own process group, killed
// at the test's end, and returns its first line of standard output.
func startBackground(ctx context.Context, t *testing.T, dir, cmd string) string {
	t.Helper()
	c := exec.Command("bash", "-c", "exec "+cmd)
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%s printed nothing:\n%s", cmd, stderr.String())
		}
		return l
	case <-ctx.Done():
		t.Fatalf("%s: no output line: %v\n%s", cmd, ctx.Err(), stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no output line within 60 s\n%s", cmd, stderr.String())
	}
	return ""
}
