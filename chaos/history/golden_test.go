package history

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Version-1 files are still read: the committed bytes of the last
// version-1 writer decode to the version-1 sample ops. (The writer now
// writes version 2, frozen by TestGoldenV2.)
func TestGoldenV1(t *testing.T) {
	path := filepath.Join("testdata", "v1.jsonl")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, ops, err := readAll(want, ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ops, sampleOpsV1()) {
		t.Errorf("%s decodes to\n%+v\nwant\n%+v", path, ops, sampleOpsV1())
	}
}

// A version-1 file with a fault op is refused: faults came with version 2.
func TestV1RefusesFault(t *testing.T) {
	in := "{\"format\":\"sluice-history\",\"version\":1,\"start\":\"2026-12-01T10:00:00Z\",\"seed\":1}\n" +
		"{\"op\":\"fault\",\"time\":1,\"fault\":\"kill\",\"target\":\"b1\"}\n"
	if _, _, err := readAll([]byte(in), ReaderConfig{}); err == nil {
		t.Fatal("a version-1 history with a fault op was accepted")
	}
}

// The version-2 encoding is frozen: sample ops recorded today must give the
// committed bytes, and the committed bytes must decode to the sample ops. A
// change here is a format change (see "Versions" in the package doc).
func TestGoldenV2(t *testing.T) {
	path := filepath.Join("testdata", "v2.jsonl")
	got := record(t, sampleOps())
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("recorded bytes differ from %s (run with -update only for a deliberate format change):\n%s", path, got)
	}
	_, ops, err := readAll(want, ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ops, sampleOps()) {
		t.Errorf("%s decodes to\n%+v\nwant\n%+v", path, ops, sampleOps())
	}
}
