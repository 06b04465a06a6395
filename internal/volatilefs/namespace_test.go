package volatilefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// crash abandons fs (as a killed process would) and runs the next start's
// recovery.
func crash(t *testing.T, undoDir string) {
	t.Helper()
	if _, err := Recover(vfs.Default, undoDir); err != nil {
		t.Fatalf("Recover: %v", err)
	}
}

func writeSynced(t *testing.T, fs vfs.FS, name, data string) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, data)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func onDisk(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func openNS(t *testing.T) (fs *FS, dir, undoDir string) {
	t.Helper()
	dir = t.TempDir()
	undoDir = filepath.Join(dir, "undo")
	fs, err := Open(vfs.Default, undoDir)
	if err != nil {
		t.Fatal(err)
	}
	return fs, dir, undoDir
}

// Each case runs namespace operations, optionally syncs the directory, and
// checks what the next start finds: with the sync everything stays; without
// it every operation since the last sync is gone.
func TestPowerCutLosesUnsyncedDirectoryEntries(t *testing.T) {
	type files map[string]string
	cases := []struct {
		name   string
		before files // written, synced and dir-synced first
		ops    func(t *testing.T, fs vfs.FS, dir string)
		synced files // after a crash, if the directory was synced after ops
		lost   files // after a crash, if it was not
	}{{
		name:   "create",
		ops:    func(t *testing.T, fs vfs.FS, dir string) { writeSynced(t, fs, filepath.Join(dir, "a"), "new") },
		synced: files{"a": "new"},
		lost:   files{"a": "<missing>"},
	}, {
		name:   "create over an existing file",
		before: files{"a": "old"},
		ops:    func(t *testing.T, fs vfs.FS, dir string) { writeSynced(t, fs, filepath.Join(dir, "a"), "new") },
		synced: files{"a": "new"},
		lost:   files{"a": "old"},
	}, {
		name:   "atomic replace: create tmp, sync, rename over",
		before: files{"a": "old"},
		ops: func(t *testing.T, fs vfs.FS, dir string) {
			writeSynced(t, fs, filepath.Join(dir, "a.tmp"), "new")
			if err := fs.Rename(filepath.Join(dir, "a.tmp"), filepath.Join(dir, "a")); err != nil {
				t.Fatal(err)
			}
		},
		synced: files{"a": "new", "a.tmp": "<missing>"},
		lost:   files{"a": "old", "a.tmp": "<missing>"},
	}, {
		name:   "rename to a new name",
		before: files{"a": "x"},
		ops: func(t *testing.T, fs vfs.FS, dir string) {
			if err := fs.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
		},
		synced: files{"a": "<missing>", "b": "x"},
		lost:   files{"a": "x", "b": "<missing>"},
	}, {
		name:   "remove",
		before: files{"a": "x"},
		ops: func(t *testing.T, fs vfs.FS, dir string) {
			if err := fs.Remove(filepath.Join(dir, "a")); err != nil {
				t.Fatal(err)
			}
		},
		synced: files{"a": "<missing>"},
		lost:   files{"a": "x"},
	}, {
		name:   "link",
		before: files{"a": "x"},
		ops: func(t *testing.T, fs vfs.FS, dir string) {
			if err := fs.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
		},
		synced: files{"a": "x", "b": "x"},
		lost:   files{"a": "x", "b": "<missing>"},
	}, {
		name:   "reuse for write",
		before: files{"old": "x"},
		ops: func(t *testing.T, fs vfs.FS, dir string) {
			f, err := fs.ReuseForWrite(filepath.Join(dir, "old"), filepath.Join(dir, "new"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		},
		synced: files{"old": "<missing>", "new": "x"},
		lost:   files{"old": "x", "new": "<missing>"},
	}, {
		name: "create, rename, remove in a chain",
		ops: func(t *testing.T, fs vfs.FS, dir string) {
			writeSynced(t, fs, filepath.Join(dir, "a"), "1")
			if err := fs.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
			writeSynced(t, fs, filepath.Join(dir, "a"), "2")
			if err := fs.Remove(filepath.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
		},
		synced: files{"a": "2", "b": "<missing>"},
		lost:   files{"a": "<missing>", "b": "<missing>"},
	}, {
		name:   "a failed operation is not reverted",
		before: files{"a": "x"},
		ops: func(t *testing.T, fs vfs.FS, dir string) {
			// Fails (no such file): the next start must not "undo" it by
			// moving a onto the missing name.
			if err := fs.Rename(filepath.Join(dir, "missing"), filepath.Join(dir, "a")); err == nil {
				t.Fatal("rename of a missing file succeeded")
			}
		},
		synced: files{"a": "x", "missing": "<missing>"},
		lost:   files{"a": "x", "missing": "<missing>"},
	}}
	for _, c := range cases {
		for _, sync := range []bool{true, false} {
			name := c.name + "/lost"
			if sync {
				name = c.name + "/dir synced"
			}
			t.Run(name, func(t *testing.T) {
				fs, dir, undoDir := openNS(t)
				data := filepath.Join(dir, "data")
				if err := fs.MkdirAll(data, 0o755); err != nil {
					t.Fatal(err)
				}
				for n, v := range c.before {
					writeSynced(t, fs, filepath.Join(data, n), v)
				}
				if err := syncDir(fs, data); err != nil {
					t.Fatal(err)
				}
				c.ops(t, fs, data)
				want := c.lost
				if sync {
					if err := syncDir(fs, data); err != nil {
						t.Fatal(err)
					}
					want = c.synced
				}
				crash(t, undoDir)
				for n, v := range want {
					if got := onDisk(t, filepath.Join(data, n)); got != v {
						t.Errorf("%s after the power cut = %q, want %q", n, got, v)
					}
				}
				if left, _ := os.ReadDir(undoDir); len(left) != 0 {
					t.Errorf("undo dir not emptied: %v", left)
				}
			})
		}
	}
}

// A rename between directories is durable once both are synced.
func TestRenameAcrossDirectoriesNeedsBothSynced(t *testing.T) {
	for _, syncBoth := range []bool{false, true} {
		fs, dir, undoDir := openNS(t)
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		for _, d := range []string{a, b} {
			if err := fs.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		writeSynced(t, fs, filepath.Join(a, "f"), "x")
		if err := syncDir(fs, a); err != nil {
			t.Fatal(err)
		}
		if err := fs.Rename(filepath.Join(a, "f"), filepath.Join(b, "f")); err != nil {
			t.Fatal(err)
		}
		if err := syncDir(fs, b); err != nil {
			t.Fatal(err)
		}
		if syncBoth {
			if err := syncDir(fs, a); err != nil {
				t.Fatal(err)
			}
		}
		crash(t, undoDir)
		inA, inB := onDisk(t, filepath.Join(a, "f")), onDisk(t, filepath.Join(b, "f"))
		if syncBoth && (inA != "<missing>" || inB != "x") {
			t.Errorf("both synced: a/f=%q b/f=%q, want the rename kept", inA, inB)
		}
		if !syncBoth && (inA != "x" || inB != "<missing>") {
			t.Errorf("source dir unsynced: a/f=%q b/f=%q, want the rename reverted", inA, inB)
		}
	}
}

// The log starts afresh once nothing is pending, and a torn last line (the
// crash hit the append before its operation ran) is ignored.
func TestUndoLogStaysShortAndToleratesATornTail(t *testing.T) {
	fs, dir, undoDir := openNS(t)
	for i := range 50 {
		writeSynced(t, fs, filepath.Join(dir, "f"), "v")
		if err := syncDir(fs, dir); err != nil {
			t.Fatal(err)
		}
		_ = i
	}
	fi, err := os.Stat(filepath.Join(undoDir, undoLogName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Fatalf("undo log holds %d bytes with nothing pending", fi.Size())
	}
	writeSynced(t, fs, filepath.Join(dir, "g"), "v")
	lf, err := os.OpenFile(filepath.Join(undoDir, undoLogName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lf.WriteString(`{"seq":99,"op":"remove","a":"/`); err != nil {
		t.Fatal(err)
	}
	_ = lf.Close()
	crash(t, undoDir)
	if got := onDisk(t, filepath.Join(dir, "g")); got != "<missing>" {
		t.Fatalf("g = %q, want reverted", got)
	}
	if got := onDisk(t, filepath.Join(dir, "f")); got != "v" {
		t.Fatalf("f = %q, want kept", got)
	}
}

// A Recover cut short by a kill runs again: a step whose "undone" record
// was not written yet runs twice, and every step must leave the same
// result then. Each operation's undo runs twice in a row here, newest
// first, over a chain that exercises every kind: the result is what one
// Recover gives.
func TestUndoStepsAreIdempotent(t *testing.T) {
	run := func(twice bool) map[string]string {
		fs, dir, undoDir := openNS(t)
		data := filepath.Join(dir, "data")
		if err := fs.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		p := func(n string) string { return filepath.Join(data, n) }
		writeSynced(t, fs, p("a"), "old-a")
		writeSynced(t, fs, p("b"), "old-b")
		if err := syncDir(fs, data); err != nil {
			t.Fatal(err)
		}
		if err := fs.Remove(p("a")); err != nil {
			t.Fatal(err)
		}
		writeSynced(t, fs, p("a"), "new-a") // create where a was removed
		if err := fs.Rename(p("a"), p("b")); err != nil {
			t.Fatal(err) // over the old b
		}
		if err := fs.Link(p("b"), p("c")); err != nil {
			t.Fatal(err)
		}
		writeSynced(t, fs, p("b"), "newer-b") // create over b
		recs, err := readUndoLog(vfs.Default, undoDir)
		if err != nil {
			t.Fatal(err)
		}
		pending := replayUndoLog(recs)
		if len(pending) != 5 {
			t.Fatalf("%d pending records, want 5", len(pending))
		}
		for i := len(pending) - 1; i >= 0; i-- {
			for range map[bool]int{false: 1, true: 2}[twice] {
				if err := undo(vfs.Default, pending[i]); err != nil {
					t.Fatalf("undo %s %s: %v", pending[i].Op, pending[i].A, err)
				}
			}
		}
		got := map[string]string{}
		for _, n := range []string{"a", "b", "c"} {
			got[n] = onDisk(t, p(n))
		}
		return got
	}
	once, twice := run(false), run(true)
	want := map[string]string{"a": "old-a", "b": "old-b", "c": "<missing>"}
	for n, v := range want {
		if once[n] != v || twice[n] != v {
			t.Errorf("%s: once %q, twice %q; want %q", n, once[n], twice[n], v)
		}
	}
}
