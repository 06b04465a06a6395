package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/sluicemq/sluice/services/compactor"
)

// The function has no /metrics to scrape: after each pass it writes the
// pass's report to stdout in CloudWatch's embedded metric format (EMF), one
// JSON line that CloudWatch Logs turns into metrics of namespace
// EMFNamespace, dimension FunctionName — no API call, no extra IAM. The
// metrics are the compactor service's counters (docs/metrics.md), per pass.
const EMFNamespace = "Sluice/Compactor"

// emfMetric is one metric of the record: its name, unit, and the report's
// value.
type emfMetric struct {
	name, unit string
	value      func(compactor.Report) float64
}

// emfMetrics are the metrics of each pass's record, in CloudWatch's units.
var emfMetrics = []emfMetric{
	{"LedgersOffloaded", "Count", func(r compactor.Report) float64 { return float64(r.Offloaded) }},
	{"OffloadBytes", "Bytes", func(r compactor.Report) float64 { return float64(r.OffloadBytes) }},
	{"LedgersBookieDeleted", "Count", func(r compactor.Report) float64 { return float64(r.BookieDeletes) }},
	{"LedgersTrimmed", "Count", func(r compactor.Report) float64 { return float64(r.Trimmed) }},
	{"LedgersPurged", "Count", func(r compactor.Report) float64 { return float64(r.Purged) }},
	{"LedgersCompacted", "Count", func(r compactor.Report) float64 { return float64(r.Compacted) }},
	{"TopicsPurged", "Count", func(r compactor.Report) float64 { return float64(r.TopicsPurged) }},
	{"OrphansDeleted", "Count", func(r compactor.Report) float64 { return float64(r.Orphans) }},
	{"LedgersUnderReplicated", "Count", func(r compactor.Report) float64 { return float64(r.UnderReplicated) }},
	{"LedgersRereplicated", "Count", func(r compactor.Report) float64 { return float64(r.Rereplicated) }},
	{"RereplicationBytes", "Bytes", func(r compactor.Report) float64 { return float64(r.RereplicatedBytes) }},
	{"Errors", "Count", func(r compactor.Report) float64 { return float64(r.Errors) }},
	{"PassDuration", "Milliseconds", func(r compactor.Report) float64 { return float64(r.Duration.Microseconds()) / 1000 }},
}

// writeEMF writes r as one EMF record of function fn at now.
func writeEMF(w io.Writer, fn string, r compactor.Report, now time.Time) error {
	type metricDef struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	defs := make([]metricDef, len(emfMetrics))
	rec := map[string]any{"FunctionName": fn}
	for i, m := range emfMetrics {
		defs[i] = metricDef{m.name, m.unit}
		rec[m.name] = m.value(r)
	}
	rec["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  EMFNamespace,
			"Dimensions": [][]string{{"FunctionName"}},
			"Metrics":    defs,
		}},
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
