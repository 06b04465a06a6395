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

// The version-1 encoding is frozen: sample ops recorded today must give the
// committed bytes, and the committed bytes must decode to the sample ops. A
// change here is a format change (see "Versions" in the package doc).
func TestGoldenV1(t *testing.T) {
	path := filepath.Join("testdata", "v1.jsonl")
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
