//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluicemq/sluice/harness/lambdatest"
)

// TestIntegrationLambdapoolCommand runs the command with two functions
// under the real emulator, invokes both through the SDK, and stops it with
// SIGTERM: it exits 0 and leaves no process behind.
func TestIntegrationLambdapoolCommand(t *testing.T) {
	rie := lambdatest.RIE(t)
	echo := lambdatest.Build(t, lambdatest.Echo)
	bin := filepath.Join(t.TempDir(), "lambdapool")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	mark := "LAMBDAPOOL_TEST=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--rie", rie,
		"--function", "echo="+echo, "--function", "function="+echo, "--instances", "2", "--instances", "function:1", "--env", mark)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("no serving line: %v\n%s", err, stderr.String())
	}
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "lambdapool: serving ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	c := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), Retryer: aws.NopRetryer{}})
	for _, fn := range []string{"echo", "function"} {
		out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(fn),
			Payload: []byte(`{"eventSource":"SelfManagedKafka","records":{"t-0":[{"topic":"t","partition":0,"offset":1,"value":"aGk="}]}}`)})
		if err != nil {
			t.Fatalf("invoke %s: %v\n%s", fn, err, stderr.String())
		}
		var resp struct{ Echo []string }
		if json.Unmarshal(out.Payload, &resp) != nil || !slices.Equal(resp.Echo, []string{"hi"}) {
			t.Fatalf("%s answered %s", fn, out.Payload)
		}
	}
	// Three RIEs, and a bootstrap under each of the two that ran an
	// invocation (an RIE starts its bootstrap on its first).
	if n := len(processesWith(mark)); n != 3+2 {
		t.Fatalf("%d processes (RIEs and bootstraps), want 5", n)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	if pids := processesWith(mark); len(pids) != 0 {
		t.Fatalf("processes left after SIGTERM: %v", pids)
	}
}

// processesWith lists the processes whose environment holds entry.
func processesWith(entry string) []int {
	dirs, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err == nil && slices.ContainsFunc(bytes.Split(b, []byte{0}), func(kv []byte) bool { return string(kv) == entry }) {
			pids = append(pids, pid)
		}
	}
	return pids
}
