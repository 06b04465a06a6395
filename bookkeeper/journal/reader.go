package journal

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// readWindow is how much a fileReader reads at once.
const readWindow = 1 << 20

// fileReader reads a journal file of known size through one sliding buffer,
// so replay costs one read per MiB, not per record, and memory stays bounded
// by max(readWindow, largest record).
type fileReader struct {
	f    vfs.File
	size int64
	buf  []byte
	off  int64 // file offset of buf[0]
}

func newFileReader(f vfs.File, size int64) *fileReader {
	return &fileReader{f: f, size: size}
}

// at returns the file's bytes [off, off+n), or fewer if the file ends first.
// The slice is valid until the next call.
func (r *fileReader) at(off int64, n int) ([]byte, error) {
	if off >= r.size {
		return nil, nil
	}
	n = int(min(int64(n), r.size-off))
	if off >= r.off && off+int64(n) <= r.off+int64(len(r.buf)) {
		i := off - r.off
		return r.buf[i : i+int64(n)], nil
	}
	want := int(min(int64(max(n, readWindow)), r.size-off))
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	r.off = off
	got, err := r.f.ReadAt(r.buf, off)
	if got < want {
		r.buf = r.buf[:0]
		if err == nil {
			err = fmt.Errorf("short read: %d of %d bytes", got, want)
		}
		return nil, fmt.Errorf("read at %d: %w", off, err)
	}
	return r.buf[:n], nil
}

// invalidate drops the buffered window, whose bytes were handed to a writer.
func (r *fileReader) invalidate() { r.buf = r.buf[:0] }
