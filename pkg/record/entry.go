package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A ledger entry is one or more record batches back to back, optionally
// preceded by an entry header. The partition writer writes the header only
// while a transaction is open on the partition (issue 24, docs/DESIGN.md
// "Transactions"): it carries the last stable offset (LSO) as of the end of
// the entry — the first offset of the oldest transaction still open after
// the entry's batches — so that a reader learns the LSO from the last entry
// it can read, without asking the writer, and a writer taking the partition
// over knows how far back the open transactions start. An entry without a
// header has no transaction open at its end: its LSO is its last offset + 1.
//
// Header layout (big-endian), EntryHeaderSize bytes:
//
//	offset size  field
//	     0    1  tag       EntryHeaderTag (0xE7): a batch starts with its
//	                       base offset, never negative, so its first byte is
//	                       below 0x80 and cannot be mistaken for the tag
//	     1    1  version   EntryHeaderVersion (1); a reader refuses others
//	     2    8  lso       the last stable offset as of the entry's end
//	    10    4  crc       CRC-32C (Castagnoli) of bytes [0, 10)
//
// A new layout takes a new version; a reader that meets a first byte at or
// above 0x80 other than the tag, or a version it does not know, refuses the
// entry (ErrInvalid), and a checksum mismatch is ErrCorrupt.

// Entry header constants; see the layout above.
const (
	EntryHeaderTag     = 0xE7
	EntryHeaderVersion = 1
	EntryHeaderSize    = 14
)

// PutEntryHeader writes an entry header with last stable offset lso into
// dst[:EntryHeaderSize].
func PutEntryHeader(dst []byte, lso int64) {
	_ = dst[EntryHeaderSize-1]
	dst[0], dst[1] = EntryHeaderTag, EntryHeaderVersion
	binary.BigEndian.PutUint64(dst[2:], uint64(lso))
	binary.BigEndian.PutUint32(dst[10:], crc32.Checksum(dst[:10], castagnoli))
}

// EntryHeader is what an entry's header says.
type EntryHeader struct {
	// Present: the entry has a header (a transaction is open at its end).
	Present bool
	// LSO is the last stable offset as of the entry's end (when Present).
	LSO int64
}

// EntryBatches splits a ledger entry into its header, if any, and its
// record batches (the rest of the entry, not checked here).
func EntryBatches(entry []byte) (EntryHeader, []byte, error) {
	if len(entry) == 0 || entry[0] < 0x80 {
		return EntryHeader{}, entry, nil
	}
	if entry[0] != EntryHeaderTag {
		return EntryHeader{}, nil, invalid("entryHeader.tag", "first byte %#02x is neither a batch's nor the entry header tag %#02x", entry[0], EntryHeaderTag)
	}
	if len(entry) < EntryHeaderSize {
		return EntryHeader{}, nil, invalid("entryHeader", "entry of %d bytes is shorter than its %d-byte header", len(entry), EntryHeaderSize)
	}
	if v := entry[1]; v != EntryHeaderVersion {
		return EntryHeader{}, nil, invalid("entryHeader.version", "%d, only version %d is known", v, EntryHeaderVersion)
	}
	if want, got := binary.BigEndian.Uint32(entry[10:]), crc32.Checksum(entry[:10], castagnoli); want != got {
		return EntryHeader{}, nil, &FormatError{Field: "entryHeader.crc", Reason: fmt.Sprintf("stored %#08x, computed %#08x", want, got), Err: ErrCorrupt}
	}
	lso := int64(binary.BigEndian.Uint64(entry[2:]))
	if lso < 0 {
		return EntryHeader{}, nil, invalid("entryHeader.lso", "%d is negative", lso)
	}
	return EntryHeader{Present: true, LSO: lso}, entry[EntryHeaderSize:], nil
}

// EntryStableOffset returns an entry's last offset and its last stable
// offset: the header's, or last+1 without one. A header whose LSO is
// beyond last+1 is ErrInvalid.
func EntryStableOffset(entry []byte) (last, lso int64, err error) {
	h, batches, err := EntryBatches(entry)
	if err != nil {
		return 0, 0, err
	}
	last, err = batchesLastOffset(batches)
	if err != nil {
		return 0, 0, err
	}
	if !h.Present {
		return last, last + 1, nil
	}
	if h.LSO > last+1 {
		return 0, 0, invalid("entryHeader.lso", "%d is beyond the entry's end %d", h.LSO, last+1)
	}
	return last, h.LSO, nil
}
