package journal

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// firstSeqs returns each journal file's first record sequence number.
func firstSeqs(t *testing.T, fs vfs.FS) map[uint64]uint64 {
	t.Helper()
	out := map[uint64]uint64{}
	for _, name := range journalFiles(t, fs) {
		seq, _ := parseFileName(name)
		h, err := readFileHeader(fs, testDir, seq)
		if err != nil {
			t.Fatal(err)
		}
		out[seq] = h.firstSeq
	}
	return out
}

func TestCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	j, _ := mustOpen(t, cfg)
	recs := map[uint64][]byte{}
	for i := range 300 {
		rec := payload(uint64(i), 500)
		seq, err := j.AppendWait(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		recs[seq] = rec
	}
	before := firstSeqs(t, fs)
	if len(before) < 5 {
		t.Fatalf("only %d files; the test needs rotation", len(before))
	}

	if err := j.Checkpoint(301); !errors.Is(err, ErrCheckpointAhead) {
		t.Fatalf("checkpoint beyond Durable: %v", err)
	}
	if err := j.Checkpoint(150); err != nil {
		t.Fatal(err)
	}
	// Exactly the files holding nothing after 150 are gone: every file
	// whose successor starts at or before 151.
	after := firstSeqs(t, fs)
	for seq, first := range before {
		next, hasNext := before[seq+1]
		_, kept := after[seq]
		if obsolete := hasNext && next <= 151; obsolete == kept {
			t.Fatalf("file %d (records %d..%d): kept=%v", seq, first, next-1, kept)
		}
	}
	if len(after) == len(before) {
		t.Fatal("checkpoint deleted nothing")
	}
	if err := j.Checkpoint(100); err != nil || j.Checkpointed() != 150 {
		t.Fatalf("backward checkpoint: %v, now %d", err, j.Checkpointed())
	}
	mustClose(t, j)

	j, got := mustOpen(t, cfg)
	if len(got) != 150 || j.Recovery().Checkpoint != 150 {
		t.Fatalf("replayed %d after checkpoint %d", len(got), j.Recovery().Checkpoint)
	}
	checkReplay(t, got, 151, recs)

	// Checkpointing everything leaves only the newest (empty) file, and the
	// sequence still continues after a reopen.
	if err := j.Checkpoint(j.Durable()); err != nil {
		t.Fatal(err)
	}
	if files := journalFiles(t, fs); len(files) != 1 {
		t.Fatalf("files after full checkpoint: %v", files)
	}
	mustClose(t, j)
	j, got = mustOpen(t, cfg)
	defer mustClose(t, j)
	if len(got) != 0 || j.Recovery().LastSeq != 300 {
		t.Fatalf("replayed %d, last seq %d", len(got), j.Recovery().LastSeq)
	}
	if seq, err := j.AppendWait(context.Background(), []byte("next")); err != nil || seq != 301 {
		t.Fatalf("append: %d, %v", seq, err)
	}
}

// Files that a crash kept Checkpoint from deleting are deleted by Open.
func TestOpenDeletesFilesBeforeCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	for range 3 {
		singleRecordJournal(t, fs, 2) // files 1..3 hold records 1..6
	}
	writeFile(t, fs, checkpointName, encodeCheckpoint(4))
	j, got := mustOpen(t, memConfig(fs))
	defer mustClose(t, j)
	if info := j.Recovery(); info.RemovedFiles != 2 || len(got) != 2 || got[0].seq != 5 {
		t.Fatalf("recovery %+v, replayed %d", info, len(got))
	}
	if files := journalFiles(t, fs); len(files) != 2 || files[0] != fileName(3) { // and Open's file 4
		t.Fatalf("files %v", files)
	}
}
