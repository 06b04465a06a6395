package client

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicemq/sluice/bookkeeper/bookie"
	"github.com/sluicemq/sluice/bookkeeper/internal/metrictest"
	"github.com/sluicemq/sluice/bookkeeper/ledger"
	"github.com/sluicemq/sluice/pkg/catalog"
)

// Appends, an ensemble change after a bookie is stopped mid-write, reads
// that fall back from the stopped bookie's copies, and a close move the
// client's metrics as the package doc says.
func TestMetricsFollowWritesAndAnEnsembleChange(t *testing.T) {
	cl := newCluster(t, 4)
	mr := metrictest.New(t)
	c := cl.client(t, func(cfg *Config) { cfg.MeterProvider = mr.Provider })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	// 100 entries before the stop: entries 64..99 of the first segment
	// are asked of b2 first (ledger.ReadOrder: runs of ReadRun entries
	// rotate over the ensemble), so reading them falls back.
	appendN(t, w, 0, 99)
	bytes := func(from, to int64) (n int64) {
		for e := from; e <= to; e++ {
			n += int64(len(payload(e)))
		}
		return n
	}
	s := mr.Collect(t)
	if got := s.Int(metricAddEntries); got != 100 {
		t.Fatalf("add entries = %d, want 100", got)
	}
	if got := s.Int(metricAddBytes); got != bytes(0, 99) {
		t.Fatalf("add bytes = %d, want %d", got, bytes(0, 99))
	}
	if count, sum := s.Hist(metricAddDuration); count != 100 || sum <= 0 {
		t.Fatalf("add duration: count %d sum %v, want 100 values", count, sum)
	}
	if n := s.IntSum(metricEnsembleChanges) + s.IntSum(metricBookieErrors); n != 0 {
		t.Fatalf("ensemble changes or bookie errors before any failure: %d", n)
	}
	if got := s.Int(metricLedgersCreated); got != 1 {
		t.Fatalf("ledgers created = %d", got)
	}

	cl.stopBookie("b2")
	appendN(t, w, 100, 149)
	eventually(t, "the ensemble change", func() bool { return len(w.Metadata().Ensembles) == 2 })
	if _, err := w.Close(ctxT(t), 100+149); err != nil {
		t.Fatal(err)
	}
	s = mr.Collect(t)
	if got := s.Int(metricEnsembleChanges, "reason", reasonUnavailable, "result", resultReplaced); got != 1 {
		t.Fatalf("ensemble changes (unavailable, replaced) = %d, want 1; all: %d", got, s.IntSum(metricEnsembleChanges))
	}
	if got := s.IntSum(metricEnsembleChanges); got != 1 {
		t.Fatalf("ensemble changes = %d, want 1", got)
	}
	if got := s.Int(metricBookieErrors, "bookie", "b2", "op", opAdd, "reason", reasonUnavailable); got < 1 {
		t.Fatalf("add errors of b2 = %d, want some", got)
	}
	if got := s.Int(metricAddEntries); got != 150 {
		t.Fatalf("add entries = %d, want 150", got)
	}
	if got := s.Int(metricAddFailed); got != 0 {
		t.Fatalf("add failed = %d, want 0 (Qa=2 rode out the stop)", got)
	}
	if got := s.Int(metricLedgersClosed); got != 1 {
		t.Fatalf("ledgers closed = %d", got)
	}

	// The first segment's reads that ask b2 first fail and go to another
	// copy.
	if m := w.Metadata(); m.Ensembles[1].FirstEntry <= ledger.ReadRun {
		t.Fatalf("second segment from entry %d: entries %d.. asked of b2 first are not in the first", m.Ensembles[1].FirstEntry, ledger.ReadRun)
	}
	readAll(t, c, w.ID(), 149)
	s = mr.Collect(t)
	if got := s.Int(metricReadFallbacks, "reason", reasonError); got < 1 {
		t.Fatalf("read fallbacks (error) = %d, want some", got)
	}
	if got := s.Int(metricBookieErrors, "bookie", "b2", "op", opRead, "reason", reasonError); got < 1 {
		t.Fatalf("read errors of b2 = %d, want some", got)
	}
}

// A bookie that never answers is replaced for a timeout; recoveries are
// counted by outcome.
func TestMetricsTimeoutAndRecoveries(t *testing.T) {
	cl := newCluster(t, 3)
	cl.startFake("silent", silentBookie{id: "silent"})
	mr := metrictest.New(t)
	c := cl.client(t, func(cfg *Config) { cfg.AddTimeout = 100 * time.Millisecond; cfg.MeterProvider = mr.Provider })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "silent", "b2"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 9)
	eventually(t, "the silent bookie replaced", func() bool {
		return mr.Collect(t).Int(metricEnsembleChanges, "reason", reasonTimeout, "result", resultReplaced) == 1
	})
	if got := mr.Collect(t).Int(metricBookieErrors, "bookie", "silent", "op", opAdd, "reason", reasonTimeout); got < 1 {
		t.Fatalf("timeouts of the silent bookie = %d, want some", got)
	}
	appendN(t, w, 10, 11)

	// Another process recovers the ledger, then finds it closed.
	rc := cl.client(t, func(cfg *Config) { cfg.MeterProvider = mr.Provider })
	if _, err := rc.Recover(ctxT(t), w.ID(), lastOffsetOf(100)); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Recover(ctxT(t), w.ID(), lastOffsetOf(100)); err != nil {
		t.Fatal(err)
	}
	s := mr.Collect(t)
	if got := s.Int(metricRecoveries, "outcome", outcomeRecovered); got != 1 {
		t.Fatalf("recoveries (recovered) = %d, want 1", got)
	}
	if got := s.Int(metricRecoveries, "outcome", outcomeAlreadyClosed); got != 1 {
		t.Fatalf("recoveries (already_closed) = %d, want 1", got)
	}
	if count, _ := s.Hist(metricRecoveryDuration, "outcome", outcomeRecovered); count != 1 {
		t.Fatalf("recovery duration count = %d", count)
	}
	// The fenced writer's next append fails: counted if the writer took
	// it (it may refuse it up front, having learned of the fence).
	if _, err := w.Append(ctxT(t), payload(12)); err == nil {
		t.Fatal("append after recovery succeeded")
	}
	if got := mr.Collect(t).Int(metricAddFailed); got > 1 {
		t.Fatalf("add failed = %d, want at most 1", got)
	}
}

// One trace links the caller, the client's add span and each bookie's
// journal-commit span, across the real AddEntries stream; untraced
// appends make no span.
func TestAddSpanReachesTheBookies(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	cl := newCluster(t, 0)
	cl.bookieTracer = tp
	for _, id := range []string{"b1", "b2", "b3"} {
		cl.startBookie(id)
	}
	c := cl.client(t, func(cfg *Config) { cfg.TracerProvider = tp })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 1) // untraced: no spans
	if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
		t.Fatalf("%d spans for untraced appends", n)
	}

	ctx, parent := tp.Tracer("test").Start(ctxT(t), "produce")
	if e, err := w.Append(ctx, payload(2)); err != nil || e != 2 {
		t.Fatalf("append: %d, %v", e, err)
	}
	parent.End()
	// Qa=2 answered; the third bookie's commit may end a little later.
	eventually(t, "three journal-commit spans", func() bool {
		n := 0
		for _, s := range rec.Ended() {
			if s.Name() == bookie.SpanJournalCommit {
				n++
			}
		}
		return n == 3
	})
	var add sdktrace.ReadOnlySpan
	var commits []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case SpanAdd:
			if add != nil {
				t.Fatal("two add spans")
			}
			add = s
		case bookie.SpanJournalCommit:
			commits = append(commits, s)
		}
	}
	if add == nil {
		t.Fatal("no add span")
	}
	if add.Parent().SpanID() != parent.SpanContext().SpanID() || add.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("add span's parent %v, want the caller's %v", add.Parent(), parent.SpanContext())
	}
	attrs := map[string]int64{}
	for _, kv := range add.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInt64()
	}
	if attrs[string(attrLedger)] != int64(w.ID()) || attrs[string(attrEntry)] != 2 || attrs[string(attrEntryBytes)] != int64(len(payload(2))) {
		t.Fatalf("add span attributes %v", add.Attributes())
	}
	acks := 0
	for _, ev := range add.Events() {
		if ev.Name == "bookie acknowledged" {
			acks++
		}
	}
	if acks < 2 {
		t.Fatalf("add span has %d bookie acknowledgements, want at least Qa=2", acks)
	}
	var bookies []string
	for _, s := range commits {
		if s.Parent().SpanID() != add.SpanContext().SpanID() || s.SpanContext().TraceID() != add.SpanContext().TraceID() {
			t.Fatalf("commit span's parent %v, want the add span %v", s.Parent(), add.SpanContext())
		}
		for _, kv := range s.Attributes() {
			if kv.Key == attrBookie {
				bookies = append(bookies, kv.Value.AsString())
			}
		}
		if s.EndTime().After(add.EndTime()) && len(bookies) <= 2 {
			t.Logf("bookie %v committed after the add was acknowledged (beyond Qa)", bookies)
		}
	}
	slices.Sort(bookies)
	if !slices.Equal(bookies, []string{"b1", "b2", "b3"}) {
		t.Fatalf("commit spans from bookies %v", bookies)
	}
}

// The names an operator scrapes: the Prometheus exporter's translation of
// every instrument.
func TestMetricsPrometheusNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	cl := newCluster(t, 3)
	c := cl.client(t, func(cfg *Config) { cfg.MeterProvider = mp })
	w, err := c.CreateLedger(ctxT(t), spec(catalog.DefaultReplication, "b1", "b2", "b3"))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 0, 0)
	ms := c.meters
	ms.bookieError("b1", opAdd, reasonTimeout, 1)
	ms.ensembleChange(reasonTimeout, resultReplaced)
	ms.fallback(reasonSpeculative)
	ms.damage(catalog.DamageMissing, damageMarked)
	ms.recovered(time.Now(), outcomeRecovered)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	for _, w := range []string{
		"sluice_ledger_add_bytes_total",
		"sluice_ledger_add_duration_seconds",
		"sluice_ledger_add_entries_total",
		"sluice_ledger_add_failed_total",
		"sluice_ledger_add_streams_opened_total",
		"sluice_ledger_bookie_errors_total",
		"sluice_ledger_damaged_copies_total",
		"sluice_ledger_ensemble_changes_total",
		"sluice_ledger_ledgers_closed_total",
		"sluice_ledger_ledgers_created_total",
		"sluice_ledger_read_fallbacks_total",
		"sluice_ledger_recoveries_total",
		"sluice_ledger_recovery_duration_seconds",
	} {
		if !slices.Contains(got, w) {
			t.Errorf("missing %s; exported: %v", w, got)
		}
	}
}
