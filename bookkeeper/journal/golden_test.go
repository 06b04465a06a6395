package journal

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The bytes of a tiny journal are pinned: a format change must show up here
// (and come with a new format version). The journal: "hello" and "sluice"
// in one group, checkpoint 1, then an empty record in a second group.
func TestGolden(t *testing.T) {
	fs := vfs.NewMem()
	cfg := Config{
		Dir:          testDir,
		FS:           fs,
		GroupBytes:   2*RecordHeaderSize + len("hello") + len("sluice"), // the two fill a group
		MaxGroupWait: time.Second,                                       // so a group goes only when full, or at Close
	}
	j, _ := mustOpen(t, cfg)
	var o outcome
	mustAppend(t, j, []byte("hello"), o.done())
	mustAppend(t, j, []byte("sluice"), o.done())
	o.wg.Wait()
	if err := j.Checkpoint(1); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, j, nil, o.done())
	mustClose(t, j)

	journal, ckpt := readFile(t, fs, fileName(1)), readFile(t, fs, checkpointName)
	got := "# " + fileName(1) + "\n" + hex.Dump(journal) + "# " + checkpointName + "\n" + hex.Dump(ckpt)
	path := filepath.Join("testdata", "golden", "tiny.hex")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("journal bytes changed; if on purpose, bump formatVersion and run with -update.\ngot:\n%s\nwant:\n%s", got, want)
	}

	// The layout the package doc describes, checked field by field.
	h, err := decodeFileHeader(journal)
	if err != nil || h != (fileHeader{fileSeq: 1, firstSeq: 1, version: formatVersion}) {
		t.Fatalf("file header %+v, %v", h, err)
	}
	want3 := []struct {
		off, syncedTo int
		rec           string
	}{{32, 32, "hello"}, {61, 32, "sluice"}, {91, 91, ""}}
	off := FileHeaderSize
	for i, w := range want3 {
		rh, p, n, err := decodeRecord(journal[off:], h.seed())
		if err != nil || off != w.off || rh.seq != uint64(i+1) || rh.syncedTo != uint64(w.syncedTo) || !bytes.Equal(p, []byte(w.rec)) {
			t.Fatalf("record %d at %d: %+v %q %v", i, off, rh, p, err)
		}
		off += n
	}
	if off+terminatorSize != len(journal) || !isTerminator(journal[off:]) {
		t.Fatalf("%d bytes after the last record, want a terminator of %d", len(journal)-off, terminatorSize)
	}
	if seq, err := decodeCheckpoint(ckpt); err != nil || seq != 1 {
		t.Fatalf("checkpoint %d, %v", seq, err)
	}
}

// A journal written in format version 1 (testdata/golden/tiny-v1.hex: the
// same tiny journal, before groups had terminators) still opens: the
// records after its checkpoint replay, and appends go on in a new file.
func TestGoldenVersion1StillReads(t *testing.T) {
	dump, err := os.ReadFile(filepath.Join("testdata", "golden", "tiny-v1.hex"))
	if err != nil {
		t.Fatal(err)
	}
	files := undump(t, string(dump))
	if h, err := decodeFileHeader(files[fileName(1)]); err != nil || h.version != formatV1 {
		t.Fatalf("v1 golden header %+v, %v", h, err)
	}
	fs := vfs.NewMem()
	if err := fs.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		writeFile(t, fs, name, b)
	}
	j, got := mustOpen(t, memConfig(fs))
	checkReplay(t, got, 2, map[uint64][]byte{2: []byte("sluice"), 3: {}})
	if len(got) != 2 {
		t.Fatalf("replayed %d records, want 2", len(got))
	}
	if seq, err := j.AppendWait(t.Context(), []byte("v2")); err != nil || seq != 4 {
		t.Fatalf("append after a v1 journal: %d, %v", seq, err)
	}
	mustClose(t, j)
	j, got = mustOpen(t, memConfig(fs))
	defer mustClose(t, j)
	checkReplay(t, got, 2, map[uint64][]byte{2: []byte("sluice"), 3: {}, 4: []byte("v2")})
	if len(got) != 3 {
		t.Fatalf("replayed %d records after reopen, want 3", len(got))
	}
}

// undump parses the golden format: "# name" lines, each followed by the
// hex.Dump of that file.
func undump(t *testing.T, s string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	var name string
	for _, line := range strings.Split(s, "\n") {
		if n, ok := strings.CutPrefix(line, "# "); ok {
			name = n
			files[name] = []byte{}
			continue
		}
		if len(line) < 10 {
			continue
		}
		cols, _, _ := strings.Cut(line[10:], "|")
		for _, f := range strings.Fields(cols) {
			b, err := hex.DecodeString(f)
			if err != nil || len(b) != 1 {
				t.Fatalf("golden line %q: %v", line, err)
			}
			files[name] = append(files[name], b[0])
		}
	}
	return files
}
