package wire

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// The checksum is CRC32C of the big-endian ids and LAC followed by the
// payload: pinned by a known value so neither end can drift.
func TestEntryChecksum(t *testing.T) {
	b := make([]byte, 24, 24+5)
	binary.BigEndian.PutUint64(b[0:], 7)
	binary.BigEndian.PutUint64(b[8:], 42)
	binary.BigEndian.PutUint64(b[16:], ^uint64(0)) // lac -1
	b = append(b, "hello"...)
	want := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	if got := EntryChecksum(7, 42, -1, []byte("hello")); got != want {
		t.Fatalf("EntryChecksum = %#x, want %#x", got, want)
	}
	if EntryChecksum(7, 42, -1, []byte("hello")) == EntryChecksum(7, 42, 0, []byte("hello")) {
		t.Fatal("the LAC is not covered")
	}
}
