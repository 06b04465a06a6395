package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testDir = "/j"

// memConfig is a small journal on fs: tiny files so rotation happens often.
func memConfig(fs vfs.FS) Config {
	return Config{
		Dir:           testDir,
		FS:            fs,
		MaxRecordSize: 4096,
		GroupBytes:    2048,
		MaxFileSize:   16 << 10,
	}
}

// replayed is one record seen by a replay function.
type replayed struct {
	seq uint64
	rec []byte
}

// collector returns a replay function that keeps copies, and the list.
func collector() (ReplayFunc, *[]replayed) {
	var got []replayed
	return func(seq uint64, rec []byte) error {
		got = append(got, replayed{seq, bytes.Clone(rec)})
		return nil
	}, &got
}

func mustOpen(t testing.TB, cfg Config) (*Journal, []replayed) {
	t.Helper()
	fn, got := collector()
	j, err := Open(cfg, fn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return j, *got
}

func mustClose(t testing.TB, j *Journal) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// payload returns the deterministic record number id of size n: the id
// first (when it fits), then bytes from a generator seeded by id.
func payload(id uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(id, 0x5eed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if n >= 8 {
		binary.LittleEndian.PutUint64(b, id)
	}
	return b
}

// model remembers what was appended: seq → payload, and which seqs were
// acknowledged.
type model struct {
	mu    sync.Mutex
	recs  map[uint64][]byte
	acked map[uint64]bool
}

func newModel() *model {
	return &model{recs: map[uint64][]byte{}, acked: map[uint64]bool{}}
}

// appendAsync appends rec and records it in the model when it is acked.
// wg is done when the outcome is known; failures go to errs.
func (m *model) appendAsync(t testing.TB, j *Journal, rec []byte, wg *sync.WaitGroup, errs chan<- error) {
	t.Helper()
	wg.Add(1)
	err := j.Append(context.Background(), rec, func(seq uint64, err error) {
		defer wg.Done()
		if err != nil {
			errs <- err
			return
		}
		m.mu.Lock()
		m.recs[seq] = rec
		m.acked[seq] = true
		m.mu.Unlock()
	})
	if err != nil {
		wg.Done()
		t.Fatalf("Append: %v", err)
	}
}

// snapshot copies the acked set.
func (m *model) snapshot() map[uint64]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[uint64]bool, len(m.acked))
	for s := range m.acked {
		out[s] = true
	}
	return out
}

// checkReplay checks that got is the contiguous run from first, each record
// equal to the model's.
func checkReplay(t testing.TB, got []replayed, first uint64, recs map[uint64][]byte) {
	t.Helper()
	for i, r := range got {
		if want := first + uint64(i); r.seq != want {
			t.Fatalf("replayed record %d has seq %d, want %d", i, r.seq, want)
		}
		want, ok := recs[r.seq]
		if !ok {
			t.Fatalf("replayed seq %d was never appended", r.seq)
		}
		if !bytes.Equal(r.rec, want) {
			t.Fatalf("replayed seq %d: %d bytes differ from the %d appended", r.seq, len(r.rec), len(want))
		}
	}
}

func readFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(fs.PathJoin(testDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces a file's content and syncs it. It writes a copy: a
// vfs.File may scribble on what it was given (MemFS does in race builds).
func writeFile(t testing.TB, fs vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fs.Create(fs.PathJoin(testDir, name), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Clone(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// journalFiles lists the journal files in order.
func journalFiles(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if _, ok := parseFileName(n); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
