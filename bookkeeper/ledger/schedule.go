package ledger

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// idxSet is a set of ensemble positions (bit i = position i). E is at most
// catalog.MaxEnsembleSize (16), so 32 bits hold any ensemble.
type idxSet uint32

func (s idxSet) has(i int) bool       { return s&(1<<uint(i)) != 0 }
func (s idxSet) with(i int) idxSet    { return s | 1<<uint(i) }
func (s idxSet) without(i int) idxSet { return s &^ (1 << uint(i)) }
func (s idxSet) count() int           { return bits.OnesCount32(uint32(s)) }

func (s idxSet) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < 32; i++ {
		if s.has(i) {
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, i)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// Schedule is BookKeeper's RoundRobinDistributionSchedule: how entries map
// to the positions of an ensemble, and the quorum rules built on that.
//
//   - Write set: entry e goes to the Qw positions (e+i) mod E, i = 0..Qw-1
//     (striping when E > Qw; every position when E == Qw).
//   - Ack quorum: an entry is acknowledged once Qa positions of its write
//     set acked it.
//   - Ack quorum coverage: a set of positions "covers" a cohort of size n
//     when it holds at least n-Qa+1 of them, so every Qa-subset of the
//     cohort meets it. It is what lets a decision be made without hearing
//     from everyone: if every write set is covered by fenced bookies, no
//     entry can newly reach Qa (each Qa of a write set holds a fenced
//     bookie); if an entry's write set is covered by "no such entry"
//     answers from fenced bookies, no Qa of it holds the entry, so it was
//     never acknowledged and never will be.
type Schedule struct {
	e, qw, qa int
}

// NewSchedule returns the schedule for r, which must satisfy
// catalog.MaxEnsembleSize >= E >= Qw >= Qa >= 1.
func NewSchedule(r catalog.Replication) (Schedule, error) {
	if err := (Config{Replication: r}).Validate(); err != nil {
		return Schedule{}, err
	}
	return Schedule{e: r.Ensemble, qw: r.WriteQuorum, qa: r.AckQuorum}, nil
}

// WriteSet returns the ensemble positions entry is written to, in order.
// entry must not be negative.
func (s Schedule) WriteSet(entry int64) []int {
	out := make([]int, s.qw)
	first := int(entry % int64(s.e))
	for i := range out {
		out[i] = (first + i) % s.e
	}
	return out
}

// ReadRun is how many consecutive entries a reader asks of the same
// replica first when every bookie of a segment holds every entry (Qw = E):
// one range read instead of one read per entry, and still spread over
// the ensemble run by run.
const ReadRun = 64

// ReadOrder is the order in which a reader asks the replicas of entry
// (positions in its segment). With Qw < E it is the write set; with
// Qw = E it rotates once per ReadRun entries instead of every entry, so
// that consecutive entries are asked of the same bookie.
func (s Schedule) ReadOrder(entry int64) []int {
	if s.qw < s.e {
		return s.WriteSet(entry)
	}
	out := make([]int, s.e)
	first := int((entry / ReadRun) % int64(s.e))
	for i := range out {
		out[i] = (first + i) % s.e
	}
	return out
}

// writeSet is WriteSet as a set.
func (s Schedule) writeSet(entry int64) idxSet {
	return s.stripe(int(entry % int64(s.e)))
}

// stripe is the write set that starts at position first.
func (s Schedule) stripe(first int) idxSet {
	var out idxSet
	for i := 0; i < s.qw; i++ {
		out = out.with((first + i) % s.e)
	}
	return out
}

// inWriteSet reports whether position i is in entry's write set.
func (s Schedule) inWriteSet(entry int64, i int) bool {
	return i >= 0 && i < s.e && s.writeSet(entry).has(i)
}

// ackQuorum reports whether the positions in acked reach Qa of entry's write
// set.
func (s Schedule) ackQuorum(acked idxSet, entry int64) bool {
	return (acked & s.writeSet(entry)).count() >= s.qa
}

// coverage is the number of members of a cohort of Qw (a write set) that
// must answer for ack quorum coverage: Qw-Qa+1.
func (s Schedule) coverage() int { return s.qw - s.qa + 1 }

// ensembleCovered reports whether responded covers every possible write
// set of the ensemble: no Qa of any write set lies outside responded.
// Recovery's fencing phase ends when the fenced bookies cover the ensemble.
func (s Schedule) ensembleCovered(responded idxSet) bool {
	for first := 0; first < s.e; first++ {
		if (responded & s.stripe(first)).count() < s.coverage() {
			return false
		}
	}
	return true
}

// ensembleCoverageLost reports whether failed makes ensemble coverage
// impossible: some write set has Qa failed members, so fewer than Qw-Qa+1
// of it can ever answer.
func (s Schedule) ensembleCoverageLost(failed idxSet) bool {
	for first := 0; first < s.e; first++ {
		if (failed & s.stripe(first)).count() >= s.qa {
			return true
		}
	}
	return false
}

// entryAbsent reports whether the "no such entry" answers in neg cover
// entry's write set: no Qa of the write set can hold the entry.
func (s Schedule) entryAbsent(neg idxSet, entry int64) bool {
	return (neg & s.writeSet(entry)).count() >= s.coverage()
}

// quorumLost reports whether failed leaves fewer than Qa members of entry's
// write set able to ack it.
func (s Schedule) quorumLost(failed idxSet, entry int64) bool {
	return s.qw-(failed&s.writeSet(entry)).count() < s.qa
}
