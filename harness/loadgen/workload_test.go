package loadgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const validYAML = `
name: test
topics: 2
partitionsPerTopic: 16
messageSize: 1024
producersPerTopic: 1
producerRate: 5000
subscriptionsPerTopic: 1
warmupDuration: 10s
testDuration: 1m
`

func TestParseWorkloadFillsDefaults(t *testing.T) {
	w, err := ParseWorkload([]byte(validYAML))
	if err != nil {
		t.Fatal(err)
	}
	if w.KeyDistributor != KeyNone || w.ConsumerPerSubscription != 1 {
		t.Errorf("defaults: keyDistributor %q consumerPerSubscription %d", w.KeyDistributor, w.ConsumerPerSubscription)
	}
	if w.TestDuration.D() != time.Minute || w.WarmupDuration.D() != 10*time.Second {
		t.Errorf("durations: %v %v", w.TestDuration, w.WarmupDuration)
	}
	if w.Producers() != 2 || w.Consumers() != 2 {
		t.Errorf("producers %d consumers %d", w.Producers(), w.Consumers())
	}
}

// An OpenMessaging Benchmark workload file (its own field names and whole
// minutes) loads as is.
func TestParseWorkloadAcceptsOMBMinutes(t *testing.T) {
	w, err := ParseWorkload([]byte(`
name: 1 topic / 16 partitions / 1kb
topics: 1
partitionsPerTopic: 16
messageSize: 1024
keyDistributor: "RANDOM_NANO"
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 50000
testDurationMinutes: 15
warmupDurationMinutes: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	if w.TestDuration.D() != 15*time.Minute || w.WarmupDuration.D() != time.Minute {
		t.Errorf("durations: %v %v", w.TestDuration, w.WarmupDuration)
	}
	if w.TestDurationMinutes != 0 {
		t.Error("minutes not folded into the duration")
	}
}

// Every invalid field is reported, each error naming its field.
func TestValidateNamesEveryBadField(t *testing.T) {
	for _, tc := range []struct {
		name, edit, field string
	}{
		{"no name", "name: test", "name"},
		{"topics 0", "topics: 2", "topics"},
		{"too many partitions", "partitionsPerTopic: 16\n", "partitionsPerTopic"},
		{"message smaller than the header", "messageSize: 1024", "messageSize"},
		{"unknown key distributor", "producersPerTopic: 1\n", "keyDistributor"},
		{"no producers", "producersPerTopic: 1\n", "producersPerTopic"},
		{"negative rate", "producerRate: 5000", "producerRate"},
		{"too many subscriptions", "subscriptionsPerTopic: 1", "subscriptionsPerTopic"},
		{"no test duration", "testDuration: 1m", "testDuration"},
		{"negative warm-up", "warmupDuration: 10s", "warmupDuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repl := map[string]string{
				"name":                  "name: ' '",
				"topics":                "topics: 0",
				"partitionsPerTopic":    "partitionsPerTopic: 20000\n",
				"messageSize":           "messageSize: 8",
				"keyDistributor":        "producersPerTopic: 1\nkeyDistributor: HASHED\n",
				"producersPerTopic":     "producersPerTopic: 0\n",
				"producerRate":          "producerRate: -1",
				"subscriptionsPerTopic": "subscriptionsPerTopic: 17",
				"testDuration":          "testDuration: 0s",
				"warmupDuration":        "warmupDuration: -1s",
			}[tc.field]
			src := strings.Replace(validYAML, tc.edit, repl, 1)
			_, err := ParseWorkload([]byte(src))
			if err == nil {
				t.Fatalf("no error for\n%s", src)
			}
			if !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("error does not name %s: %v", tc.field, err)
			}
		})
	}
}

func TestValidateReportsAllErrorsAtOnce(t *testing.T) {
	err := Workload{Name: "x", Topics: 0, PartitionsPerTopic: 0, MessageSize: 1, ProducersPerTopic: 1,
		ProducerRate: 10, KeyDistributor: KeyNone, TestDuration: Duration(time.Second)}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, f := range []string{"topics:", "partitionsPerTopic:", "messageSize:"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("missing %s in %v", f, err)
		}
	}
}

func TestParseWorkloadRejects(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"unknown field", validYAML + "partitionsPerTopc: 3\n", "partitionsPerTopc"},
		{"both duration forms", validYAML + "testDurationMinutes: 1\n", "testDuration and testDurationMinutes"},
		{"bad duration", strings.Replace(validYAML, "1m", "a minute", 1), "not a duration"},
		{"max-rate search without warm-up", strings.Replace(strings.Replace(validYAML, "5000", "0", 1), "10s", "5s", 1), "warmupDuration:"},
		{"consumers without subscriptions", strings.Replace(validYAML, "subscriptionsPerTopic: 1", "subscriptionsPerTopic: 0\nconsumerPerSubscription: 2", 1), "consumerPerSubscription:"},
		{"backlog with a warm-up", validYAML + "backlogDuration: 30s\n", "warmupDuration: must be 0 with backlogDuration"},
		{"backlog without a fixed rate", strings.Replace(validYAML, "5000", "0", 1) + "backlogDuration: 30s\n", "backlogDuration: needs a fixed producerRate"},
		{"backlog without consumers", strings.Replace(strings.Replace(validYAML, "subscriptionsPerTopic: 1", "subscriptionsPerTopic: 0", 1), "warmupDuration: 10s", "backlogDuration: 30s", 1), "backlogDuration: needs subscriptions"},
		{"empty", "", "empty workload"},
		{"two documents", validYAML + "---\n" + validYAML, "more than one YAML document"},
		{"wrong type", strings.Replace(validYAML, "topics: 2", "topics: two", 1), "topics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWorkload([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The workloads the repository ships all load.
func TestShippedWorkloadsLoad(t *testing.T) {
	files, err := filepath.Glob("../../bench/workloads/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("workload files: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := LoadWorkload(f); err != nil {
			t.Error(err)
		}
	}
}

func TestLoadWorkloadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWorkload(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("error %v does not name %s", err, p)
	}
}
