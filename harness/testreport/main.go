// Command testreport reads `go test -json` output on stdin and prints what a
// person needs: one line per package, the full output of every failed test,
// and a closing count line of the form
//
//	TIER: N passed, N failed, N skipped
//
// It exits non-zero if any test or package failed (including build errors),
// if no test ran at all, or — with -no-skip — if any test was skipped (used
// for the integration tier under CI, where a skip means a service was
// missing).
//
// With -record FILE it also appends "TIER PASSED FAILED SKIPPED" to FILE;
// `testreport -total FILE` later prints every recorded tier and the sum, so a
// run of several tiers ends with one closing count line.
//
// Usage: go test -json ./... | go run ./harness/testreport -tier hermetic
//
// It is test support (harness/README.md): the Taskfile's test tiers pipe
// into it.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of test2json output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type counts struct {
	passed, failed, skipped int
	failedPkgs              []string
	skippedTests            []string
}

func main() {
	tier := flag.String("tier", "tests", "name printed before the counts")
	noSkip := flag.Bool("no-skip", false, "fail if any test was skipped")
	record := flag.String("record", "", "append this tier's counts to `file`")
	total := flag.String("total", "", "print the tiers recorded in `file` and their sum, then exit")
	flag.Parse()

	if *total != "" {
		if err := printTotal(*total, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(2)
		}
		return
	}

	c, err := report(os.Stdin, os.Stdout, *tier)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		os.Exit(2)
	}
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", *tier, c.passed, c.failed, c.skipped)
	if *record != "" {
		if err := appendRecord(*record, *tier, c); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(2)
		}
	}
	switch {
	case c.failed > 0 || len(c.failedPkgs) > 0:
		fmt.Printf("%s: FAILED packages: %s\n", *tier, strings.Join(c.failedPkgs, " "))
		os.Exit(1)
	case c.passed == 0:
		fmt.Printf("%s: no test ran\n", *tier)
		os.Exit(1)
	case *noSkip && c.skipped > 0:
		fmt.Printf("%s: tests were skipped, which is not allowed here: %s\n", *tier, strings.Join(c.skippedTests, " "))
		os.Exit(1)
	}
}

// report consumes test2json events from r, writes progress to w and returns
// the counts. Lines that are not JSON (build errors print plain text) are
// passed through.
func report(r io.Reader, w io.Writer, tier string) (counts, error) {
	var c counts
	output := map[string][]string{} // "pkg test" -> lines, kept until the test ends
	pkgOutput := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "output":
			if e.Test != "" {
				output[key] = append(output[key], e.Output)
			} else {
				pkgOutput[e.Package] = append(pkgOutput[e.Package], e.Output)
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				pkgDone(w, tier, &c, e, pkgOutput[e.Package])
				delete(pkgOutput, e.Package)
				continue
			}
			switch e.Action {
			case "pass":
				c.passed++
			case "skip":
				c.skipped++
				c.skippedTests = append(c.skippedTests, e.Test)
				fmt.Fprintf(w, "[%s] SKIP %s %s\n%s", tier, e.Package, e.Test, lastLines(output[key], 3))
			case "fail":
				c.failed++
				fmt.Fprintf(w, "[%s] FAIL %s %s\n%s", tier, e.Package, e.Test, strings.Join(output[key], ""))
			}
			delete(output, key)
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	sort.Strings(c.failedPkgs)
	return c, nil
}

func pkgDone(w io.Writer, tier string, c *counts, e event, out []string) {
	switch e.Action {
	case "fail":
		c.failedPkgs = append(c.failedPkgs, e.Package)
		// Package-level output holds build errors and panics outside tests.
		fmt.Fprintf(w, "[%s] FAIL %s (%.1fs)\n%s", tier, e.Package, e.Elapsed, strings.Join(out, ""))
	case "pass":
		fmt.Fprintf(w, "[%s] ok   %s (%.1fs)\n", tier, e.Package, e.Elapsed)
	}
}

func lastLines(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

func appendRecord(path, tier string, c counts) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s %d %d %d\n", tier, c.passed, c.failed, c.skipped); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printTotal(path string, w io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var sum counts
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var tier string
		var c counts
		if _, err := fmt.Sscanf(line, "%s %d %d %d", &tier, &c.passed, &c.failed, &c.skipped); err != nil {
			return fmt.Errorf("%s: bad line %q: %w", path, line, err)
		}
		fmt.Fprintf(w, "  %-12s %5d passed, %d failed, %d skipped\n", tier, c.passed, c.failed, c.skipped)
		sum.passed += c.passed
		sum.failed += c.failed
		sum.skipped += c.skipped
	}
	fmt.Fprintf(w, "total: %d passed, %d failed, %d skipped\n", sum.passed, sum.failed, sum.skipped)
	return nil
}
