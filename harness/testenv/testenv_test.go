package testenv_test

import (
	"strings"
	"testing"

	"github.com/sluicemq/sluice/harness/testenv"
)

// recorder captures what Require does to a test without ending this one.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.fatal = args[0].(string) }
func (r *recorder) Skip(args ...any)  { r.skip = args[0].(string) }

func TestRequireFailsInCIAndSkipsElsewhere(t *testing.T) {
	t.Setenv("SLUICE_TEST_NOPE", "")

	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	testenv.Require(r, "SLUICE_TEST_NOPE", "Nope")
	if r.fatal == "" || r.skip != "" {
		t.Fatalf("CI=true: fatal=%q skip=%q, want a failure", r.fatal, r.skip)
	}

	t.Setenv("CI", "")
	r = &recorder{TB: t}
	testenv.Require(r, "SLUICE_TEST_NOPE", "Nope")
	if r.skip == "" || r.fatal != "" {
		t.Fatalf("no CI: fatal=%q skip=%q, want a skip", r.fatal, r.skip)
	}
}

func TestRequireReturnsValue(t *testing.T) {
	t.Setenv("SLUICE_TEST_NOPE", "127.0.0.1:1")
	if got := testenv.Require(t, "SLUICE_TEST_NOPE", "Nope"); got != "127.0.0.1:1" {
		t.Fatalf("got %q", got)
	}
}

func TestKafkaSplitsTheBrokerList(t *testing.T) {
	t.Setenv("SLUICE_TEST_KAFKA", "127.0.0.1:9092,127.0.0.1:9093")
	if got := testenv.Kafka(t); len(got) != 2 || got[1] != "127.0.0.1:9093" {
		t.Fatalf("got %q", got)
	}
	t.Setenv("SLUICE_TEST_KAFKA", "")
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	testenv.Kafka(r)
	if r.fatal == "" || !strings.Contains(r.fatal, "task kafka:up") {
		t.Fatalf("CI=true without Kafka: fatal=%q, want a failure saying how to start it", r.fatal)
	}
}
