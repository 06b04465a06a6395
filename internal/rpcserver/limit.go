package rpcserver

import (
	"compress/gzip"
	"encoding/binary"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
)

// A request message over MaxRequestBytes must get INVALID_ARGUMENT naming
// the limit (apierr.RequestBytes): sending it again can never succeed.
// connect-go's own limit (WithReadMaxBytes) answers RESOURCE_EXHAUSTED, the
// code of retryable throttling, so a well-behaved client would retry it
// forever. connect has no hook to change that answer, but it passes on a
// *connect.Error that a reader returns as the call's error. So the limit
// is enforced at the same bound, one step before connect's own check, at
// both places a message can grow:
//
//   - the request body as read (limitBody): the length prefix of every
//     enveloped message (gRPC, gRPC-web, Connect streams) is checked before
//     connect sees its last byte; a unary Connect body fails at its first
//     byte past the limit;
//   - the gzip decompressor's output (limitedGzip), for compressed
//     messages.
//
// connect's WithReadMaxBytes stays set to the same bound as a backstop.

// limitRequests wraps a handler's request bodies (see above).
func limitRequests(h http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			ct := r.Header.Get("Content-Type")
			enveloped := strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+")
			r.Body = &limitBody{ReadCloser: r.Body, max: max, enveloped: enveloped, length: r.ContentLength}
		}
		h.ServeHTTP(w, r)
	})
}

// tooLargeRequest is the answer to a message over the limit; got < 0 when
// its size is not known.
func tooLargeRequest(got, max int64) *connect.Error {
	return apierr.TooLarge("request", apierr.RequestBytes, got, max)
}

// limitBody fails the read that would hand connect a message over max.
type limitBody struct {
	io.ReadCloser
	max       int64
	enveloped bool
	length    int64 // Content-Length, -1 when unknown
	err       error // sticky

	// unenveloped: bytes read
	n int64
	// enveloped: the prefix of the current message being read (hdrN of 5
	// bytes), then the bytes of its payload still to come (left)
	hdr  [5]byte
	hdrN int
	left int64
}

func (b *limitBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.enveloped {
		n, err := b.ReadCloser.Read(p)
		b.n += int64(n)
		if b.n > b.max {
			got := int64(-1)
			if d, derr := b.drain(maxDrainBytes); derr == io.EOF {
				got = b.n + d
			} else if b.length > b.max {
				got = b.length
			}
			b.err = tooLargeRequest(got, b.max)
			return n, b.err
		}
		return n, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.left > 0 {
		n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left)])
		b.left -= int64(n)
		return n, err
	}
	// Within a prefix: read no further than its end, so the prefix is
	// checked before the reader has all of it.
	n, err := b.ReadCloser.Read(p[:min(len(p), len(b.hdr)-b.hdrN)])
	copy(b.hdr[b.hdrN:], p[:n])
	b.hdrN += n
	if b.hdrN < len(b.hdr) {
		return n, err
	}
	b.hdrN = 0
	size := int64(binary.BigEndian.Uint32(b.hdr[1:]))
	if size > b.max {
		// Withhold the prefix's last byte: the reader (io.ReadFull) then
		// reports this error rather than a complete prefix.
		b.err = tooLargeRequest(size, b.max)
		_, _ = b.drain(min(size, maxDrainBytes))
		return n - 1, b.err
	}
	b.left = size
	return n, err
}

// maxDrainBytes bounds what is read and dropped of a refused message, so
// that the answer reaches an HTTP/1.1 client still sending (a server that
// stops reading and closes the connection may reset it before the client
// reads the answer), as connect does for its own limit.
const maxDrainBytes = 64 << 20

// drain reads and drops up to n bytes; io.EOF when the body ended first.
func (b *limitBody) drain(n int64) (int64, error) {
	return io.CopyN(io.Discard, b.ReadCloser, n)
}

// limitedGzip is connect's gzip decompressor, failing past max bytes of
// output with the same answer as limitBody.
type limitedGzip struct {
	gzip.Reader
	n, max int64
}

func (d *limitedGzip) Read(p []byte) (int, error) {
	n, err := d.Reader.Read(p)
	d.n += int64(n)
	if d.n > d.max {
		return n, tooLargeRequest(-1, d.max)
	}
	return n, err
}

func (d *limitedGzip) Reset(r io.Reader) error {
	d.n = 0
	return d.Reader.Reset(r)
}

// gzipWithin replaces connect's gzip (decompressing requests, compressing
// answers) with one whose decompressor stops at max.
func gzipWithin(max int64) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCompression("gzip", nil, nil), // drop the default, so gzip is listed once
		connect.WithCompression("gzip",
			func() connect.Decompressor { return &limitedGzip{max: max} },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
	}
}
