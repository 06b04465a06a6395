package record

import "encoding/binary"

// Kafka's varints are zig-zag encoded base-128 varints, the encoding of
// encoding/binary's PutVarint. Decoding is stricter than binary.Varint: a
// varint (int32) may take at most 5 bytes and a varlong at most 10, as
// Kafka's ByteUtils enforces.

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// varintLen is the encoded size of v.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// readUvarint decodes an unsigned varint of at most maxBytes bytes. n is 0
// when b ends first, -1 when the varint is too long.
func readUvarint(b []byte, maxBytes int) (u uint64, n int) {
	var shift uint
	for i := 0; i < maxBytes; i++ {
		if i == len(b) {
			return 0, 0
		}
		c := b[i]
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return u, i + 1
		}
		shift += 7
	}
	return 0, -1
}

// readVarint decodes a zig-zag varint (int32). ok is false if b ends first or
// the varint is longer than 5 bytes or out of int32 range.
func readVarint(b []byte) (v int32, n int, ok bool) {
	u, n := readUvarint(b, 5)
	if n <= 0 || u > 0xffffffff {
		return 0, n, false
	}
	x := int64(u>>1) ^ -int64(u&1)
	return int32(x), n, true
}

// readVarlong decodes a zig-zag varlong (int64) of at most 10 bytes.
func readVarlong(b []byte) (v int64, n int, ok bool) {
	u, n := readUvarint(b, 10)
	if n <= 0 {
		return 0, n, false
	}
	if n == 10 && b[9] > 1 { // the 10th byte holds only the top bit
		return 0, n, false
	}
	return int64(u>>1) ^ -int64(u&1), n, true
}
