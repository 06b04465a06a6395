package bookie

import (
	"context"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/bookkeeper/internal/metrictest"
	"github.com/sluicemq/sluice/bookkeeper/wire"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// metricsConfig is testConfig with metrics into mr and a fixed disk: the
// journal's 30 of 100 bytes used, the others 50.
func metricsConfig(mr *metrictest.Reader) Config {
	cfg := testConfig(vfs.NewMem())
	cfg.MeterProvider = mr.Provider
	cfg.DiskUsage = func(dir string) (vfs.DiskUsage, error) {
		used := uint64(50)
		if dir == "/data/journal" {
			used = 30
		}
		return vfs.DiskUsage{TotalBytes: 100, UsedBytes: used, AvailBytes: 100 - used - 5}, nil
	}
	return cfg
}

// Driving a real bookie over its RPCs moves every metric as the package
// doc says: adds by status, journal entries and bytes, one fsync value per
// group commit, reads by rpc with their latency, fences, ledgers stored,
// disks, read-only reasons.
func TestMetricsFollowTheBookie(t *testing.T) {
	mr := metrictest.New(t)
	b := mustOpen(t, metricsConfig(mr))
	defer mustClose(t, b)
	c := serve(t, b)
	ctx := context.Background()

	s := mr.Collect(t)
	if n := s.IntSum(metricAdds); n != 0 {
		t.Fatalf("adds before any: %d", n)
	}
	if got := s.Int(metricDiskUsed, "dir", "journal"); got != 30 {
		t.Fatalf("journal disk used = %d, want 30", got)
	}
	if got := s.Int(metricDiskAvailable, "dir", "ledger"); got != 45 {
		t.Fatalf("ledger disk available = %d, want 45", got)
	}
	if got := s.Int(metricDiskSize, "dir", "index"); got != 100 {
		t.Fatalf("index disk size = %d, want 100", got)
	}

	// 40 adds to two ledgers over one stream, in messages of 1 to 8.
	stream := c.AddEntries(ctx)
	const n = 40
	go func() {
		var next [2]int64
		for i, size := range []int{1, 3, 8, 2, 6, 4, 8, 8} {
			l := int64(1 + i%2)
			msg := addMsg(l)
			for range size {
				e := next[l-1]
				msg.Ledgers[0].Adds = append(msg.Ledgers[0].Adds, add(l, e, e-1))
				next[l-1]++
			}
			if err := stream.Send(msg); err != nil {
				t.Errorf("send: %v", err)
				return
			}
		}
	}()
	receiveResults(t, stream, n)

	s = mr.Collect(t)
	if got := s.Int(metricAdds, "status", "ok"); got != n {
		t.Fatalf("adds ok = %d, want %d", got, n)
	}
	if got := s.Int(metricJournalEntries); got != n {
		t.Fatalf("journal entries = %d, want %d", got, n)
	}
	js := b.Status().Journal
	if got := s.Int(metricJournalBytes); got != int64(js.GroupBytes) || got < n*int64(len(payload(1, 1))) {
		t.Fatalf("journal bytes = %d, journal says %d", got, js.GroupBytes)
	}
	// One fsync value per group commit, and the groups hold every add.
	if count, _ := s.Hist(metricFsync); count != js.Groups || count == 0 {
		t.Fatalf("fsync histogram count = %d, group commits %d", count, js.Groups)
	}
	if count, _ := s.Hist(metricCommitDuration); count != js.Groups {
		t.Fatalf("commit duration count = %d, group commits %d", count, js.Groups)
	}
	if count, sum := s.Hist(metricGroupEntries); count != js.Groups || sum != n {
		t.Fatalf("group entries: count %d sum %v, want %d groups holding %d", count, sum, js.Groups, n)
	}
	groups := js.Groups

	// One more add: the fsync count grows by exactly one group.
	if err := stream.Send(addReq(1, 100, 19)); err != nil {
		t.Fatal(err)
	}
	receiveResults(t, stream, 1)
	if count, _ := mr.Collect(t).Hist(metricFsync); count != groups+1 {
		t.Fatalf("fsync count after one more add = %d, want %d", count, groups+1)
	}

	// Reads: 5 entries by ReadEntries, one miss, a ReadLac with entries.
	resp, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 1, FirstEntry: 0, LastEntry: 4}))
	if err != nil || len(resp.Msg.GetEntries()) != 5 {
		t.Fatalf("read: %v, %d entries", err, len(resp.Msg.GetEntries()))
	}
	if _, err := c.ReadEntries(ctx, connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 1, FirstEntry: 50, LastEntry: 50})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("read of a missing entry: %v", err)
	}
	if _, err := c.ReadLac(ctx, connect.NewRequest(&bookiev1.ReadLacRequest{LedgerId: 1, PreviousLac: 2, MaxEntryBytes: 1 << 20})); err != nil {
		t.Fatal(err)
	}
	// Fence ledger 2; its writer's next add is answered FENCED.
	if _, err := c.Fence(ctx, connect.NewRequest(&bookiev1.FenceRequest{LedgerId: 2, MasterKey: testKey})); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(addReq(2, 20, 19)); err != nil {
		t.Fatal(err)
	}
	if r, _ := receiveResults(t, stream, 1); r[0].status != bookiev1.AddStatus_ADD_STATUS_FENCED {
		t.Fatalf("add to a fenced ledger: %v", r[0].status)
	}
	if err := stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}

	b.SetReadOnly(true)
	b.countLedgers(time.Now())
	s = mr.Collect(t)
	if got := s.Int(metricReadEntries, "rpc", "ReadEntries"); got != 5 {
		t.Fatalf("entries read by ReadEntries = %d, want 5", got)
	}
	lacEntries := s.Int(metricReadEntries, "rpc", "ReadLac")
	if lacEntries < 1 {
		t.Fatalf("entries returned by ReadLac = %d, want some", lacEntries)
	}
	if got := s.Int(metricReadBytes, "rpc", "ReadEntries"); got != 5*int64(len(payload(1, 0))) {
		t.Fatalf("bytes read by ReadEntries = %d", got)
	}
	if count, _ := s.Hist(metricReadDuration, "outcome", "ok"); count != 1 {
		t.Fatalf("read duration ok count = %d, want 1", count)
	}
	if count, _ := s.Hist(metricReadDuration, "outcome", "not_found"); count != 1 {
		t.Fatalf("read duration not_found count = %d, want 1", count)
	}
	if got := s.Int(metricFences); got != 1 {
		t.Fatalf("fences = %d, want 1", got)
	}
	if got := s.Int(metricAdds, "status", "fenced"); got != 1 {
		t.Fatalf("adds fenced = %d, want 1", got)
	}
	if got := s.Int(metricLedgers); got != 2 {
		t.Fatalf("ledgers = %d, want 2", got)
	}
	if s.Int(metricReadOnly, "reason", "operator") != 1 || s.Int(metricReadOnly, "reason", "disk") != 0 || s.Int(metricReadOnly, "reason", "draining") != 0 {
		t.Fatalf("read-only gauges: operator %d disk %d draining %d", s.Int(metricReadOnly, "reason", "operator"),
			s.Int(metricReadOnly, "reason", "disk"), s.Int(metricReadOnly, "reason", "draining"))
	}
	if !s.Has(metricFailed) || s.Int(metricFailed) != 0 {
		t.Fatal("failed gauge missing or set")
	}
	if !s.Has(metricEntryLogFiles) {
		t.Fatal("entry log files gauge missing")
	}
	// A checkpoint flushes the buffer: entry log files appear.
	if err := b.checkpoint(); err != nil {
		t.Fatal(err)
	}
	s = mr.Collect(t)
	if s.Int(metricFlushes) < 1 || s.Int(metricEntryLogCreated) < 1 || s.Int(metricEntryLogFiles) < 1 {
		t.Fatalf("after a checkpoint: flushes %d, entry log files created %d, now %d",
			s.Int(metricFlushes), s.Int(metricEntryLogCreated), s.Int(metricEntryLogFiles))
	}
}

// The names an operator scrapes: the Prometheus exporter's translation of
// every instrument (the list the metrics catalogue quotes).
func TestMetricsPrometheusNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	cfg := testConfig(vfs.NewMem())
	cfg.MeterProvider = mp
	b := mustOpen(t, cfg)
	defer mustClose(t, b)
	addWait(t, b, 1, 0, -1)
	b.countLedgers(time.Now())
	if _, _, err := b.Read(1, 0, 0, 0, false, nil); err != nil {
		t.Fatal(err)
	}
	// Reads through the service record the read histogram.
	svc := service{b}
	if _, err := svc.ReadEntries(context.Background(), connect.NewRequest(&bookiev1.ReadEntriesRequest{LedgerId: 1, FirstEntry: 0, LastEntry: 0})); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	want := []string{
		"sluice_bookie_adds_total",
		"sluice_bookie_entrylog_files",
		"sluice_bookie_entrylog_files_created_total",
		"sluice_bookie_failed",
		"sluice_bookie_fences_total",
		"sluice_bookie_gc_entries_moved_total",
		"sluice_bookie_gc_files_removed_total",
		"sluice_bookie_gc_reclaimed_bytes_total",
		"sluice_bookie_journal_commit_duration_seconds",
		"sluice_bookie_journal_entries_total",
		"sluice_bookie_journal_fsync_duration_seconds",
		"sluice_bookie_journal_group_entries",
		"sluice_bookie_journal_queue_full_total",
		"sluice_bookie_journal_rotations_total",
		"sluice_bookie_journal_written_bytes_total",
		"sluice_bookie_ledgers",
		"sluice_bookie_read_bytes_total",
		"sluice_bookie_read_duration_seconds",
		"sluice_bookie_read_entries_total",
		"sluice_bookie_read_only",
		"sluice_bookie_storage_flushes_total",
	}
	// Disk gauges appear only when the disk could be measured (a memory
	// filesystem reports none).
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing %s; exported: %v", w, got)
		}
	}
}

// A traced add (Add.trace_context) gets one span, a child of the client's
// span, ended when its journal group is durable; an untraced add none.
func TestCommitSpanContinuesTheClientTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	cfg := testConfig(vfs.NewMem())
	cfg.TracerProvider = tp
	b := mustOpen(t, cfg)
	defer mustClose(t, b)
	c := serve(t, b)

	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	traced := add(7, 0, -1)
	traced.TraceContext = wire.AppendTraceContext(nil, parent)
	stream := c.AddEntries(context.Background())
	if err := stream.Send(addMsg(7, traced, add(7, 1, -1))); err != nil {
		t.Fatal(err)
	}
	receiveResults(t, stream, 2)
	if err := stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1 (the traced add's)", len(spans))
	}
	sp := spans[0]
	if sp.Name() != SpanJournalCommit || sp.Parent().SpanID() != parent.SpanID() || sp.SpanContext().TraceID() != parent.TraceID() || !sp.Parent().IsRemote() {
		t.Fatalf("span %q parent %v trace %v: not a child of the client's span %v", sp.Name(), sp.Parent(), sp.SpanContext().TraceID(), parent)
	}
	attrs := map[string]int64{}
	for _, kv := range sp.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInt64()
	}
	if attrs[string(attrLedger)] != 7 || attrs[string(attrEntry)] != 0 || attrs[string(attrEntryBytes)] != int64(len(traced.Payload)) {
		t.Fatalf("span attributes %v", sp.Attributes())
	}
}
