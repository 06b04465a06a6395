package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 {
			t.Errorf("%q: exit %d; want 2 (stderr %q)", tc.args, code, stderr)
		}
		name := "sluice " + tc.args[0]
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
