package bookie

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/journal"
	"github.com/sluicemq/sluice/bookkeeper/storage"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// Acknowledged adds survive a crash that keeps only synced bytes, whether or
// not a checkpoint ran in between, and the journal replay brings back what
// the storage had not flushed.
func TestAcknowledgedAddsSurviveCrash(t *testing.T) {
	for _, checkpointAt := range []int64{-1, 0, 20, 39} {
		fs := vfs.NewCrashableMem()
		b := mustOpen(t, testConfig(fs))
		for e := int64(0); e < 40; e++ {
			addWait(t, b, 1, e, e-1)
			addWait(t, b, 2, e, e-1)
			if e == checkpointAt {
				if err := b.checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{})
		mustClose(t, b)

		b = mustOpen(t, testConfig(crashed))
		for _, l := range []int64{1, 2} {
			ents, info, err := b.Read(l, 0, 39, 0, false, nil)
			if err != nil {
				t.Fatalf("checkpoint at %d: read ledger %d: %v", checkpointAt, l, err)
			}
			if len(ents) != 40 || info.LastEntry != 39 {
				t.Fatalf("checkpoint at %d: ledger %d: %d entries, last %d; want 40, 39", checkpointAt, l, len(ents), info.LastEntry)
			}
			for i, e := range ents {
				if !bytes.Equal(e.Payload, payload(l, int64(i))) {
					t.Fatalf("ledger %d entry %d: payload %q", l, i, e.Payload)
				}
			}
		}
		if got := b.Status().JournalCheckpoint; got == 0 {
			t.Errorf("checkpoint at %d: the journal was not checkpointed after replay", checkpointAt)
		}
		mustClose(t, b)
	}
}

// A fence is durable when answered, refuses normal adds, lets recovery adds
// through, and survives a crash.
func TestFence(t *testing.T) {
	fs := vfs.NewCrashableMem()
	b := mustOpen(t, testConfig(fs))
	addWait(t, b, 5, 0, -1)
	info, err := b.Fence(5, testKey)
	if err != nil || !info.Fenced || info.LastEntry != 0 {
		t.Fatalf("Fence = %+v, %v", info, err)
	}
	p := payload(5, 1)
	req := AddRequest{Ledger: 5, Entry: 1, LAC: 0, Payload: p, MasterKey: testKey, Checksum: wire.EntryChecksum(5, 1, 0, p)}
	if err := b.Add(context.Background(), req, func(error) { t.Error("done called for a refused add") }); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to fenced ledger: %v; want ErrFenced", err)
	}
	req.Recovery = true
	done := make(chan error, 1)
	if err := b.Add(context.Background(), req, func(err error) { done <- err }); err != nil {
		t.Fatalf("recovery add: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	mustClose(t, b)
	b = mustOpen(t, testConfig(crashed))
	defer mustClose(t, b)
	info, err = b.Fence(5, testKey)
	if err != nil || !info.Fenced || info.LastEntry != 1 {
		t.Fatalf("after crash: Fence = %+v, %v; want fenced, last entry 1", info, err)
	}
	if _, err := b.Fence(5, []byte("other")); !errors.Is(err, storage.ErrUnauthorized) {
		t.Fatalf("fence with another key: %v; want ErrUnauthorized", err)
	}
}

// Cookies: a wiped or swapped directory is refused, naming what happened.
func TestIdentity(t *testing.T) {
	populated := func(t *testing.T) vfs.FS {
		fs := vfs.NewMem()
		b := mustOpen(t, testConfig(fs))
		addWait(t, b, 1, 0, -1)
		mustClose(t, b)
		return fs
	}
	t.Run("fresh bookie writes a journal cookie", func(t *testing.T) {
		fs := vfs.NewMem()
		b := mustOpen(t, testConfig(fs))
		id := b.Cookie().StorageID
		mustClose(t, b)
		c, err := storage.ReadCookie(fs, "/data/journal")
		if err != nil || c.Role != storage.RoleJournal || c.StorageID != id || c.BookieID != "bookie-1" {
			t.Fatalf("journal cookie = %+v, %v", c, err)
		}
	})
	t.Run("wiped journal dir", func(t *testing.T) {
		fs := populated(t)
		if err := fs.RemoveAll("/data/journal"); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(testConfig(fs)); !errors.Is(err, storage.ErrCookieMissing) {
			t.Fatalf("Open = %v; want ErrCookieMissing", err)
		}
	})
	t.Run("journal cookie deleted", func(t *testing.T) {
		fs := populated(t)
		if err := fs.Remove("/data/journal/COOKIE"); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(testConfig(fs)); !errors.Is(err, storage.ErrCookieMissing) {
			t.Fatalf("Open = %v; want ErrCookieMissing", err)
		}
	})
	t.Run("wiped ledger and index dirs", func(t *testing.T) {
		fs := populated(t)
		for _, d := range []string{"/data/ledgers", "/data/index"} {
			if err := fs.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Open(testConfig(fs)); !errors.Is(err, storage.ErrCookieMissing) {
			t.Fatalf("Open = %v; want ErrCookieMissing", err)
		}
	})
	t.Run("another bookie's disks", func(t *testing.T) {
		fs := populated(t)
		cfg := testConfig(fs)
		cfg.ID = "bookie-2"
		if _, err := Open(cfg); !errors.Is(err, storage.ErrCookieMismatch) {
			t.Fatalf("Open = %v; want ErrCookieMismatch", err)
		}
	})
	t.Run("registered storage id differs", func(t *testing.T) {
		fs := populated(t)
		cfg := testConfig(fs)
		cfg.RequireStorageID = "0123456789abcdef0123456789abcdef"
		if _, err := Open(cfg); !errors.Is(err, storage.ErrCookieMismatch) {
			t.Fatalf("Open = %v; want ErrCookieMismatch", err)
		}
	})
	t.Run("journal wiped before any add is adopted", func(t *testing.T) {
		fs := vfs.NewMem()
		mustClose(t, mustOpen(t, testConfig(fs)))
		if err := fs.RemoveAll("/data/journal"); err != nil {
			t.Fatal(err)
		}
		mustClose(t, mustOpen(t, testConfig(fs)))
	})
}

// ReadLAC long-polls: it returns at once when the LAC is already above
// previous, wakes when an add piggybacks a higher LAC or WriteLAC raises it,
// and returns the current LAC when the wait runs out.
func TestReadLACLongPoll(t *testing.T) {
	b := mustOpen(t, testConfig(vfs.NewMem()))
	defer mustClose(t, b)
	ctx := context.Background()
	if lac, _, err := b.ReadLAC(ctx, 9, -1, 0); err != nil || lac != -1 {
		t.Fatalf("unknown ledger: ReadLAC = %d, %v; want -1", lac, err)
	}
	addWait(t, b, 9, 0, -1)
	addWait(t, b, 9, 1, 0)
	if lac, _, err := b.ReadLAC(ctx, 9, -1, time.Minute); err != nil || lac != 0 {
		t.Fatalf("ReadLAC = %d, %v; want 0 at once", lac, err)
	}
	got := make(chan int64, 1)
	go func() {
		lac, _, err := b.ReadLAC(ctx, 9, 0, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- lac
	}()
	waitFor(t, func() bool { b.lacs.mu.Lock(); defer b.lacs.mu.Unlock(); return b.lacs.waiters == 1 })
	if err := b.WriteLAC(9, testKey, 1); err != nil {
		t.Fatal(err)
	}
	if lac := <-got; lac != 1 {
		t.Fatalf("woken ReadLAC = %d; want 1", lac)
	}
	start := time.Now()
	if lac, fenced, err := b.ReadLAC(ctx, 9, 1, 20*time.Millisecond); err != nil || lac != 1 || fenced || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("timed-out ReadLAC = %d, fenced %v, %v after %v; want 1 after the wait", lac, fenced, err, time.Since(start))
	}

	// Fencing wakes a waiting ReadLAC at once, and later ones answer at
	// once: the LAC will not rise any more.
	fenced := make(chan bool, 1)
	go func() {
		_, f, err := b.ReadLAC(ctx, 9, 1, time.Minute)
		if err != nil {
			t.Error(err)
		}
		fenced <- f
	}()
	waitFor(t, func() bool { b.lacs.mu.Lock(); defer b.lacs.mu.Unlock(); return b.lacs.waiters == 1 })
	if _, err := b.Fence(9, testKey); err != nil {
		t.Fatal(err)
	}
	if !<-fenced {
		t.Fatal("a ReadLAC waiting when the ledger was fenced answered without fenced")
	}
	if lac, f, err := b.ReadLAC(ctx, 9, 1, time.Minute); err != nil || lac != 1 || !f {
		t.Fatalf("ReadLAC of a fenced ledger = %d, fenced %v, %v; want 1, fenced, at once", lac, f, err)
	}
}

// The disk watermark turns the bookie read-only with hysteresis; recovery
// adds are still taken.
func TestReadOnlyWatermark(t *testing.T) {
	cfg := testConfig(vfs.NewMem())
	used := uint64(50)
	cfg.DiskUsage = func(string) (vfs.DiskUsage, error) {
		return vfs.DiskUsage{TotalBytes: 100, UsedBytes: used, AvailBytes: 100 - used}, nil
	}
	b := mustOpen(t, cfg)
	defer mustClose(t, b)
	if b.ReadOnly() {
		t.Fatal("read-only at 50%")
	}
	used = 96
	b.checkDisk()
	if !b.ReadOnly() {
		t.Fatal("writable at 96%")
	}
	p := payload(1, 0)
	req := AddRequest{Ledger: 1, Entry: 0, LAC: -1, Payload: p, MasterKey: testKey, Checksum: wire.EntryChecksum(1, 0, -1, p)}
	if err := b.Add(context.Background(), req, func(error) {}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("add when read-only: %v; want ErrReadOnly", err)
	}
	req.Recovery = true
	done := make(chan error, 1)
	if err := b.Add(context.Background(), req, func(err error) { done <- err }); err != nil || <-done != nil {
		t.Fatalf("recovery add when read-only: %v", err)
	}
	used = 92 // between the watermarks: stays read-only
	b.checkDisk()
	if !b.ReadOnly() {
		t.Fatal("writable at 92%, above WritableBelow")
	}
	used = 80
	b.checkDisk()
	if b.ReadOnly() {
		t.Fatal("still read-only at 80%")
	}
	if st := b.Status(); st.TotalBytes != 100 || st.FreeBytes != 20 {
		t.Fatalf("status disk = %d free of %d", st.FreeBytes, st.TotalBytes)
	}
}

// Run checkpoints once enough bytes were journaled, trimming the journal.
func TestRunCheckpointsByBytes(t *testing.T) {
	cfg := testConfig(vfs.NewMem())
	cfg.CheckpointBytes = 4 << 10
	b := mustOpen(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- b.Run(ctx) }()
	for e := int64(0); e < 200; e++ {
		addWait(t, b, 3, e, e-1)
	}
	waitFor(t, func() bool { return b.Status().JournalCheckpoint > 0 })
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	mustClose(t, b)
}

func TestConfigValidate(t *testing.T) {
	err := Config{MaxEntryBytes: -1, ReadOnlyAt: 0.5, WritableBelow: 0.6, MaxAddMessageBytes: 100}.Validate()
	if err == nil {
		t.Fatal("empty config validated")
	}
	for _, field := range []string{"ID", "InstanceID", "Dir", "MaxEntryBytes", "ReadOnlyAt", "MaxAddMessageBytes"} {
		if !bytes.Contains([]byte(err.Error()), []byte(field+":")) {
			t.Errorf("Validate error does not name %s: %v", field, err)
		}
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Slow group commits are logged, at most one line a second, counting the
// slow ones in between; fast ones and failed ones are not.
func TestSlowGroupLogger(t *testing.T) {
	var buf bytes.Buffer
	hook := slowGroupLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	hook(journal.GroupInfo{Bytes: 10, WriteTime: time.Millisecond, SyncTime: 5 * time.Millisecond})
	hook(journal.GroupInfo{Bytes: 10, SyncTime: time.Second, Err: errors.New("failed")})
	if buf.Len() != 0 {
		t.Fatalf("logged a fast or failed group: %s", buf.String())
	}
	hook(journal.GroupInfo{Bytes: 111, Records: 3, WriteTime: time.Millisecond, SyncTime: 300 * time.Millisecond})
	hook(journal.GroupInfo{Bytes: 222, SyncTime: 900 * time.Millisecond}) // within the second: counted, not logged
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "slow journal group commit") || !strings.Contains(lines[0], "bytes=111") {
		t.Fatalf("log: %q", buf.String())
	}
}
