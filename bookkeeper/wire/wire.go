// Package wire holds what both ends of the bookie protocol agree on beyond
// the generated messages (pkg/gen/sluice/bookie/v1): the entry checksum,
// limits both ends must know (MaxMissingLedgersIDs), and the binary trace
// context an add carries (trace.go: Add.trace_context, the client's add
// span, so the bookie's journal-commit span is its child). The ledger client (bookkeeper/client) computes the checksum, the bookie
// verifies it and its storage (bookkeeper/storage) keeps it in every entry
// log frame and returns it with every read — one checksum end to end, so
// neither end imports the other's internals to agree on it.
//
// Layout of the checksummed bytes (BookKeeper's entry header order):
//
//	0        8        16       24
//	+--------+--------+--------+=========+
//	| ledger | entry  | lac    | payload |
//	+--------+--------+--------+=========+
//
//	ledger, entry, lac  int64, big-endian (lac is -1 for none)
//	checksum            CRC32C (Castagnoli) of the 24 header bytes, then the payload
package wire

import (
	"encoding/binary"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaxMissingLedgersIDs bounds the ledger ids of one
// BookieService.MissingLedgers call: the bookie refuses more, the client
// splits a longer list.
const MaxMissingLedgersIDs = 10_000

// EntryChecksum is an entry's CRC32C over the layout drawn in the package
// doc. It is Add.crc32c in an AddEntries message and the checksum a read
// answers with.
func EntryChecksum(ledger, entry, lac int64, payload []byte) uint32 {
	var hdr [24]byte
	binary.BigEndian.PutUint64(hdr[0:8], uint64(ledger))
	binary.BigEndian.PutUint64(hdr[8:16], uint64(entry))
	binary.BigEndian.PutUint64(hdr[16:24], uint64(lac))
	return crc32.Update(crc32.Checksum(hdr[:], castagnoli), castagnoli, payload)
}
