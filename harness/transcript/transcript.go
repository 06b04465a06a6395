// Package transcript runs the transcript tests of the repository's pure
// state machines (bookkeeper/ledger, services/ingest/partition/machine,
// services/ingest/txn, services/fetch/membership): a file of blocks, each
// one command, a "----" line and the output it must produce, separated by
// blank lines; lines starting with # are comments. The caller's run
// function carries out a command and returns its output lines. With
// rewrite (each package's -rewrite flag) the files are written back with
// the output produced, to be reviewed as a diff. Test support: only tests
// import it.
package transcript

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files runs every file matching glob as a subtest; newRun gives each file
// a fresh machine's run function. empty is the line that stands for no
// output (e.g. "(no actions)").
func Files(t *testing.T, glob string, rewrite bool, empty string, newRun func(t *testing.T) func(cmd string) []string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts match %s: %v", glob, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { Run(t, f, rewrite, empty, newRun(t)) })
	}
}

type block struct {
	preamble []string // comments and extra blank lines before the command
	cmd      string
	want     []string
}

func parse(t *testing.T, path string) (blocks []block, trailer []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var pre []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", path, i+1, l)
		}
		b := block{preamble: pre, cmd: l}
		pre = nil
		for i += 2; i < len(lines) && lines[i] != ""; i++ {
			b.want = append(b.want, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks, pre
}

// Run runs one transcript file through run.
func Run(t *testing.T, path string, rewrite bool, empty string, run func(cmd string) []string) {
	t.Helper()
	blocks, trailer := parse(t, path)
	var out strings.Builder
	failed := false
	for _, b := range blocks {
		got := run(b.cmd)
		if len(got) == 0 {
			got = []string{empty}
		}
		if !rewrite && strings.Join(got, "\n") != strings.Join(b.want, "\n") {
			failed = true
			t.Errorf("%s: %s\n got:\n\t%s\nwant:\n\t%s", path, b.cmd, strings.Join(got, "\n\t"), strings.Join(b.want, "\n\t"))
		}
		for _, l := range b.preamble {
			out.WriteString(l + "\n")
		}
		out.WriteString(b.cmd + "\n----\n" + strings.Join(got, "\n") + "\n\n")
	}
	for _, l := range trailer {
		out.WriteString(l + "\n")
	}
	if rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Log("run the test with -rewrite to accept the new output, and review the diff")
	}
}
