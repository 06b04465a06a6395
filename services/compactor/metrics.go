package compactor

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Metric names, in one place.
const (
	metricOffloaded     = "sluice.compactor.ledgers.offloaded"
	metricOffloadBytes  = "sluice.compactor.offload.bytes"
	metricBookieDeletes = "sluice.compactor.ledgers.bookie_deleted"
	metricTrimmed       = "sluice.compactor.ledgers.trimmed"
	metricPurged        = "sluice.compactor.ledgers.purged"
	metricOrphans       = "sluice.compactor.objects.orphans_deleted"
	metricCompacted     = "sluice.compactor.ledgers.compacted"
	metricErrors        = "sluice.compactor.errors"
	metricUnderRepl     = "sluice.compactor.ledgers.under_replicated"
	metricRereplicated  = "sluice.compactor.ledgers.rereplicated"
	metricRereplBytes   = "sluice.compactor.rereplication.bytes"
	metricPassDuration  = "sluice.compactor.pass.duration"
)

// meters are the compactor's instruments.
type meters struct {
	offloaded, offloadBytes, bookieDeletes, trimmed, purged, orphans, compacted, errors metric.Int64Counter
	rereplicated, rereplBytes                                                           metric.Int64Counter
	// underReplicated is the last pass's count (a gauge: it falls as
	// re-replication catches up).
	underReplicated metric.Int64Gauge
	pass            metric.Float64Histogram
}

func newMeters(mp metric.MeterProvider) (*meters, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/sluicemq/sluice/services/compactor")
	var ms meters
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	ms.offloaded = counter(metricOffloaded, "{ledger}", "ledgers moved to object storage (catalog OFFLOADED)")
	ms.offloadBytes = counter(metricOffloadBytes, "By", "segment bytes uploaded")
	ms.bookieDeletes = counter(metricBookieDeletes, "{ledger}", "offloaded ledgers whose bookie copies were deleted")
	ms.trimmed = counter(metricTrimmed, "{ledger}", "ledgers trimmed from partition chains by retention")
	ms.purged = counter(metricPurged, "{ledger}", "DELETED ledgers whose data and metadata were removed")
	ms.orphans = counter(metricOrphans, "{object}", "segment objects deleted by the orphan sweep")
	ms.compacted = counter(metricCompacted, "{ledger}", "offloaded ledgers rewritten by key compaction")
	ms.errors = counter(metricErrors, "{error}", "failed steps (retried by a later pass)")
	ms.rereplicated = counter(metricRereplicated, "{ledger}", "CLOSED ledgers whose copies on a lost bookie were rebuilt on another")
	ms.rereplBytes = counter(metricRereplBytes, "By", "payload bytes copied by re-replication")
	if err != nil {
		return nil, err
	}
	// The counters start at zero rather than appearing on their first
	// event, so rates and alerts work from the first scrape.
	for _, c := range []metric.Int64Counter{ms.offloaded, ms.offloadBytes, ms.bookieDeletes, ms.trimmed, ms.purged, ms.orphans, ms.compacted, ms.errors, ms.rereplicated, ms.rereplBytes} {
		c.Add(context.Background(), 0)
	}
	if ms.underReplicated, err = m.Int64Gauge(metricUnderRepl, metric.WithUnit("{ledger}"),
		metric.WithDescription("ledgers the last pass saw with a copy on a bookie missing from the registry")); err != nil {
		return nil, err
	}
	ms.pass, err = m.Float64Histogram(metricPassDuration, metric.WithUnit("s"), metric.WithDescription("duration of one pass"))
	return &ms, err
}
