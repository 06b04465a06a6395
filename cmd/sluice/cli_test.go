package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runCLI runs a command line in-process: its exit code, stdout and stderr.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// Bad flag values are usage errors (exit 2) that name the flag and what
// it takes, all of them at once, before the command touches anything:
// the directories given stay empty and nothing listens at the addresses.
func TestUsageErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want []string // each in stderr
	}{
		{[]string{"dev", "--data-dir", dir, "--addr", "nohost"}, []string{`--addr "nohost": want HOST:PORT`}},
		{[]string{"dev", "--data-dir", dir, "--log-format", "xml"}, []string{`--log-format "xml": want text or json`}},
		{[]string{"dev", "--data-dir", dir, "--cors-origins", "http://ok:1,bad"}, []string{`--cors-origins: origin "bad": want scheme://host[:port] or *`}},
		{[]string{"dev", "--data-dir", dir, "--offload-age", "1000h"}, []string{"--offload-age 1000h0m0s", "720h0m0s"}},
		{[]string{"dev", "--data-dir", dir, "--offload-age", "soon"}, []string{`invalid argument "soon" for "--offload-age"`}},
		{[]string{"dev", "--data-dir", dir, "extra"}, []string{`unexpected arguments ["extra"]`}},
		{[]string{"dev", "--data-dir", ""}, []string{"--data-dir is required"}},
		{[]string{"bookie"}, []string{"--dir is required"}},
		{[]string{"bookie", "--dir", dir, "--addr", "127.0.0.1:70000", "--heartbeat", "0s", "--checkpoint-interval", "-1s",
			"--journal-max-group-wait", "2s", "--journal-recycle-files", "-1", "--instance", "", "--id", "a b"},
			[]string{`--addr "127.0.0.1:70000"`, "--heartbeat 0s: want a positive duration up to 3m19s",
				"--checkpoint-interval -1s: want a positive duration", "--journal-max-group-wait 2s: journal config: MaxGroupWait 2s outside [0, 1s]",
				"--journal-recycle-files -1: want 0", "--instance is required", `--id "a b"`}},
		{[]string{"bookie", "--dir", dir, "--advertise", "host"}, []string{`--advertise "host": want HOST:PORT`}},
		{[]string{"bookie", "--dir", dir, "--journal-dir", filepath.Join(dir, "ledgers")}, []string{"invalid bookie config", "JournalDir"}},
		{[]string{"bookie", "-dir", dir}, []string{"unknown shorthand flag", "(long flags take two dashes: --dir)"}},
		{[]string{"ingest"}, []string{"--catalog-table is required"}},
		{[]string{"ingest", "--catalog-table", "t", "--owner-ttl", "1h", "--heartbeat", "0s", "--balance-interval", "0s", "--id", "x y",
			"--addr", ":x", "--log-format", "yaml"},
			[]string{"--owner-ttl 1h0m0s: want 100ms..10m0s", "--heartbeat 0s: want a positive duration up to half of --owner-ttl",
				"--balance-interval 0s: want a positive interval, or a negative one for never", `--id "x y"`, `--addr ":x"`, `--log-format "yaml"`}},
		{[]string{"ingest", "--catalog-table", "t", "--owner-ttl", "4s", "--heartbeat", "3s"}, []string{"--heartbeat 3s: want a positive duration up to half of --owner-ttl (4s)"}},
		{[]string{"fetch", "--catalog-table", "t"}, []string{"--cassandra is required"}},
		{[]string{"compactor"}, []string{"--catalog-table is required", "--objects is required"}},
		{[]string{"topic", "create"}, []string{"needs one topic name"}},
		{[]string{"topic", "create", "a", "b", "--partitions", "0", "--config", "x,retention.ms=abc,foo=1", "--addr", "x y"},
			[]string{`takes one topic name; unexpected arguments ["b"]`, "--partitions 0: want 1..10000", `--config: "x" is not k=v`,
				"--config: foo: unknown topic config key", `--config: retention.ms: "abc" is not a decimal integer`, `--addr "x y"`}},
		{[]string{"topic", "create", "bad name", "--partitions", "10001"}, []string{`topic name "bad name" has ' '`, "--partitions 10001: want 1..10000"}},
		{[]string{"topic", "describe"}, []string{"needs one topic name"}},
		{[]string{"topic", "delete", "a", "b"}, []string{`unexpected arguments ["b"]`}},
		{[]string{"topic", "list", "a"}, []string{`unexpected arguments ["a"]`}},
		{[]string{"topic", "list", "--partitions", "3"}, []string{"unknown flag: --partitions"}},
		{[]string{"produce", "--topic", "t", "--partition", "-5", "a"}, []string{"--partition -5: want -1 (by key, else sticky) or a partition 0..9999"}},
		{[]string{"produce", "a", "--partition", "10000"}, []string{"--topic is required", "--partition 10000"}},
		{[]string{"produce", "--topic", "t", "--partition", "x"}, []string{`invalid argument "x" for "--partition" flag`}},
		{[]string{"produce", "--topic", "t", "--count", "-1"}, []string{"--count -1: want 0 (no load run) or 1..100000000"}},
		{[]string{"produce", "--topic", "t", "--count", "5", "--size", "0", "--batch", "0", "--inflight", "0", "--key", "k", "--partition", "1", "v"},
			[]string{"--size 0: want 1..67108864", "--batch 0: want 1..10000", "--inflight 0: want 1..10000",
				"--key does not apply to a load run", "--partition does not apply to a load run", `unexpected values ["v"]`}},
		{[]string{"produce", "--topic", "t", "--count", "5", "--size", "67108864", "--batch", "2"}, []string{"requests of 134217728 bytes; want at most 67108864"}},
		{[]string{"produce", "--topic", "t", "--size", "10", "v"}, []string{"--size applies to load runs only (--count N)"}},
		{[]string{"produce", "--topic", "t", "--subject", "s", "v"}, []string{"--subject applies with --encode only"}},
		{[]string{"produce", "--topic", "t", "--count", "5", "--encode"}, []string{"--encode does not apply to a load run"}},
		{[]string{"produce", "--topic", "t", "--addr", "localhost", "v"}, []string{`--addr "localhost": want HOST:PORT or http(s)://HOST:PORT`}},
		{[]string{"compactor", "--catalog-table", "t", "--objects", "x", "--interval", "0s", "--workers", "0", "--max-ledgers-per-pass", "0",
			"--upload-part-mib", "4", "--orphan-grace", "0s", "--compact-interval", "-1s"},
			[]string{`--objects "x"`, "--interval 0s: want a positive duration", "--workers 0: want 1..64", "--max-ledgers-per-pass 0: want 1..10000",
				"--upload-part-mib 4: want 5..512", "--orphan-grace 0s", "--compact-interval -1s"}},
		{[]string{"compactor", "--catalog-table", "t", "--objects", "mem://", "--prefix", "a", "--interval", "1000h", "--tombstone-delay", "1000h"},
			[]string{`--prefix "a": compactor config: Prefix "a" must end in '/'`, "--interval 1000h0m0s: compactor config: Interval 1000h0m0s is outside [1ms, 720h0m0s]",
				"--tombstone-delay 1000h0m0s"}},
		{[]string{"fetch", "--catalog-table", "t", "--cassandra", "a,,b", "--keyspace", "Bad-Name", "--replication-factor", "0",
			"--objects", "s3:/x", "--cache-mib", "0", "--balance-interval", "2m"},
			[]string{`--cassandra "a,,b"`, `--keyspace "Bad-Name"`, "--replication-factor 0: want 1 or more", `--objects "s3:/x"`,
				"--cache-mib 0: want 1..65536", "--balance-interval 2m0s: fetch config: BalanceInterval 2m0s is outside [1ms, 1m0s]"}},
		{[]string{"fetch", "--catalog-table", "t", "--cassandra", "h", "--replication-factor", "99", "--keyspace", "",
			"--objects", "file://relative/dir", "--balance-interval", "-1s", "--cassandra-txn-buckets", "5000"},
			[]string{"--replication-factor 99: cassandra config: Replication.Factor 99: outside [1, 10]", "--keyspace is required",
				"--cassandra-txn-buckets 5000: want 1..4096",
				`--objects "file://relative/dir"`, "--balance-interval -1s: want a positive duration"}},
		{[]string{"bookie", "--dir", dir, "--tls-cert", "c.pem"}, []string{"--tls-cert and --tls-key go together",
			"--tls-cert needs --tls-ca on a bookie: its port takes only callers with a certificate from the cluster's CA (mTLS)"}},
		{[]string{"bookie", "--dir", dir, "--tls-ca", "ca.pem"}, []string{"--tls-ca needs --tls-cert and --tls-key"}},
		{[]string{"ingest", "--catalog-table", "t", "--tls-client-ca", "u.pem", "--tls-client-auth", "maybe"},
			[]string{"--tls-ca and --tls-client-ca need --tls-cert and --tls-key", `--tls-client-auth "maybe": want require or request`}},
		{[]string{"compactor", "--catalog-table", "t", "--objects", "mem://", "--tls-ca", "ca.pem"},
			[]string{"--tls-ca needs --tls-cert and --tls-key: bookies with TLS take only callers with a certificate (mTLS)"}},
		{[]string{"topic", "list", "--tls-cert", "c.pem"}, []string{"--tls-cert and --tls-key go together"}},
		{[]string{"topic", "list", "--tls-ca", filepath.Join(dir, "missing.pem")}, []string{"--tls-ca/--tls-cert/--tls-key: tls: read CA file"}},
		{[]string{"topic", "list", "--addr", "10.1.2.3:7420", "--token", "x"}, []string{"--token: a bearer token goes only over TLS (an https:// --addr, or --tls-ca) or to a loopback address; http://10.1.2.3:7420 is neither"}},
		{[]string{"fetch", "--catalog-table", "t", "--cassandra", "h", "--cassandra-tls-cert", "c.pem", "--cassandra-password-file", "pw"},
			[]string{"--cassandra-tls-cert and --cassandra-tls-key go together", "--cassandra-tls-cert needs --cassandra-tls-ca",
				"--cassandra-password-file needs --cassandra-username"}},
		{[]string{"ingest", "--catalog-table", "t", "--addr", "0.0.0.0:7421"}, []string{"--addr 0.0.0.0:7421 is not a loopback address", "--insecure"}},
		{[]string{"bookie", "--dir", dir, "--addr", "10.0.0.5:3181"}, []string{"--addr 10.0.0.5:3181 is not a loopback address, and this bookie has no mTLS"}},
		{[]string{"ingest", "--catalog-table", "t", "--auth", "required", "--auth-jwks", "j.json"},
			[]string{"--auth-jwks needs --auth-issuer and --auth-audience", "--auth required needs --tls-cert, --tls-key and --tls-ca"}},
		{[]string{"dev", "--data-dir", dir, "--auth-jwks", "http://idp.example/jwks.json", "--auth-issuer", "i", "--auth-audience", "a"},
			[]string{"--auth-jwks http://idp.example/jwks.json: fetch token keys over https"}},
		{[]string{"dev", "--data-dir", dir, "--super-users", "User:a", "--authorization", "rbac"},
			[]string{`--authorization "rbac": want none or acl`}},
		{[]string{"dev", "--data-dir", dir, "--authorization", "acl", "--super-users", "admin"},
			[]string{`--super-users: principal "admin": want User:NAME or Service:NAME`}},
		{[]string{"acl", "add", "--principal", "User:a", "--topic", "t", "--group", "g", "--operation", "write"},
			[]string{"give one", `--operation "write"`}},
		{[]string{"acl", "remove"}, []string{"select the ACLs to remove", "--all"}},
		{[]string{"auth", "token", "--key", "k", "--kid", "1", "--ttl", "48h"}, []string{"--issuer is required", "--ttl 48h0m0s"}},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 {
			t.Errorf("%q: exit %d; want 2 (stderr %q)", tc.args, code, stderr)
		}
		name := "sluice " + tc.args[0]
		if len(tc.args) > 1 && (tc.args[0] == "topic" || tc.args[0] == "group" || tc.args[0] == "acl" || tc.args[0] == "auth" || (tc.args[0] == "bench" && tc.args[1] == "ledger")) {
			name += " " + tc.args[1]
		}
		for _, w := range append(tc.want, name+": ", "Run '"+name+" --help' for usage.") {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q lacks %q", tc.args, stderr, w)
			}
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		t.Fatalf("refused commands touched %s: %v, %v", dir, ents, err)
	}
}

// checkOnly runs a command line as run does, up to and including the
// command's checks, but not the command itself (which would open disks
// and reach DynamoDB).
func checkOnly(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	root := newRoot(io.Discard, io.Discard)
	cmd, _, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("%q: no such command (%v)", args, err)
	}
	ran := false
	cmd.RunE = func(*cobra.Command, []string) error { ran = true; return nil }
	var errOut bytes.Buffer
	root.SetErr(&errOut)
	code = execute(context.Background(), root, args)
	if code == 0 && !ran {
		t.Fatalf("%q: exit 0 but the command did not run", args)
	}
	return code, errOut.String()
}

// The command lines of the repository's scripts and harnesses (bench/*.sh,
// chaos/harness, harness/bookieproc, the process tests) pass the checks.
func TestRepoCommandLinesPassChecks(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "--data-dir", "/tmp/d", "--addr", "127.0.0.1:0"},
		{"dev", "--offload-age", "0"},
		{"bookie", "--dir", "/tmp/b", "--addr", "127.0.0.1:17531", "--id", "bookie-1", "--instance", "sluice-test",
			"--catalog-table", "t", "--heartbeat", "1s", "--checkpoint-interval", "500ms", "--advertise", "127.0.0.1:40001"},
		{"bookie", "--id", "bookie-1", "--dir", "/tmp/b", "--addr", "127.0.0.1:17531", "--catalog-table", "t", "--pprof", "--journal-recycle-files", "0"},
		{"ingest", "--addr", "127.0.0.1:7421", "--id", "ingest-1", "--catalog-table", "t", "--owner-ttl", "4s",
			"--heartbeat", (4 * time.Second / 3).String(), "--balance-interval", "500ms"},
		{"ingest", "--addr", "127.0.0.1:7421", "--id", "ingest-1", "--catalog-table", "t", "--create-table", "--pprof"},
		{"ingest", "--catalog-table", "t", "--balance-interval", "-1s"},
		{"fetch", "--addr", "127.0.0.1:7422", "--catalog-table", "t", "--cassandra", "127.0.0.1:9042", "--keyspace", "compactor_it_1",
			"--replication-factor", "1", "--pprof", "--balance-interval", "500ms", "--objects", "file:///tmp/objects"},
		{"compactor", "--catalog-table", "t", "--objects", "s3://b?region=us-east-1", "--offload-age", "-1ns", "--bookie-delete-grace", "-1ns", "--once"},
		{"compactor", "--catalog-table", "t", "--objects", "file:///tmp/o", "--offload-age", "-1ns", "--bookie-delete-grace", "-1ns",
			"--workers", "1", "--upload-part-mib", "5", "--once", "--prefix", "p/", "--delete-grace", "0"},
		{"bench", "--workload", "bench/workloads/s1.yaml", "--out", "/tmp/o", "--label", "kafka s1 r1", "--drain-timeout", "20s",
			"--warmup-duration", "12s", "--test-duration", "8s", "--sluice-per-record", "--driver", "kafka", "--brokers", "127.0.0.1:9092,127.0.0.1:9093",
			"--server-pids", "kafka-1=100,kafka-2=101", "--kafka-topic-config", "flush.messages=1"},
		{"bench", "--workload", "w.yaml", "--out", "/tmp/o", "--rate", "15000", "--recovery-rate", "5000", "--driver", "sluice",
			"--sluice-addr", "127.0.0.1:17421", "--sluice-fetch-addr", "127.0.0.1:17422", "--server-pids", "ingest=1,bookie-1=2,fetch=3"},
		{"bench", "--driver", "mem", "--workload", "w.yaml", "--out", "/tmp/o", "--rate", "0", "--warmup-duration", "0s"},
		{"bench", "ledger", "--dir", "/tmp/l", "--out", "/tmp/l.md", "--warmup", "5s", "--duration", "20s"},
		{"bench", "ledger", "--dir", "/tmp/l", "--out", "/tmp/l.md", "--quick"},
		{"produce", "--topic", "orders", "--key", "user-7", "a", "b", "c"},
		{"produce", "--topic", "orders", "--count", "20000", "--size", "1024"},
		{"consume", "orders", "--group", "billing", "--format", "json"},
		{"consume", "demo", "--addr", "127.0.0.1:1", "--from", "earliest", "--count", "4"},
		{"topic", "create", "orders", "--partitions", "4"},
		{"group", "reset", "g", "--topic", "t", "--to", "earliest", "--dry-run", "--partitions", "0,1"},
		{"fetch", "--catalog-table", "t", "--cassandra", "a,b:9043", "--objects", "s3://bucket?region=us-east-1&endpoint=http://127.0.0.1:4566&use_path_style=true"},
	} {
		if code, stderr := checkOnly(t, args...); code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, stderr)
		}
	}
}

// A zero age or grace means zero (none, at once), not the compactor
// config's default (minutes).
func TestZeroAgeOrGraceMeansNone(t *testing.T) {
	f := compactorFlags{table: "t", objects: "mem://", interval: time.Second, orphanGrace: time.Hour, compactEvery: time.Minute,
		workers: 1, maxLedgers: 1, partMiB: 16, rereplMiB: 32, logFormat: "text"} // every age and grace zero
	if err := f.check(); err != nil {
		t.Fatal(err)
	}
	if cfg := f.config(); cfg.OffloadAge >= 0 || cfg.BookieDeleteGrace >= 0 || cfg.DeleteGrace >= 0 || cfg.TombstoneDelay >= 0 || cfg.RereplicateGrace >= 0 {
		t.Fatalf("zero flags reach the config as %v %v %v %v %v; want negative (none)", cfg.OffloadAge, cfg.BookieDeleteGrace, cfg.DeleteGrace, cfg.TombstoneDelay, cfg.RereplicateGrace)
	}
	d := devFlags{serverFlags: serverFlags{addr: devDefaultAddr, logFormat: "text"}, dataDir: "d"}
	if err := d.check(); err != nil || d.offloadAge >= 0 {
		t.Fatalf("dev --offload-age 0: %v, %v", d.offloadAge, err)
	}
}

// parseProduce runs `sluice produce args` up to its action and returns
// the checked flags the action got.
func parseProduce(t *testing.T, args ...string) produceFlags {
	t.Helper()
	var got *produceFlags
	cmd := newProduceCmd(func(_ context.Context, f produceFlags, _ io.Reader, _ io.Writer) error {
		got = &f
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err != nil || got == nil {
		t.Fatalf("produce %q: %v (action ran: %v)", args, err, got != nil)
	}
	return *got
}

// Flags go before or after the values; -- ends the flags. (The old parser
// stopped at the first value: `a b --key k` produced four records and a
// trailing --addr was a record.)
func TestProduceFlagsAnywhere(t *testing.T) {
	records := func(f produceFlags) (out []string) {
		for _, r := range produceRequest(f, f.values).GetRecords() {
			out = append(out, string(r.GetKey())+"="+string(r.GetValue()))
		}
		return out
	}
	f := parseProduce(t, "--topic", "t", "a", "b", "--key", "k")
	if got := records(f); strings.Join(got, " ") != "k=a k=b" {
		t.Errorf("--key after the values: records %q; want a and b with key k", got)
	}
	f = parseProduce(t, "a", "--topic", "t", "b", "--addr", "127.0.0.1:9", "--partition", "3")
	if f.ep.addr != "127.0.0.1:9" || f.topic != "t" || strings.Join(f.values, " ") != "a b" {
		t.Errorf("flags between and after the values: %+v", f)
	}
	if p := produceRequest(f, f.values).Partition; p == nil || *p != 3 {
		t.Errorf("--partition 3 after the values: request partition %v", p)
	}
	f = parseProduce(t, "--topic", "t", "--", "--literal", "--key", "k")
	if got := records(f); strings.Join(got, " ") != "=--literal =--key =k" || f.key != "" {
		t.Errorf("after --: records %q, key %q; want three values and no key", got, f.key)
	}
	f = parseProduce(t, "--topic=t", "--count", "10", "--size", "8")
	if f.count != 10 || f.size != 8 || f.batch != 100 || f.inflight != 16 || f.partition != -1 || f.ep.addr != devDefaultAddr || len(f.values) != 0 {
		t.Errorf("load run defaults: %+v", f)
	}
}

// commandPaths lists every command of the tree (cobra's help and
// completion commands included) as argument lists ("topic", "create").
func commandPaths() [][]string {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(append([]string{}, path...), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)
	return paths
}

// Every command answers --help, -h and `sluice help ...` alike: its help
// on stdout, exit 0.
func TestEveryCommandHasHelp(t *testing.T) {
	paths := append(commandPaths(), nil) // nil: sluice itself
	if len(paths) < 26 {
		t.Fatalf("only %d commands found: %q", len(paths), paths)
	}
	for _, path := range paths {
		code, help, stderr := runCLI(append(path, "--help")...)
		name := strings.TrimSpace("sluice " + strings.Join(path, " "))
		if code != 0 || stderr != "" || !strings.Contains(help, "Usage:\n  "+name) || !strings.Contains(help, "-h, --help") {
			t.Errorf("%s --help: exit %d, stderr %q, stdout:\n%s", name, code, stderr, help)
			continue
		}
		if _, short, _ := runCLI(append(path, "-h")...); short != help {
			t.Errorf("%s -h differs from --help", name)
		}
		if code, viaHelp, _ := runCLI(append([]string{"help"}, path...)...); code != 0 || viaHelp != help {
			t.Errorf("sluice help %s: exit %d, differs from --help:\n%s", strings.Join(path, " "), code, viaHelp)
		}
		// The help lists every flag of the command.
		root := newRoot(io.Discard, io.Discard)
		if cmd, _, err := root.Find(path); err == nil && cmd != root {
			cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(help, "--"+f.Name+" ") {
					t.Errorf("%s --help lacks --%s", name, f.Name)
				}
			})
		}
	}
}

// `sluice completion SHELL` prints a script that calls back into the
// binary, and the callback completes commands, flags and flag values.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "# bash completion V2 for sluice", "zsh": "#compdef sluice", "fish": "complete -c sluice"} {
		code, out, stderr := runCLI("completion", shell)
		if code != 0 || stderr != "" || !strings.Contains(out, want) || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, stderr %q, script lacks %q or __complete:\n%.300s", shell, code, stderr, want, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string // completion lines
	}{
		{[]string{"__complete", "top"}, []string{"topic\tcreate, describe, list or delete topics"}},
		{[]string{"__complete", "topic", ""}, []string{"create\tcreate a topic", "list\tprint the names of all topics"}},
		{[]string{"__complete", "produce", "t", "--par"}, []string{"--partition\t"}},
		{[]string{"__complete", "consume", "t", "--format", ""}, []string{"text", "json"}},
		{[]string{"__complete", "bench", "--driver", ""}, []string{"kafka", "sluice", "mem"}},
		{[]string{"__complete", "consume", ""}, []string{":4"}}, // no file names for a topic
	} {
		code, out, _ := runCLI(tc.args...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%q: exit %d, completions lack %q:\n%s", tc.args, code, w, out)
			}
		}
	}
}

// Unknown commands, at every level, are usage errors with a suggestion
// and where to find the commands.
func TestUnknownCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"prodce", "--topic", "t"}, []string{`sluice: unknown command "prodce" (did you mean "produce"?)`, "Run 'sluice help' for the list of commands."}},
		{[]string{"topic", "crate", "t"}, []string{`sluice topic: unknown command "crate" (did you mean "create"?)`, "Run 'sluice topic --help' for its commands."}},
		{[]string{"group", "frobnicate"}, []string{`sluice group: unknown command "frobnicate"`, "Run 'sluice group --help' for its commands."}},
		{[]string{"bench", "ledgr"}, []string{`sluice bench: unknown command "ledgr" (did you mean "ledger"?)`}},
		{[]string{"help", "nope"}, []string{`sluice help: unknown command "nope"`}},
		{[]string{"help", "topic", "nope"}, []string{`sluice help: unknown command "nope"`, "Run 'sluice topic --help' for its commands."}},
		{[]string{"completion", "tcsh"}, []string{"sluice completion: unknown command \"tcsh\""}},
		{[]string{"--nope"}, []string{"sluice: unknown flag: --nope", "Run 'sluice --help' for usage."}},
		{[]string{"version", "extra"}, []string{`sluice version: unexpected arguments ["extra"]`}},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != 2 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want 2 and nothing on stdout", tc.args, code, stdout)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q lacks %q", tc.args, stderr, w)
			}
		}
	}
	// A command alone that only holds commands prints its help.
	for _, args := range [][]string{nil, {"topic"}, {"group"}} {
		if code, stdout, _ := runCLI(args...); code != 0 || !strings.Contains(stdout, "Available Commands:") && !strings.Contains(stdout, "Client commands:") {
			t.Errorf("%q: exit %d\n%s", args, code, stdout)
		}
	}
}

// A command line that parses but fails while running exits 1 and says
// which command failed; a usage error exits 2 and points at the help.
func TestExitCodes(t *testing.T) {
	// Nothing listens on port 1.
	code, _, stderr := runCLI("topic", "list", "--addr", "127.0.0.1:1")
	if code != 1 || !strings.HasPrefix(stderr, "sluice topic list: ") || !strings.Contains(stderr, "127.0.0.1:1") || strings.Contains(stderr, "--help") {
		t.Errorf("unreachable server: exit %d, stderr %q; want 1 and the command's error", code, stderr)
	}
	code, _, stderr = runCLI("produce", "--topic", "t", "a", "--addr", "127.0.0.1:1") // --addr after the value is the address
	if code != 1 || !strings.HasPrefix(stderr, "sluice produce: ") || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("produce to port 1: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI("produce", "--topic", "t", "--partition", "-5", "a")
	if code != 2 || stderr != "sluice produce: --partition -5: want -1 (by key, else sticky) or a partition 0..9999\nRun 'sluice produce --help' for usage.\n" {
		t.Errorf("--partition -5: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, _ := runCLI("version"); code != 0 || !strings.HasPrefix(stdout, "sluice development build") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
}
