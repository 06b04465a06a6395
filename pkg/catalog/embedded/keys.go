package embedded

import (
	"encoding/binary"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// Key builders; see the package doc for the layout.

var (
	formatKey        = []byte("format")
	ledgerCounterKey = []byte("c/ledger")
	topicPrefix      = []byte("t/")
	deletedPrefix    = []byte("d/")
	ownerPrefix      = []byte("o/")
	bookiePrefix     = []byte("b/")
	ledgerPrefix     = []byte("l/")
	triggerPrefix    = []byte("tr/")
)

func cat(parts ...[]byte) []byte {
	var n int
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func u32(v int) []byte   { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func u64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func topicKey(name string) []byte               { return cat(topicPrefix, []byte(name)) }
func deletedKey(id catalog.TopicID) []byte      { return cat(deletedPrefix, []byte(id)) }
func ownerKey(id string) []byte                 { return cat(ownerPrefix, []byte(id)) }
func bookieKey(id string) []byte                { return cat(bookiePrefix, []byte(id)) }
func triggerKey(name string) []byte             { return cat(triggerPrefix, []byte(name)) }
func ledgerKey(id catalog.LedgerID) []byte      { return cat(ledgerPrefix, u64(int64(id))) }
func partitionPrefix(id catalog.TopicID) []byte { return cat([]byte("p/"), []byte(id), []byte("/")) }

func partitionKey(id catalog.TopicID, index int) []byte {
	return cat(partitionPrefix(id), u32(index))
}

func byPartitionPrefix(id catalog.TopicID, partition int) []byte {
	return cat([]byte("lp/"), []byte(id), []byte("/"), u32(partition))
}

func byPartitionKey(m catalog.LedgerMetadata) []byte {
	return cat(byPartitionPrefix(m.TopicID, m.Partition), u64(int64(m.ID)))
}

func byStatePrefix(s catalog.LedgerState) []byte { return cat([]byte("ls/"), []byte{byte(s)}) }

func byStateKey(s catalog.LedgerState, id catalog.LedgerID) []byte {
	return cat(byStatePrefix(s), u64(int64(id)))
}

// ledgerIDSuffix reads the ledger id at the end of an index key.
func ledgerIDSuffix(key []byte) catalog.LedgerID {
	return catalog.LedgerID(binary.BigEndian.Uint64(key[len(key)-8:]))
}

// prefixEnd is the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}
