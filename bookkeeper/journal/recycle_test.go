package journal

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// names lists the journal dir's recycled and journal files.
func names(t *testing.T, fs vfs.FS) (recycled, journal []string) {
	t.Helper()
	all, err := fs.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range all {
		switch {
		case isRecycleName(n):
			recycled = append(recycled, n)
		case strings.HasPrefix(n, filePrefix):
			journal = append(journal, n)
		}
	}
	slices.Sort(recycled)
	slices.Sort(journal)
	return recycled, journal
}

// closedWithRecycledFiles leaves on fs a closed journal of 100 records,
// checkpointed in full, and returns its recycled and journal file names.
func closedWithRecycledFiles(t *testing.T, fs vfs.FS) (recycled, journal []string) {
	t.Helper()
	j, _ := mustOpen(t, memConfig(fs))
	appendN(t, j, 0, 100)
	if err := j.Checkpoint(j.Durable()); err != nil {
		t.Fatal(err)
	}
	mustClose(t, j)
	recycled, journal = names(t, fs)
	if len(recycled) == 0 {
		t.Fatal("no recycled files to start with")
	}
	return recycled, journal
}

func appendN(t *testing.T, j *Journal, from, n int) map[uint64][]byte {
	t.Helper()
	m := map[uint64][]byte{}
	for i := from; i < from+n; i++ {
		seq, err := j.AppendWait(context.Background(), payload(uint64(i), 1000))
		if err != nil {
			t.Fatal(err)
		}
		m[seq] = payload(uint64(i), 1000)
	}
	return m
}

// Checkpointed files go to a bounded pool, rotations take them back, and
// the journal reads back exactly its records: the stale records a reused
// file still holds after its terminator are never replayed.
func TestRecycledFilesAreReused(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	cfg.RecycleFiles = 2
	j, _ := mustOpen(t, cfg)
	recs := appendN(t, j, 0, 200) // ~13 files of 16 KiB
	ckpt := j.Durable() - 10
	if err := j.Checkpoint(ckpt); err != nil {
		t.Fatal(err)
	}
	recycled, _ := names(t, fs)
	if len(recycled) != 2 {
		t.Fatalf("after the checkpoint: recycled files %v, want 2 (the pool's bound)", recycled)
	}
	// Append until both are reused, and a little more: the second is then
	// the newest file, with its old contents after a few new records.
	for i := 200; j.Stats().Reused < 2; i++ {
		if i > 400 {
			t.Fatalf("rotations did not reuse the recycled files (Stats %+v)", j.Stats())
		}
		for seq, p := range appendN(t, j, i, 1) {
			recs[seq] = p
		}
	}
	for seq, p := range appendN(t, j, 1000, 2) {
		recs[seq] = p
	}
	if got := j.Stats().Reused; got != 2 {
		t.Fatalf("Stats.Reused %d, want 2", got)
	}
	recycled, journal := names(t, fs)
	if len(recycled) != 0 {
		t.Fatalf("recycled files %v left after rotations", recycled)
	}
	// A reused file is longer than its records: the old contents follow
	// its last terminator.
	stale := 0
	for _, n := range journal {
		b := readFile(t, fs, n)
		h, err := decodeFileHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fs.Open(fs.PathJoin(testDir, n))
		if err != nil {
			t.Fatal(err)
		}
		res, err := scanFile(newFileReader(f, int64(len(b))), h, func(uint64, []byte) error { return nil })
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.terminated() && res.validEnd+terminatorSize < int64(len(b)) {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("no journal file holds stale bytes after its terminator; nothing was reused")
	}
	last := j.Durable()
	mustClose(t, j)

	j, got := mustOpen(t, cfg)
	defer mustClose(t, j)
	checkReplay(t, got, ckpt+1, recs)
	if uint64(len(got)) != last-ckpt || j.Recovery().TornBytes != 0 {
		t.Fatalf("replayed %d records, want %d; torn %d", len(got), last-ckpt, j.Recovery().TornBytes)
	}
}

// With RecycleFiles negative, checkpointed files are deleted.
func TestRecycleOff(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	cfg.RecycleFiles = -1
	j, _ := mustOpen(t, cfg)
	defer mustClose(t, j)
	appendN(t, j, 0, 100)
	if err := j.Checkpoint(j.Durable()); err != nil {
		t.Fatal(err)
	}
	appendN(t, j, 100, 50)
	if recycled, journal := names(t, fs); len(recycled) != 0 || j.Stats().Reused != 0 || len(journal) > 5 {
		t.Fatalf("recycled %v, reused %d, journal files %v", recycled, j.Stats().Reused, journal)
	}
}

// A journal that starts afresh (no files, no checkpoint) deletes recycled
// files left in its directory: their stale records carry sequence numbers
// the new journal will use again.
func TestFreshJournalDropsRecycledFiles(t *testing.T) {
	fs := vfs.NewMem()
	_, journal := closedWithRecycledFiles(t, fs)
	for _, n := range append(journal, checkpointName) {
		if err := fs.Remove(fs.PathJoin(testDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	j, got := mustOpen(t, memConfig(fs))
	defer mustClose(t, j)
	if recycled, _ := names(t, fs); len(recycled) != 0 || len(got) != 0 || j.Stats().Reused != 0 {
		t.Fatalf("fresh journal: recycled files %v, replayed %d, reused %d", recycled, len(got), j.Stats().Reused)
	}
	if seq, err := j.AppendWait(context.Background(), []byte("first")); err != nil || seq != 1 {
		t.Fatalf("first append: %d, %v", seq, err)
	}
}

// A group terminator never decodes as a record.
func TestTerminatorIsNoRecord(t *testing.T) {
	for _, h := range []fileHeader{{fileSeq: 1, version: formatV1}, {fileSeq: 1, version: formatVersion}, {fileSeq: 1 << 40, version: formatVersion}} {
		if _, _, _, err := decodeRecord(terminator[:], h.seed()); err == nil {
			t.Fatalf("a terminator decodes as a record of %+v", h)
		}
	}
}

// Records a crash left after the newest file's terminator (a torn group
// whose first page never reached the disk) stay there, unacknowledged,
// when that file is recycled. Reused as a later file, whose sequence
// numbers may then reach theirs, they must neither replay nor pass for
// proof of an fsync (a false ErrCorrupt): their checksums are seeded with
// the file they were written to.
func TestTornRecordsInRecycledFileAreNoProof(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	cfg.RecycleFiles = 1
	singleRecordJournal(t, fs, 5) // records 1-5 in file 1, then its terminator
	b := readFile(t, fs, fileName(1))
	x := len(b) - terminatorSize
	// The torn group 6-8 at x: its first page lost (the terminator stays),
	// a later part on disk: record 7, valid, synced-to x.
	torn, _ := craftFile(1, 7, [][]byte{payload(7, 40)})
	rec := torn[FileHeaderSize:]
	sealRecord(rec, file1Seed, uint64(x))
	b = append(b, make([]byte, 64)...) // the lost part of record 6
	b = append(b, rec...)
	writeFile(t, fs, fileName(1), b)

	j, got := mustOpen(t, cfg) // file 2 from record 6 on
	if len(got) != 5 {
		t.Fatalf("replayed %d records, want 5", len(got))
	}
	if err := j.Checkpoint(5); err != nil { // file 1 is recycled
		t.Fatal(err)
	}
	mustClose(t, j)
	j, _ = mustOpen(t, cfg) // file 3 is file 1 reused, from record 6 on
	if j.Stats().Reused != 1 {
		t.Fatalf("Stats.Reused %d, want 1", j.Stats().Reused)
	}
	if seq, err := j.AppendWait(context.Background(), payload(6, 40)); err != nil || seq != 6 {
		t.Fatalf("append: %d, %v", seq, err)
	}
	mustClose(t, j)
	// File 3's records end at 6, before the old record 7 with a synced-to
	// beyond; file 3 is the newest at this Open.
	j, got = mustOpen(t, cfg)
	defer mustClose(t, j)
	if len(got) != 1 || got[0].seq != 6 {
		t.Fatalf("replayed %v, want record 6 only", got)
	}
}

// A recycled file that cannot be reused is replaced by a new one.
func TestRecycledFileNotReusableIsReplaced(t *testing.T) {
	fs := vfs.NewMem()
	recycled, _ := closedWithRecycledFiles(t, fs)
	// Replace the oldest recycled file by a directory: it cannot be opened
	// for writing.
	if err := fs.Remove(fs.PathJoin(testDir, recycled[0])); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll(fs.PathJoin(testDir, recycled[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	j, _ := mustOpen(t, memConfig(fs))
	defer mustClose(t, j)
	if j.Stats().Reused != 0 {
		t.Fatalf("Stats.Reused %d, want 0", j.Stats().Reused)
	}
	if seq, err := j.AppendWait(context.Background(), []byte("x")); err != nil || seq != 101 {
		t.Fatalf("append: %d, %v", seq, err)
	}
}
