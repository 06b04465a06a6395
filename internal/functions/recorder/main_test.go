package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func invocation(id, reqID string) context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{
		AwsRequestID:  reqID,
		ClientContext: lambdacontext.ClientContext{Custom: map[string]string{InvocationIDKey: id}},
	})
}

func event(values ...string) events.KafkaEvent {
	var recs []events.KafkaRecord
	for i, v := range values {
		recs = append(recs, events.KafkaRecord{Topic: "orders", Partition: 2, Offset: int64(10 + i), Key: b64("k" + strconv.Itoa(i)), Value: b64(v)})
	}
	return events.KafkaEvent{EventSource: "SelfManagedKafka", Records: map[string][]events.KafkaRecord{"orders-2": recs}}
}

// lines reads the process's record file in dir.
func lines(t *testing.T, dir string) []Line {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, strconv.Itoa(os.Getpid())+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

func TestRecordsEveryInvocationAndReportsFailures(t *testing.T) {
	dir := t.TempDir()
	r := &Recorder{Dir: dir}
	before := time.Now().UnixNano()
	ev := event("a", "fail", "b")
	ev.Records["orders-1"] = []events.KafkaRecord{{Topic: "orders", Partition: 1, Offset: 5, Value: "!!not base64"}}
	resp, err := r.Handle(invocation("id-1", "req-1"), ev)
	if err != nil {
		t.Fatal(err)
	}
	want := Response{Records: 4, InvocationID: "id-1", BatchItemFailures: []BatchItemFailure{
		{KafkaItemIdentifier{"orders-1", 5}}, {KafkaItemIdentifier{"orders-2", 11}},
	}}
	if !reflect.DeepEqual(resp, want) {
		t.Fatalf("Handle = %+v, want %+v", resp, want)
	}
	if _, err := r.Handle(invocation("id-2", "req-2"), event("c")); err != nil {
		t.Fatal(err)
	}
	got := lines(t, dir)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2", len(got))
	}
	l := got[0]
	if l.InvocationID != "id-1" || l.RequestID != "req-1" || l.Outcome != OutcomeOK || l.StartedUnixNano < before || l.StartedUnixNano > time.Now().UnixNano() {
		t.Fatalf("line = %+v", l)
	}
	wantRecs := []Record{
		{"orders", 1, 5, "", "!!not base64"},
		{"orders", 2, 10, "k0", "a"}, {"orders", 2, 11, "k1", "fail"}, {"orders", 2, 12, "k2", "b"},
	}
	if !reflect.DeepEqual(l.Records, wantRecs) {
		t.Fatalf("records = %+v, want %+v", l.Records, wantRecs)
	}
	if got[1].InvocationID != "id-2" || len(got[1].Records) != 1 || got[1].Records[0].Value != "c" {
		t.Fatalf("second line = %+v", got[1])
	}
}

// The answer's JSON is what Sluice's fetch service parses.
func TestWireShape(t *testing.T) {
	r := &Recorder{}
	resp, err := r.Handle(invocation("id", "req"), event("fail"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp)
	if want := `{"records":1,"batchItemFailures":[{"itemIdentifier":{"partition":"orders-2","offset":10}}],"invocationId":"id"}`; string(b) != want {
		t.Fatalf("answer %s, want %s", b, want)
	}
}

func TestPoisonFailsTheInvocation(t *testing.T) {
	dir := t.TempDir()
	r := &Recorder{Dir: dir}
	_, err := r.Handle(invocation("id", "req"), event("a", "poison", "poison"))
	var pe *PoisonError
	if !errors.As(err, &pe) || pe.Partition != "orders-2" || pe.Offset != 11 {
		t.Fatalf("Handle = %v, want the first poison record", err)
	}
	if l := lines(t, dir); len(l) != 1 || l[0].Outcome != OutcomePoison || len(l[0].Records) != 3 {
		t.Fatalf("lines = %+v", l)
	}
}

func TestFailFirst(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RECORDER_DIR", dir)
	t.Setenv("RECORDER_FAIL_FIRST", "2")
	r, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, err := r.Handle(invocation("id", "req"), event("a"))
		var te *TransientError
		if (i < 2) != errors.As(err, &te) {
			t.Fatalf("invocation %d: %v", i, err)
		}
	}
	l := lines(t, dir)
	if len(l) != 3 || l[0].Outcome != OutcomeFailFirst || l[1].Outcome != OutcomeFailFirst || l[2].Outcome != OutcomeOK {
		t.Fatalf("lines = %+v", l)
	}
	t.Setenv("RECORDER_FAIL_FIRST", "-1")
	if _, err := FromEnv(); err == nil {
		t.Fatal("FromEnv accepted RECORDER_FAIL_FIRST=-1")
	}
}

func TestSleep(t *testing.T) {
	r := &Recorder{}
	start := time.Now()
	if _, err := r.Handle(invocation("id", "req"), event("sleep:30", "sleep:20", "sleep:x")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("answered after %v, want ≥ 50ms", d)
	}
}
