package compactor

import (
	"time"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// The retention decisions are pure functions of the chain, so they are
// tested against a naive model without a catalog (plan_test.go).

// sizeTrimCount is how many ledgers at the front of a chain size retention
// drops: Kafka's rule (drop the oldest while what remains is still at
// least retention.bytes), over the ledgers whose size is known (sizes[i] <
// 0: unknown, i.e. not yet in object storage). An unknown size counts as 0
// in the total and stops the trimming: the compactor may keep too much for
// a moment (until the ledger is offloaded), never drop too much. The tail
// (last) ledger is never counted as trimmable.
func sizeTrimCount(sizes []int64, retentionBytes int64) int {
	if retentionBytes == catalog.Unlimited || len(sizes) < 2 {
		return 0
	}
	var total int64
	for _, s := range sizes {
		total += max(s, 0)
	}
	n := 0
	for n < len(sizes)-1 && sizes[n] >= 0 && total-sizes[n] >= retentionBytes {
		total -= sizes[n]
		n++
	}
	return n
}

// timeExpired reports whether time retention drops ledger m: it is sealed
// and was sealed more than retention.ms ago. Every record of a ledger was
// appended before it was sealed, so none of them is younger than the limit
// (Kafka compares record timestamps, which producers set; the seal time is
// the broker's own clock, so a producer's clock cannot make data vanish
// early).
func timeExpired(m catalog.LedgerMetadata, retentionMs int64, now time.Time) bool {
	if retentionMs == catalog.Unlimited || !m.State.Sealed() || m.ClosedAt.IsZero() {
		return false
	}
	return now.Sub(m.ClosedAt) > time.Duration(retentionMs)*time.Millisecond
}

// trimmable cuts a planned front of n ledgers to the ones that may go: all
// sealed (the DELETED transition needs it) and never the tail.
func trimmable(front []catalog.LedgerMetadata, chainLen int) int {
	n := min(len(front), chainLen-1)
	for i := range n {
		if !front[i].State.Sealed() || front[i].State == catalog.LedgerDeleted {
			return i
		}
	}
	return max(n, 0)
}
