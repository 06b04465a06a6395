// Package volatilefs is a pebble vfs.FS that keeps every write in process
// memory until the file is synced, so that killing the process (SIGKILL)
// loses exactly the bytes a power cut could lose: written, never synced.
//
// A plain SIGKILL loses the process but never the kernel's page cache, so a
// storage engine that forgets an fsync survives it unnoticed. The chaos
// harness runs bookies on this filesystem (build tag chaos_volatilefs in
// cmd/sluice) so that "a crash loses unsynced data" is a process-level
// fault, and a build that acknowledges before fsync loses acknowledged
// entries where the checker can see it.
//
// Model:
//   - Write and WriteAt go to an in-memory overlay of the file (shared by
//     every handle on the same path, as the page cache is shared by every
//     descriptor of an inode); reads see the overlay.
//   - Sync, SyncData and SyncTo write the overlay to the real file and
//     fsync it: from then on the bytes survive a kill.
//   - When the overlays of all files exceed MaxPending bytes, the file being
//     written is written back without fsync (the kernel may write dirty
//     pages back early; that only makes data more durable).
//   - Namespace operations (create, rename, remove, link) take effect on the
//     real filesystem at once. With New that is kinder than a power cut,
//     which can also lose an unsynced directory entry. With Open (an undo
//     directory; see namespace.go) the next start reverts every one whose
//     directory was not synced since, as the worst power cut would.
//
// For tests only: a process using it loses data on any crash by design.
package volatilefs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// DefaultMaxPending bounds the unsynced bytes held in memory by one FS.
const DefaultMaxPending = 256 << 20

// FS wraps a vfs.FS (usually vfs.Default).
type FS struct {
	vfs.FS
	// MaxPending bounds the bytes held unsynced across all files; beyond it
	// the file being written is written back (not synced).
	MaxPending int64

	mu      sync.Mutex
	files   map[string]*state // by cleaned path
	pending int64             // bytes in every overlay (guarded by mu)

	ns *namespace // the undo log of namespace operations; nil with New

	// Reverted is how many namespace operations of the previous process
	// Open reverted.
	Reverted int
}

// New wraps under.
func New(under vfs.FS) *FS {
	return &FS{FS: under, MaxPending: DefaultMaxPending, files: make(map[string]*state)}
}

var _ vfs.FS = (*FS)(nil)

// state is one file's overlay: the unsynced writes in write order and the
// size the file has with them.
type state struct {
	mu      sync.Mutex
	extents []extent
	size    int64
	bytes   int64 // sum of len(extents[i].data)
}

type extent struct {
	off  int64
	data []byte
}

func key(name string) string { return filepath.Clean(name) }

// stateFor returns the overlay of name, creating it with the file's current
// size when there is none. fresh replaces any overlay (a new inode).
func (fs *FS) stateFor(name string, fresh bool) (*state, error) {
	k := key(name)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if st, ok := fs.files[k]; ok && !fresh {
		return st, nil
	} else if ok {
		fs.pending -= st.drop()
	}
	st := &state{}
	if !fresh {
		fi, err := fs.FS.Stat(name)
		if err != nil {
			return nil, err
		}
		st.size = fi.Size()
	}
	fs.files[k] = st
	return st, nil
}

func (fs *FS) forget(name string) {
	k := key(name)
	fs.mu.Lock()
	if st, ok := fs.files[k]; ok {
		fs.pending -= st.drop()
		delete(fs.files, k)
	}
	fs.mu.Unlock()
}

// drop discards the overlay and returns how many bytes it held.
func (st *state) drop() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.bytes
	st.extents, st.bytes = nil, 0
	return n
}

func (fs *FS) wrap(name string, f vfs.File, st *state, rw bool) *file {
	return &file{fs: fs, name: name, f: f, st: st, rw: rw}
}

// Create implements vfs.FS.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (f vfs.File, err error) {
	// Create replaces an existing file with a new inode: the old one is
	// kept for the undo.
	err = fs.logged("create", name, "", name, func() (err error) {
		f, err = fs.FS.Create(name, category)
		return err
	})
	return fs.opened(name, f, err, true, true)
}

// Open implements vfs.FS.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.opened(name, f, err, false, false)
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (f vfs.File, err error) {
	open := func() (err error) {
		f, err = fs.FS.OpenReadWrite(name, category, opts...)
		return err
	}
	if _, serr := fs.FS.Stat(name); fs.ns != nil && errors.Is(serr, os.ErrNotExist) {
		err = fs.logged("create", name, "", "", open) // it creates the file
	} else {
		err = open()
	}
	return fs.opened(name, f, err, false, true)
}

// opened wraps a real file just opened (err: the open's) with name's
// overlay — a fresh one for a new inode — as writable or read-only.
func (fs *FS) opened(name string, f vfs.File, err error, fresh, rw bool) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	st, err := fs.stateFor(name, fresh)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return fs.wrap(name, f, st, rw), nil
}

// ReuseForWrite implements vfs.FS: the overlay moves with the file.
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.flushPath(oldname); err != nil {
		return nil, err
	}
	var f vfs.File
	err := fs.logged("rename", oldname, newname, newname, func() (err error) {
		f, err = fs.FS.ReuseForWrite(oldname, newname, category)
		return err
	})
	if err != nil {
		return nil, err
	}
	fs.forget(oldname)
	return fs.opened(newname, f, nil, false, true)
}

// Rename implements vfs.FS: the overlay moves with the file.
func (fs *FS) Rename(oldname, newname string) error {
	if err := fs.logged("rename", oldname, newname, newname, func() error { return fs.FS.Rename(oldname, newname) }); err != nil {
		return err
	}
	ko, kn := key(oldname), key(newname)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if st, ok := fs.files[kn]; ok {
		fs.pending -= st.drop()
		delete(fs.files, kn)
	}
	if st, ok := fs.files[ko]; ok {
		fs.files[kn] = st
		delete(fs.files, ko)
	}
	return nil
}

// Link implements vfs.FS: both names share one overlay (one inode).
func (fs *FS) Link(oldname, newname string) error {
	// newname is kept: a kill between the record and a link that would
	// have failed (newname exists) must not lose it.
	if err := fs.logged("link", oldname, newname, newname, func() error { return fs.FS.Link(oldname, newname) }); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if st, ok := fs.files[key(oldname)]; ok {
		fs.files[key(newname)] = st
	}
	return nil
}

// Remove implements vfs.FS.
func (fs *FS) Remove(name string) error {
	remove := func() error { return fs.FS.Remove(name) }
	var err error
	if fi, serr := fs.FS.Stat(name); serr == nil && fi.IsDir() {
		err = remove() // directories are durable at once (namespace.go)
	} else {
		err = fs.logged("remove", name, "", name, remove)
	}
	if err != nil {
		return err
	}
	fs.forget(name)
	return nil
}

// RemoveAll implements vfs.FS.
func (fs *FS) RemoveAll(name string) error {
	err := fs.FS.RemoveAll(name)
	prefix := key(name) + string(filepath.Separator)
	fs.mu.Lock()
	for k, st := range fs.files {
		if k == key(name) || strings.HasPrefix(k, prefix) {
			fs.pending -= st.drop()
			delete(fs.files, k)
		}
	}
	fs.mu.Unlock()
	return err
}

// Stat implements vfs.FS: the size includes unsynced writes.
func (fs *FS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := fs.FS.Stat(name)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	st, ok := fs.files[key(name)]
	fs.mu.Unlock()
	if !ok {
		return fi, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return sizedInfo{FileInfo: fi, size: st.size}, nil
}

// Unwrap implements vfs.FS.
func (fs *FS) Unwrap() vfs.FS { return fs.FS }

// Pending reports the unsynced bytes held in memory.
func (fs *FS) Pending() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.pending
}

// flushPath writes name's overlay back without syncing (used before the
// file is reused under another name).
func (fs *FS) flushPath(name string) error {
	fs.mu.Lock()
	st, ok := fs.files[key(name)]
	fs.mu.Unlock()
	if !ok {
		return nil
	}
	return fs.writeBack(name, st, nil)
}

// writeBack writes st's overlay to the real file (through w when it is
// writable, else a new read-write handle) without syncing it.
func (fs *FS) writeBack(name string, st *state, w vfs.File) error {
	n, err := st.writeBack(fs.FS, name, w)
	fs.mu.Lock()
	fs.pending -= n
	fs.mu.Unlock()
	return err
}

// writeBack empties the overlay into the real file and returns the bytes
// it held.
func (st *state) writeBack(under vfs.FS, name string, w vfs.File) (int64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.extents) == 0 {
		return 0, nil
	}
	if w == nil {
		f, err := under.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			return 0, err
		}
		defer func() { _ = f.Close() }()
		w = f
	}
	for _, e := range st.extents {
		if _, err := w.WriteAt(e.data, e.off); err != nil {
			return 0, err
		}
	}
	n := st.bytes
	st.extents, st.bytes = nil, 0
	return n, nil
}

type sizedInfo struct {
	vfs.FileInfo
	size int64
}

func (s sizedInfo) Size() int64 { return s.size }

// file is one handle. Reads and writes go through the shared overlay.
type file struct {
	fs   *FS
	name string
	f    vfs.File
	st   *state
	rw   bool // opened for writing

	mu  sync.Mutex // guards pos
	pos int64
}

var _ vfs.File = (*file)(nil)

func (f *file) Close() error { return f.f.Close() }

func (f *file) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	st := f.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if off >= st.size {
		return 0, io.EOF
	}
	n := len(p)
	if rest := st.size - off; int64(n) > rest {
		n = int(rest)
	}
	got, err := f.f.ReadAt(p[:n], off)
	if err != nil && err != io.EOF {
		return got, err
	}
	clear(p[got:n]) // beyond the real file's end: a hole until written back
	for _, e := range st.extents {
		lo, hi := max(off, e.off), min(off+int64(n), e.off+int64(len(e.data)))
		if lo < hi {
			copy(p[lo-off:hi-off], e.data[lo-e.off:hi-e.off])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	st := f.st
	st.mu.Lock()
	if k := len(st.extents); k > 0 && st.extents[k-1].off+int64(len(st.extents[k-1].data)) == off {
		st.extents[k-1].data = append(st.extents[k-1].data, p...)
	} else {
		st.extents = append(st.extents, extent{off: off, data: append([]byte(nil), p...)})
	}
	st.bytes += int64(len(p))
	st.size = max(st.size, off+int64(len(p)))
	st.mu.Unlock()
	f.fs.mu.Lock()
	f.fs.pending += int64(len(p))
	over := f.fs.MaxPending > 0 && f.fs.pending > f.fs.MaxPending
	f.fs.mu.Unlock()
	if over {
		if err := f.fs.writeBack(f.name, st, f.writable()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writable returns the real handle when it can write, else nil.
func (f *file) writable() vfs.File {
	if f.rw {
		return f.f
	}
	return nil
}

func (f *file) Preallocate(offset, length int64) error { return f.f.Preallocate(offset, length) }

func (f *file) Stat() (vfs.FileInfo, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return nil, err
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return sizedInfo{FileInfo: fi, size: f.st.size}, nil
}

// Sync writes the overlay back and fsyncs the file.
func (f *file) Sync() error {
	if err := f.fs.writeBack(f.name, f.st, f.writable()); err != nil {
		return err
	}
	return f.f.Sync() // fsync on any descriptor syncs the inode
}

func (f *file) SyncData() error { return f.Sync() }

func (f *file) SyncTo(int64) (bool, error) { return true, f.Sync() }

func (f *file) Prefetch(int64, int64) error { return nil }

// Fd hides the descriptor so nobody reads around the overlay.
func (f *file) Fd() uintptr { return vfs.InvalidFd }
