package dynamodb

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func TestTriggerItemRoundTrip(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, spec := range []catalog.TriggerSpec{
		{Topic: "orders", Function: "fn"},
		{Topic: "orders", Function: "arn:aws:lambda:us-east-1:123456789012:function:f:live", Enabled: true,
			StartingPosition: catalog.StartTimestamp, StartingTimestampMs: 1_700_000_000_000, BatchSize: 10, MaxBatchBytes: 1 << 20,
			BatchWindowMs: 5, Parallelization: 3, MaxRetries: -1, RetryBackoffInitialMs: 10, RetryBackoffMaxMs: 20,
			MaxRecordAgeMs: 60_000, BisectOnError: true, OnFailureTopic: "dlq"},
	} {
		tr := catalog.Trigger{Name: "t", TriggerSpec: spec.WithDefaults(), TopicID: "abc", CreatedAt: at, UpdatedAt: at, Version: 4}
		got, err := decodeTrigger(triggerItem(tr))
		if err != nil || got != tr {
			t.Fatalf("round trip = %+v, %v; want %+v", got, err, tr)
		}
	}
	tr := catalog.Trigger{Name: "t", TriggerSpec: catalog.TriggerSpec{Topic: "orders", Function: "fn"}.WithDefaults(), TopicID: "abc", Version: 1}
	for name, edit := range map[string]func(map[string]av){
		"unresolved default": func(it map[string]av) { it["batch"] = n(0) },
		"missing attribute":  func(it map[string]av) { delete(it, "fn") },
		"format 2":           func(it map[string]av) { it[attrFormat] = n(2) },
	} {
		it := maps.Clone(triggerItem(tr))
		edit(it)
		if _, err := decodeTrigger(it); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}
