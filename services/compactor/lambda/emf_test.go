package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicemq/sluice/services/compactor"
)

// A pass's report becomes one JSON line in CloudWatch's embedded metric
// format: every metric the directive declares has its value at the root,
// the dimension too, and the values are the report's.
func TestEMFRecordOfAPass(t *testing.T) {
	var buf bytes.Buffer
	r := compactor.Report{Offloaded: 3, OffloadBytes: 12 << 20, UnderReplicated: 2, Errors: 1, Duration: 1500 * time.Millisecond}
	now := time.UnixMilli(1_765_000_000_123)
	if err := writeEMF(&buf, "sluice-compactor", r, now); err != nil {
		t.Fatal(err)
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 || !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
		t.Fatalf("not one line: %q", buf.String())
	}
	var rec struct {
		AWS struct {
			Timestamp         int64 `json:"Timestamp"`
			CloudWatchMetrics []struct {
				Namespace  string     `json:"Namespace"`
				Dimensions [][]string `json:"Dimensions"`
				Metrics    []struct{ Name, Unit string }
			} `json:"CloudWatchMetrics"`
		} `json:"_aws"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(buf.Bytes(), &root); err != nil {
		t.Fatal(err)
	}
	if rec.AWS.Timestamp != now.UnixMilli() || len(rec.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("directive: %+v", rec.AWS)
	}
	d := rec.AWS.CloudWatchMetrics[0]
	if d.Namespace != EMFNamespace || len(d.Dimensions) != 1 || len(d.Dimensions[0]) != 1 || root[d.Dimensions[0][0]] != "sluice-compactor" {
		t.Fatalf("namespace or dimension: %+v, root %v", d, root)
	}
	if len(d.Metrics) != len(emfMetrics) {
		t.Fatalf("%d metrics declared, want %d", len(d.Metrics), len(emfMetrics))
	}
	for _, m := range d.Metrics {
		if _, ok := root[m.Name].(float64); !ok {
			t.Errorf("metric %s declared without a value at the root", m.Name)
		}
		switch m.Unit {
		case "Count", "Bytes", "Milliseconds":
		default:
			t.Errorf("metric %s: unit %q is not CloudWatch's", m.Name, m.Unit)
		}
	}
	for name, want := range map[string]float64{"LedgersOffloaded": 3, "OffloadBytes": 12 << 20, "LedgersUnderReplicated": 2, "Errors": 1, "PassDuration": 1500, "LedgersPurged": 0} {
		if root[name] != want {
			t.Errorf("%s = %v, want %v", name, root[name], want)
		}
	}
}
