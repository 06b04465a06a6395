package embedded

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func testTrigger() catalog.Trigger {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return catalog.Trigger{Name: "orders-fn", TopicID: "0123abcd", CreatedAt: at, UpdatedAt: at.Add(time.Second), Version: 2,
		TriggerSpec: catalog.TriggerSpec{Topic: "orders", Function: "fn", Enabled: true, OnFailureTopic: "orders-dlq"}.WithDefaults()}
}

// TestTriggerRecordFormat pins the stored JSON of a trigger: changing it
// is a format change (a new value version), never an accident.
func TestTriggerRecordFormat(t *testing.T) {
	tr := testTrigger()
	v := encodeValue(toTriggerRec(tr))
	const want = `{"name":"orders-fn","topic":"orders","topicId":"0123abcd","function":"fn","enabled":true,` +
		`"startingPosition":"latest","batchSize":100,"maxBatchBytes":6291456,"batchWindowMs":0,"parallelization":1,` +
		`"maxRetries":3,"retryBackoffInitialMs":100,"retryBackoffMaxMs":30000,"maxRecordAgeMs":0,"bisectOnError":false,` +
		`"onFailureTopic":"orders-dlq","createdMs":1893553445000,"updatedMs":1893553446000,"version":2}`
	if got := string(v[valueHeaderLen:]); got != want {
		t.Fatalf("stored trigger:\n got %s\nwant %s", got, want)
	}
	var r triggerRec
	if err := decodeValue(triggerKey(tr.Name), v, &r); err != nil {
		t.Fatal(err)
	}
	back, err := r.trigger()
	if err != nil || back != tr {
		t.Fatalf("round trip = %+v, %v; want %+v", back, err, tr)
	}
}

// TestTriggerRecordRevalidated: a stored trigger that the catalog would not
// have written is corrupt, not used.
func TestTriggerRecordRevalidated(t *testing.T) {
	for name, edit := range map[string]func(*triggerRec){
		"unresolved default": func(r *triggerRec) { r.BatchSize = 0 },
		"bad function":       func(r *triggerRec) { r.Function = "not a function" },
		"no topic id":        func(r *triggerRec) { r.TopicID = "" },
		"version 0":          func(r *triggerRec) { r.Version = 0 },
	} {
		r := toTriggerRec(testTrigger())
		edit(&r)
		if _, err := r.trigger(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
