package journal

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fuzzSeeds are journal files: valid, torn, damaged, and not files at all.
func fuzzSeeds() [][]byte {
	valid, offs := craftFile(1, 1,
		[][]byte{[]byte("hello"), []byte("sluice")},
		[][]byte{nil},
		[][]byte{bytes.Repeat([]byte{7}, 300), []byte("x")})
	flipped := bytes.Clone(valid)
	flipped[offs[1]+RecordHeaderSize] ^= 1
	holed := bytes.Clone(valid)
	clear(holed[offs[3] : offs[3]+10])
	return [][]byte{
		valid,
		valid[:offs[2]+5],
		flipped,
		holed,
		append(bytes.Clone(valid), make([]byte, 100)...),
		valid[:FileHeaderSize],
		valid[:FileHeaderSize-1],
		nil,
		bytes.Repeat([]byte{0xff}, 64),
	}
}

// decodeRecord never panics, and never returns a record whose checksum does
// not match its bytes.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range fuzzSeeds() {
		if len(s) > FileHeaderSize {
			f.Add(s[FileHeaderSize:])
		}
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, payload, n, err := decodeRecord(b, file1Seed)
		if err != nil {
			return
		}
		if n != RecordHeaderSize+len(payload) || n > len(b) || int(h.length) != len(payload) {
			t.Fatalf("size %d, payload %d, length field %d, input %d", n, len(payload), h.length, len(b))
		}
		if !bytes.Equal(payload, b[RecordHeaderSize:n]) || recordChecksum(file1Seed, b[:RecordHeaderSize], payload) != h.crc {
			t.Fatal("returned a record whose checksum does not match")
		}
	})
}

// Recovery of arbitrary bytes never panics and either fails with
// ErrCorrupt or replays only records that are really in the file, each with
// a matching checksum, in sequence order. Recovery is then idempotent: a
// second Open replays the same records. older puts the bytes in a file that
// is not the newest, where the rules are strict.
func FuzzReplay(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, older bool) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll(testDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fs, fileName(1), data)
		if older {
			// A successor that fits if file 1 holds records 1 to 4.
			next, _ := craftFile(2, 5)
			writeFile(t, fs, fileName(2), next)
		}
		cfg := memConfig(fs)
		fn, got := collector()
		j, err := Open(cfg, fn)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want nil or ErrCorrupt", err)
			}
			return
		}
		mustClose(t, j)
		for i, r := range *got {
			if i > 0 && r.seq != (*got)[i-1].seq+1 {
				t.Fatalf("replayed seq %d after %d", r.seq, (*got)[i-1].seq)
			}
			if !inFile(data, r) {
				t.Fatalf("replayed seq %d (%d bytes) is not a checksummed record of the input", r.seq, len(r.rec))
			}
		}
		j, second := mustOpen(t, cfg)
		mustClose(t, j)
		if len(second) != len(*got) {
			t.Fatalf("second recovery replayed %d records, first %d", len(second), len(*got))
		}
		for i := range second {
			if second[i].seq != (*got)[i].seq || !bytes.Equal(second[i].rec, (*got)[i].rec) {
				t.Fatalf("second recovery differs at record %d", i)
			}
		}
	})
}

// inFile reports whether data holds, at some offset, a record that decodes
// with a matching checksum and carries r's seq and payload.
func inFile(data []byte, r replayed) bool {
	for off := range data {
		// File 1 in either version: checksums from its seed, or from 0.
		for _, seed := range []uint32{file1Seed, 0} {
			h, p, _, err := decodeRecord(data[off:], seed)
			if err == nil && h.seq == r.seq && bytes.Equal(p, r.rec) {
				return true
			}
		}
	}
	return false
}
