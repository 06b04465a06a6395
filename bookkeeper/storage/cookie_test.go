package storage

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// withData opens a storage on fs, stores and checkpoints a few entries,
// and closes it; it returns the storage's cookie.
func withData(t *testing.T, o Options) Cookie {
	t.Helper()
	s := mustOpen(t, o)
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, 1, e)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	c := s.Cookie()
	mustClose(t, s)
	return c
}

// wantOpenErr opens o and wants err to be want, with every hint in the
// message (the operator must learn what happened).
func wantOpenErr(t *testing.T, o Options, want error, hints ...string) {
	t.Helper()
	s, err := Open(o)
	if err == nil {
		mustClose(t, s)
		t.Fatalf("Open succeeded, want %v", want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("Open: %v, want %v", err, want)
	}
	for _, h := range hints {
		if !strings.Contains(err.Error(), h) {
			t.Errorf("Open error does not say %q: %v", h, err)
		}
	}
	t.Logf("refused as expected: %v", err)
}

func TestCookieWrittenAtFirstStart(t *testing.T) {
	fs := vfs.NewMem()
	c := withData(t, testOptions(fs))
	if len(c.StorageID) != 32 || c.BookieID != "bookie-1" || c.InstanceID != "instance-1" || c.Role != RoleLedgers {
		t.Fatalf("Cookie() = %+v", c)
	}
	for dir, role := range map[string]string{testDir: RoleLedgers, testIndexDir: RoleIndex} {
		got, err := ReadCookie(fs, dir)
		if err != nil || got.Role != role || got.StorageID != c.StorageID || got.LedgerDir != testDir || got.IndexDir != testIndexDir {
			t.Fatalf("cookie in %s = %+v, %v", dir, got, err)
		}
	}
	o := testOptions(fs)
	o.RequireStorageID = c.StorageID
	s := mustOpen(t, o)
	checkEntry(t, s, 1, 19)
	mustClose(t, s)
}

func TestCookieWipedLedgerDir(t *testing.T) {
	fs := vfs.NewMem()
	withData(t, testOptions(fs))
	if err := fs.RemoveAll(testDir); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, testOptions(fs), ErrCookieMissing, testDir, "wiped or replaced")
}

func TestCookieWipedIndexDir(t *testing.T) {
	fs := vfs.NewMem()
	withData(t, testOptions(fs))
	if err := fs.RemoveAll(testIndexDir); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, testOptions(fs), ErrCookieMissing, testIndexDir, "wiped or replaced")
}

// The index deleted but the cookie beside it kept: data missing while the
// cookie exists.
func TestIndexDeletedCookieKept(t *testing.T) {
	fs := vfs.NewMem()
	withData(t, testOptions(fs))
	if err := fs.RemoveAll(fs.PathJoin(testIndexDir, pebbleSubdir)); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, testOptions(fs), ErrDataLoss, "no index")
}

func TestEntryLogDeleted(t *testing.T) {
	fs := vfs.NewMem()
	withData(t, testOptions(fs))
	names, _ := fs.List(testDir)
	for _, n := range names {
		if _, ok := parseLogName(n); ok {
			if err := fs.Remove(fs.PathJoin(testDir, n)); err != nil {
				t.Fatal(err)
			}
			break // the first one holds the entries
		}
	}
	wantOpenErr(t, testOptions(fs), ErrDataLoss, "missing")
}

func TestCookieMissingWithDataPresent(t *testing.T) {
	fs := vfs.NewMem()
	withData(t, testOptions(fs))
	if err := fs.Remove(fs.PathJoin(testDir, CookieFile)); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, testOptions(fs), ErrCookieMissing, "entry logs but no cookie")
}

// Both dirs wiped whole look like a new bookie; the bookie registry's
// storage id tells them apart.
func TestCookieWipedWhole(t *testing.T) {
	fs := vfs.NewMem()
	c := withData(t, testOptions(fs))
	for _, d := range []string{testDir, testIndexDir} {
		if err := fs.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	o := testOptions(fs)
	o.RequireStorageID = c.StorageID
	wantOpenErr(t, o, ErrCookieMissing, "wiped", c.StorageID)
	// Without the registry's word it is a new storage, with a new id.
	s := mustOpen(t, testOptions(fs))
	defer mustClose(t, s)
	if s.Cookie().StorageID == c.StorageID {
		t.Fatal("a wiped storage got its old id back")
	}
	_, err := s.ReadEntry(1, 0)
	wantErr(t, "read on the new storage", err, ErrNoSuchLedger)
}

func TestCookieSwappedDisks(t *testing.T) {
	fs := vfs.NewMem()
	a := testOptions(fs)
	b := testOptions(fs)
	b.BookieID, b.Dir, b.IndexDir = "bookie-2", "/data2/ledgers", "/data2/index"
	withData(t, a)
	withData(t, b)

	t.Run("another bookie's ledger dir", func(t *testing.T) {
		o := a
		o.Dir = b.Dir
		wantOpenErr(t, o, ErrCookieMismatch, "bookie-2", "another bookie")
	})
	t.Run("another cluster", func(t *testing.T) {
		o := a
		o.InstanceID = "instance-2"
		wantOpenErr(t, o, ErrCookieMismatch, "instance-1")
	})
	t.Run("ledger and index dirs swapped", func(t *testing.T) {
		o := a
		o.Dir, o.IndexDir = a.IndexDir, a.Dir
		wantOpenErr(t, o, ErrCookieMismatch, "wrong path")
	})
	t.Run("this bookie's earlier install", func(t *testing.T) {
		// Same bookie id, reformatted: dirs of two storages together.
		c := b
		c.BookieID = "bookie-1"
		c.Dir, c.IndexDir = "/data3/ledgers", "/data3/index"
		withData(t, c)
		o := a
		o.IndexDir = c.IndexDir
		wantOpenErr(t, o, ErrCookieMismatch, "different installs")
	})
	t.Run("registry names another storage", func(t *testing.T) {
		o := a
		o.RequireStorageID = strings.Repeat("ab", 16)
		wantOpenErr(t, o, ErrCookieMismatch, "registered")
	})
	t.Run("the original still opens", func(t *testing.T) {
		s := mustOpen(t, a)
		checkEntry(t, s, 1, 0)
		mustClose(t, s)
	})
}

func TestCookieCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	withData(t, testOptions(fs))
	p := fs.PathJoin(testDir, CookieFile)
	f, err := fs.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	wantOpenErr(t, testOptions(fs), ErrCorrupt, "checksum")
}

// A crash at any point of the first Open leaves dirs that the next Open
// finishes formatting, with the id chosen first. Images keep all or none
// of the unsynced data (see crasher.opening for why not a part).
func TestCookieCrashDuringFormat(t *testing.T) {
	for op := 0; ; op++ {
		mem := vfs.NewCrashableMem()
		var image *vfs.MemFS
		var mu sync.Mutex // Pebble does I/O on its own goroutines too
		count := 0
		inj := errorfs.InjectorFunc(func(errorfs.Op) error {
			mu.Lock()
			defer mu.Unlock()
			if count == op {
				image = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100 * (op % 2), RNG: rand.New(rand.NewPCG(uint64(op), 1))})
			}
			count++
			return nil
		})
		s := mustOpen(t, testOptions(errorfs.Wrap(mem, inj)))
		mustClose(t, s)
		mu.Lock()
		defer mu.Unlock()
		if image == nil {
			if op < 10 {
				t.Fatalf("only %d filesystem operations", op)
			}
			return
		}
		s, err := Open(testOptions(image))
		if err != nil {
			t.Fatalf("crash before op %d of the first Open: reopen: %v", op, err)
		}
		if id, _ := ReadCookie(image, testIndexDir); id.StorageID != "" && id.StorageID != s.Cookie().StorageID {
			t.Fatalf("crash before op %d: index cookie %s, storage %s", op, id.StorageID, s.Cookie().StorageID)
		}
		mustAdd(t, s, 1, 0)
		checkEntry(t, s, 1, 0)
		mustClose(t, s)
	}
}

func TestCookieEncodeDecode(t *testing.T) {
	c := Cookie{BookieID: "b-1", InstanceID: "i-1", StorageID: strings.Repeat("0f", 16), Role: RoleIndex, LedgerDir: "/a=b", IndexDir: "/c"}
	b := c.Encode()
	const golden = "sluice-bookie-cookie\nversion=1\nbookie_id=b-1\ninstance_id=i-1\nstorage_id=0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f\n" +
		"role=index\nledger_dir=/a=b\nindex_dir=/c\ncrc32c="
	if !strings.HasPrefix(string(b), golden) {
		t.Fatalf("cookie bytes changed (the format is versioned; bump it instead):\n%s", b)
	}
	got, err := DecodeCookie(b)
	if err != nil || got != c {
		t.Fatalf("DecodeCookie = %+v, %v", got, err)
	}
	for i := range b {
		bad := []byte(string(b))
		bad[i] ^= 0x20
		if _, err := DecodeCookie(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a cookie with byte %d changed decoded: %v", i, err)
		}
	}
	for _, n := range []int{0, 10, len(b) - 1} {
		if _, err := DecodeCookie(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a cookie cut to %d bytes decoded: %v", n, err)
		}
	}
	v2 := strings.Replace(string(b), "version=1", "version=2", 1)
	if _, err := DecodeCookie([]byte(v2)); err == nil {
		t.Fatal("version 2 decoded")
	}
}
