package client

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// masterKeyDomain separates these hashes from any other use of SHA-256 and
// names the derivation's version: a new derivation gets a new domain.
const masterKeyDomain = "sluice/bookkeeper/ledger-master-key/v1\x00"

// MasterKey is the ledger's master key, which bookies check on every add,
// WriteLac, Fence and recovery read: the first 20 bytes (BookKeeper's size)
// of SHA-256(domain ‖ ledger id ‖ writer epoch ‖ writer owner), integers
// big-endian. It depends only on fields of the catalog record that never
// change (catalog.NextLedger keeps them immutable), so a recovering client
// derives the same key from the metadata alone.
//
// It is an identity check, not a secret: it stops a client that confused
// ledger ids (or a writer of another incarnation) from writing into a
// ledger. Keeping the old writer out is fencing's job, as in BookKeeper,
// where the recovering client also presents the ledger's own password.
func MasterKey(m catalog.LedgerMetadata) []byte {
	h := sha256.New()
	h.Write([]byte(masterKeyDomain))
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(m.ID))
	binary.BigEndian.PutUint64(b[8:16], uint64(m.WriterEpoch))
	h.Write(b[:])
	h.Write([]byte(m.WriterOwner))
	return h.Sum(nil)[:20]
}
