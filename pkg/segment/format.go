package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Sizes of the fixed parts of the layout (see the package doc).
const (
	// HeaderSize is the size of the header; the data section starts here.
	HeaderSize = 16
	// TrailerSize is the size of the trailer, the object's last bytes. Its
	// layout is the same in every format version.
	TrailerSize = 24
	// OffsetEntrySize and TimeEntrySize are the sizes of index entries.
	OffsetEntrySize = 20
	TimeEntrySize   = 16
	// FooterFixedSize is the size of a version 1 footer without its topic id.
	FooterFixedSize = 108
	// MaxTopicIDBytes bounds the topic id stored in the footer.
	MaxTopicIDBytes = 255
	// MaxFooterBytes bounds the footer of any version this build reads.
	MaxFooterBytes = FooterFixedSize + MaxTopicIDBytes

	// Version is the format version this build writes; it reads versions
	// 1..Version.
	Version = 1

	// minBatchSize is the smallest Kafka batch: a header and no records.
	minBatchSize = 61
	// minObjectSize: header, one batch, one entry of each index, an empty
	// topic id's footer, trailer.
	minObjectSize = HeaderSize + minBatchSize + OffsetEntrySize + TimeEntrySize + FooterFixedSize + TrailerSize
)

var (
	headerMagic  = [8]byte{'S', 'L', 'C', 'S', 'E', 'G', 'M', 0}
	trailerMagic = [8]byte{'S', 'L', 'C', 'S', 'E', 'G', 'E', 0}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
	le           = binary.LittleEndian
)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// offsetEntry closes index interval i: the interval is the data bytes
// [end of entry i-1 (or the data start), end), its batches hold offsets
// (last of entry i-1, last], the last batch's last offset is exactly last,
// and crc is the CRC32C of the interval's bytes.
type offsetEntry struct {
	last int64 // last offset of the interval's last batch
	end  int64 // object position one past the interval's last batch
	crc  uint32
}

// timeEntry: every record at an offset ≤ offset has a timestamp ≤ ts, and
// some batch at or before offset has max timestamp ts (Kafka's time index:
// a record with a timestamp above ts comes after offset). offset is always
// the last offset of an offset index entry.
type timeEntry struct {
	ts     int64
	offset int64
}

// footer is the decoded version 1 footer.
type footer struct {
	ledgerID     int64
	partition    int32
	topicID      string
	firstOffset  int64
	lastOffset   int64
	recordCount  int64
	batchCount   int64
	maxTimestamp int64
	dataPos      int64
	dataLen      int64
	offIdxPos    int64
	timeIdxPos   int64
	offIdxCount  int
	timeIdxCount int
	dataCRC      uint32
	offIdxCRC    uint32
	timeIdxCRC   uint32
}

// trailer is the decoded trailer.
type trailer struct {
	footerLen int
	version   int
	footerCRC uint32
}

func appendHeader(dst []byte) []byte {
	var h [HeaderSize]byte
	copy(h[0:8], headerMagic[:])
	le.PutUint16(h[8:10], Version)
	le.PutUint32(h[12:16], checksum(h[0:12]))
	return append(dst, h[:]...)
}

// decodeHeader checks the header at the start of b (len(b) ≥ HeaderSize)
// and returns its version, which must equal the trailer's.
func decodeHeader(b []byte) (int, error) {
	h := b[:HeaderSize]
	if [8]byte(h[0:8]) != headerMagic {
		return 0, corruptf(SectionHeader, 0, "magic %q is not a segment's", h[0:8])
	}
	if got, want := checksum(h[0:12]), le.Uint32(h[12:16]); got != want {
		return 0, corruptf(SectionHeader, 0, "crc stored %#08x, computed %#08x", want, got)
	}
	if r := le.Uint16(h[10:12]); r != 0 {
		return 0, corruptf(SectionHeader, 0, "reserved field is %#04x, want 0", r)
	}
	return int(le.Uint16(h[8:10])), nil
}

func appendOffsetEntry(dst []byte, e offsetEntry) []byte {
	var b [OffsetEntrySize]byte
	le.PutUint64(b[0:8], uint64(e.last))
	le.PutUint64(b[8:16], uint64(e.end))
	le.PutUint32(b[16:20], e.crc)
	return append(dst, b[:]...)
}

func decodeOffsetEntry(b []byte) offsetEntry {
	return offsetEntry{
		last: int64(le.Uint64(b[0:8])),
		end:  int64(le.Uint64(b[8:16])),
		crc:  le.Uint32(b[16:20]),
	}
}

func appendTimeEntry(dst []byte, e timeEntry) []byte {
	var b [TimeEntrySize]byte
	le.PutUint64(b[0:8], uint64(e.ts))
	le.PutUint64(b[8:16], uint64(e.offset))
	return append(dst, b[:]...)
}

func decodeTimeEntry(b []byte) timeEntry {
	return timeEntry{ts: int64(le.Uint64(b[0:8])), offset: int64(le.Uint64(b[8:16]))}
}

func (f *footer) size() int { return FooterFixedSize + len(f.topicID) }

func appendFooter(dst []byte, f *footer) []byte {
	var b [FooterFixedSize]byte
	le.PutUint64(b[0:8], uint64(f.ledgerID))
	le.PutUint32(b[8:12], uint32(f.partition))
	le.PutUint16(b[12:14], uint16(len(f.topicID)))
	// b[14:16] reserved, zero
	le.PutUint64(b[16:24], uint64(f.firstOffset))
	le.PutUint64(b[24:32], uint64(f.lastOffset))
	le.PutUint64(b[32:40], uint64(f.recordCount))
	le.PutUint64(b[40:48], uint64(f.batchCount))
	le.PutUint64(b[48:56], uint64(f.maxTimestamp))
	le.PutUint64(b[56:64], uint64(f.dataPos))
	le.PutUint64(b[64:72], uint64(f.dataLen))
	le.PutUint64(b[72:80], uint64(f.offIdxPos))
	le.PutUint64(b[80:88], uint64(f.timeIdxPos))
	le.PutUint32(b[88:92], uint32(f.offIdxCount))
	le.PutUint32(b[92:96], uint32(f.timeIdxCount))
	le.PutUint32(b[96:100], f.dataCRC)
	le.PutUint32(b[100:104], f.offIdxCRC)
	le.PutUint32(b[104:108], f.timeIdxCRC)
	dst = append(dst, b[:]...)
	return append(dst, f.topicID...)
}

// decodeFooter decodes a version 1 footer whose CRC was checked. It checks
// only what needs no context (lengths, reserved bits); validateFooter checks
// the rest against the object.
func decodeFooter(b []byte, pos int64) (footer, error) {
	if len(b) < FooterFixedSize {
		return footer{}, corruptf(SectionFooter, pos, "%d bytes, shorter than %d", len(b), FooterFixedSize)
	}
	if r := le.Uint16(b[14:16]); r != 0 {
		return footer{}, corruptf(SectionFooter, pos, "reserved field is %#04x, want 0", r)
	}
	if n := int(le.Uint16(b[12:14])); FooterFixedSize+n != len(b) {
		return footer{}, corruptf(SectionFooter, pos, "topic id of %d bytes in a %d-byte footer", n, len(b))
	}
	return footer{
		ledgerID:     int64(le.Uint64(b[0:8])),
		partition:    int32(le.Uint32(b[8:12])),
		firstOffset:  int64(le.Uint64(b[16:24])),
		lastOffset:   int64(le.Uint64(b[24:32])),
		recordCount:  int64(le.Uint64(b[32:40])),
		batchCount:   int64(le.Uint64(b[40:48])),
		maxTimestamp: int64(le.Uint64(b[48:56])),
		dataPos:      int64(le.Uint64(b[56:64])),
		dataLen:      int64(le.Uint64(b[64:72])),
		offIdxPos:    int64(le.Uint64(b[72:80])),
		timeIdxPos:   int64(le.Uint64(b[80:88])),
		offIdxCount:  int(le.Uint32(b[88:92])),
		timeIdxCount: int(le.Uint32(b[92:96])),
		dataCRC:      le.Uint32(b[96:100]),
		offIdxCRC:    le.Uint32(b[100:104]),
		timeIdxCRC:   le.Uint32(b[104:108]),
		topicID:      string(b[FooterFixedSize:]),
	}, nil
}

func appendTrailer(dst []byte, t trailer) []byte {
	var b [TrailerSize]byte
	le.PutUint32(b[0:4], uint32(t.footerLen))
	le.PutUint16(b[4:6], uint16(t.version))
	// b[6:8] reserved, zero
	le.PutUint32(b[8:12], t.footerCRC)
	le.PutUint32(b[12:16], checksum(b[0:12]))
	copy(b[16:24], trailerMagic[:])
	return append(dst, b[:]...)
}

// decodeTrailer checks the trailer (len(b) == TrailerSize) at object
// position pos: magic, its own CRC, then the version. The order matters: a
// damaged version must read as corruption, not as a newer format.
func decodeTrailer(b []byte, pos int64) (trailer, error) {
	if [8]byte(b[16:24]) != trailerMagic {
		return trailer{}, corruptf(SectionTrailer, pos, "magic %q is not a segment's (truncated, or not a segment)", b[16:24])
	}
	if got, want := checksum(b[0:12]), le.Uint32(b[12:16]); got != want {
		return trailer{}, corruptf(SectionTrailer, pos, "crc stored %#08x, computed %#08x", want, got)
	}
	t := trailer{
		footerLen: int(le.Uint32(b[0:4])),
		version:   int(le.Uint16(b[4:6])),
		footerCRC: le.Uint32(b[8:12]),
	}
	if t.version < 1 || t.version > Version {
		// The trailer's CRC holds: the object is intact but newer than us.
		return trailer{}, fmt.Errorf("%w: %d, this build reads 1..%d", ErrUnsupportedVersion, t.version, Version)
	}
	if r := le.Uint16(b[6:8]); r != 0 {
		return trailer{}, corruptf(SectionTrailer, pos, "reserved field is %#04x, want 0", r)
	}
	if t.footerLen < FooterFixedSize || t.footerLen > MaxFooterBytes {
		return trailer{}, corruptf(SectionTrailer, pos, "footer length %d outside [%d, %d]", t.footerLen, FooterFixedSize, MaxFooterBytes)
	}
	return t, nil
}
