package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// file1Seed is the record checksum seed of journal file 1 (version 2).
var file1Seed = fileHeader{fileSeq: 1, version: formatVersion}.seed()

// craftFile frames groups of records as the writer does (each record's
// synced-to is its group's start offset) and returns the file and each
// record's offset.
func craftFile(fileSeq, firstSeq uint64, groups ...[][]byte) ([]byte, []int) {
	b := make([]byte, FileHeaderSize)
	h := fileHeader{fileSeq: fileSeq, firstSeq: firstSeq, version: formatVersion}
	h.encode(b)
	var offs []int
	seq := firstSeq
	for _, g := range groups {
		start := len(b)
		for _, rec := range g {
			off := len(b)
			offs = append(offs, off)
			b = append(b, make([]byte, RecordHeaderSize)...)
			putRecordHeader(b[off:], len(rec), seq, 0)
			b = append(b, rec...)
			sealRecord(b[off:], h.seed(), uint64(start))
			seq++
		}
	}
	return b, offs
}

// singleRecordJournal writes n records, one group each, into file 1 of a
// fresh journal on fs and closes it.
func singleRecordJournal(t *testing.T, fs vfs.FS, n int) {
	t.Helper()
	j, _ := mustOpen(t, memConfig(fs))
	for i := range n {
		if _, err := j.AppendWait(context.Background(), payload(uint64(i), 40)); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, j)
}

func wantCorrupt(t *testing.T, fs vfs.FS, mention string) {
	t.Helper()
	j, err := Open(memConfig(fs), nil)
	if err == nil {
		j.Close()
		t.Fatalf("Open succeeded, want ErrCorrupt (%s)", mention)
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), mention) {
		t.Fatalf("Open: %v, want ErrCorrupt mentioning %q", err, mention)
	}
}

func payloads(n int) map[uint64][]byte {
	m := map[uint64][]byte{}
	for i := range n {
		m[uint64(i+1)] = payload(uint64(i), 40)
	}
	return m
}

// A cut-off record or garbage where the newest file's records end (where
// the last group's terminator was) is a torn write: it is truncated, and
// the truncation is durable. Zeros there read as a terminator: the records
// end the same, and nothing is cut.
func TestTornTailTruncated(t *testing.T) {
	for name, tc := range map[string]struct {
		tail func() []byte
		torn bool
	}{
		"half record": {func() []byte {
			rec, _ := craftFile(1, 6, [][]byte{payload(5, 40)})
			return rec[FileHeaderSize : FileHeaderSize+30]
		}, true},
		"zeros":   {func() []byte { return make([]byte, 4096) }, false},
		"garbage": {func() []byte { return bytes.Repeat([]byte{0xa5}, 100) }, true},
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			singleRecordJournal(t, fs, 5)
			full := readFile(t, fs, fileName(1))
			valid := withoutTerminator(t, full)
			extra := tc.tail()
			damaged := append(bytes.Clone(valid), extra...)
			writeFile(t, fs, fileName(1), damaged)

			j, got := mustOpen(t, memConfig(fs))
			checkReplay(t, got, 1, payloads(5))
			wantTorn := int64(0)
			if tc.torn {
				wantTorn = int64(len(extra))
			}
			if len(got) != 5 || j.Recovery().TornBytes != wantTorn {
				t.Fatalf("replayed %d, torn %d; want 5 and %d", len(got), j.Recovery().TornBytes, wantTorn)
			}
			if seq, err := j.AppendWait(context.Background(), payload(5, 40)); err != nil || seq != 6 {
				t.Fatalf("append after truncation: %d, %v", seq, err)
			}
			mustClose(t, j)
			want := valid
			if !tc.torn {
				want = damaged
			}
			if !bytes.Equal(readFile(t, fs, fileName(1)), want) {
				t.Fatal("file 1 not truncated back to its valid prefix, or cut though it ended at a terminator")
			}
			j, got = mustOpen(t, memConfig(fs))
			defer mustClose(t, j)
			checkReplay(t, got, 1, payloads(6))
			if len(got) != 6 || j.Recovery().TornBytes != 0 {
				t.Fatalf("second reopen: %d records, torn %d", len(got), j.Recovery().TornBytes)
			}
		})
	}
}

// withoutTerminator returns a version 2 file's bytes without the
// terminator that follows its last group.
func withoutTerminator(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < FileHeaderSize+terminatorSize || !isTerminator(b[len(b)-terminatorSize:]) {
		t.Fatalf("file of %d bytes does not end with a terminator", len(b))
	}
	return b[:len(b)-terminatorSize]
}

// Every byte of a file other than the newest up to its terminator was
// synced: damage there is corruption, including garbage where the
// terminator was (the bytes after a terminator are stale and not read).
func TestDamageInOlderFileIsCorrupt(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"flipped payload byte":    func(b []byte) []byte { b[len(b)-terminatorSize-3] ^= 1; return b },
		"garbage for terminator":  func(b []byte) []byte { b[len(b)-1] = 7; return b },
		"cut short":               func(b []byte) []byte { return b[:len(b)-terminatorSize-1] },
		"terminator cut short":    func(b []byte) []byte { return b[:len(b)-1] },
		"no terminator (version)": func(b []byte) []byte { return b[:len(b)-terminatorSize] },
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			singleRecordJournal(t, fs, 5)
			j, _ := mustOpen(t, memConfig(fs)) // file 2 is now the newest
			mustClose(t, j)
			b := damage(readFile(t, fs, fileName(1)))
			if name == "no terminator (version)" {
				b = append(b, 0, 0, 0) // a version 1 file: bytes after the last record are damage
				binary.LittleEndian.PutUint16(b[8:], formatV1)
				binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
			}
			writeFile(t, fs, fileName(1), b)
			wantCorrupt(t, fs, fileName(1))
		})
	}
}

// Damage in the newest file followed by a record written after a later
// fsync (synced-to beyond the damage) is corruption, not a torn write.
func TestDamageProvenSyncedIsCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	singleRecordJournal(t, fs, 5) // five groups
	b := readFile(t, fs, fileName(1))
	_, offs := craftFile(1, 1, [][]byte{payload(0, 40)}, [][]byte{payload(1, 40)})
	b[offs[1]+RecordHeaderSize+3] ^= 0x10 // record 2's payload
	writeFile(t, fs, fileName(1), b)
	wantCorrupt(t, fs, "had been synced")

	// The length field destroyed: framing is lost, the scan still finds
	// the later records.
	binary.LittleEndian.PutUint32(b[offs[1]:], 1<<30)
	writeFile(t, fs, fileName(1), b)
	wantCorrupt(t, fs, "had been synced")
}

// Damage in the newest file's last group has no later record to prove it
// was synced; it is cut like a torn write (the documented limitation).
func TestDamageInLastGroupIsCutAsTorn(t *testing.T) {
	fs := vfs.NewMem()
	singleRecordJournal(t, fs, 5)
	b := readFile(t, fs, fileName(1))
	b[len(b)-terminatorSize-1] ^= 0xff
	writeFile(t, fs, fileName(1), b)
	j, got := mustOpen(t, memConfig(fs))
	defer mustClose(t, j)
	checkReplay(t, got, 1, payloads(4))
	if len(got) != 4 || j.Recovery().TornBytes != RecordHeaderSize+40+terminatorSize {
		t.Fatalf("replayed %d, torn %d", len(got), j.Recovery().TornBytes)
	}
}

// Valid records after a hole are not proof when they do not claim an fsync
// beyond the hole (the kernel writes unsynced pages back in any order), or
// when their sequence number shows they are stale bytes, not ours.
func TestValidRecordsAfterHoleThatProveNothing(t *testing.T) {
	recs := [][]byte{payload(0, 40), payload(1, 40), payload(2, 40)}
	for name, tc := range map[string]struct {
		build   func() []byte
		corrupt bool
	}{
		"same group after hole": {build: func() []byte {
			b, offs := craftFile(1, 1, [][]byte{recs[0]}, [][]byte{recs[1], recs[2]})
			clear(b[offs[1]:offs[2]]) // record 2 never reached the disk, record 3 did
			return b
		}},
		"stale record claiming a later sync": {build: func() []byte {
			b, offs := craftFile(1, 1, [][]byte{recs[0]}, [][]byte{recs[1]})
			clear(b[offs[1]:])
			// Bytes of an old, deleted file: a valid record whose synced-to
			// is beyond the hole, but with seq 1 (not ≥ 2, the seq due).
			old, _ := craftFile(7, 1, [][]byte{recs[2]})
			stale := old[FileHeaderSize:]
			binary.LittleEndian.PutUint64(stale[16:], uint64(len(b)))
			sealRecord(stale, file1Seed, uint64(len(b))) // its checksum fits file 1: only the seq tells
			return append(b, stale...)
		}},
		"record of another file claiming a later sync": {build: func() []byte {
			b, offs := craftFile(1, 1, [][]byte{recs[0]}, [][]byte{recs[1]})
			clear(b[offs[1]:])
			// A recycled file's old record with the seq due and a synced-to
			// beyond the hole: its checksum is seeded with file 7, not 1.
			old, _ := craftFile(7, 2, [][]byte{recs[2]})
			stale := old[FileHeaderSize:]
			sealRecord(stale, fileHeader{fileSeq: 7, version: formatVersion}.seed(), uint64(len(b)))
			return append(b, stale...)
		}},
		"later record claiming a later sync": {corrupt: true, build: func() []byte {
			b, offs := craftFile(1, 1, [][]byte{recs[0]}, [][]byte{recs[1]}, [][]byte{recs[2]})
			clear(b[offs[1]:offs[2]])
			return b
		}},
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := fs.MkdirAll(testDir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, fs, fileName(1), tc.build())
			if tc.corrupt {
				wantCorrupt(t, fs, "had been synced")
				return
			}
			j, got := mustOpen(t, memConfig(fs))
			defer mustClose(t, j)
			if len(got) != 1 || !bytes.Equal(got[0].rec, recs[0]) {
				t.Fatalf("replayed %d records, want only record 1", len(got))
			}
		})
	}
}

// Records whose checksum is fine but which are out of place break
// invariants 1 and 4: corrupt in an older file.
func TestMisplacedValidRecordIsCorrupt(t *testing.T) {
	for name, tc := range map[string]struct {
		build   func() []byte
		mention string
	}{
		"synced-to of no group": {mention: "synced-to", build: func() []byte {
			b, offs := craftFile(1, 1, [][]byte{payload(0, 40)}, [][]byte{payload(1, 40)})
			sealRecord(b[offs[1]:], file1Seed, 7) // a group cannot start at 7
			return b
		}},
		"record repeated": {mention: "sequence out of order", build: func() []byte {
			b, offs := craftFile(1, 1, [][]byte{payload(0, 40), payload(1, 40)})
			return append(b, b[offs[1]:]...) // same seq, same group: only the seq is wrong
		}},
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := fs.MkdirAll(testDir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, fs, fileName(1), tc.build())
			next, _ := craftFile(2, 3) // file 1 is not the newest
			writeFile(t, fs, fileName(2), next)
			wantCorrupt(t, fs, tc.mention)
		})
	}
}

func TestFileHeaderDamageIsCorrupt(t *testing.T) {
	t.Run("flipped bit", func(t *testing.T) {
		fs := vfs.NewMem()
		singleRecordJournal(t, fs, 2)
		b := readFile(t, fs, fileName(1))
		b[13] ^= 1
		writeFile(t, fs, fileName(1), b)
		wantCorrupt(t, fs, "checksum")
	})
	t.Run("future version", func(t *testing.T) {
		fs := vfs.NewMem()
		singleRecordJournal(t, fs, 2)
		b := readFile(t, fs, fileName(1))
		binary.LittleEndian.PutUint16(b[8:], formatVersion+1)
		binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
		writeFile(t, fs, fileName(1), b)
		wantCorrupt(t, fs, fmt.Sprintf("format version %d", formatVersion+1))
	})
	t.Run("cut short", func(t *testing.T) {
		fs := vfs.NewMem()
		singleRecordJournal(t, fs, 2)
		writeFile(t, fs, fileName(1), readFile(t, fs, fileName(1))[:10])
		wantCorrupt(t, fs, "header cut short")
	})
	t.Run("wrong file number", func(t *testing.T) {
		fs := vfs.NewMem()
		singleRecordJournal(t, fs, 2)
		b, _ := craftFile(9, 1)
		writeFile(t, fs, fileName(1), b)
		wantCorrupt(t, fs, "header says file 9")
	})
}

func TestMissingFilesAreCorrupt(t *testing.T) {
	setup := func(t *testing.T) vfs.FS {
		fs := vfs.NewMem()
		for range 3 { // files 1..3 with two records each
			singleRecordJournal(t, fs, 2)
		}
		return fs
	}
	t.Run("middle", func(t *testing.T) {
		fs := setup(t)
		if err := fs.Remove(fs.PathJoin(testDir, fileName(2))); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, fs, "not consecutive")
	})
	t.Run("oldest without checkpoint", func(t *testing.T) {
		fs := setup(t)
		if err := fs.Remove(fs.PathJoin(testDir, fileName(1))); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, fs, "records 1 to 2 are missing")
	})
	t.Run("all, checkpoint kept", func(t *testing.T) {
		fs := setup(t)
		writeFile(t, fs, checkpointName, encodeCheckpoint(3))
		for _, f := range journalFiles(t, fs) {
			if err := fs.Remove(fs.PathJoin(testDir, f)); err != nil {
				t.Fatal(err)
			}
		}
		wantCorrupt(t, fs, "no journal files")
	})
}

func TestCheckpointFileDamage(t *testing.T) {
	t.Run("flipped bit", func(t *testing.T) {
		fs := vfs.NewMem()
		singleRecordJournal(t, fs, 3)
		b := encodeCheckpoint(2)
		b[12] ^= 4
		writeFile(t, fs, checkpointName, b)
		wantCorrupt(t, fs, "checkpoint: checksum")
	})
	t.Run("beyond the last record", func(t *testing.T) {
		fs := vfs.NewMem()
		singleRecordJournal(t, fs, 3)
		writeFile(t, fs, checkpointName, encodeCheckpoint(4))
		wantCorrupt(t, fs, "beyond the journal's last record 3")
	})
	t.Run("wrong size", func(t *testing.T) {
		fs := vfs.NewMem()
		singleRecordJournal(t, fs, 3)
		writeFile(t, fs, checkpointName, append(encodeCheckpoint(2), 0))
		wantCorrupt(t, fs, "25 bytes")
	})
}

// Leftovers of interrupted atomic writes are removed; their final names
// are what counts.
func TestLeftoverTempFilesRemoved(t *testing.T) {
	fs := vfs.NewMem()
	singleRecordJournal(t, fs, 3)
	writeFile(t, fs, fileName(2)+tmpSuffix, []byte("half a header"))
	writeFile(t, fs, checkpointName+tmpSuffix, encodeCheckpoint(3))
	j, got := mustOpen(t, memConfig(fs))
	defer mustClose(t, j)
	if len(got) != 3 || j.Checkpointed() != 0 {
		t.Fatalf("replayed %d, checkpoint %d", len(got), j.Checkpointed())
	}
	names, _ := fs.List(testDir)
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			t.Fatalf("leftover %s not removed", n)
		}
	}
}

// A replay function's error fails Open and releases the directory.
func TestReplayErrorFailsOpen(t *testing.T) {
	fs := vfs.NewMem()
	singleRecordJournal(t, fs, 3)
	stop := errors.New("bookie could not apply")
	_, err := Open(memConfig(fs), func(seq uint64, _ []byte) error {
		if seq == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "record 2") {
		t.Fatalf("Open: %v", err)
	}
	j, got := mustOpen(t, memConfig(fs))
	defer mustClose(t, j)
	if len(got) != 3 {
		t.Fatalf("replayed %d", len(got))
	}
}
