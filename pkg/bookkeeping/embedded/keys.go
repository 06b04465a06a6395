package embedded

import (
	"encoding/binary"
	"fmt"
)

// Key prefixes; see the package doc for the layout.
const (
	prefixFormat    = 'f'
	prefixMember    = 'm'
	prefixPartition = 'p'
	prefixCounter   = 'n'
	prefixTxn       = 't'
	prefixGroup     = 'g'
)

var (
	formatKey  = []byte{prefixFormat}
	counterKey = []byte{prefixCounter}
)

// memberPrefix is the prefix of every member key of group.
func memberPrefix(group string) []byte {
	k := make([]byte, 0, 2+len(group))
	k = append(k, prefixMember)
	k = append(k, group...)
	return append(k, 0)
}

func memberKey(group, member string) []byte { return append(memberPrefix(group), member...) }

// memberFromKey returns the member id of a key under memberPrefix(group).
func memberFromKey(group string, k []byte) string { return string(k[len(group)+2:]) }

// groupPrefix is the prefix of every partition key of group.
func groupPrefix(group string) []byte {
	k := make([]byte, 0, 2+len(group))
	k = append(k, prefixPartition)
	k = append(k, group...)
	return append(k, 0)
}

// topicPrefix is the prefix of every partition key of (group, topic).
func topicPrefix(group, topic string) []byte {
	k := groupPrefix(group)
	k = append(k, topic...)
	return append(k, 0)
}

func partitionKey(group, topic string, partition int32) []byte {
	return binary.BigEndian.AppendUint32(topicPrefix(group, topic), uint32(partition))
}

// splitPartitionKey returns the topic and partition of a key under
// groupPrefix(group).
func splitPartitionKey(group string, k []byte) (topic string, partition int32, err error) {
	rest := k[len(group)+2:]
	if len(rest) < 5 || rest[len(rest)-5] != 0 {
		return "", 0, fmt.Errorf("%w: malformed partition key %q", ErrCorrupt, k)
	}
	return string(rest[:len(rest)-5]), int32(binary.BigEndian.Uint32(rest[len(rest)-4:])), nil
}

// groupKey is the key of group's group record.
func groupKey(group string) []byte { return append([]byte{prefixGroup}, group...) }

func txnKey(id string) []byte { return append([]byte{prefixTxn}, id...) }

// prefixEnd returns the smallest key greater than every key with prefix p
// (an exclusive upper bound for iteration).
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
