package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Wire formats, as Kafka clients write them:
//   - gzip: RFC 1952 (several members allowed, as Java's GZIPInputStream does).
//   - snappy: a raw snappy block (what franz-go and librdkafka write), or
//     xerial snappy-java framing (what the Java client writes); both are read.
//   - lz4: the LZ4 frame format (Kafka ≥ 0.10, KIP-57).
//   - zstd: zstd frames.
//
// Decompression never produces more than the limit it is given (plus one
// read), whatever the compressed input claims; codec state (lz4 blocks, the
// zstd window) is bounded by the formats and pooled.

// zstdMaxWindow bounds the zstd window a frame may ask for. 8 MiB is the
// window the zstd spec asks every decoder to support and covers compression
// levels up to 19 (Kafka's compression.zstd.level); "ultra" levels 20-22
// are rejected.
const zstdMaxWindow = 8 << 20

// errDecompressedTooLarge is returned by decompress when the output would
// pass the limit; the caller turns it into a *FormatError with ErrLimit.
var errDecompressedTooLarge = errors.New("decompressed size exceeds the limit")

// checkLevel validates a codec's compression level (0 = the codec default).
func checkLevel(c Codec, level int) error {
	ok := level == 0
	switch c {
	case CodecGzip:
		ok = ok || level >= gzip.BestSpeed && level <= gzip.BestCompression
	case CodecLZ4:
		ok = ok || level >= 1 && level <= len(lz4Levels)
	case CodecZstd:
		ok = ok || level >= 1 && level <= 22
	}
	if !ok {
		return fmt.Errorf("record: compression level %d is not valid for %v", level, c)
	}
	return nil
}

var lz4Levels = [...]lz4.CompressionLevel{
	lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5,
	lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9,
}

// compressor pools, one per (codec, level).
var compressors sync.Map // codecLevel -> *sync.Pool or *zstd.Encoder

type codecLevel struct {
	c     Codec
	level int
}

func gzipWriterPool(level int) *sync.Pool {
	k := codecLevel{CodecGzip, level}
	if p, ok := compressors.Load(k); ok {
		return p.(*sync.Pool)
	}
	if level == 0 {
		level = gzip.DefaultCompression
	}
	p, _ := compressors.LoadOrStore(k, &sync.Pool{New: func() any {
		w, err := gzip.NewWriterLevel(nil, level)
		if err != nil {
			panic(err) // level checked by checkLevel
		}
		return w
	}})
	return p.(*sync.Pool)
}

func lz4WriterPool(level int) *sync.Pool {
	k := codecLevel{CodecLZ4, level}
	if p, ok := compressors.Load(k); ok {
		return p.(*sync.Pool)
	}
	lv := lz4.Fast
	if level > 0 {
		lv = lz4Levels[level-1]
	}
	p, _ := compressors.LoadOrStore(k, &sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		if err := w.Apply(lz4.CompressionLevelOption(lv)); err != nil {
			panic(err)
		}
		return w
	}})
	return p.(*sync.Pool)
}

// zstdEncoder returns the shared encoder for a level. EncodeAll is safe for
// concurrent use, so one encoder per level serves every goroutine.
func zstdEncoder(level int) *zstd.Encoder {
	k := codecLevel{CodecZstd, level}
	if e, ok := compressors.Load(k); ok {
		return e.(*zstd.Encoder)
	}
	lv := zstd.SpeedDefault
	if level > 0 {
		lv = zstd.EncoderLevelFromZstd(level)
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(lv), zstd.WithZeroFrames(true))
	if err != nil {
		panic(err)
	}
	actual, loaded := compressors.LoadOrStore(k, e)
	if loaded {
		_ = e.Close()
	}
	return actual.(*zstd.Encoder)
}

// compress appends src compressed with c to dst.
func compress(dst []byte, c Codec, level int, src []byte) ([]byte, error) {
	switch c {
	case CodecGzip:
		pool := gzipWriterPool(level)
		w := pool.Get().(*gzip.Writer)
		defer pool.Put(w)
		buf := bytes.NewBuffer(dst)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CodecSnappy:
		// s2's snappy-compatible fast encoder, as franz-go uses.
		n := len(dst)
		dst = slices.Grow(dst, s2.MaxEncodedLen(len(src)))
		out := s2.EncodeSnappy(dst[n:cap(dst)], src)
		return dst[:n+len(out)], nil
	case CodecLZ4:
		pool := lz4WriterPool(level)
		w := pool.Get().(*lz4.Writer)
		defer pool.Put(w)
		buf := bytes.NewBuffer(dst)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CodecZstd:
		return zstdEncoder(level).EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("record: cannot compress with %v", c)
}

var (
	gzipReaders sync.Pool // *gzip.Reader
	lz4Readers  sync.Pool // *lz4.Reader
)

// zstdReaders pools synchronous streaming zstd decoders. Streaming (rather
// than DecodeAll) lets readLimited stop one read past the limit whatever the
// frame claims; a pooled decoder keeps its window buffer (at most
// zstdMaxWindow) for the next batch. Concurrency 1 decodes on the caller's
// goroutine, so a pooled decoder owns no goroutines.
var zstdReaders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
	)
	if err != nil {
		panic(err) // constant options
	}
	return d
}}

// decompress decodes src (compressed with c) into dst[:0], growing it as
// needed, and fails with errDecompressedTooLarge past limit bytes.
func decompress(dst []byte, c Codec, src []byte, limit int) ([]byte, error) {
	dst = dst[:0]
	// Pooled readers keep a reference to their input; emptying br afterwards
	// keeps them from pinning the caller's batch.
	br := bytes.NewReader(src)
	defer br.Reset(nil)
	switch c {
	case CodecGzip:
		r, _ := gzipReaders.Get().(*gzip.Reader)
		if r == nil {
			r = new(gzip.Reader)
		}
		defer gzipReaders.Put(r)
		if err := r.Reset(br); err != nil {
			return dst, err
		}
		return readLimited(dst, r, limit)
	case CodecSnappy:
		return decodeSnappy(dst, src, limit)
	case CodecLZ4:
		r, _ := lz4Readers.Get().(*lz4.Reader)
		if r == nil {
			r = lz4.NewReader(nil)
		}
		defer lz4Readers.Put(r)
		r.Reset(br)
		return readLimited(dst, r, limit)
	case CodecZstd:
		d := zstdReaders.Get().(*zstd.Decoder)
		defer func() {
			_ = d.Reset(nil) // drop the reference to src
			zstdReaders.Put(d)
		}()
		if err := d.Reset(br); err != nil {
			return dst, err
		}
		return readLimited(dst, d, limit)
	}
	return dst, fmt.Errorf("unknown codec %v", c)
}

// readLimited reads r to EOF into dst, failing once more than limit bytes
// have come out.
func readLimited(dst []byte, r io.Reader, limit int) ([]byte, error) {
	for {
		if len(dst) > limit {
			return dst, errDecompressedTooLarge
		}
		if len(dst) == cap(dst) {
			// Double, but never allocate past limit+1: one byte over is
			// enough to know the limit is broken.
			dst = slices.Grow(dst, min(max(cap(dst), 4<<10), limit+1-len(dst)))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			if len(dst) > limit {
				return dst, errDecompressedTooLarge
			}
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// xerialHeader starts snappy-java's framing: magic, version 1, compatible 1.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

func decodeSnappy(dst, src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return decodeSnappyBlock(dst, src, limit)
	}
	if len(src) < xerialHeaderSize {
		return dst, errors.New("snappy: truncated xerial header")
	}
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return dst, errors.New("snappy: truncated xerial chunk length")
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n > len(src)-p {
			return dst, errors.New("snappy: xerial chunk runs past the end")
		}
		var err error
		if dst, err = decodeSnappyBlock(dst, src[p:p+n], limit); err != nil {
			return dst, err
		}
		p += n
	}
	return dst, nil
}

// decodeSnappyBlock appends one raw snappy block to dst.
func decodeSnappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("snappy: %w", err)
	}
	if n > limit-len(dst) {
		return dst, errDecompressedTooLarge
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out, err := snappy.Decode(dst[start:], src)
	if err != nil {
		return dst[:start], fmt.Errorf("snappy: %w", err)
	}
	if len(out) != n {
		return dst[:start], errors.New("snappy: decoded length does not match the preamble")
	}
	return dst, nil
}
