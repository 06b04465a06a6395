package fetch_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// fakeLambda serves the Lambda Invoke API in process for the hermetic
// tier: it decodes Lambda's Kafka event and answers what its handler says.
// (The integration tier runs real aws-lambda-go handlers under AWS's
// Runtime Interface Emulator instead.)
type fakeLambda struct {
	srv *httptest.Server
	// handle answers one invocation: the HTTP status, the
	// X-Amzn-ErrorType (throttling) and the body.
	handle func(inv invocation) (status int, errType string, body string)

	mu    sync.Mutex
	calls []invocation
}

// invocation is what the fake function saw.
type invocation struct {
	function string
	id       string
	records  []events.KafkaRecord // of the one partition
	values   []string
}

func newFakeLambda(t *testing.T, handle func(inv invocation) (int, string, string)) *fakeLambda {
	f := &fakeLambda{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /2015-03-31/functions/<name>/invocations
		parts := strings.Split(r.URL.Path, "/")
		if len(parts) != 5 || parts[4] != "invocations" {
			http.Error(w, "bad path "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var ev events.KafkaEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("fake lambda: event %s: %v", body, err)
		}
		inv := invocation{function: parts[3]}
		if cc, err := base64.StdEncoding.DecodeString(r.Header.Get("X-Amz-Client-Context")); err == nil {
			var c struct {
				Custom map[string]string `json:"custom"`
			}
			_ = json.Unmarshal(cc, &c)
			inv.id = c.Custom[trigger.ClientContextKey]
		}
		for _, recs := range ev.Records {
			inv.records = append(inv.records, recs...)
		}
		for _, rec := range inv.records {
			v, _ := base64.StdEncoding.DecodeString(rec.Value)
			inv.values = append(inv.values, string(v))
		}
		status, errType, answer := f.handle(inv)
		if status == http.StatusOK {
			f.mu.Lock()
			f.calls = append(f.calls, inv)
			f.mu.Unlock()
		}
		if errType != "" {
			w.Header().Set("X-Amzn-ErrorType", errType)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLambda) invoker() *trigger.Invoker {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	return trigger.NewInvoker(cfg, f.srv.URL)
}

func (f *fakeLambda) invocations() []invocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// processed is every record value the function finished (answered OK and
// not in batchItemFailures), by partition, in the order seen.
type seen struct {
	mu     sync.Mutex
	values map[int64][]string
}

func (s *seen) add(partition int64, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[int64][]string{}
	}
	s.values[partition] = append(s.values[partition], v)
}

// processed notes every record of inv as processed and answers success.
func (s *seen) processed(inv invocation) (int, string, string) {
	for i, r := range inv.records {
		s.add(r.Partition, inv.values[i])
	}
	return ok()
}

func (s *seen) get(partition int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.values[partition])
}

func ok(failed ...int64) (int, string, string) {
	var items []string
	for _, o := range failed {
		items = append(items, fmt.Sprintf(`{"itemIdentifier":"%d"}`, o))
	}
	return http.StatusOK, "", `{"batchItemFailures":[` + strings.Join(items, ",") + `]}`
}

func triggerCluster(t *testing.T, f *fakeLambda) *env {
	return startCluster(t, cluster.Config{Lambda: f.invoker(), Fetch: fetch.Config{TriggerRefresh: 50 * time.Millisecond, BalanceInterval: 100 * time.Millisecond}})
}

func (e *env) createTrigger(t *testing.T, name string, spec *sluicev1.TriggerSpec) {
	t.Helper()
	spec.Enabled = true
	if spec.Function == "" {
		spec.Function = "fn"
	}
	if _, err := e.admin.CreateTrigger(context.Background(), connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: name, Spec: spec})); err != nil {
		t.Fatal(err)
	}
}

func (e *env) describeTrigger(t *testing.T, name string) *sluicev1.DescribeTriggerResponse {
	t.Helper()
	resp, err := e.admin.DescribeTrigger(context.Background(), connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: name}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg
}

func values(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "v" + strconv.Itoa(from+i)
	}
	return out
}

// A trigger invokes its function with every record of every partition in
// partition order, in batches of at most batch_size, with a deterministic
// invocation id, commits after success, and DescribeTrigger shows it
// running with no lag.
func TestTriggerDeliversEveryRecordInOrder(t *testing.T) {
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		return got.processed(inv)
	})
	e := triggerCluster(t, f)
	e.createTopic(t, "orders", 3)
	e.produce(t, "orders", 0, 0, 300, 100)
	e.produce(t, "orders", 2, 0, 120, 40)
	e.createTrigger(t, "orders-fn", &sluicev1.TriggerSpec{Topic: "orders", BatchSize: 50,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST})
	waitFor(t, "every record invoked", 20*time.Second, func() bool { return len(got.get(0)) >= 300 && len(got.get(2)) >= 120 })
	// Records produced while it runs come too.
	e.produce(t, "orders", 1, 0, 70, 7)
	waitFor(t, "the later records invoked", 20*time.Second, func() bool { return len(got.get(1)) >= 70 })
	for p, n := range map[int64]int{0: 300, 1: 70, 2: 120} {
		if g := got.get(p); !slices.Equal(g, values(0, n)) {
			t.Fatalf("partition %d: the function saw %d records %v..., want v0..v%d once each in order", p, len(g), g[:min(len(g), 5)], n-1)
		}
	}
	for _, inv := range f.invocations() {
		if len(inv.records) > 50 || inv.function != "fn" {
			t.Fatalf("invocation of %q with %d records (batch size 50)", inv.function, len(inv.records))
		}
		first, last := inv.records[0], inv.records[len(inv.records)-1]
		if !strings.HasPrefix(inv.id, "v1/orders-fn/orders/") || !strings.Contains(inv.id, fmt.Sprintf("/%d/%d-%d/", first.Partition, first.Offset, last.Offset)) {
			t.Fatalf("invocation id %q does not name partition %d offsets %d-%d", inv.id, first.Partition, first.Offset, last.Offset)
		}
	}
	waitFor(t, "lag 0 on every partition", 10*time.Second, func() bool {
		d := e.describeTrigger(t, "orders-fn")
		if d.GetTrigger().GetState() != sluicev1.TriggerState_TRIGGER_STATE_RUNNING || len(d.GetPartitions()) != 3 || d.GetMembers() != 1 {
			return false
		}
		for _, p := range d.GetPartitions() {
			if p.GetLag() != 0 || p.GetState() != "RUNNING" {
				return false
			}
		}
		return true
	})
	// The trigger's group is the runtime's: clients cannot join it.
	_, err := e.cons.Commit(context.Background(), connect.NewRequest(&sluicev1.CommitRequest{Group: e.describeTrigger(t, "orders-fn").GetGroup(),
		Offsets: []*sluicev1.CommitOffset{{Topic: "orders", Partition: 0, Offset: 1}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("commit in a trigger's group: %v, want INVALID_ARGUMENT", err)
	}
}

// batchItemFailures: the records before the first failed one are done; the
// rest is invoked again (a retry), and the failed record succeeds then.
// Nothing before the failure is invoked twice.
func TestTriggerHonoursBatchItemFailures(t *testing.T) {
	var mu sync.Mutex
	failedOnce := map[string]bool{}
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		mu.Lock()
		defer mu.Unlock()
		for i, r := range inv.records {
			v := inv.values[i]
			if (v == "v13" || v == "v40") && !failedOnce[v] {
				failedOnce[v] = true
				var failed []int64
				for _, r2 := range inv.records[i:] {
					failed = append(failed, r2.Offset)
				}
				return ok(failed[:1]...)
			}
			got.add(r.Partition, v)
		}
		return ok()
	})
	e := triggerCluster(t, f)
	e.createTopic(t, "t", 1)
	e.produce(t, "t", 0, 0, 60, 60)
	e.createTrigger(t, "tr", &sluicev1.TriggerSpec{Topic: "t", BatchSize: 25, RetryBackoffInitialMs: 1, RetryBackoffMaxMs: 5,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST})
	waitFor(t, "every record processed", 20*time.Second, func() bool { return len(got.get(0)) >= 60 })
	if g := got.get(0); !slices.Equal(g, values(0, 60)) {
		t.Fatalf("processed %v, want v0..v59 once each in order", g)
	}
	// The retry of a partial failure starts at the failed record.
	var starts []int64
	for _, inv := range f.invocations() {
		starts = append(starts, inv.records[0].Offset)
	}
	if !slices.Contains(starts, 13) || !slices.Contains(starts, 40) {
		t.Fatalf("invocations started at %v; want retries starting at 13 and 40", starts)
	}
}

// A poison record (the function fails every batch holding it) goes to the
// on_failure_topic after the retries, with headers naming the trigger, the
// function, the source and the error, and the records after it are
// processed; bisect_on_error isolates it, so its neighbours are not sent.
func TestTriggerPoisonRecordGoesToTheDLQ(t *testing.T) {
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		if slices.Contains(inv.values, "v7") {
			return http.StatusOK, "", `{"errorMessage":"cannot parse v7","errorType":"ParseError"}`
		}
		return got.processed(inv)
	})
	e := triggerCluster(t, f)
	e.createTopic(t, "t", 1)
	e.createTopic(t, "t-dlq", 1)
	e.produce(t, "t", 0, 0, 30, 30)
	e.createTrigger(t, "tr", &sluicev1.TriggerSpec{Topic: "t", BatchSize: 10, MaxRetries: 2, RetryBackoffInitialMs: 1, RetryBackoffMaxMs: 5,
		BisectOnError: true, OnFailureTopic: "t-dlq", StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST})
	waitFor(t, "the records after the poison one processed", 20*time.Second, func() bool { return len(got.get(0)) >= 29 })
	want := slices.DeleteFunc(values(0, 30), func(v string) bool { return v == "v7" })
	if g := got.get(0); !slices.Equal(g, want) {
		t.Fatalf("processed %v, want every record but v7 once in order", g)
	}
	var dlq []*sluicev1.ConsumedRecord
	waitFor(t, "the poison record in the DLQ", 10*time.Second, func() bool {
		resp, err := e.cons.Fetch(context.Background(), connect.NewRequest(&sluicev1.FetchRequest{Topic: "t-dlq", Partition: 0, Offset: 0}))
		if err != nil {
			return false
		}
		dlq = resp.Msg.Records
		return len(dlq) > 0
	})
	if len(dlq) != 1 || string(dlq[0].Value) != "v7" || string(dlq[0].Key) != "k7" {
		t.Fatalf("DLQ holds %v, want the one record v7", dlq)
	}
	hs := map[string]string{}
	for _, h := range dlq[0].Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs[fetch.DLQHeaderTrigger] != "tr" || hs[fetch.DLQHeaderFunction] != "fn" || hs[fetch.DLQHeaderTopic] != "t" || hs[fetch.DLQHeaderPartition] != "0" ||
		hs[fetch.DLQHeaderOffset] != "7" || !strings.Contains(hs[fetch.DLQHeaderError], "cannot parse v7") || hs[fetch.DLQHeaderAttempts] != "3" {
		t.Fatalf("DLQ headers %v", hs)
	}
	d := e.describeTrigger(t, "tr")
	if len(d.GetPartitions()) != 1 || !strings.Contains(d.GetPartitions()[0].GetLastError(), "cannot parse v7") || d.GetPartitions()[0].GetLastErrorAtMs() == 0 {
		t.Fatalf("DescribeTrigger partitions %v, want the last error", d.GetPartitions())
	}
}

// Without an on_failure_topic a record out of retries stops the trigger on
// its partition — never skipped — and DescribeTrigger says so; the other
// partitions go on. Updating the trigger (here: adding a DLQ) resumes it.
func TestTriggerStopsAPartitionWithoutDLQ(t *testing.T) {
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		if slices.Contains(inv.values, "v3") && inv.records[0].Partition == 0 {
			return http.StatusOK, "", `{"errorMessage":"boom","errorType":"Error"}`
		}
		return got.processed(inv)
	})
	e := triggerCluster(t, f)
	e.createTopic(t, "t", 2)
	e.createTopic(t, "dlq", 1)
	e.produce(t, "t", 0, 0, 10, 10)
	e.produce(t, "t", 1, 0, 10, 10)
	e.createTrigger(t, "tr", &sluicev1.TriggerSpec{Topic: "t", BatchSize: 1, MaxRetries: 1, RetryBackoffInitialMs: 1, RetryBackoffMaxMs: 5,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST})
	waitFor(t, "partition 1 processed", 20*time.Second, func() bool { return len(got.get(1)) >= 10 })
	var d *sluicev1.DescribeTriggerResponse
	waitFor(t, "the trigger STOPPED", 10*time.Second, func() bool {
		d = e.describeTrigger(t, "tr")
		return d.GetTrigger().GetState() == sluicev1.TriggerState_TRIGGER_STATE_STOPPED
	})
	if g := got.get(0); !slices.Equal(g, values(0, 3)) {
		t.Fatalf("partition 0 processed %v, want v0..v2 and a stop at v3", g)
	}
	for _, p := range d.GetPartitions() {
		if p.GetPartition() == 0 && (p.GetState() != "STOPPED" || p.GetCommittedOffset() != 3 || !strings.Contains(p.GetLastError(), "boom")) {
			t.Fatalf("partition 0: %v, want STOPPED at offset 3 with the error", p)
		}
	}
	idsOfV3 := func() []string {
		var ids []string
		for _, inv := range f.invocations() {
			if slices.Contains(inv.values, "v3") && inv.records[0].Partition == 0 {
				ids = append(ids, inv.id)
			}
		}
		return ids
	}
	before := idsOfV3()
	if len(before) != 2 || before[0] != before[1] {
		t.Fatalf("v3 was invoked with ids %q; want twice (1 retry) with one id", before)
	}
	// Adding a DLQ resumes it: v3 goes there, the rest is processed.
	tr := d.GetTrigger()
	spec := tr.GetSpec()
	spec.OnFailureTopic = "dlq"
	if _, err := e.admin.UpdateTrigger(context.Background(), connect.NewRequest(&sluicev1.UpdateTriggerRequest{Name: "tr", Spec: spec, ExpectedVersion: tr.GetVersion()})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "partition 0 resumed", 20*time.Second, func() bool { return len(got.get(0)) >= 9 })
	if g := got.get(0); !slices.Equal(g, slices.DeleteFunc(values(0, 10), func(v string) bool { return v == "v3" })) {
		t.Fatalf("partition 0 processed %v", g)
	}
	// The new runner (a new member, a new lease epoch) ran the unfinished
	// round again under the ids of its first attempt.
	for _, id := range idsOfV3() {
		if id != before[0] {
			t.Fatalf("v3 was invoked with ids %q after the update; want %q throughout (the round's ids)", idsOfV3(), before[0])
		}
	}
	if n := len(idsOfV3()); n != 4 {
		t.Fatalf("v3 was invoked %d times; want 2 before and 2 after the update", n)
	}
}

// A throttled function (429 TooManyRequestsException) slows the trigger
// down without spending retries: nothing goes to the DLQ, everything is
// processed once the throttling ends.
func TestTriggerThrottlingSpendsNoRetries(t *testing.T) {
	var mu sync.Mutex
	throttles := 0
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		mu.Lock()
		defer mu.Unlock()
		if throttles < 6 {
			throttles++
			return http.StatusTooManyRequests, "TooManyRequestsException", `{"Type":"User","message":"Rate Exceeded."}`
		}
		return got.processed(inv)
	})
	e := triggerCluster(t, f)
	e.createTopic(t, "t", 1)
	e.createTopic(t, "dlq", 1)
	e.produce(t, "t", 0, 0, 20, 20)
	e.createTrigger(t, "tr", &sluicev1.TriggerSpec{Topic: "t", BatchSize: 5, MaxRetries: -1, RetryBackoffInitialMs: 1, RetryBackoffMaxMs: 20,
		OnFailureTopic: "dlq", StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST})
	waitFor(t, "every record processed", 20*time.Second, func() bool { return len(got.get(0)) >= 20 })
	if g := got.get(0); !slices.Equal(g, values(0, 20)) {
		t.Fatalf("processed %v", g)
	}
	resp, err := e.cons.Fetch(context.Background(), connect.NewRequest(&sluicev1.FetchRequest{Topic: "dlq", Partition: 0, Offset: 0}))
	if err != nil || len(resp.Msg.Records) != 0 {
		t.Fatalf("DLQ: %v %v, want empty", resp, err)
	}
}

// With parallelization > 1 batches of one partition run at once, but the
// records of one key are never in two concurrent batches: each key's
// records reach the function in offset order.
func TestTriggerParallelizationKeepsKeyOrder(t *testing.T) {
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	byKey := map[string][]int64{}
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		for _, r := range inv.records {
			k, _ := base64.StdEncoding.DecodeString(r.Key)
			byKey[string(k)] = append(byKey[string(k)], r.Offset)
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return ok()
	})
	e := triggerCluster(t, f)
	e.createTopic(t, "t", 1)
	p := int32(0)
	for i := 0; i < 400; i += 100 {
		var recs []*sluicev1.Record
		for j := i; j < i+100; j++ {
			recs = append(recs, &sluicev1.Record{Key: []byte("key" + strconv.Itoa(j%13)), Value: []byte("v" + strconv.Itoa(j))})
		}
		if _, err := e.prod.Produce(context.Background(), connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p, Records: recs})); err != nil {
			t.Fatal(err)
		}
	}
	e.createTrigger(t, "tr", &sluicev1.TriggerSpec{Topic: "t", BatchSize: 10, Parallelization: 4,
		StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST})
	waitFor(t, "every record processed", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, offs := range byKey {
			n += len(offs)
		}
		return n >= 400
	})
	mu.Lock()
	defer mu.Unlock()
	for k, offs := range byKey {
		if !slices.IsSorted(offs) || len(offs) != len(slices.Compact(slices.Clone(offs))) {
			t.Fatalf("key %s reached the function as offsets %v, want ascending, once each", k, offs)
		}
	}
	if maxInFlight < 2 {
		t.Fatalf("at most %d invocations ran at once; parallelization 4 should run several", maxInFlight)
	}
}

// A trigger deleted and created again under the same name is a new trigger:
// it starts from its starting position, not where the deleted one stood.
func TestTriggerRecreatedStartsAfresh(t *testing.T) {
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		return got.processed(inv)
	})
	e := triggerCluster(t, f)
	e.createTopic(t, "t", 1)
	e.produce(t, "t", 0, 0, 10, 10)
	spec := func() *sluicev1.TriggerSpec {
		return &sluicev1.TriggerSpec{Topic: "t", StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST}
	}
	e.createTrigger(t, "tr", spec())
	waitFor(t, "the first trigger's records", 20*time.Second, func() bool { return len(got.get(0)) >= 10 })
	first := e.describeTrigger(t, "tr").GetGroup()
	if _, err := e.admin.DeleteTrigger(context.Background(), connect.NewRequest(&sluicev1.DeleteTriggerRequest{Name: "tr"})); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // a new creation time
	e.createTrigger(t, "tr", spec())
	waitFor(t, "the new trigger's records", 20*time.Second, func() bool { return len(got.get(0)) >= 20 })
	if g := got.get(0); !slices.Equal(g, append(values(0, 10), values(0, 10)...)) {
		t.Fatalf("the function saw %v; want v0..v9 from each trigger", g)
	}
	if second := e.describeTrigger(t, "tr").GetGroup(); second == first {
		t.Fatalf("both triggers ran as group %q", first)
	}
}

// A trigger reads committed by default: its function never sees the
// records of an aborted transaction, and sees a transaction's records
// only once it committed, in log order with the records written outside
// transactions. One with read_uncommitted sees them all.
func TestTriggerReadsCommittedByDefault(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	f := newFakeLambda(t, func(inv invocation) (int, string, string) {
		mu.Lock()
		defer mu.Unlock()
		got[inv.function] = append(got[inv.function], inv.values...)
		return ok()
	})
	seen := func(fn string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got[fn])
	}
	e := triggerCluster(t, f)
	e.createTopic(t, "tx", 1)
	ctx := context.Background()
	c, err := sluice.NewClient(strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewTransactionalProducer(ctx, "tx-writer")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := p.Send(ctx, &sluice.Record{Topic: "tx", Partition: 0, Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if !commit {
			if err := p.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, "a1", "a2")
	txn(false, "x1", "x2")
	if _, err := e.prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "tx", Partition: new(int32(0)),
		Records: []*sluicev1.Record{{Value: []byte("plain")}}})); err != nil {
		t.Fatal(err)
	}
	txn(true, "b1")
	// An open transaction: written, not committed.
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(ctx, &sluice.Record{Topic: "tx", Partition: 0, Value: []byte("open")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	earliest := sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST
	e.createTrigger(t, "committed", &sluicev1.TriggerSpec{Topic: "tx", Function: "committed", StartingPosition: earliest})
	e.createTrigger(t, "uncommitted", &sluicev1.TriggerSpec{Topic: "tx", Function: "uncommitted", StartingPosition: earliest, ReadUncommitted: true})
	all := []string{"a1", "a2", "x1", "x2", "plain", "b1", "open"}
	waitFor(t, "read_uncommitted sees every record", 20*time.Second, func() bool { return len(seen("uncommitted")) >= len(all) })
	waitFor(t, "read_committed reaches the open transaction", 20*time.Second, func() bool { return len(seen("committed")) >= 4 })
	time.Sleep(300 * time.Millisecond) // rounds the open transaction would show up in
	if g := seen("committed"); !slices.Equal(g, []string{"a1", "a2", "plain", "b1"}) {
		t.Fatalf("read_committed trigger saw %v; want [a1 a2 plain b1] (no aborted records, nothing of the open transaction)", g)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "read_committed sees the transaction once committed", 20*time.Second, func() bool { return len(seen("committed")) >= 5 })
	if g := seen("committed"); !slices.Equal(g, []string{"a1", "a2", "plain", "b1", "open"}) {
		t.Fatalf("read_committed trigger saw %v; want [a1 a2 plain b1 open]", g)
	}
	if g := seen("uncommitted"); !slices.Equal(g, all) {
		t.Fatalf("read_uncommitted trigger saw %v; want %v", g, all)
	}
	if d := e.describeTrigger(t, "uncommitted"); !d.GetTrigger().GetSpec().GetReadUncommitted() {
		t.Fatalf("DescribeTrigger does not show read_uncommitted: %v", d.GetTrigger().GetSpec())
	}
}

// A trigger runs as the principal that made it: with authorization on,
// once that principal may no longer consume the topic, the trigger invokes
// nothing and its partitions back off saying why; given back the grant,
// it goes on from where it stopped.
func TestTriggerRunsAsItsPrincipal(t *testing.T) {
	var got seen
	f := newFakeLambda(t, func(inv invocation) (int, string, string) { return got.processed(inv) })
	e := startCluster(t, cluster.Config{Lambda: f.invoker(), Authorization: &cluster.Authorization{SuperUsers: []string{"User:ANONYMOUS"}},
		Fetch: fetch.Config{TriggerRefresh: 50 * time.Millisecond, BalanceInterval: 100 * time.Millisecond}})
	ctx := context.Background()
	e.createTopic(t, "orders", 1)
	grant := catalog.ACL{Principal: "User:alice", ResourceType: catalog.ResourceTopic, PatternType: catalog.PatternLiteral,
		ResourceName: "orders", Operation: catalog.OpConsume, Permission: catalog.Allow}
	setGrant := func(on bool) {
		t.Helper()
		var err error
		if on {
			err = e.c.Catalog.CreateACLs(ctx, []catalog.ACL{grant})
		} else {
			_, err = e.c.Catalog.DeleteACLs(ctx, catalog.ACLFilter{Principal: "User:alice"})
		}
		if err == nil {
			err = e.c.Authz.Reload(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	setGrant(true)
	if _, err := e.c.Catalog.CreateTrigger(ctx, "orders-fn", catalog.TriggerSpec{Topic: "orders", Function: "fn", Enabled: true,
		StartingPosition: catalog.StartEarliest, RunAs: "User:alice"}); err != nil {
		t.Fatal(err)
	}
	e.produce(t, "orders", 0, 0, 10, 10)
	waitFor(t, "the first records invoked", 20*time.Second, func() bool { return len(got.get(0)) >= 10 })

	setGrant(false)
	e.produce(t, "orders", 0, 10, 10, 10)
	waitFor(t, "the partition backing off on the refusal", 20*time.Second, func() bool {
		for _, p := range e.describeTrigger(t, "orders-fn").GetPartitions() {
			if p.GetState() == "BACKING_OFF" && strings.Contains(p.GetLastError(), `User:alice may not consume on topic "orders"`) {
				return true
			}
		}
		return false
	})
	if n := len(got.get(0)); n != 10 {
		t.Fatalf("%d records invoked after the grant was taken away; want the first 10 only", n)
	}

	setGrant(true)
	waitFor(t, "the rest invoked after the grant came back", fetch.TriggerAuthzRecheck+15*time.Second, func() bool { return len(got.get(0)) >= 20 })
	if g := got.get(0); !slices.Equal(g, values(0, 20)) {
		t.Fatalf("the function saw %v; want v0..v19 once each in order", g)
	}
}
