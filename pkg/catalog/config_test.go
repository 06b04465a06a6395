package catalog_test

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

func TestParseTopicConfigDefaults(t *testing.T) {
	c, err := catalog.ParseTopicConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := catalog.TopicConfig{RetentionMs: 604800000, RetentionBytes: -1, CleanupPolicy: catalog.CleanupDelete,
		MaxMessageBytes: 1048588, Replication: catalog.Replication{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2},
		SchemaValidation: catalog.ValidationReject}
	if c != want || c != catalog.DefaultTopicConfig() {
		t.Fatalf("defaults = %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestParseTopicConfigEveryKeyRoundTrips(t *testing.T) {
	in := map[string]string{
		"retention.ms":               "-1",
		"retention.bytes":            "1073741824",
		"cleanup.policy":             "compact",
		"max.message.bytes":          "67108864",
		"replication.ensemble":       "5",
		"replication.write.quorum":   "3",
		"replication.ack.quorum":     "1",
		"durability.relaxed.allowed": "true",
		"schema.subject":             "orders-value",
		"schema.validation":          "dlq",
		"schema.dlq.topic":           "orders.invalid",
	}
	c, err := catalog.ParseTopicConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	want := catalog.TopicConfig{RetentionMs: -1, RetentionBytes: 1 << 30, CleanupPolicy: catalog.CleanupCompact,
		MaxMessageBytes: 64 << 20, Replication: catalog.Replication{Ensemble: 5, WriteQuorum: 3, AckQuorum: 1},
		DurabilityRelaxedAllowed: true, SchemaSubject: "orders-value",
		SchemaValidation: catalog.ValidationDLQ, SchemaDLQTopic: "orders.invalid"}
	if c != want {
		t.Fatalf("parsed %+v, want %+v", c, want)
	}
	out := c.Map()
	if len(out) != len(in) {
		t.Fatalf("Map has %d keys, want %d", len(out), len(in))
	}
	for k, v := range in {
		if out[k] != v {
			t.Errorf("Map()[%q] = %q, want %q", k, out[k], v)
		}
	}
	back, err := catalog.ParseTopicConfig(out)
	if err != nil || back != c {
		t.Fatalf("ParseTopicConfig(Map()) = %+v, %v; want %+v", back, err, c)
	}
}

func TestParseTopicConfigNamesEveryBadKey(t *testing.T) {
	cases := []struct {
		key, value string
	}{
		{"retention.ms", "soon"},
		{"retention.ms", "0"},
		{"retention.ms", "-2"},
		{"retention.bytes", "0"},
		{"retention.bytes", "1e9"},
		{"cleanup.policy", "compact,delete"},
		{"cleanup.policy", ""},
		{"max.message.bytes", "0"},
		{"max.message.bytes", "67108865"},
		{"max.message.bytes", "99999999999"},
		{"replication.ensemble", "17"},
		{"replication.ensemble", "0"},
		{"replication.write.quorum", "4"},
		{"replication.ack.quorum", "0"},
		{"replication.ack.quorum", "4"},
		{"durability.relaxed.allowed", "yes"},
		{"schema.subject", "has space"},
		{"schema.validation", "warn"},
		{"schema.dlq.topic", "no/slash"},
		{"segment.bytes", "1"},
		{"Retention.ms", "1"},
	}
	for _, c := range cases {
		_, err := catalog.ParseTopicConfig(map[string]string{c.key: c.value})
		if !hasField(err, c.key) {
			t.Errorf("%s=%q: err = %v, want a ValidationError naming %q", c.key, c.value, err, c.key)
		}
		if !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("%s=%q: errors.Is(err, ErrInvalid) is false", c.key, c.value)
		}
	}
}

func TestSchemaDLQNeedsItsTopic(t *testing.T) {
	_, err := catalog.ParseTopicConfig(map[string]string{"schema.subject": "s", "schema.validation": "dlq"})
	if !hasField(err, "schema.dlq.topic") {
		t.Fatalf("dlq without schema.dlq.topic: err = %v, want it to name schema.dlq.topic", err)
	}
	if _, err := catalog.ParseTopicConfig(map[string]string{"schema.subject": "s", "schema.validation": "dlq", "schema.dlq.topic": "s.dlq"}); err != nil {
		t.Fatal(err)
	}
}

func TestParseTopicConfigReportsAllViolations(t *testing.T) {
	_, err := catalog.ParseTopicConfig(map[string]string{
		"retention.ms":      "x",
		"cleanup.policy":    "shred",
		"unknown.key":       "1",
		"max.message.bytes": "0",
	})
	for _, k := range []string{"retention.ms", "cleanup.policy", "unknown.key", "max.message.bytes"} {
		if !hasField(err, k) {
			t.Errorf("err = %v, does not name %q", err, k)
		}
	}
	// An unparsable key is reported once, not again as out of range.
	if n := countField(err, "retention.ms"); n != 1 {
		t.Errorf("retention.ms reported %d times", n)
	}
}

func TestReplicationOrderIsEnforced(t *testing.T) {
	for _, r := range []struct{ e, qw, qa string }{{"3", "3", "3"}, {"3", "2", "2"}, {"1", "1", "1"}, {"16", "16", "16"}} {
		if _, err := catalog.ParseTopicConfig(map[string]string{"replication.ensemble": r.e, "replication.write.quorum": r.qw, "replication.ack.quorum": r.qa}); err != nil {
			t.Errorf("E/Qw/Qa %s/%s/%s: %v", r.e, r.qw, r.qa, err)
		}
	}
	_, err := catalog.ParseTopicConfig(map[string]string{"replication.ensemble": "2"})
	if !hasField(err, "replication.write.quorum") {
		t.Errorf("ensemble 2 under the default write quorum 3: err = %v, want it to name the write quorum", err)
	}
}

func hasField(err error, field string) bool { return countField(err, field) > 0 }

// countField counts the ValidationErrors naming field in err, looking
// through errors.Join.
func countField(err error, field string) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range j.Unwrap() {
			n += countField(e, field)
		}
		return n
	}
	var ve *catalog.ValidationError
	if errors.As(err, &ve) && ve.Field == field {
		return 1
	}
	return 0
}
