//go:build integration

package lambdapool_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sluicemq/sluice/harness/lambdatest"
	"github.com/sluicemq/sluice/internal/lambdapool"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// recorderLine is a line of internal/functions/recorder's file.
type recorderLine struct {
	InvocationID    string `json:"invocationId"`
	RequestID       string `json:"requestId"`
	StartedUnixNano int64  `json:"startedUnixNano"`
	Outcome         string `json:"outcome"`
	Records         []struct {
		Topic     string `json:"topic"`
		Partition int64  `json:"partition"`
		Offset    int64  `json:"offset"`
		Key       string `json:"key"`
		Value     string `json:"value"`
	} `json:"records"`
}

// invoker invokes the pool's functions through aws-sdk-go-v2's Lambda
// client (no SDK retries, as the trigger's Invoker) with a batch of
// orders-2 records whose values are given, and Sluice's invocation id in
// the client context.
type invoker struct {
	t      *testing.T
	client *lambda.Client
}

func newInvoker(t *testing.T, p *lambdapool.Pool) *invoker {
	return &invoker{t: t, client: lambda.New(lambda.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(p.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), Retryer: aws.NopRetryer{},
	})}
}

// invoke returns the SDK's answer and trigger.Classify's reading of it.
func (iv *invoker) invoke(function, id string, firstOffset int64, values ...string) (*lambda.InvokeOutput, trigger.Result, error) {
	var recs []events.KafkaRecord
	batch := trigger.Batch{Topic: "orders", Partition: 2}
	for i, v := range values {
		off := firstOffset + int64(i)
		recs = append(recs, events.KafkaRecord{Topic: "orders", Partition: 2, Offset: off,
			Key: b64("k" + strconv.FormatInt(off, 10)), Value: b64(v)})
		batch.Records = append(batch.Records, record.Record{Offset: off})
	}
	payload, err := json.Marshal(events.KafkaEvent{EventSource: "SelfManagedKafka", Records: map[string][]events.KafkaRecord{"orders-2": recs}})
	if err != nil {
		iv.t.Fatal(err)
	}
	cc := b64(`{"custom":{"sluice-invocation-id":"` + id + `"}}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := iv.client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(function), ClientContext: aws.String(cc), Payload: payload})
	return out, trigger.Classify(out, err, batch), err
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestIntegrationRecorderUnderRIE runs internal/functions/recorder under
// the real Runtime Interface Emulator, 2 instances behind the pool, and
// invokes it with the real SDK client: two invocations run at once (in two
// processes), a third meanwhile is throttled; the handler saw the records
// and the invocation id; "fail" comes back as a batch item failure and
// "poison" as a function error with X-Amz-Function-Error; a timeout is a
// function error too; killing an RIE mid-invocation gives a transient
// error, the instance comes back, and later invocations run; Close leaves
// no process behind.
func TestIntegrationRecorderUnderRIE(t *testing.T) {
	dir := t.TempDir()
	p := lambdatest.Start(t,
		lambdatest.Function{Name: "recorder", Package: lambdatest.Recorder, Instances: 2, Env: []string{"RECORDER_DIR=" + dir}},
		lambdatest.Function{Name: "short", Package: lambdatest.Recorder, Timeout: time.Second, Env: []string{"RECORDER_DIR=" + dir}},
	)
	iv := newInvoker(t, p)

	// Two at once, then a third while both sleep.
	var wg sync.WaitGroup
	for i, id := range []string{"a", "b"} {
		wg.Go(func() {
			out, res, err := iv.invoke("recorder", id, int64(10*i), "x", "sleep:1500")
			if res.Outcome != trigger.Success || len(res.Failed) != 0 {
				t.Errorf("invocation %s: %v (%v, %v)", id, res.Outcome, err, out)
			}
		})
	}
	waitFor(t, "both instances busy", func() bool {
		n := 0
		for _, s := range p.Instances("recorder") {
			if s.Busy {
				n++
			}
		}
		return n == 2
	})
	out, res, err := iv.invoke("recorder", "c", 20, "x")
	var tm *types.TooManyRequestsException
	if !errors.As(err, &tm) || res.Outcome != trigger.Throttled {
		t.Fatalf("third invocation: %v, %v; Classify %v; want TooManyRequestsException, throttled", out, err, res.Outcome)
	}
	wg.Wait()
	lines := readLines(t, dir)
	a, b := find(t, lines, "a"), find(t, lines, "b")
	if a.file == b.file {
		t.Fatalf("a and b ran in the same process (%s)", a.file)
	}
	if d := time.Duration(a.StartedUnixNano - b.StartedUnixNano).Abs(); d > time.Second {
		t.Fatalf("a and b started %v apart: not at once", d)
	}
	if len(a.Records) != 2 || a.Records[0].Topic != "orders" || a.Records[0].Partition != 2 || a.Records[0].Offset != 0 ||
		a.Records[0].Key != "k0" || a.Records[0].Value != "x" || a.Records[1].Value != "sleep:1500" || a.RequestID == "" {
		t.Fatalf("a's line: %+v", a.recorderLine)
	}

	// A failed record, a poison record.
	if _, res, err := iv.invoke("recorder", "d", 30, "ok", "fail", "ok"); res.Outcome != trigger.Success || !slices.Equal(res.Failed, []int64{31}) {
		t.Fatalf("fail: %v %v (%v)", res.Outcome, res.Failed, err)
	}
	out, res, err = iv.invoke("recorder", "e", 40, "ok", "poison")
	if err != nil || aws.ToString(out.FunctionError) != "Unhandled" || res.Outcome != trigger.FunctionError ||
		!bytes.Contains(out.Payload, []byte(`"errorType":"PoisonError"`)) {
		t.Fatalf("poison: %v, %v; Classify %v", out, err, res.Outcome)
	}
	if l := find(t, readLines(t, dir), "e"); l.Outcome != "poison" {
		t.Fatalf("poison line: %+v", l.recorderLine)
	}

	// A timeout (1 s) is a function error; the next invocation runs.
	out, res, err = iv.invoke("short", "f", 50, "sleep:3000")
	if err != nil || aws.ToString(out.FunctionError) != "Unhandled" || res.Outcome != trigger.FunctionError ||
		!bytes.Contains(out.Payload, []byte("Task timed out after 1.00 seconds")) {
		t.Fatalf("timeout: %v, %v; Classify %v", out, err, res.Outcome)
	}
	if _, res, err := iv.invoke("short", "g", 60, "ok"); res.Outcome != trigger.Success {
		t.Fatalf("after a timeout: %v (%v)", res.Outcome, err)
	}

	// Kill an RIE in the middle of an invocation.
	killed := make(chan trigger.Result, 1)
	go func() {
		_, res, _ := iv.invoke("recorder", "h", 70, "sleep:5000")
		killed <- res
	}()
	var victim lambdapool.InstanceState
	waitFor(t, "the invocation to start", func() bool {
		for _, s := range p.Instances("recorder") {
			if s.Busy {
				victim = s
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if res := <-killed; res.Outcome != trigger.Transient {
		t.Fatalf("the killed invocation: %v (%v), want transient", res.Outcome, res.Err)
	}
	waitFor(t, "the restart", func() bool {
		s := p.Instances("recorder")[victim.Index]
		return s.Restarts == 1 && s.PID != 0 && s.PID != victim.PID
	})
	// Both instances serve again: two at once succeed.
	for i, id := range []string{"i", "j"} {
		wg.Go(func() {
			if _, res, err := iv.invoke("recorder", id, int64(80+10*i), "sleep:300"); res.Outcome != trigger.Success {
				t.Errorf("after the restart, %s: %v (%v)", id, res.Outcome, err)
			}
		})
	}
	wg.Wait()
	// The bootstrap of the killed RIE (asleep in "h") is gone too: at most
	// an RIE and a bootstrap per instance.
	if n := len(processesWith("RECORDER_DIR=" + dir)); n > 2*3 {
		t.Fatalf("%d processes of the pool, want at most 6 (3 instances)", n)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if pids := processesWith("RECORDER_DIR=" + dir); len(pids) != 0 {
		t.Fatalf("processes left after Close: %v", pids)
	}
}

type fileLine struct {
	recorderLine
	file string
}

func readLines(t *testing.T, dir string) []fileLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []fileLine
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l recorderLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %q: %v", name, sc.Text(), err)
			}
			out = append(out, fileLine{l, filepath.Base(name)})
		}
		f.Close()
	}
	return out
}

// find returns the one line of invocation id.
func find(t *testing.T, lines []fileLine, id string) fileLine {
	t.Helper()
	var found []fileLine
	for _, l := range lines {
		if l.InvocationID == id {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines of invocation %q, want 1: %+v", len(found), id, lines)
	}
	return found[0]
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
		if err != nil {
			continue
		}
		if slices.ContainsFunc(bytes.Split(b, []byte{0}), func(kv []byte) bool { return string(kv) == entry }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
