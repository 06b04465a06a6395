package loadgen

import (
	"encoding/binary"
	"errors"
)

// HeaderSize is the size of the header the load generator writes at the
// start of every payload; the rest is random bytes (so compression gains
// nothing). Layout, big-endian:
//
//	0      4          8                  16
//	+------+----------+------------------+---------------------+
//	| SLB1 | producer | intended send ns | random fill ...     |
//	+------+----------+------------------+---------------------+
//
// "intended send ns" is the time the message was scheduled to be sent, in
// nanoseconds since the run's monotonic base: end-to-end latency is receive
// time minus this, so a message that waited in the load generator because
// the system was slow counts that wait (no coordinated omission). It needs
// producers and consumers in one process, which they are.
const HeaderSize = 16

var payloadMagic = [4]byte{'S', 'L', 'B', '1'}

var errForeignPayload = errors.New("payload was not written by this load generator")

// putHeader writes the header into p (len(p) >= HeaderSize).
func putHeader(p []byte, producer uint32, intended int64) {
	copy(p[0:4], payloadMagic[:])
	binary.BigEndian.PutUint32(p[4:8], producer)
	binary.BigEndian.PutUint64(p[8:16], uint64(intended))
}

// readHeader returns the producer and intended send time of payload p.
func readHeader(p []byte) (producer uint32, intended int64, err error) {
	if len(p) < HeaderSize || [4]byte(p[0:4]) != payloadMagic {
		return 0, 0, errForeignPayload
	}
	return binary.BigEndian.Uint32(p[4:8]), int64(binary.BigEndian.Uint64(p[8:16])), nil
}
