package telemetry_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/telemetry"
)

func TestJSONLogsCarryService(t *testing.T) {
	var buf bytes.Buffer
	tel, err := telemetry.New(telemetry.Config{Service: "ingest", Format: "json", Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	tel.Logger.Info("partition acquired", "partition", 3)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line is not JSON: %q", buf.String())
	}
	if line["service"] != "ingest" || line["msg"] != "partition acquired" || line["partition"] != float64(3) {
		t.Fatalf("log line = %v", line)
	}
}

func TestRejectsUnknownFormat(t *testing.T) {
	_, err := telemetry.New(telemetry.Config{Format: "xml"})
	if err == nil || !strings.Contains(err.Error(), "xml") {
		t.Fatalf("err = %v, want one naming the bad format", err)
	}
}

func TestInstancesDoNotShareMetrics(t *testing.T) {
	a, b := telemetry.Discard(), telemetry.Discard()
	c, err := a.MeterProvider.Meter("test").Int64Counter("sluice_test_only_a")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(t.Context(), 1)
	if got := scrape(t, b); strings.Contains(got, "sluice_test_only_a") {
		t.Fatal("a metric of one Telemetry leaked into another's registry")
	}
	if got := scrape(t, a); !regexp.MustCompile(`(?m)^sluice_test_only_a_total\{.*\} 1$`).MatchString(got) {
		t.Fatalf("counter missing from its own registry:\n%s", got)
	}
}

func scrape(t *testing.T, tel *telemetry.Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}
