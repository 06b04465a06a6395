package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/sluice"
)

// parseConsume runs `sluice consume args` up to its action and returns
// the checked flags the action got; help (on stdout) is what -h printed.
func parseConsume(args []string) (f consumeFlags, ran bool, help string, err error) {
	cmd := newConsumeCmd(func(_ context.Context, got consumeFlags, _, _ io.Writer) error {
		f, ran = got, true
		return nil
	})
	var out bytes.Buffer
	cmd.SetArgs(append([]string{}, args...)) // nil would be os.Args
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err = cmd.Execute()
	return f, ran, out.String(), err
}

func TestConsumeFlags(t *testing.T) {
	parse := func(args ...string) consumeFlags {
		t.Helper()
		f, ran, _, err := parseConsume(args)
		if err != nil || !ran {
			t.Fatalf("%q: %v (ran %v)", args, err, ran)
		}
		return f
	}
	f := parse("--group", "g", "orders", "--follow", "--from", "latest", "--count", "5", "--format", "json")
	if f.topic != "orders" || f.group != "g" || !f.follow || f.count != 5 || f.format != "json" || f.from != sluice.Latest() || f.partition != -1 || f.ep.addr != devDefaultAddr {
		t.Fatalf("%+v", f)
	}
	f = parse("orders", "--partition", "2", "--from", "2026-12-01T10:00:00Z")
	if f.partition != 2 || f.from != sluice.AtTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) || f.follow || f.format != "text" {
		t.Fatalf("%+v", f)
	}
	if f = parse("--from", "42", "t"); f.from != sluice.AtOffset(42) {
		t.Fatalf("%+v", f)
	}
	if f = parse("t", "--group", "g", "--idle", "1s", "--commit-interval", "5s", "--session-timeout", "30s"); f.idle != time.Second ||
		f.commitInterval != 5*time.Second || f.sessionTimeout != 30*time.Second {
		t.Fatalf("%+v", f)
	}

	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{nil, "sluice consume TOPIC"},
		{[]string{"a", "b"}, "one topic at a time"},
		{[]string{"t", "--from", "yesterday"}, "--from"},
		{[]string{"t", "--from", "-3"}, "--from"},
		{[]string{"t", "--format", "xml"}, `--format "xml": want text or json`},
		{[]string{"t", "--isolation", "serializable"}, `--isolation "serializable": want read_uncommitted or read_committed`},
		{[]string{"t", "--count", "-1"}, "--count"},
		{[]string{"t", "--partition", "-2"}, "--partition -2"},
		{[]string{"t", "--partition", "10000"}, "--partition 10000"},
		{[]string{"t", "--group", "g", "--partition", "1"}, "drop one of them"},
		{[]string{"t", "--group", "g", "--from", "42"}, "sluice group reset g --topic t --to 42"},
		{[]string{"t", "--group", "g", "--idle", "0s"}, "--idle"},
		{[]string{"t", "--group", "g", "--commit-interval", "0s"}, "--commit-interval 0s: want 10ms..1h0m0s"},
		{[]string{"t", "--group", "g", "--session-timeout", "-1s"}, "--session-timeout -1s: want 0 (the server's) or 1s..5m0s"},
		{[]string{"t", "--group", "g", "--session-timeout", "500ms"}, "--session-timeout 500ms"},
		{[]string{"t", "--idle", "1s"}, "--idle applies to group members only"},
		{[]string{"t", "--commit-interval", "1s"}, "--commit-interval applies to group members only"},
		{[]string{"t", "--group", "g", "--follow", "--idle", "1s"}, "--idle ends a read without --follow"},
		{[]string{"t", "--addr", "nowhere"}, `--addr "nowhere"`},
		{[]string{"t", "--nope"}, "unknown flag: --nope"},
	} {
		_, ran, _, err := parseConsume(tc.args)
		if err == nil || ran || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (ran %v); want an error containing %q", tc.args, err, ran, tc.want)
		}
	}
	if _, ran, help, err := parseConsume([]string{"-h"}); err != nil || ran || !strings.Contains(help, "consume TOPIC [flags]") {
		t.Fatalf("-h: %v, ran %v\n%s", err, ran, help)
	}
	if code, stdout, _ := runCLI("consume", "--help"); code != 0 || !strings.Contains(stdout, "--session-timeout") {
		t.Fatalf("--help: exit %d\n%s", code, stdout)
	}
}

func TestGroupResetFlags(t *testing.T) {
	r, err := parseReset("t", "earliest", "0, 2")
	if err != nil || r.to != sluice.Earliest() || len(r.partitions) != 2 || r.partitions[1] != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	for _, tc := range [][3]string{
		{"", "earliest", ""}, {"t", "", ""}, {"t", "soon", ""}, {"t", "latest", "x"}, {"t", "latest", "-1"},
	} {
		if _, err := parseReset(tc[0], tc[1], tc[2]); err == nil {
			t.Errorf("parseReset%q succeeded", tc)
		}
	}
	if code, stdout, _ := runCLI("group"); code != 0 || !strings.Contains(stdout, "reset") || !strings.Contains(stdout, "move a consumer group's committed offsets") {
		t.Fatalf("group: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCLI("group", "describe"); code != 2 || !strings.Contains(stderr, "needs one group name") {
		t.Fatalf("describe without a name: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI("group", "frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Fatalf("unknown verb: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI("group", "reset", "g", "--partitions", "1,x,-1,10000"); code != 2 ||
		!strings.Contains(stderr, "--topic is required") || !strings.Contains(stderr, "--to is required") ||
		!strings.Contains(stderr, `--partitions: "x"`) || !strings.Contains(stderr, `--partitions: "-1"`) || !strings.Contains(stderr, `--partitions: "10000"`) {
		t.Fatalf("reset with bad flags: exit %d, %s", code, stderr)
	}
}

func TestRecordPrinter(t *testing.T) {
	var out bytes.Buffer
	p := &recordPrinter{w: &out, limit: 2}
	ts := time.UnixMilli(1_700_000_000_000)
	r := sluice.ConsumedRecord{Topic: "t", Partition: 1, Offset: 7, Key: []byte("k"), Value: []byte("a\tb"), Timestamp: ts}
	if ok, more := p.print(&r); !ok || !more {
		t.Fatal("first record not printed")
	}
	r.Key, r.Value = nil, []byte("plain value")
	if ok, more := p.print(&r); !ok || more {
		t.Fatal("second record: want printed, no more")
	}
	if ok, _ := p.print(&r); ok {
		t.Fatal("printed past --count")
	}
	if want := "1\t7\tk\t\"a\\tb\"\n1\t7\t\tplain value\n"; out.String() != want {
		t.Fatalf("text output %q; want %q", out.String(), want)
	}

	out.Reset()
	p = &recordPrinter{w: &out, json: true}
	r = sluice.ConsumedRecord{Topic: "t", Offset: 3, Key: []byte{0xff}, Value: []byte("v"), Timestamp: ts,
		Headers: []sluice.Header{{Key: "h", Value: []byte("x")}}}
	p.print(&r)
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["key_base64"] != "/w==" || m["value"] != "v" || m["offset"] != float64(3) || m["timestamp"] != "2023-11-14T22:13:20Z" {
		t.Fatalf("json %s", out.String())
	}
}
