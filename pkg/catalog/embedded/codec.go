package embedded

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrCorrupt reports a stored value that fails its checksum, version or
// decoding. It is never papered over: the operation fails.
var ErrCorrupt = errors.New("embedded catalog: corrupt record")

// valueVersion is the only value encoding so far (see the package doc).
const valueVersion = 1

const valueHeaderLen = 5

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeValue frames rec's JSON with the version byte and checksum.
func encodeValue(rec any) []byte {
	payload, err := json.Marshal(rec)
	if err != nil {
		// Records are plain structs; failing to marshal one is a bug.
		panic(fmt.Sprintf("embedded catalog: marshal %T: %v", rec, err))
	}
	return frame(payload)
}

// frame prepends the version byte and the payload's checksum.
func frame(payload []byte) []byte {
	out := make([]byte, valueHeaderLen, valueHeaderLen+len(payload))
	out[0] = valueVersion
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(payload, castagnoli))
	return append(out, payload...)
}

// decodeValue checks the frame of a value read at key and unmarshals it
// strictly into rec.
func decodeValue(key, value []byte, rec any) error {
	if len(value) < valueHeaderLen {
		return fmt.Errorf("%w: key %q: %d-byte value is shorter than its header", ErrCorrupt, key, len(value))
	}
	if value[0] != valueVersion {
		return fmt.Errorf("%w: key %q: unknown value version %d", ErrCorrupt, key, value[0])
	}
	payload := value[valueHeaderLen:]
	if want, got := binary.BigEndian.Uint32(value[1:5]), crc32.Checksum(payload, castagnoli); want != got {
		return fmt.Errorf("%w: key %q: checksum %08x, stored %08x", ErrCorrupt, key, got, want)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rec); err != nil {
		return fmt.Errorf("%w: key %q: %v", ErrCorrupt, key, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: key %q: trailing data after the record", ErrCorrupt, key)
	}
	return nil
}

// corrupt wraps a validation failure of a decoded record.
func corrupt(key []byte, err error) error {
	return fmt.Errorf("%w: key %q: %v", ErrCorrupt, key, err)
}
