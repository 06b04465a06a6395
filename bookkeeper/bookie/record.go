package bookie

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicemq/sluice/bookkeeper/storage"
)

// Journal record format, version 1 (the journal frames and checksums the
// record as a whole; this is its payload). Integers little-endian except the
// entry checksum, which is the writer's CRC32C kept as sent.
//
//	0     1      2       3     4          6          8         16        24        32     36
//	+-----+------+-------+-----+----------+----------+---------+---------+---------+------+=====+=========+
//	| ver | type | flags | 0   | keylen   | 0        | ledger  | entry   | lac     | crc  | key | payload |
//	+-----+------+-------+-----+----------+----------+---------+---------+---------+------+=====+=========+
//
//	ver     u8 = 1
//	type    u8: 1 = add entry (the only type so far)
//	flags   u8: bit 0 = recovery add; other bits must be zero
//	0       u8 reserved, zero
//	keylen  u16: master key bytes, 1..storage.MaxMasterKeySize
//	0       u16 reserved, zero
//	ledger  i64 ≥ 0; entry i64 ≥ 0; lac i64 ≥ -1
//	crc     u32: wire.EntryChecksum(ledger, entry, lac, payload), verified
//	        again by storage.AddEntry when the record is replayed
//
// Fences and deletions are not journaled: the storage persists them with a
// synced index write before they are answered (see bookkeeper/storage).
// Explicit LACs are not journaled either: a LAC lower after a crash is safe
// (readers see less, never more) and the writer's next add or WriteLac
// raises it again.
const (
	recordVersion    = 1
	recordTypeAdd    = 1
	recordHeaderSize = 36
	flagRecovery     = 1 << 0
)

// addRecord is a decoded journal record.
type addRecord struct {
	ledger, entry, lac int64
	checksum           uint32
	recovery           bool
	masterKey, payload []byte
}

// appendRecord appends r's encoding to dst.
func appendRecord(dst []byte, r addRecord) []byte {
	return append(appendRecordHead(dst, r), r.payload...)
}

// appendRecordHead appends what precedes the payload in r's record: the
// header and the master key (the journal takes the payload as a part of
// its own, uncopied until it lands in the group buffer).
func appendRecordHead(dst []byte, r addRecord) []byte {
	var h [recordHeaderSize]byte
	h[0] = recordVersion
	h[1] = recordTypeAdd
	if r.recovery {
		h[2] = flagRecovery
	}
	binary.LittleEndian.PutUint16(h[4:], uint16(len(r.masterKey)))
	binary.LittleEndian.PutUint64(h[8:], uint64(r.ledger))
	binary.LittleEndian.PutUint64(h[16:], uint64(r.entry))
	binary.LittleEndian.PutUint64(h[24:], uint64(r.lac))
	binary.LittleEndian.PutUint32(h[32:], r.checksum)
	dst = append(dst, h[:]...)
	return append(dst, r.masterKey...)
}

// decodeRecord parses a journal record. The slices alias b. Anything but a
// well-formed version 1 record is an error wrapping storage.ErrCorrupt: the
// journal's own checksum passed, so a record that does not decode was written
// wrong or by an unknown version, and replay must stop.
func decodeRecord(b []byte) (addRecord, error) {
	if len(b) < recordHeaderSize {
		return addRecord{}, fmt.Errorf("%w: journal record of %d bytes, shorter than its %d-byte header", storage.ErrCorrupt, len(b), recordHeaderSize)
	}
	if b[0] != recordVersion {
		return addRecord{}, fmt.Errorf("%w: journal record version %d; this build reads version %d", storage.ErrCorrupt, b[0], recordVersion)
	}
	if b[1] != recordTypeAdd {
		return addRecord{}, fmt.Errorf("%w: journal record type %d unknown", storage.ErrCorrupt, b[1])
	}
	if b[2]&^flagRecovery != 0 || b[3] != 0 || b[6] != 0 || b[7] != 0 {
		return addRecord{}, fmt.Errorf("%w: journal record has reserved bits set", storage.ErrCorrupt)
	}
	keyLen := int(binary.LittleEndian.Uint16(b[4:]))
	r := addRecord{
		ledger:   int64(binary.LittleEndian.Uint64(b[8:])),
		entry:    int64(binary.LittleEndian.Uint64(b[16:])),
		lac:      int64(binary.LittleEndian.Uint64(b[24:])),
		checksum: binary.LittleEndian.Uint32(b[32:]),
		recovery: b[2]&flagRecovery != 0,
	}
	switch {
	case keyLen == 0 || keyLen > storage.MaxMasterKeySize:
		return addRecord{}, fmt.Errorf("%w: journal record master key of %d bytes", storage.ErrCorrupt, keyLen)
	case recordHeaderSize+keyLen > len(b):
		return addRecord{}, fmt.Errorf("%w: journal record master key runs past its end", storage.ErrCorrupt)
	case r.ledger < 0 || r.entry < 0 || r.lac < -1:
		return addRecord{}, fmt.Errorf("%w: journal record ids ledger %d entry %d lac %d", storage.ErrCorrupt, r.ledger, r.entry, r.lac)
	}
	r.masterKey = b[recordHeaderSize : recordHeaderSize+keyLen]
	r.payload = b[recordHeaderSize+keyLen:]
	return r, nil
}
