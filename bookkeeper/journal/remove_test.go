package journal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type truncFS struct {
	vfs.FS
	sizes []int64
}

type truncFile struct {
	vfs.File
	fs *truncFS
}

func (f truncFile) Truncate(size int64) error {
	f.fs.sizes = append(f.fs.sizes, size)
	return f.File.(interface{ Truncate(int64) error }).Truncate(size)
}

func (fs *truncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return truncFile{f, fs}, nil
}

// An obsolete journal file is shrunk removeStep at a time, never below its
// header, before it is unlinked; a file system whose files cannot be
// truncated (the in-memory one) just unlinks.
func TestRemoveFileShrinksInSteps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, fileName(1))
	const size = 3*removeStep + 1000
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := &truncFS{FS: vfs.Default}
	if err := removeFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file still there: %v", err)
	}
	want := []int64{size - removeStep, size - 2*removeStep, size - 3*removeStep}
	if len(fs.sizes) != len(want) {
		t.Fatalf("truncated to %v; want %v", fs.sizes, want)
	}
	for i, s := range fs.sizes {
		if s != want[i] || s <= FileHeaderSize {
			t.Fatalf("truncated to %v; want %v (never to the header)", fs.sizes, want)
		}
	}

	mem := vfs.NewMem()
	f, err := mem.Create("j", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 2*removeStep)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := removeFile(mem, "j"); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat("j"); err == nil {
		t.Fatal("in-memory file still there")
	}
}
