package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Sizes and hard limits of the on-disk formats (see the package doc).
const (
	// FrameHeaderSize is the size of an entry frame's header in an entry log.
	FrameHeaderSize = 32
	// LogHeaderSize is the size of an entry log file's header.
	LogHeaderSize = 40
	// MaxEntrySizeLimit bounds Options.MaxEntrySize: the largest payload
	// any version of this code will write or accept when reading.
	MaxEntrySizeLimit = 64 << 20
	// MaxMasterKeySize bounds a ledger's master key (BookKeeper's are 20
	// bytes, a SHA-1 of the ledger password).
	MaxMasterKeySize = 1024

	logFormatVersion   = 1 // entry log files
	indexFormatVersion = 1 // keys and values in the index
	storageIDSize      = 16
	locationSize       = 24
	u64ValueSize       = 12
	metaFixedSize      = 16 // ver, flags, key length, lac, crc
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logMagic opens every entry log file.
var logMagic = [8]byte{'S', 'L', 'C', 'E', 'L', 'O', 'G', 0}

// errFormat is the cause inside ErrCorrupt for bytes that do not decode.
var errFormat = errors.New("bad format")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrCorrupt, errFormat, fmt.Sprintf(format, args...))
}

func putEntryIDs(b []byte, ledger, entry, lac int64) {
	binary.BigEndian.PutUint64(b[0:8], uint64(ledger))
	binary.BigEndian.PutUint64(b[8:16], uint64(entry))
	binary.BigEndian.PutUint64(b[16:24], uint64(lac))
}

// frame is one decoded entry log frame.
type frame struct {
	ledger, entry, lac int64
	crc                uint32
	payload            []byte // aliases the decoded buffer
}

// frameSize is the size of the frame holding a payload of n bytes.
func frameSize(n int) int64 { return FrameHeaderSize + int64(n) }

// appendFrame appends the frame of an entry to dst. crc must be the entry's
// EntryChecksum; the caller checked it.
func appendFrame(dst []byte, ledger, entry, lac int64, crc uint32, payload []byte) []byte {
	var hdr [FrameHeaderSize]byte
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(hdr[4:8], crc)
	putEntryIDs(hdr[8:32], ledger, entry, lac)
	return append(append(dst, hdr[:]...), payload...)
}

// decodeFrame decodes b, which must be exactly one frame, and verifies its
// checksum. Nothing is returned as data unless the checksum matches.
func decodeFrame(b []byte) (frame, error) {
	if len(b) < FrameHeaderSize {
		return frame{}, corruptf("frame of %d bytes, shorter than its header", len(b))
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	if n > MaxEntrySizeLimit || int64(len(b)) != frameSize(int(n)) {
		return frame{}, corruptf("frame length %d does not fit %d bytes", n, len(b))
	}
	f := frame{
		crc:     binary.LittleEndian.Uint32(b[4:8]),
		ledger:  int64(binary.BigEndian.Uint64(b[8:16])),
		entry:   int64(binary.BigEndian.Uint64(b[16:24])),
		lac:     int64(binary.BigEndian.Uint64(b[24:32])),
		payload: b[FrameHeaderSize:],
	}
	if got := crc32.Checksum(b[8:], castagnoli); got != f.crc {
		return frame{}, fmt.Errorf("%w: entry checksum mismatch: stored %08x, computed %08x", ErrCorrupt, f.crc, got)
	}
	if f.ledger < 0 || f.entry < 0 || f.lac < -1 {
		return frame{}, corruptf("frame ids ledger %d entry %d lac %d out of range", f.ledger, f.entry, f.lac)
	}
	return f, nil
}

// logHeader is the header of an entry log file.
type logHeader struct {
	fileID    uint64
	storageID [storageIDSize]byte
}

func (h logHeader) encode() []byte {
	b := make([]byte, LogHeaderSize)
	copy(b[0:8], logMagic[:])
	binary.LittleEndian.PutUint16(b[8:10], logFormatVersion)
	binary.LittleEndian.PutUint64(b[12:20], h.fileID)
	copy(b[20:36], h.storageID[:])
	binary.LittleEndian.PutUint32(b[36:40], crc32.Checksum(b[0:36], castagnoli))
	return b
}

func decodeLogHeader(b []byte) (logHeader, error) {
	if len(b) != LogHeaderSize {
		return logHeader{}, corruptf("entry log header of %d bytes", len(b))
	}
	if !bytes.Equal(b[0:8], logMagic[:]) {
		return logHeader{}, corruptf("entry log header magic %q", b[0:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[36:40]), crc32.Checksum(b[0:36], castagnoli); got != want {
		return logHeader{}, corruptf("entry log header checksum %08x, computed %08x", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:10]); v != logFormatVersion {
		return logHeader{}, corruptf("entry log format version %d; this build reads %d", v, logFormatVersion)
	}
	if r := binary.LittleEndian.Uint16(b[10:12]); r != 0 {
		return logHeader{}, corruptf("entry log header reserved field %d", r)
	}
	h := logHeader{fileID: binary.LittleEndian.Uint64(b[12:20])}
	copy(h.storageID[:], b[20:36])
	return h, nil
}

// Index keys. Integers are big-endian so keys sort numerically.
const (
	prefixEntry = 'e' // 'e' ledger entry → location
	prefixMeta  = 'm' // 'm' ledger → ledger metadata
	prefixUsage = 'u' // 'u' file ledger → bytes of the ledger's frames in the file
)

var (
	formatKey   = []byte("!format")   // index format version and storage id
	nextFileKey = []byte("!nextfile") // lowest entry log file id never used
)

func entryKey(ledger, entry int64) []byte {
	k := make([]byte, 17)
	k[0] = prefixEntry
	binary.BigEndian.PutUint64(k[1:9], uint64(ledger))
	binary.BigEndian.PutUint64(k[9:17], uint64(entry))
	return k
}

// ledgerEntriesSpan is the key span [lo, hi) of every entry of ledger.
func ledgerEntriesSpan(ledger int64) (lo, hi []byte) {
	return entryKey(ledger, 0), entryKey(ledger+1, 0)
}

func decodeEntryKey(k []byte) (ledger, entry int64, ok bool) {
	if len(k) != 17 || k[0] != prefixEntry {
		return 0, 0, false
	}
	l, e := binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:17])
	return int64(l), int64(e), l <= math.MaxInt64 && e <= math.MaxInt64
}

func metaKey(ledger int64) []byte {
	k := make([]byte, 9)
	k[0] = prefixMeta
	binary.BigEndian.PutUint64(k[1:9], uint64(ledger))
	return k
}

func usageKey(file uint64, ledger int64) []byte {
	k := make([]byte, 17)
	k[0] = prefixUsage
	binary.BigEndian.PutUint64(k[1:9], file)
	binary.BigEndian.PutUint64(k[9:17], uint64(ledger))
	return k
}

// fileUsageSpan is the key span [lo, hi) of every usage row of file.
func fileUsageSpan(file uint64) (lo, hi []byte) {
	lo = usageKey(file, 0)
	hi = make([]byte, 9)
	hi[0] = prefixUsage
	binary.BigEndian.PutUint64(hi[1:9], file+1)
	if file == math.MaxUint64 {
		hi = []byte{prefixUsage + 1}
	}
	return lo, hi
}

func decodeUsageKey(k []byte) (file uint64, ledger int64, ok bool) {
	if len(k) != 17 || k[0] != prefixUsage {
		return 0, 0, false
	}
	l := binary.BigEndian.Uint64(k[9:17])
	return binary.BigEndian.Uint64(k[1:9]), int64(l), l <= math.MaxInt64
}

// location is where an entry's frame is: the value of an entry key.
type location struct {
	file   uint64 // entry log file id
	offset int64  // of the frame's first byte
	length uint32 // payload bytes (the frame is FrameHeaderSize more)
}

// precedes reports whether next's frame starts where l's ends, in the same
// entry log file: the two can be read with one read.
func (l location) precedes(next location) bool {
	return l.file == next.file && l.offset+frameSize(int(l.length)) == next.offset
}

// encodeLocation encodes loc as the value of key. The checksum covers the
// key too, so a value that ends up under another key does not verify.
func encodeLocation(key []byte, loc location) []byte {
	v := make([]byte, locationSize)
	binary.LittleEndian.PutUint64(v[0:8], loc.file)
	binary.LittleEndian.PutUint64(v[8:16], uint64(loc.offset))
	binary.LittleEndian.PutUint32(v[16:20], loc.length)
	binary.LittleEndian.PutUint32(v[20:24], keyedChecksum(key, v[0:20]))
	return v
}

func decodeLocation(key, v []byte) (location, error) {
	if len(v) != locationSize {
		return location{}, corruptf("index value of %d bytes", len(v))
	}
	if got, want := binary.LittleEndian.Uint32(v[20:24]), keyedChecksum(key, v[0:20]); got != want {
		return location{}, corruptf("index value checksum %08x, computed %08x", got, want)
	}
	loc := location{
		file:   binary.LittleEndian.Uint64(v[0:8]),
		offset: int64(binary.LittleEndian.Uint64(v[8:16])),
		length: binary.LittleEndian.Uint32(v[16:20]),
	}
	if loc.file == 0 || loc.offset < LogHeaderSize || loc.length > MaxEntrySizeLimit {
		return location{}, corruptf("index location file %d offset %d length %d out of range", loc.file, loc.offset, loc.length)
	}
	return loc, nil
}

func keyedChecksum(key, v []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, v)
}

// Ledger metadata flags.
const (
	flagFenced  = 1 << 0
	flagDeleted = 1 << 1
	knownFlags  = flagFenced | flagDeleted
)

// ledgerMeta is the persisted metadata of one ledger.
type ledgerMeta struct {
	flags     uint8
	lac       int64
	masterKey []byte // nil until the first add or fence sets it
}

func encodeMeta(key []byte, m ledgerMeta) []byte {
	n := len(m.masterKey)
	v := make([]byte, metaFixedSize+n)
	v[0] = indexFormatVersion
	v[1] = m.flags
	binary.LittleEndian.PutUint16(v[2:4], uint16(n))
	binary.LittleEndian.PutUint64(v[4:12], uint64(m.lac))
	copy(v[12:12+n], m.masterKey)
	binary.LittleEndian.PutUint32(v[12+n:], keyedChecksum(key, v[:12+n]))
	return v
}

func decodeMeta(key, v []byte) (ledgerMeta, error) {
	if len(v) < metaFixedSize {
		return ledgerMeta{}, corruptf("ledger metadata of %d bytes", len(v))
	}
	n := int(binary.LittleEndian.Uint16(v[2:4]))
	if n > MaxMasterKeySize || len(v) != metaFixedSize+n {
		return ledgerMeta{}, corruptf("ledger metadata master key length %d in %d bytes", n, len(v))
	}
	if got, want := binary.LittleEndian.Uint32(v[12+n:]), keyedChecksum(key, v[:12+n]); got != want {
		return ledgerMeta{}, corruptf("ledger metadata checksum %08x, computed %08x", got, want)
	}
	if v[0] != indexFormatVersion {
		return ledgerMeta{}, corruptf("ledger metadata version %d; this build reads %d", v[0], indexFormatVersion)
	}
	m := ledgerMeta{flags: v[1], lac: int64(binary.LittleEndian.Uint64(v[4:12]))}
	if m.flags&^knownFlags != 0 || m.lac < -1 {
		return ledgerMeta{}, corruptf("ledger metadata flags %#x lac %d", m.flags, m.lac)
	}
	if n > 0 {
		m.masterKey = bytes.Clone(v[12 : 12+n])
	}
	return m, nil
}

// encodeU64 encodes a checksummed counter (usage rows, the next file id).
func encodeU64(key []byte, x uint64) []byte {
	v := make([]byte, u64ValueSize)
	binary.LittleEndian.PutUint64(v[0:8], x)
	binary.LittleEndian.PutUint32(v[8:12], keyedChecksum(key, v[0:8]))
	return v
}

func decodeU64(key, v []byte) (uint64, error) {
	if len(v) != u64ValueSize {
		return 0, corruptf("counter value of %d bytes under %q", len(v), key)
	}
	if got, want := binary.LittleEndian.Uint32(v[8:12]), keyedChecksum(key, v[0:8]); got != want {
		return 0, corruptf("counter checksum %08x, computed %08x", got, want)
	}
	return binary.LittleEndian.Uint64(v[0:8]), nil
}

// formatRecord is the value of formatKey: written last when a storage is
// formatted, checked on every open.
type formatRecord struct {
	version   uint32
	storageID [storageIDSize]byte
}

func encodeFormat(r formatRecord) []byte {
	v := make([]byte, 24)
	binary.LittleEndian.PutUint32(v[0:4], r.version)
	copy(v[4:20], r.storageID[:])
	binary.LittleEndian.PutUint32(v[20:24], keyedChecksum(formatKey, v[0:20]))
	return v
}

func decodeFormat(v []byte) (formatRecord, error) {
	if len(v) != 24 {
		return formatRecord{}, corruptf("format record of %d bytes", len(v))
	}
	if got, want := binary.LittleEndian.Uint32(v[20:24]), keyedChecksum(formatKey, v[0:20]); got != want {
		return formatRecord{}, corruptf("format record checksum %08x, computed %08x", got, want)
	}
	r := formatRecord{version: binary.LittleEndian.Uint32(v[0:4])}
	copy(r.storageID[:], v[4:20])
	if r.version != indexFormatVersion {
		return formatRecord{}, corruptf("index format version %d; this build reads %d", r.version, indexFormatVersion)
	}
	return r, nil
}
