package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

// FuzzDecodeFrame: garbage never panics and never decodes unless its
// checksum matches; every encoded frame decodes to what was encoded; any
// one flipped bit is refused.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(int64(1), int64(0), int64(-1), []byte("hello"), []byte{}, uint16(0))
	f.Add(int64(1<<40), int64(77), int64(76), bytes.Repeat([]byte{0xff}, 300), []byte{1, 2, 3}, uint16(900))
	f.Add(int64(0), int64(0), int64(-1), []byte{}, appendFrame(nil, 3, 4, 2, wire.EntryChecksum(3, 4, 2, []byte("x")), []byte("x")), uint16(5))
	f.Fuzz(func(t *testing.T, ledger, entry, lac int64, payload, garbage []byte, flip uint16) {
		if fr, err := decodeFrame(garbage); err == nil {
			if crc32.Checksum(garbage[8:], castagnoli) != fr.crc || binary.LittleEndian.Uint32(garbage[4:8]) != fr.crc {
				t.Fatalf("decoded a frame whose checksum does not match")
			}
			if !bytes.Equal(appendFrame(nil, fr.ledger, fr.entry, fr.lac, fr.crc, fr.payload), garbage) {
				t.Fatal("decoded frame does not re-encode to its bytes")
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode error %v is not ErrCorrupt", err)
		}
		if ledger < 0 || entry < 0 || lac < -1 {
			return
		}
		crc := wire.EntryChecksum(ledger, entry, lac, payload)
		b := appendFrame(nil, ledger, entry, lac, crc, payload)
		fr, err := decodeFrame(b)
		if err != nil || fr.ledger != ledger || fr.entry != entry || fr.lac != lac || fr.crc != crc || !bytes.Equal(fr.payload, payload) {
			t.Fatalf("round trip: %+v, %v", fr, err)
		}
		bit := int(flip) % (8 * len(b))
		b[bit/8] ^= 1 << (bit % 8)
		if _, err := decodeFrame(b); err == nil {
			t.Fatalf("frame with bit %d flipped decoded", bit)
		}
	})
}

// FuzzDecodeLocation: index values decode only with a checksum matching
// their key; one flipped bit in key or value is refused.
func FuzzDecodeLocation(f *testing.F) {
	f.Add(int64(1), int64(2), uint64(3), int64(40), uint32(10), []byte{}, uint16(0))
	f.Add(int64(9), int64(1<<50), uint64(1<<60), int64(1<<33), uint32(MaxEntrySizeLimit), make([]byte, 24), uint16(200))
	f.Fuzz(func(t *testing.T, ledger, entry int64, file uint64, offset int64, length uint32, garbage []byte, flip uint16) {
		key := entryKey(ledger, entry)
		if loc, err := decodeLocation(key, garbage); err == nil {
			if !bytes.Equal(encodeLocation(key, loc), garbage) {
				t.Fatal("decoded a value that does not re-encode to its bytes (checksum not checked?)")
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode error %v is not ErrCorrupt", err)
		}
		loc := location{file: file, offset: offset, length: length}
		v := encodeLocation(key, loc)
		got, err := decodeLocation(key, v)
		valid := file > 0 && offset >= LogHeaderSize && length <= MaxEntrySizeLimit
		if valid != (err == nil) || (valid && got != loc) {
			t.Fatalf("round trip of %+v: %+v, %v", loc, got, err)
		}
		// The checksum covers the key: the value under another key fails.
		both := append(bytes.Clone(key), v...)
		bit := int(flip) % (8 * len(both))
		both[bit/8] ^= 1 << (bit % 8)
		if _, err := decodeLocation(both[:len(key)], both[len(key):]); err == nil {
			t.Fatalf("index value with bit %d of key+value flipped decoded", bit)
		}
	})
}

// FuzzDecodeMeta: ledger metadata rows, same properties.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(int64(1), uint8(flagFenced), int64(5), []byte("key"), []byte{}, uint16(0))
	f.Add(int64(7), uint8(flagDeleted), int64(-1), []byte{}, encodeMeta(metaKey(7), ledgerMeta{lac: 3, masterKey: []byte("k")}), uint16(77))
	f.Fuzz(func(t *testing.T, ledger int64, flags uint8, lac int64, mkey, garbage []byte, flip uint16) {
		key := metaKey(ledger)
		if m, err := decodeMeta(key, garbage); err == nil {
			if !bytes.Equal(encodeMeta(key, m), garbage) {
				t.Fatal("decoded a row that does not re-encode to its bytes")
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode error %v is not ErrCorrupt", err)
		}
		if len(mkey) > MaxMasterKeySize || lac < -1 || flags&^knownFlags != 0 {
			return
		}
		m := ledgerMeta{flags: flags, lac: lac, masterKey: mkey}
		if len(mkey) == 0 {
			m.masterKey = nil
		}
		v := encodeMeta(key, m)
		got, err := decodeMeta(key, v)
		if err != nil || got.flags != m.flags || got.lac != m.lac || !bytes.Equal(got.masterKey, m.masterKey) {
			t.Fatalf("round trip of %+v: %+v, %v", m, got, err)
		}
		both := append(bytes.Clone(key), v...)
		bit := int(flip) % (8 * len(both))
		both[bit/8] ^= 1 << (bit % 8)
		if _, err := decodeMeta(both[:len(key)], both[len(key):]); err == nil {
			t.Fatalf("metadata with bit %d of key+value flipped decoded", bit)
		}
	})
}

// FuzzDecodeSmallRecords covers the remaining fixed-size decoders: entry
// log headers, counters and the format record.
func FuzzDecodeSmallRecords(f *testing.F) {
	f.Add(logHeader{fileID: 3}.encode())
	f.Add(encodeU64(nextFileKey, 9))
	f.Add(encodeFormat(formatRecord{version: indexFormatVersion}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeLogHeader(b); err == nil && !bytes.Equal(h.encode(), b) {
			t.Fatal("decoded a log header that does not re-encode")
		}
		if n, err := decodeU64(nextFileKey, b); err == nil && !bytes.Equal(encodeU64(nextFileKey, n), b) {
			t.Fatal("decoded a counter that does not re-encode")
		}
		if r, err := decodeFormat(b); err == nil && !bytes.Equal(encodeFormat(r), b) {
			t.Fatal("decoded a format record that does not re-encode")
		}
	})
}

// FuzzDecodeCookie: a cookie decodes only if it is exactly what Encode
// writes for the decoded fields.
func FuzzDecodeCookie(f *testing.F) {
	f.Add(Cookie{BookieID: "b", InstanceID: "i", StorageID: "00", Role: RoleLedgers, LedgerDir: "/l", IndexDir: "/x"}.Encode())
	f.Add([]byte("sluice-bookie-cookie\nversion=1\ncrc32c=00000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCookie(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v is not ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(c.Encode(), b) {
			t.Fatalf("decoded cookie %+v does not re-encode to its bytes", c)
		}
	})
}
