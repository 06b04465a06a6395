package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// On-disk format constants. They are part of the format: changing any of them
// needs a new format version (see the package doc).
const (
	// formatVersion is the journal file format this code writes: version 2,
	// in which every group is followed by a terminator and a file may be a
	// recycled one holding stale bytes after it (see the package doc).
	// Version 1 files (no terminators, nothing after the last record) are
	// still read. Versions only move forward: a reader refuses files with a
	// version it does not know instead of guessing.
	formatVersion = 2
	// formatV1 is the first journal file format, read but no longer written.
	formatV1 = 1
	// checkpointVersion is the only CHECKPOINT format.
	checkpointVersion = 1

	fileMagic       = "SLCJRNL\x00"
	checkpointMagic = "SLCJCKPT"

	// FileHeaderSize is the size of a journal file header.
	FileHeaderSize = 32
	// RecordHeaderSize is the per-record framing overhead.
	RecordHeaderSize = 24
	// checkpointSize is the size of the CHECKPOINT file.
	checkpointSize = 24
	// terminatorSize is the size of the terminator written after every
	// group in a version 2 file: that many zero bytes, where the next
	// record header would be. The next group overwrites it.
	terminatorSize = RecordHeaderSize

	// MaxRecordSizeLimit is the largest payload the format admits, whatever
	// the configuration says. Readers treat a larger length field as damage,
	// which also bounds what a decoder of garbage may try to allocate.
	MaxRecordSizeLimit = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileHeader is the header at offset 0 of every journal file.
type fileHeader struct {
	fileSeq  uint64 // position of the file in the journal; consecutive
	firstSeq uint64 // sequence number of the first record the file holds (or would hold)
	version  uint16 // file format version; encode writes formatVersion whatever it says
}

func (h fileHeader) encode(b []byte) {
	_ = b[FileHeaderSize-1]
	copy(b[0:8], fileMagic)
	binary.LittleEndian.PutUint16(b[8:10], formatVersion)
	binary.LittleEndian.PutUint16(b[10:12], 0)
	binary.LittleEndian.PutUint64(b[12:20], h.fileSeq)
	binary.LittleEndian.PutUint64(b[20:28], h.firstSeq)
	binary.LittleEndian.PutUint32(b[28:32], crc32.Checksum(b[0:28], castagnoli))
}

func decodeFileHeader(b []byte) (fileHeader, error) {
	if len(b) < FileHeaderSize {
		return fileHeader{}, fmt.Errorf("file header: %d bytes, want %d", len(b), FileHeaderSize)
	}
	if string(b[0:8]) != fileMagic {
		return fileHeader{}, errors.New("file header: bad magic")
	}
	if got, want := binary.LittleEndian.Uint32(b[28:32]), crc32.Checksum(b[0:28], castagnoli); got != want {
		return fileHeader{}, fmt.Errorf("file header: checksum %#08x, want %#08x", got, want)
	}
	v := binary.LittleEndian.Uint16(b[8:10])
	if v != formatV1 && v != formatVersion {
		return fileHeader{}, fmt.Errorf("file header: format version %d, this build reads only %d and %d", v, formatV1, formatVersion)
	}
	if r := binary.LittleEndian.Uint16(b[10:12]); r != 0 {
		return fileHeader{}, fmt.Errorf("file header: reserved field %#04x, want 0", r)
	}
	h := fileHeader{
		fileSeq:  binary.LittleEndian.Uint64(b[12:20]),
		firstSeq: binary.LittleEndian.Uint64(b[20:28]),
		version:  v,
	}
	if h.firstSeq == 0 {
		return fileHeader{}, errors.New("file header: first record sequence 0")
	}
	return h, nil
}

// isTerminator reports whether b starts with a group terminator.
func isTerminator(b []byte) bool {
	if len(b) < terminatorSize {
		return false
	}
	for _, c := range b[:terminatorSize] {
		if c != 0 {
			return false
		}
	}
	return true
}

// recordHeader is the framing in front of every record payload.
type recordHeader struct {
	length   uint32 // payload length
	crc      uint32 // CRC32C over header bytes [0,4) ++ [8,24) ++ payload
	seq      uint64 // journal-wide record sequence number, from 1, consecutive
	syncedTo uint64 // file offset up to which the file was fsynced before this record's group was written (= the group's start offset)
}

// putRecordHeader writes the framing for a payload of length n with seq and
// syncedTo, leaving the checksum zero; sealRecord fills it in once the
// payload follows the header in b.
func putRecordHeader(b []byte, n int, seq, syncedTo uint64) {
	_ = b[RecordHeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:4], uint32(n))
	binary.LittleEndian.PutUint32(b[4:8], 0)
	binary.LittleEndian.PutUint64(b[8:16], seq)
	binary.LittleEndian.PutUint64(b[16:24], syncedTo)
}

// seed is where a record checksum of this file starts: in version 2, the
// CRC32C of the file sequence number (u64), so a record checksums only in
// the file it was written to; a recycled file's old records, written under
// another file sequence, never decode in it. Version 1 records start from 0.
func (h fileHeader) seed() uint32 {
	if h.version == formatV1 {
		return 0
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], h.fileSeq)
	return crc32.Update(0, castagnoli, b[:])
}

// recordChecksum is the CRC32C of a framed record (header then payload),
// skipping the checksum field itself, continued from seed (fileHeader.seed).
func recordChecksum(seed uint32, hdr, payload []byte) uint32 {
	c := crc32.Update(seed, castagnoli, hdr[0:4])
	c = crc32.Update(c, castagnoli, hdr[8:RecordHeaderSize])
	return crc32.Update(c, castagnoli, payload)
}

// sealRecord sets syncedTo and the checksum (from seed) of the framed record
// at the start of b (header followed by its payload) and returns the
// record's total size.
func sealRecord(b []byte, seed uint32, syncedTo uint64) int {
	n := int(binary.LittleEndian.Uint32(b[0:4]))
	binary.LittleEndian.PutUint64(b[16:24], syncedTo)
	end := RecordHeaderSize + n
	binary.LittleEndian.PutUint32(b[4:8], recordChecksum(seed, b[:RecordHeaderSize], b[RecordHeaderSize:end]))
	return end
}

// Reasons a record does not decode. They stay inside the package: callers
// see ErrCorrupt or a truncated torn tail, never these.
var (
	errShortHeader  = errors.New("record header cut short")
	errTooLarge     = errors.New("record length above the format limit")
	errShortPayload = errors.New("record payload cut short")
	errChecksum     = errors.New("record checksum mismatch")
)

// peekRecordHeader decodes the framing at the start of b without checking
// the checksum.
func peekRecordHeader(b []byte) (recordHeader, error) {
	if len(b) < RecordHeaderSize {
		return recordHeader{}, errShortHeader
	}
	h := recordHeader{
		length:   binary.LittleEndian.Uint32(b[0:4]),
		crc:      binary.LittleEndian.Uint32(b[4:8]),
		seq:      binary.LittleEndian.Uint64(b[8:16]),
		syncedTo: binary.LittleEndian.Uint64(b[16:24]),
	}
	if h.length > MaxRecordSizeLimit {
		return h, errTooLarge
	}
	return h, nil
}

// decodeRecord decodes the record at the start of b. It returns the header,
// the payload (aliasing b) and the record's total size. A record is returned
// only if its checksum, from seed (its file's fileHeader.seed), matches; it
// knows nothing else about where the record sits, so sequence and synced-to
// checks are the caller's.
func decodeRecord(b []byte, seed uint32) (recordHeader, []byte, int, error) {
	h, err := peekRecordHeader(b)
	if err != nil {
		return h, nil, 0, err
	}
	end := RecordHeaderSize + int(h.length)
	if len(b) < end {
		return h, nil, 0, errShortPayload
	}
	payload := b[RecordHeaderSize:end]
	if recordChecksum(seed, b[:RecordHeaderSize], payload) != h.crc {
		return h, nil, 0, errChecksum
	}
	return h, payload, end, nil
}

func encodeCheckpoint(seq uint64) []byte {
	b := make([]byte, checkpointSize)
	copy(b[0:8], checkpointMagic)
	binary.LittleEndian.PutUint16(b[8:10], checkpointVersion)
	binary.LittleEndian.PutUint16(b[10:12], 0)
	binary.LittleEndian.PutUint64(b[12:20], seq)
	binary.LittleEndian.PutUint32(b[20:24], crc32.Checksum(b[0:20], castagnoli))
	return b
}

func decodeCheckpoint(b []byte) (uint64, error) {
	if len(b) != checkpointSize {
		return 0, fmt.Errorf("checkpoint: %d bytes, want %d", len(b), checkpointSize)
	}
	if string(b[0:8]) != checkpointMagic {
		return 0, errors.New("checkpoint: bad magic")
	}
	if got, want := binary.LittleEndian.Uint32(b[20:24]), crc32.Checksum(b[0:20], castagnoli); got != want {
		return 0, fmt.Errorf("checkpoint: checksum %#08x, want %#08x", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:10]); v != checkpointVersion {
		return 0, fmt.Errorf("checkpoint: format version %d, this build reads only %d", v, checkpointVersion)
	}
	if r := binary.LittleEndian.Uint16(b[10:12]); r != 0 {
		return 0, fmt.Errorf("checkpoint: reserved field %#04x, want 0", r)
	}
	return binary.LittleEndian.Uint64(b[12:20]), nil
}
