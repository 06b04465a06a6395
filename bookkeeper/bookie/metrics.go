package bookie

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicemq/sluice/bookkeeper/journal"
	"github.com/sluicemq/sluice/bookkeeper/storage"
	"github.com/sluicemq/sluice/bookkeeper/wire"
	bookiev1 "github.com/sluicemq/sluice/pkg/gen/sluice/bookie/v1"
)

// Metric names, in one place; the package doc ("Metrics and traces")
// says what each means. The Prometheus exporter turns dots into
// underscores and adds the unit and _total: sluice.bookie.journal.fsync.duration
// is sluice_bookie_journal_fsync_duration_seconds.
const (
	metricFsync            = "sluice.bookie.journal.fsync.duration"
	metricCommitDuration   = "sluice.bookie.journal.commit.duration"
	metricGroupEntries     = "sluice.bookie.journal.group.entries"
	metricJournalBytes     = "sluice.bookie.journal.written"
	metricJournalEntries   = "sluice.bookie.journal.entries"
	metricJournalRotations = "sluice.bookie.journal.rotations"
	metricJournalQueueFull = "sluice.bookie.journal.queue_full"
	metricAdds             = "sluice.bookie.adds"
	metricReadEntries      = "sluice.bookie.read.entries"
	metricReadBytes        = "sluice.bookie.read.bytes"
	metricReadDuration     = "sluice.bookie.read.duration"
	metricFences           = "sluice.bookie.fences"
	metricLedgers          = "sluice.bookie.ledgers"
	metricDiskUsed         = "sluice.bookie.disk.used"
	metricDiskAvailable    = "sluice.bookie.disk.available"
	metricDiskSize         = "sluice.bookie.disk.size"
	metricReadOnly         = "sluice.bookie.read_only"
	metricFailed           = "sluice.bookie.failed"
	metricEntryLogFiles    = "sluice.bookie.entrylog.files"
	metricEntryLogCreated  = "sluice.bookie.entrylog.files_created"
	metricFlushes          = "sluice.bookie.storage.flushes"
	metricGCFiles          = "sluice.bookie.gc.files_removed"
	metricGCBytes          = "sluice.bookie.gc.reclaimed"
	metricGCMoved          = "sluice.bookie.gc.entries_moved"
)

// SpanJournalCommit is the name of the bookie's span for one traced add:
// from the bookie taking it to its group commit's fdatasync (or its
// refusal), a child of the client's add span (Add.trace_context).
const SpanJournalCommit = "bookie.journal.commit"

// Span attribute keys, shared with bookkeeper/client's add span.
const (
	attrLedger     = attribute.Key("sluice.ledger.id")
	attrEntry      = attribute.Key("sluice.entry.id")
	attrEntryBytes = attribute.Key("sluice.entry.bytes")
	attrBookie     = attribute.Key("sluice.bookie.id")
)

// fsyncBuckets (seconds) cover 0.1 ms (NVMe with a write cache) to over a
// second (a stalled disk).
var fsyncBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// readBuckets (seconds) for ReadEntries: a buffered entry in microseconds,
// an entry log read in a millisecond or so, a cold disk in tens.
var readBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// groupBuckets (records) for records per group commit.
var groupBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}

// Values of the "status" attribute of sluice.bookie.adds, indexed as
// addStatusIndex returns.
var addStatusNames = [...]string{"ok", "fenced", "unauthorized", "bad_checksum", "rejected", "error"}

func addStatusIndex(st bookiev1.AddStatus) int {
	switch st {
	case bookiev1.AddStatus_ADD_STATUS_OK:
		return 0
	case bookiev1.AddStatus_ADD_STATUS_FENCED:
		return 1
	case bookiev1.AddStatus_ADD_STATUS_UNAUTHORIZED:
		return 2
	case bookiev1.AddStatus_ADD_STATUS_BAD_CHECKSUM:
		return 3
	case bookiev1.AddStatus_ADD_STATUS_REJECTED:
		return 4
	default:
		return 5
	}
}

// Values of the "rpc" attribute of the read counters.
const (
	rpcReadEntries = iota
	rpcReadLac
	rpcWatchLac
	numReadRPCs
)

var readRPCNames = [numReadRPCs]string{"ReadEntries", "ReadLac", "WatchLac"}

// Values of the "outcome" attribute of sluice.bookie.read.duration.
const (
	readOK = iota
	readNotFound
	readError
	numReadOutcomes
)

var readOutcomeNames = [numReadOutcomes]string{"ok", "not_found", "error"}

// Values of the "dir" attribute of the disk gauges, in checkDisk's order.
var diskDirNames = [3]string{"journal", "ledger", "index"}

// meters is the bookie's instrumentation. Counters on hot paths are
// atomics read by observable instruments when the meter provider
// collects, so an add costs no SDK call; histograms are recorded once per
// group commit (the journal's writer goroutine) or per ReadEntries call,
// with attribute sets bound here.
type meters struct {
	fsync, commit, readTime metric.Float64Histogram
	groupEntries            metric.Int64Histogram
	readTimeOpts            [numReadOutcomes]metric.RecordOption

	adds       [len(addStatusNames)]atomic.Int64
	readEnts   [numReadRPCs]atomic.Int64
	readBytes  [numReadRPCs]atomic.Int64
	fences     atomic.Int64
	ledgers    atomic.Int64 // -1 until first counted
	ledgersAt  time.Time    // when ledgers was last counted; Run's goroutine only
	disks      atomic.Pointer[[3]dirUsage]
	collecting metric.Registration

	tracer trace.Tracer // nil: no spans (no provider, or a no-op one)
}

// dirUsage is one directory's disk as checkDisk last saw it.
type dirUsage struct {
	known                  bool
	used, available, total int64
}

func newMeters(cfg Config) (*meters, error) {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter("github.com/sluicemq/sluice/bookkeeper/bookie")
	ms := &meters{}
	ms.ledgers.Store(-1)
	if tp := cfg.TracerProvider; tp != nil {
		if _, noop := tp.(tracenoop.TracerProvider); !noop {
			ms.tracer = tp.Tracer("github.com/sluicemq/sluice/bookkeeper/bookie")
		}
	}
	var err error
	hist := func(name, unit, desc string, bounds []float64) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		return h
	}
	ms.fsync = hist(metricFsync, "s", "journal group commit fdatasync time (one per group commit that succeeded)", fsyncBuckets)
	ms.commit = hist(metricCommitDuration, "s", "journal group commit from its first record queued to fdatasync done: the longest any add of the group waited for the journal", fsyncBuckets)
	ms.readTime = hist(metricReadDuration, "s", "ReadEntries calls served, by outcome (ok, not_found, error)", readBuckets)
	if err != nil {
		return nil, err
	}
	for i, o := range readOutcomeNames {
		ms.readTimeOpts[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	if ms.groupEntries, err = m.Int64Histogram(metricGroupEntries, metric.WithUnit("{entry}"),
		metric.WithDescription("records (adds) per journal group commit"), metric.WithExplicitBucketBoundaries(groupBuckets...)); err != nil {
		return nil, err
	}
	return ms, nil
}

// observe registers the observable instruments, read from b's stats when
// the provider collects. Unregistered by Close.
func (ms *meters) observe(cfg Config, b *Bookie) error {
	mp := cfg.MeterProvider
	if mp == nil {
		return nil
	}
	m := mp.Meter("github.com/sluicemq/sluice/bookkeeper/bookie")
	var err error
	var insts []metric.Observable
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		if err != nil {
			return nil
		}
		var c metric.Int64ObservableCounter
		c, err = m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		insts = append(insts, c)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		if err != nil {
			return nil
		}
		var g metric.Int64ObservableGauge
		g, err = m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		insts = append(insts, g)
		return g
	}
	jBytes := counter(metricJournalBytes, "By", "bytes written to the journal by group commits that succeeded, framing included")
	jEntries := counter(metricJournalEntries, "{entry}", "records (adds) the journal made durable")
	jRotations := counter(metricJournalRotations, "{file}", "journal files started after the one created at start")
	jQueueFull := counter(metricJournalQueueFull, "{add}", "adds refused because the journal queue stayed full for AddQueueWait")
	adds := counter(metricAdds, "{entry}", "adds answered on AddEntries streams, by status (ok, fenced, unauthorized, bad_checksum, rejected, error)")
	readEnts := counter(metricReadEntries, "{entry}", "entries returned, by rpc (ReadEntries, ReadLac, WatchLac)")
	readBytes := counter(metricReadBytes, "By", "entry payload bytes returned, by rpc (ReadEntries, ReadLac, WatchLac)")
	fences := counter(metricFences, "{fence}", "fence requests that succeeded (Fence calls and fencing recovery reads; a ledger fenced again counts again)")
	logCreated := counter(metricEntryLogCreated, "{file}", "entry log files started (rotations, the first after start included)")
	flushes := counter(metricFlushes, "{flush}", "storage flushes of the write buffer to the entry log and index (checkpoints and full buffers)")
	gcFiles := counter(metricGCFiles, "{file}", "entry log files removed by garbage collection (compaction)")
	gcBytes := counter(metricGCBytes, "By", "disk bytes garbage collection reclaimed")
	gcMoved := counter(metricGCMoved, "{entry}", "live entries garbage collection copied out of entry logs it compacted")
	ledgers := gauge(metricLedgers, "{ledger}", "ledgers stored (counted at most once a minute)")
	logFiles := gauge(metricEntryLogFiles, "{file}", "entry log files on disk")
	used := gauge(metricDiskUsed, "By", "bytes used on the disk of each directory (dir: journal, ledger, index)")
	avail := gauge(metricDiskAvailable, "By", "bytes available to the bookie on the disk of each directory (dir: journal, ledger, index)")
	size := gauge(metricDiskSize, "By", "size of the disk of each directory (dir: journal, ledger, index)")
	readOnly := gauge(metricReadOnly, "", "1 while the bookie refuses normal adds, by reason: disk (usage at the watermark), operator (set read-only, or GC found a corrupt entry), draining")
	failed := gauge(metricFailed, "", "1 once a journal or storage write or fsync failed: the bookie refuses every call until it restarts")
	if err != nil {
		return err
	}
	set := func(k, v string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
	}
	var addOpts [len(addStatusNames)]metric.ObserveOption
	for i, s := range addStatusNames {
		addOpts[i] = set("status", s)
	}
	var rpcOpts [numReadRPCs]metric.ObserveOption
	for i, r := range readRPCNames {
		rpcOpts[i] = set("rpc", r)
	}
	var dirOpts [len(diskDirNames)]metric.ObserveOption
	for i, d := range diskDirNames {
		dirOpts[i] = set("dir", d)
	}
	roDisk, roOperator, roDraining := set("reason", "disk"), set("reason", "operator"), set("reason", "draining")
	b01 := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	ms.collecting, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		js, ss := b.j.Stats(), b.st.Stats()
		o.ObserveInt64(jBytes, int64(js.GroupBytes))
		o.ObserveInt64(jEntries, int64(js.Appends))
		o.ObserveInt64(jRotations, int64(js.Rotations))
		o.ObserveInt64(jQueueFull, int64(js.QueueFullErr))
		for i := range ms.adds {
			o.ObserveInt64(adds, ms.adds[i].Load(), addOpts[i])
		}
		for i := range numReadRPCs {
			o.ObserveInt64(readEnts, ms.readEnts[i].Load(), rpcOpts[i])
			o.ObserveInt64(readBytes, ms.readBytes[i].Load(), rpcOpts[i])
		}
		o.ObserveInt64(fences, ms.fences.Load())
		o.ObserveInt64(flushes, int64(ss.Flushes))
		o.ObserveInt64(logCreated, int64(ss.LogFilesCreated))
		o.ObserveInt64(gcFiles, int64(ss.FilesRemoved))
		o.ObserveInt64(gcBytes, int64(ss.BytesReclaimed))
		o.ObserveInt64(gcMoved, int64(ss.EntriesMoved))
		if n := ms.ledgers.Load(); n >= 0 {
			o.ObserveInt64(ledgers, n)
		}
		o.ObserveInt64(logFiles, int64(ss.LogFiles))
		if d := ms.disks.Load(); d != nil {
			for i, u := range d {
				if u.known {
					o.ObserveInt64(used, u.used, dirOpts[i])
					o.ObserveInt64(avail, u.available, dirOpts[i])
					o.ObserveInt64(size, u.total, dirOpts[i])
				}
			}
		}
		o.ObserveInt64(readOnly, b01(b.readOnly.Load()), roDisk)
		o.ObserveInt64(readOnly, b01(b.operatorRO.Load()), roOperator)
		o.ObserveInt64(readOnly, b01(b.drainingMs.Load() != 0), roDraining)
		o.ObserveInt64(failed, b01(b.failed.Load() != nil))
		return nil
	}, insts...)
	return err
}

// groupCommitted is the journal's GroupCommitted hook (its writer
// goroutine): one histogram value each per group commit that succeeded.
func (ms *meters) groupCommitted(g journal.GroupInfo) {
	if g.Err != nil {
		return
	}
	ctx := context.Background()
	ms.fsync.Record(ctx, g.SyncTime.Seconds())
	ms.commit.Record(ctx, (g.Wait + g.WriteTime + g.SyncTime).Seconds())
	ms.groupEntries.Record(ctx, int64(g.Records))
}

// answered counts the adds of one AddEntries response by status (the
// stream's sender goroutine).
func (ms *meters) answered(ready []addResult) {
	var n [len(addStatusNames)]int64
	for _, r := range ready {
		n[addStatusIndex(r.status)]++
	}
	for i, c := range n {
		if c > 0 {
			ms.adds[i].Add(c)
		}
	}
}

// read counts entries returned by rpc.
func (ms *meters) read(rpc int, ents []storage.Entry) {
	if len(ents) == 0 {
		return
	}
	size := 0
	for _, e := range ents {
		size += len(e.Payload)
	}
	ms.readEnts[rpc].Add(int64(len(ents)))
	ms.readBytes[rpc].Add(int64(size))
}

// readDone records one ReadEntries call's time by outcome.
func (ms *meters) readDone(start time.Time, err error) {
	o := readOK
	switch {
	case errors.Is(err, storage.ErrNoSuchEntry), errors.Is(err, storage.ErrNoSuchLedger):
		o = readNotFound
	case err != nil:
		o = readError
	}
	ms.readTime.Record(context.Background(), time.Since(start).Seconds(), ms.readTimeOpts[o])
}

// startCommitSpan starts the span of one add carrying a trace context
// (Add.trace_context): a child of the client's add span, ended by
// endCommitSpan once the add is durable or refused. nil when the add is
// not traced or the bookie has no tracer: then nothing else is done.
func (ms *meters) startCommitSpan(ctx context.Context, bookieID string, ledger int64, a *bookiev1.Add) trace.Span {
	if ms.tracer == nil || len(a.GetTraceContext()) == 0 {
		return nil
	}
	sc, ok := wire.ParseTraceContext(a.GetTraceContext())
	if !ok {
		return nil
	}
	_, span := ms.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, sc), SpanJournalCommit,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrLedger.Int64(ledger), attrEntry.Int64(a.GetEntryId()),
			attrEntryBytes.Int(len(a.GetPayload())), attrBookie.String(bookieID)))
	return span
}

// endCommitSpan ends a commit span (nil: nothing) with the add's status.
func endCommitSpan(span trace.Span, st bookiev1.AddStatus) {
	if span == nil {
		return
	}
	if st != bookiev1.AddStatus_ADD_STATUS_OK {
		span.SetStatus(codes.Error, addStatusNames[addStatusIndex(st)])
	}
	span.End()
}

// ledgerCountInterval bounds how often Run counts the stored ledgers for
// sluice.bookie.ledgers (a walk of the index's ledger records).
const ledgerCountInterval = time.Minute

// countLedgers refreshes the ledgers gauge when it is older than
// ledgerCountInterval (Run's goroutine only).
func (b *Bookie) countLedgers(now time.Time) {
	ms := b.meters
	if !ms.ledgersAt.IsZero() && now.Sub(ms.ledgersAt) < ledgerCountInterval {
		return
	}
	ms.ledgersAt = now
	const page = 10_000
	n, after := int64(0), int64(-1)
	for {
		ids, err := b.st.ListLedgers(after, page)
		if err != nil {
			return // keep the last count; a failed storage fails the bookie elsewhere
		}
		n += int64(len(ids))
		if len(ids) < page {
			break
		}
		after = ids[len(ids)-1]
	}
	ms.ledgers.Store(n)
}
