package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReportCountsAndShowsFailures(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"ok line\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"boom: want 1 got 2\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"no service\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"fail","Package":"p","Elapsed":1.5}`,
		`# q`,
		`q/x.go:3:1: syntax error`,
		`{"Action":"output","Package":"q","Output":"FAIL q [build failed]\n"}`,
		`{"Action":"fail","Package":"q"}`,
	}, "\n")
	var out bytes.Buffer
	c, err := report(strings.NewReader(in), &out, "unit")
	if err != nil {
		t.Fatal(err)
	}
	if c.passed != 1 || c.failed != 1 || c.skipped != 1 {
		t.Fatalf("counts = %+v, want 1 passed 1 failed 1 skipped", c)
	}
	if strings.Join(c.failedPkgs, ",") != "p,q" {
		t.Fatalf("failed packages = %v, want p,q", c.failedPkgs)
	}
	for _, want := range []string{"boom: want 1 got 2", "syntax error", "FAIL q [build failed]", "SKIP p TestC"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "ok line") {
		t.Errorf("output of a passing test was printed:\n%s", out.String())
	}
}

func TestTotalSumsTiers(t *testing.T) {
	path := t.TempDir() + "/summary"
	if err := appendRecord(path, "hermetic", counts{passed: 10, skipped: 1}); err != nil {
		t.Fatal(err)
	}
	if err := appendRecord(path, "integration", counts{passed: 4, failed: 2}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printTotal(path, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "total: 14 passed, 2 failed, 1 skipped\n") {
		t.Fatalf("output:\n%s", out.String())
	}
}
