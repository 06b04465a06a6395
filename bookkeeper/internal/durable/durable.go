// Package durable holds the few filesystem steps the bookie's storage
// packages (journal, storage) take to make files and directory entries
// survive a crash: a file or rename is durable only once its directory is
// synced, and a file that must never be seen half-written is written under
// a temporary name, synced, then renamed into place.
//
// Every function works on a pebble vfs.FS, so tests can use a crashable
// in-memory filesystem that keeps only synced data.
package durable

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TmpSuffix is appended to a file's name while it is being written; a file
// with this suffix is an unfinished write that recovery may delete.
const TmpSuffix = ".tmp"

// SyncDir makes the directory's entries (creations, renames, removals) durable.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	return errors.Join(d.Sync(), d.Close())
}

// WriteFull writes all of b to f or returns an error (io.ErrShortWrite for a
// short write without one).
func WriteFull(f vfs.File, b []byte) error {
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// WriteFileAtomic replaces dir/name with data: write dir/name+TmpSuffix,
// sync it, rename it over dir/name, sync the directory. A crash leaves
// either the old file or the new one, never a mix.
func WriteFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	path := fs.PathJoin(dir, name)
	tmp := path + TmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = WriteFull(f, data)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(fs, dir)
}

// CreateWithHeader makes dir/name appear atomically with a durable header:
// the header is written and synced under a temporary name, the file renamed
// and the directory synced. It returns the file open for appending after
// the header, so every file under its final name has a complete header.
func CreateWithHeader(fs vfs.FS, dir, name string, header []byte) (vfs.File, error) {
	path := fs.PathJoin(dir, name)
	tmp := path + TmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	err = WriteFull(f, header)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil && !sabotageDirSync {
		err = SyncDir(fs, dir)
	}
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// MkdirAll creates dir and any missing parents, and syncs the parent of each
// directory it created, since a new directory is durable only once its
// parent's entry is.
func MkdirAll(fs vfs.FS, dir string) error {
	var created []string
	for d := dir; ; {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !IsNotExist(err) {
			return err
		}
		created = append(created, d)
		parent := fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := SyncDir(fs, fs.PathDir(created[i])); err != nil {
			return err
		}
	}
	return nil
}
