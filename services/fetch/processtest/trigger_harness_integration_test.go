//go:build integration

package processtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/harness/bookieproc"
	"github.com/sluicemq/sluice/harness/lambdatest"
	"github.com/sluicemq/sluice/internal/lambdapool"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	bkcassandra "github.com/sluicemq/sluice/pkg/bookkeeping/cassandra"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/fetch/trigger"
)

// The trigger tests' harness: two `sluice fetch` copies running triggers
// whose functions are the recorder (internal/functions/recorder) under a
// real Runtime Interface Emulator pool, each copy's Invoke calls passing
// through a recording proxy (invokeLog), the committed offsets read from
// the copies' Cassandra keyspace, and DescribeTrigger watched all along.

// triggerSessionTimeout is the trigger members' session timeout: the fetch
// default (fetch.Config.TriggerSessionTimeout has no flag).
const triggerSessionTimeout = fetch.DefaultTriggerSessionTimeout

// triggerCluster is a cluster of two fetch copies running triggers.
type triggerCluster struct {
	*cluster
	pool    *lambdapool.Pool
	invokes *invokeLog
	// recorders is each function's RECORDER_DIR.
	recorders map[string]string
	// bk reads the fetch copies' groups, leases and offsets.
	bk *bookkeeping.Store
}

// startTriggerCluster starts a lambdapool of fns (each the recorder, with
// a RECORDER_DIR of its own) and a cluster of two fetch copies invoking
// them through invokeLog, with --ingest-address (the DLQ producer) and a
// 200 ms --trigger-refresh.
func startTriggerCluster(ctx context.Context, t *testing.T, fns ...lambdatest.Function) *triggerCluster {
	t.Helper()
	tc := &triggerCluster{recorders: map[string]string{}}
	for i := range fns {
		dir := t.TempDir()
		fns[i].Package = lambdatest.Recorder
		fns[i].Env = append(fns[i].Env, "RECORDER_DIR="+dir)
		tc.recorders[fns[i].Name] = dir
	}
	tc.pool = lambdatest.Start(t, fns...)
	tc.invokes = newInvokeLog(t, tc.pool.Endpoint())
	tc.cluster = startClusterWith(ctx, t, clusterConfig{fetchCopies: 2, fetchArgs: func(id, ingestAddr string) []string {
		return []string{"--lambda-endpoint", tc.invokes.endpoint(id), "--ingest-address", ingestAddr,
			"--trigger-refresh", "200ms", "--log-format", "json"}
	}})
	bk, err := bkcassandra.Open(ctx, bkcassandra.Config{Hosts: []string{tc.cassandra}, Keyspace: tc.keyspace,
		NoKeyspaceCreation: true, NoMigrate: true, Timeout: 20 * time.Second, ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bk.Close() })
	tc.bk = bk
	return tc
}

// createTopic creates a topic through the ingest copy.
func (tc *triggerCluster) createTopic(ctx context.Context, t *testing.T, name string, partitions int32) {
	t.Helper()
	if _, err := tc.admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: partitions})); err != nil {
		t.Fatal(err)
	}
}

// createTrigger creates a trigger through the admin API and returns it as
// stored.
func (tc *triggerCluster) createTrigger(ctx context.Context, t *testing.T, name string, spec *sluicev1.TriggerSpec) *sluicev1.TriggerInfo {
	t.Helper()
	resp, err := tc.admin.CreateTrigger(ctx, connect.NewRequest(&sluicev1.CreateTriggerRequest{Name: name, Spec: spec}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.GetTrigger()
}

// produce writes records to one partition in one call and returns their
// offsets.
func (tc *triggerCluster) produce(ctx context.Context, t *testing.T, topic string, partition int32, recs ...*sluicev1.Record) []int64 {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := tc.producer.Produce(cctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: topic, Partition: &partition, Records: recs}))
	if err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, partition, err)
	}
	if len(resp.Msg.GetResults()) != len(recs) {
		t.Fatalf("produce to %s/%d: %d results for %d records", topic, partition, len(resp.Msg.GetResults()), len(recs))
	}
	offs := make([]int64, len(recs))
	for i, r := range resp.Msg.GetResults() {
		if r.GetPartition() != partition {
			t.Fatalf("produce to %s/%d: record acknowledged on partition %d", topic, partition, r.GetPartition())
		}
		offs[i] = r.GetOffset()
	}
	return offs
}

// values makes records of values, without keys.
func values(vs ...string) []*sluicev1.Record {
	out := make([]*sluicev1.Record, len(vs))
	for i, v := range vs {
		out[i] = &sluicev1.Record{Value: []byte(v)}
	}
	return out
}

// copyOf names the fetch copy a trigger member id belongs to: member ids
// are routed ids, "t-<random>.<the copy's address in base64url>"
// (services/fetch/route.go); "" when it names none of the copies.
func (tc *triggerCluster) copyOf(member string) string {
	i := strings.LastIndexByte(member, '.')
	if i < 0 {
		return ""
	}
	addr, err := base64.RawURLEncoding.DecodeString(member[i+1:])
	if err != nil {
		return ""
	}
	for _, id := range tc.fetches {
		if tc.procs[id].Addr == string(addr) {
			return id
		}
	}
	return ""
}

// other is the fetch copy that is not id.
func (tc *triggerCluster) other(id string) string {
	for _, f := range tc.fetches {
		if f != id {
			return f
		}
	}
	return ""
}

// recorded reads every invocation the recorder function fn recorded.
func (tc *triggerCluster) recorded(t *testing.T, fn string) []recLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(tc.recorders[fn], "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []recLine
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			if !bytes.HasSuffix(line, []byte("\n")) {
				break // being written
			}
			var l recLine
			if err := json.Unmarshal(line, &l); err != nil {
				t.Fatalf("%s: %v: %q", f, err, line)
			}
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b recLine) int { return int(a.StartedUnixNano - b.StartedUnixNano) })
	return out
}

// recLine is one line of the recorder's files (its package doc).
type recLine struct {
	InvocationID    string `json:"invocationId"`
	StartedUnixNano int64  `json:"startedUnixNano"`
	Outcome         string `json:"outcome"`
	Records         []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Key       string `json:"key"`
		Value     string `json:"value"`
	} `json:"records"`
}

func (l recLine) started() time.Time { return time.Unix(0, l.StartedUnixNano) }

// invocationID is a parsed trigger invocation id,
// v1/<trigger>/<topic>/<topic id>/<partition>/<first>-<last>/<epoch>.
type invocationID struct {
	trigger, topic     string
	partition          int32
	first, last, epoch int64
}

func parseInvocationID(s string) (invocationID, error) {
	f := strings.Split(s, "/")
	if len(f) != 7 || f[0] != "v1" {
		return invocationID{}, fmt.Errorf("invocation id %q: not v1/<trigger>/<topic>/<topic id>/<partition>/<first>-<last>/<epoch>", s)
	}
	id := invocationID{trigger: f[1], topic: f[2]}
	first, last, ok := strings.Cut(f[5], "-")
	p, err1 := strconv.ParseInt(f[4], 10, 32)
	a, err2 := strconv.ParseInt(first, 10, 64)
	b, err3 := strconv.ParseInt(last, 10, 64)
	e, err4 := strconv.ParseInt(f[6], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || !ok {
		return invocationID{}, fmt.Errorf("invocation id %q: %v", s, err)
	}
	id.partition, id.first, id.last, id.epoch = int32(p), a, b, e
	return id, nil
}

// idOf is the invocation id of a batch of a trigger.
func idOf(tr *sluicev1.TriggerInfo, partition int32, first, last, epoch int64) string {
	return trigger.InvocationID(trigger.InvocationKey{Trigger: tr.GetName(), Topic: tr.GetSpec().GetTopic(), TopicID: catalog.TopicID(tr.GetTopicId()),
		Partition: partition, FirstOffset: first, LastOffset: last, LeaseEpoch: epoch})
}

// invokeLog proxies the fetch copies' Invoke calls to the pool, one
// endpoint per copy, and writes each call down: which copy sent it, for
// which function, with which invocation id, when, and the answer's status.
type invokeLog struct {
	t         *testing.T
	rp        *httputil.ReverseProxy
	transport *http.Transport

	mu    sync.Mutex
	calls []*invokeCall
}

// invokeCall is one Invoke call through the proxy.
type invokeCall struct {
	copy, function, id string
	sent               time.Time // when the proxy got it
	answered           time.Time // zero: not answered yet
	status             int
}

func newInvokeLog(t *testing.T, target string) *invokeLog {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed copy hangs up
	l := &invokeLog{t: t, rp: rp, transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return l
}

// endpoint returns the Lambda endpoint for fetch copy id.
func (l *invokeLog) endpoint(id string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := &invokeCall{copy: id, function: functionOf(r.URL.Path), id: clientContextID(r.Header.Get("X-Amz-Client-Context")), sent: time.Now()}
		l.mu.Lock()
		l.calls = append(l.calls, call)
		l.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w}
		l.rp.ServeHTTP(sw, r)
		l.mu.Lock()
		call.answered, call.status = time.Now(), sw.status
		l.mu.Unlock()
	}))
	l.t.Cleanup(srv.Close)
	return srv.URL
}

// snapshot returns the calls so far.
func (l *invokeLog) snapshot() []invokeCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]invokeCall, len(l.calls))
	for i, c := range l.calls {
		out[i] = *c
	}
	return out
}

// inFlight reports whether copy has sent a call with invocation id that
// is not answered yet.
func (l *invokeLog) inFlight(copy, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.calls {
		if c.copy == copy && c.id == id && c.answered.IsZero() {
			return true
		}
	}
	return false
}

// functionOf is the function name of an Invoke path,
// /2015-03-31/functions/<name>/invocations.
func functionOf(path string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(path, "/2015-03-31/functions/"), "/invocations")
	if n, err := url.PathUnescape(name); err == nil {
		return n
	}
	return name
}

// clientContextID is the Sluice invocation id in an X-Amz-Client-Context.
func clientContextID(cc string) string {
	b, err := base64.StdEncoding.DecodeString(cc)
	if err != nil {
		return ""
	}
	var v struct {
		Custom map[string]string `json:"custom"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	return v.Custom[trigger.ClientContextKey]
}

// statusWriter keeps the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// triggerState is one DescribeTrigger answer, with the committed offsets
// read from bookkeeping right after it.
type triggerState struct {
	asked, at time.Time
	members   int32
	parts     map[int32]*sluicev1.TriggerPartition
	committed map[int32]bookkeeping.Committed
}

// owners returns each fetch copy's partitions (by the owners' member ids),
// in order.
func (tc *triggerCluster) owners(s triggerState) map[string][]int32 {
	out := map[string][]int32{}
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		if o := s.parts[p].GetOwner(); o != "" {
			out[tc.copyOf(o)] = append(out[tc.copyOf(o)], p)
		}
	}
	return out
}

// balanced: two members, one on each fetch copy, hold partitions/2 of the
// partitions each.
func (tc *triggerCluster) balanced(s triggerState, partitions int) bool {
	if s.members != 2 || len(s.parts) != partitions {
		return false
	}
	own := tc.owners(s)
	members := map[string]bool{}
	for _, tp := range s.parts {
		members[tp.GetOwner()] = true
	}
	return len(members) == 2 && len(own[tc.fetches[0]]) == partitions/2 && len(own[tc.fetches[1]]) == partitions/2
}

// caughtUp: every partition of ends has committed its end (DescribeTrigger
// and bookkeeping agree).
func caughtUp(s triggerState, ends map[int32]int64) bool {
	for p, end := range ends {
		if s.parts[p].GetCommittedOffset() != end || s.committed[p].Offset != end {
			return false
		}
	}
	return true
}

func (tc *triggerCluster) describe(s triggerState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d members;", s.members)
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		tp := s.parts[p]
		fmt.Fprintf(&b, " p%d=%s@%d c=%d/%d %s", p, tc.copyOf(tp.GetOwner()), tp.GetEpoch(), tp.GetCommittedOffset(), tp.GetEndOffset(), tp.GetState())
		if c, ok := s.committed[p]; ok {
			fmt.Fprintf(&b, " (bk %d@%d %s)", c.Offset, c.Epoch, c.Metadata)
		}
		if e := tp.GetLastError(); e != "" {
			fmt.Fprintf(&b, " err=%q", tail(e, 120))
		}
	}
	return b.String()
}

// triggerWatch describes a trigger over and over (through one fetch copy
// at a time: a paused copy cannot answer) and reads its committed offsets
// from bookkeeping, and checks every answer against the ones before: per
// partition the lease epoch, the committed offset and the epoch it was
// committed under never go down, and one lease epoch has one owner.
// (DescribeTrigger's end offset is not checked against the committed one:
// a copy that does not run a partition may report an end up to the
// partition chain's cache age old — 0 for a partition that had no ledger
// when it cached the chain — while the committed offset is current.)
type triggerWatch struct {
	tc          *triggerCluster
	name, topic string
	group       string
	partitions  int32
	epoch       map[int32]int64
	committed   map[int32]int64
	commitEpoch map[int32]int64
	owner       map[leaseKey]string
	mu          sync.Mutex
	via         sluicev1connect.AdminServiceClient
	latest      triggerState
	lastErr     error
	changed     chan struct{}
	violations  []string
	samples     int
	stop        context.CancelFunc
	done        chan struct{}
	sampleHooks []func(triggerState)
}

// watch starts watching trigger name (on topic) through the first fetch
// copy; it stops when t ends.
func (tc *triggerCluster) watch(ctx context.Context, t *testing.T, name, topic string, partitions int32) *triggerWatch {
	t.Helper()
	w := &triggerWatch{tc: tc, name: name, topic: topic, group: tc.triggerGroup(ctx, t, name), partitions: partitions,
		epoch: map[int32]int64{}, committed: map[int32]int64{}, commitEpoch: map[int32]int64{}, owner: map[leaseKey]string{},
		via: tc.fetchAdmin[tc.fetches[0]], changed: make(chan struct{}), done: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	go func() {
		defer close(w.done)
		for {
			start := time.Now()
			w.sample(wctx)
			select {
			case <-wctx.Done():
				return
			case <-time.After(250*time.Millisecond - time.Since(start)):
			}
		}
	}()
	t.Cleanup(func() {
		w.halt()
		samples, violations := w.report()
		t.Logf("trigger %s: %d DescribeTrigger answers checked, %d violations", name, samples, len(violations))
		for _, v := range violations {
			t.Errorf("trigger %s: %s", name, v)
		}
	})
	return w
}

// halt stops the watch.
func (w *triggerWatch) halt() { w.stop(); <-w.done }

// use makes the watch ask through fetch copy id from its next answer on,
// and waits for an answer through it.
func (w *triggerWatch) use(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	w.mu.Lock()
	w.via = w.tc.fetchAdmin[id]
	w.mu.Unlock()
	w.waitFor(ctx, t, 20*time.Second, "a DescribeTrigger answer from "+id, func(triggerState) bool { return true })
}

func (w *triggerWatch) sample(ctx context.Context) {
	w.mu.Lock()
	via := w.via
	w.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	asked := time.Now()
	resp, err := via.DescribeTrigger(rctx, connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: w.name}))
	if err != nil {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		return
	}
	s := triggerState{asked: asked, members: resp.Msg.GetMembers(), parts: map[int32]*sluicev1.TriggerPartition{}, committed: map[int32]bookkeeping.Committed{}}
	for _, tp := range resp.Msg.GetPartitions() {
		s.parts[tp.GetPartition()] = tp
	}
	for p := range w.partitions {
		c, err := w.tc.bk.FetchOffset(rctx, w.group, w.topic, p)
		switch {
		case errors.Is(err, bookkeeping.ErrNotFound):
		case err != nil:
			w.mu.Lock()
			w.lastErr = err
			w.mu.Unlock()
			return
		default:
			s.committed[p] = c
		}
	}
	s.at = time.Now()
	var bad []string
	violation := func(format string, args ...any) {
		bad = append(bad, s.at.Format("15:04:05.000: ")+fmt.Sprintf(format, args...))
	}
	for p, tp := range s.parts {
		if e, ok := w.epoch[p]; ok && tp.GetEpoch() < e {
			violation("partition %d: lease epoch went down from %d to %d", p, e, tp.GetEpoch())
		}
		if c, ok := w.committed[p]; ok && tp.GetCommittedOffset() < c {
			violation("partition %d: committed offset went back from %d to %d (DescribeTrigger)", p, c, tp.GetCommittedOffset())
		}
		if o := tp.GetOwner(); o != "" {
			k := leaseKey{p, tp.GetEpoch()}
			if prev, ok := w.owner[k]; ok && prev != o {
				violation("partition %d: epoch %d owned by %s and by %s", p, tp.GetEpoch(), prev, o)
			}
			w.owner[k] = o
		}
		w.epoch[p] = max(w.epoch[p], tp.GetEpoch())
		w.committed[p] = max(w.committed[p], tp.GetCommittedOffset())
	}
	for p, c := range s.committed {
		if prev, ok := w.committed[p]; ok && c.Offset < prev {
			violation("partition %d: committed offset went back from %d to %d (bookkeeping, epoch %d)", p, prev, c.Offset, c.Epoch)
		}
		if prev, ok := w.commitEpoch[p]; ok && c.Epoch < prev {
			violation("partition %d: offset committed under epoch %d after one under epoch %d", p, c.Epoch, prev)
		}
		w.committed[p] = max(w.committed[p], c.Offset)
		w.commitEpoch[p] = max(w.commitEpoch[p], c.Epoch)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, bad[:min(len(bad), maxViolations-len(w.violations))]...)
	w.samples++
	w.latest = s
	for _, h := range w.sampleHooks {
		h(s)
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// onSample runs h on every answer from now on (under the watch's lock).
func (w *triggerWatch) onSample(h func(triggerState)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sampleHooks = append(w.sampleHooks, h)
}

func (w *triggerWatch) report() (samples int, violations []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples, slices.Clone(w.violations)
}

// waitFor returns the first answer asked for after the call for which cond
// holds; it fails t after within.
func (w *triggerWatch) waitFor(ctx context.Context, t *testing.T, within time.Duration, what string, cond func(triggerState) bool) triggerState {
	t.Helper()
	since := time.Now()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		w.mu.Lock()
		s, lastErr, changed := w.latest, w.lastErr, w.changed
		w.mu.Unlock()
		if !s.asked.Before(since) && cond(s) {
			return s
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("trigger %s: %s: not within %v; last state: %s; last error: %v", w.name, what, within, w.tc.describe(s), lastErr)
		case <-ctx.Done():
			t.Fatalf("trigger %s: %s: %v; last state: %s", w.name, what, ctx.Err(), w.tc.describe(s))
		}
	}
}

// roundMetadata is the part of a trigger partition's commit metadata (JSON,
// services/fetch/trigger_worker.go) naming the round in flight.
type roundMetadata struct {
	Round *struct {
		First int64 `json:"first"`
		Last  int64 `json:"last"`
		Epoch int64 `json:"epoch"`
	} `json:"round"`
}

// logEntries returns the JSON log lines of p whose msg is msg.
func logEntries(p *bookieproc.Proc, msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.AllLogs()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(msg)) {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// num reads a JSON number of a log entry (-1 if missing).
func num(m map[string]any, key string) int64 {
	if f, ok := m[key].(float64); ok {
		return int64(f)
	}
	return -1
}

// invoked counts each record's invocations by the recorder lines (any
// outcome), by partition and offset.
func invoked(lines []recLine, topic string) map[po]int {
	out := map[po]int{}
	for _, l := range lines {
		for _, r := range l.Records {
			if r.Topic == topic {
				out[po{r.Partition, r.Offset}]++
			}
		}
	}
	return out
}

// triggerGroup is the consumer group trigger name runs as (DescribeTrigger's
// group: it names the trigger's incarnation).
func (tc *triggerCluster) triggerGroup(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	resp, err := tc.fetchAdmin[tc.fetches[0]].DescribeTrigger(ctx, connect.NewRequest(&sluicev1.DescribeTriggerRequest{Name: name}))
	if err != nil {
		t.Fatalf("describe trigger %s: %v", name, err)
	}
	if !strings.HasPrefix(resp.Msg.GetGroup(), fetch.TriggerGroupPrefix+name+".") {
		t.Fatalf("trigger %s runs as group %q", name, resp.Msg.GetGroup())
	}
	return resp.Msg.GetGroup()
}

// runOnTwoCopies creates a trigger on topic (which exists) — spec, or by
// default the recorder function from the earliest record in batches of 4 —
// waits until both fetch copies run it with a fair share each, produces a
// warm-up round to every partition (ends holds where each ends), and picks
// the copy holding partition p as the victim: it returns the trigger, the
// watch, the latest state and both copies.
func (tc *triggerCluster) runOnTwoCopies(ctx context.Context, t *testing.T, began time.Time, name, topic string, partitions, p int32, spec *sluicev1.TriggerSpec) (
	tr *sluicev1.TriggerInfo, w *triggerWatch, s triggerState, ends map[int32]int64, victim, survivor string) {
	t.Helper()
	if spec == nil {
		spec = &sluicev1.TriggerSpec{Topic: topic, Function: "recorder", Enabled: true,
			StartingPosition: sluicev1.TriggerStartingPosition_TRIGGER_STARTING_POSITION_EARLIEST, BatchSize: 4}
	}
	tr = tc.createTrigger(ctx, t, name, spec)
	w = tc.watch(ctx, t, name, topic, partitions)
	s = w.waitFor(ctx, t, 30*time.Second, "both fetch copies running the trigger, 2 partitions each", func(s triggerState) bool { return tc.balanced(s, int(partitions)) })
	t.Logf("cluster up and the trigger balanced %v after the start: %s", ms(time.Since(began)), tc.describe(s))
	ends = map[int32]int64{}
	tc.warmUp(ctx, t, w, topic, partitions, "w", ends)
	s = w.waitFor(ctx, t, 10*time.Second, "a fresh answer", func(triggerState) bool { return true })
	victim = tc.copyOf(s.parts[p].GetOwner())
	survivor = tc.other(victim)
	if victim == "" || !tc.balanced(s, int(partitions)) {
		t.Fatalf("partition %d's owner is on no fetch copy, or the trigger is not balanced: %s", p, tc.describe(s))
	}
	return tr, w, s, ends, victim, survivor
}
