package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/catalog/embedded"
	"github.com/sluicemq/sluice/services/admin"
)

// Bad trigger flags are usage errors (exit 2) naming each flag, all at
// once, before any call: --addr points at nothing here.
func TestTriggerUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"trigger", "create"}, []string{"needs one trigger name", `--topic "": topic name is empty`, `--function "": is empty`}},
		{[]string{"trigger", "create", "bad name", "--topic", "t", "--function", "f"}, []string{`trigger name "bad name" has ' '`}},
		{[]string{"trigger", "create", "t", "--topic", "o", "--function", "not a fn", "--batch-size", "20000", "--max-batch-bytes", "7000000",
			"--batch-window", "10m", "--parallelization", "11", "--max-retries", "-2", "--retry-backoff-initial", "2s", "--retry-backoff-max", "1s",
			"--max-record-age", "1s", "--on-failure-topic", "o", "--start", "middle"},
			[]string{`--function "not a fn": "not a fn" is not a Lambda function name`, "--batch-size 20000: 20000 is outside [1, 10000]",
				"--max-batch-bytes 7000000: 7000000 is outside [1, 6291456]", "--batch-window 10m0s: 600000 is outside [0, 300000]",
				"--parallelization 11", "--max-retries -2: -2: want -1 (no retries) or 1..10000", "--retry-backoff-max 1s: 1000 is below retry_backoff_initial_ms 2000",
				"--max-record-age 1s", `--on-failure-topic "o": is the trigger's own topic`, `--start "middle": "middle": want earliest, latest or timestamp`}},
		{[]string{"trigger", "create", "t", "--topic", "o", "--function", "f", "--start", "timestamp"}, []string{"--start timestamp needs --start-time"}},
		{[]string{"trigger", "create", "t", "--topic", "o", "--function", "f", "--start-time", "yesterday"}, []string{`--start-time "yesterday": want an RFC 3339 time`}},
		{[]string{"trigger", "create", "t", "--topic", "o", "--function", "f", "--start-time", "2026-01-01T00:00:00Z"}, []string{`--start-time "2026-01-01T00:00:00Z": is 1767225600000; it is only for starting_position timestamp`}},
		{[]string{"trigger", "update", "t", "--batch-size", "-1", "--function", ""}, []string{"--batch-size -1", `--function "": is empty`}},
		{[]string{"trigger", "update", "t", "--topic", "x"}, []string{"unknown flag: --topic"}},
		{[]string{"trigger", "describe"}, []string{"needs one trigger name"}},
		{[]string{"trigger", "delete", "a", "b"}, []string{`unexpected arguments ["b"]`}},
		{[]string{"trigger", "list", "x"}, []string{`unexpected arguments ["x"]`}},
		{[]string{"trigger", "creat"}, []string{`unknown command "creat"`}},
	} {
		code, _, stderr := runCLI(append(tc.args, "--addr", "127.0.0.1:1")...)
		if code != 2 {
			t.Errorf("%q: exit %d; want 2 (stderr %q)", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q lacks %q", tc.args, stderr, w)
			}
		}
	}
	// An update's unchanged fields are the stored trigger's business: a
	// lone small --retry-backoff-max or --start-time passes the checks.
	for _, args := range [][]string{
		{"trigger", "update", "t", "--retry-backoff-max", "10ms"},
		{"trigger", "update", "t", "--start-time", "2026-01-01T00:00:00Z"},
		{"trigger", "update", "t", "--start", "earliest"},
		{"trigger", "create", "t", "--topic", "o", "--function", "f"},
		{"trigger", "create", "--function", "arn:aws:lambda:us-east-1:123456789012:function:f:live", "t", "--topic", "o", "--start", "timestamp",
			"--start-time", "2026-01-01T00:00:00Z", "--max-retries", "-1", "--max-record-age", "1h", "--enabled=false"},
	} {
		if code, stderr := checkOnly(t, args...); code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, stderr)
		}
	}
}

// noLedgers is the admin service's Ledgers for a test that deletes no topic.
type noLedgers struct{}

func (noLedgers) Recover(context.Context, catalog.LedgerID, func(int64, []byte) (int64, error)) (catalog.LedgerMetadata, error) {
	return catalog.LedgerMetadata{}, errors.New("no recovery here")
}

// The trigger commands against an admin service on an embedded catalog,
// flags before and after the name.
func TestTriggerCommands(t *testing.T) {
	cat, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.CreateTopic(t.Context(), "orders", 2, catalog.DefaultTopicConfig()); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.New(admin.Deps{Catalog: cat, Ledgers: noLedgers{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(svc.Handler())
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	defer srv.Close()

	sluice := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(args, "--addr", srv.URL), &out, &errOut); code != want {
			t.Fatalf("sluice %s: exit %d, want %d: %s", strings.Join(args, " "), code, want, errOut.String())
		}
		return out.String() + errOut.String()
	}
	got := sluice(0, "trigger", "create", "--topic", "orders", "orders-fn", "--function", "orders-handler", "--batch-size", "500")
	if want := "created trigger orders-fn: topic orders -> function orders-handler (enabled (DescribeTrigger shows whether it runs))\n"; got != want {
		t.Fatalf("create:\n%q\nwant\n%q", got, want)
	}
	if got := sluice(1, "trigger", "create", "x", "--topic", "missing", "--function", "f"); !strings.Contains(got, "not_found") && !strings.Contains(got, "not found") {
		t.Fatalf("create on a missing topic: %s", got)
	}
	if got := sluice(1, "trigger", "create", "orders-fn", "--topic", "orders", "--function", "f"); !strings.Contains(got, "already exists") {
		t.Fatalf("second create: %s", got)
	}
	got = sluice(0, "trigger", "update", "orders-fn", "--batch-window", "200ms", "--enabled=false", "--on-failure-topic", "orders-dlq")
	if want := "updated trigger orders-fn to version 2 (disabled: stored, not run)\n"; got != want {
		t.Fatalf("update:\n%q\nwant\n%q", got, want)
	}
	desc := sluice(0, "trigger", "describe", "orders-fn")
	for _, want := range []string{"trigger:          orders-fn\n", "function:         orders-handler\n", "enabled:          false\n",
		"start:            latest\n", "batch size:       500 records\n", "batch window:     200ms\n", "max retries:      3\n",
		"retry backoff:    100ms .. 30s\n", "max record age:   no limit\n", "on failure topic: orders-dlq\n", "version:          2\n"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe lacks %q:\n%s", want, desc)
		}
	}
	// The server checks the merged spec: a DLQ equal to the topic.
	if got := sluice(1, "trigger", "update", "orders-fn", "--on-failure-topic", "orders"); !strings.Contains(got, "on_failure_topic") {
		t.Fatalf("update to a bad merged spec: %s", got)
	}
	sluice(0, "trigger", "create", "a-first", "--topic", "orders", "--function", "f")
	list := sluice(0, "trigger", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "a-first ") || !strings.Contains(lines[2], "disabled") || !strings.Contains(lines[1], "enabled") {
		t.Fatalf("list:\n%s", list)
	}
	if got := sluice(0, "trigger", "delete", "a-first"); got != "deleted trigger a-first\n" {
		t.Fatalf("delete: %q", got)
	}
	if got := sluice(1, "trigger", "describe", "a-first"); !strings.Contains(got, "not found") {
		t.Fatalf("describe after delete: %s", got)
	}
}
