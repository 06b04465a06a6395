package schema

import (
	"encoding/binary"
	"fmt"
)

// Confluent's wire format, the framing every Confluent serializer writes
// in a record's value (or key): a magic byte 0, the schema id as 4 bytes
// big-endian, then the payload. (Protobuf payloads also start with the
// message's index path; that belongs to the Protobuf format.)

// WireHeaderBytes is the framing's length before the payload.
const WireHeaderBytes = 5

// wireMagic is the framing's first byte.
const wireMagic = 0

// ParseWire splits a framed value into its schema id and payload. Errors
// wrap ErrInvalidPayload and say what is wrong with the framing.
func ParseWire(b []byte) (id int64, payload []byte, err error) {
	switch {
	case len(b) < WireHeaderBytes:
		return 0, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte schema header (magic byte 0, 4-byte schema id)", ErrInvalidPayload, len(b), WireHeaderBytes)
	case b[0] != wireMagic:
		return 0, nil, fmt.Errorf("%w: magic byte %d, want 0 (not written by a schema registry serializer)", ErrInvalidPayload, b[0])
	}
	id = int64(binary.BigEndian.Uint32(b[1:WireHeaderBytes]))
	if id < 1 || id > 1<<31-1 {
		return 0, nil, fmt.Errorf("%w: schema id %d is not one the registry gives", ErrInvalidPayload, id)
	}
	return id, b[WireHeaderBytes:], nil
}

// AppendWire appends the framing of payload under schema id to dst.
func AppendWire(dst []byte, id int64, payload []byte) []byte {
	dst = append(dst, wireMagic)
	dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	return append(dst, payload...)
}
