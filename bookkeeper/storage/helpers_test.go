package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testDir      = "/data/ledgers"
	testIndexDir = "/data/index"
)

// testOptions is a small storage on fs: tiny files so rotation and GC
// happen with little data.
func testOptions(fs vfs.FS) Options {
	return Options{
		Dir:                 testDir,
		IndexDir:            testIndexDir,
		FS:                  fs,
		BookieID:            "bookie-1",
		InstanceID:          "instance-1",
		MaxEntrySize:        4096,
		MaxWriteBufferBytes: 64 << 10,
		MaxLogFileSize:      16 << 10,
		MaxOpenFiles:        4,
		MaxReadBytes:        16 << 10,
		GCChunkBytes:        8 << 10,
	}
}

func mustOpen(t testing.TB, o Options) *Storage {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func mustClose(t testing.TB, s *Storage) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func keyOf(ledger int64) []byte { return fmt.Appendf(nil, "key-%d", ledger) }

// payloadOf is entry (ledger, entry)'s deterministic payload of n bytes.
func payloadOf(ledger, entry int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(int64(i)*7 + ledger*31 + entry*13)
	}
	return b
}

// sizeOf varies entry sizes so frames straddle MemFS blocks and files.
func sizeOf(ledger, entry int64) int { return int((ledger*131 + entry*977) % 1500) }

func request(ledger, entry, lac int64, payload []byte) AddRequest {
	return AddRequest{
		Ledger: ledger, Entry: entry, LAC: lac, Payload: payload,
		Checksum:  wire.EntryChecksum(ledger, entry, lac, payload),
		MasterKey: keyOf(ledger),
	}
}

func mustAdd(t testing.TB, s *Storage, ledger, entry int64) {
	t.Helper()
	p := payloadOf(ledger, entry, sizeOf(ledger, entry))
	if err := s.AddEntry(context.Background(), request(ledger, entry, entry-1, p)); err != nil {
		t.Fatalf("AddEntry %d/%d: %v", ledger, entry, err)
	}
}

// checkEntry reads (ledger, entry) and compares it with what mustAdd added.
func checkEntry(t testing.TB, s *Storage, ledger, entry int64) {
	t.Helper()
	if err := entryMatches(s, ledger, entry); err != nil {
		t.Fatal(err)
	}
}

func entryMatches(s *Storage, ledger, entry int64) error {
	got, err := s.ReadEntry(ledger, entry)
	if err != nil {
		return fmt.Errorf("ReadEntry %d/%d: %w", ledger, entry, err)
	}
	want := payloadOf(ledger, entry, sizeOf(ledger, entry))
	if got.Ledger != ledger || got.Entry != entry || got.LAC != entry-1 || !bytes.Equal(got.Payload, want) ||
		got.Checksum != wire.EntryChecksum(ledger, entry, entry-1, want) {
		return fmt.Errorf("ReadEntry %d/%d: got ledger %d entry %d lac %d, %d bytes, checksum %08x; not what was added",
			ledger, entry, got.Ledger, got.Entry, got.LAC, len(got.Payload), got.Checksum)
	}
	return nil
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// logBytes is the total size of the entry log files in fs.
func logBytes(t testing.TB, fs vfs.FS) (files int, total int64) {
	t.Helper()
	names, err := fs.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := parseLogName(n); !ok {
			continue
		}
		fi, err := fs.Stat(fs.PathJoin(testDir, n))
		if err != nil {
			t.Fatal(err)
		}
		files++
		total += fi.Size()
	}
	return files, total
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
