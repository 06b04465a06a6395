package ledger

import (
	"math/rand/v2"
	"slices"
	"testing"
	"testing/quick"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// The naive model states each rule the way BookKeeper's documentation and
// the TLA+ spec do — by enumerating write sets and quorums — and the
// schedule must agree with it for every ensemble shape and every set of
// positions.

func naiveWriteSet(e, qw int, entry int64) []int {
	var out []int
	for i := 0; i < qw; i++ {
		out = append(out, int((entry+int64(i))%int64(e)))
	}
	return out
}

// subsets calls f with every k-subset of members.
func subsets(members []int, k int, f func([]int) bool) bool {
	var rec func(start int, cur []int) bool
	rec = func(start int, cur []int) bool {
		if len(cur) == k {
			return f(cur)
		}
		for i := start; i < len(members); i++ {
			if !rec(i+1, append(cur, members[i])) {
				return false
			}
		}
		return true
	}
	return rec(0, nil)
}

func members(s idxSet, within []int) []int {
	var out []int
	for _, i := range within {
		if s.has(i) {
			out = append(out, i)
		}
	}
	return out
}

// naiveAcked: some Qa-subset of the write set acked.
func naiveAcked(e, qw, qa int, acked idxSet, entry int64) bool {
	return len(members(acked, naiveWriteSet(e, qw, entry))) >= qa
}

// naiveNoQuorumOutside: no Qa-subset of the write set lies wholly outside s
// (every ack quorum meets s).
func naiveNoQuorumOutside(ws []int, qa int, s idxSet) bool {
	return subsets(ws, qa, func(q []int) bool {
		for _, i := range q {
			if s.has(i) {
				return true
			}
		}
		return false
	})
}

func naiveEnsembleCovered(e, qw, qa int, s idxSet) bool {
	for first := 0; first < e; first++ {
		if !naiveNoQuorumOutside(naiveWriteSet(e, qw, int64(first)), qa, s) {
			return false
		}
	}
	return true
}

// naiveCoverageLost: no set of answers from the non-failed positions can
// ever cover the ensemble.
func naiveCoverageLost(e, qw, qa int, failed idxSet) bool {
	all := idxSet(1<<uint(e) - 1)
	return !naiveEnsembleCovered(e, qw, qa, all&^failed)
}

// naiveQuorumLost: no Qa-subset of the write set avoids failed.
func naiveQuorumLost(e, qw, qa int, failed idxSet, entry int64) bool {
	return subsets(naiveWriteSet(e, qw, entry), qa, func(q []int) bool {
		for _, i := range q {
			if failed.has(i) {
				return true
			}
		}
		return false // found a quorum with no failed member
	})
}

func checkSchedule(t *testing.T, e, qw, qa int, s idxSet, entry int64) {
	t.Helper()
	sch, err := NewSchedule(catalog.Replication{Ensemble: e, WriteQuorum: qw, AckQuorum: qa})
	if err != nil {
		t.Fatal(err)
	}
	s &= idxSet(1<<uint(e) - 1)
	ws := naiveWriteSet(e, qw, entry)
	if got := sch.WriteSet(entry); !slices.Equal(got, ws) {
		t.Fatalf("E%d Qw%d: WriteSet(%d) = %v, want %v", e, qw, entry, got, ws)
	}
	for i := 0; i < e; i++ {
		if got, want := sch.inWriteSet(entry, i), slices.Contains(ws, i); got != want {
			t.Fatalf("E%d Qw%d: inWriteSet(%d, %d) = %v", e, qw, entry, i, got)
		}
	}
	checks := []struct {
		name      string
		got, want bool
	}{
		{"ackQuorum", sch.ackQuorum(s, entry), naiveAcked(e, qw, qa, s, entry)},
		{"entryAbsent", sch.entryAbsent(s, entry), naiveNoQuorumOutside(ws, qa, s)},
		{"ensembleCovered", sch.ensembleCovered(s), naiveEnsembleCovered(e, qw, qa, s)},
		{"ensembleCoverageLost", sch.ensembleCoverageLost(s), naiveCoverageLost(e, qw, qa, s)},
		{"quorumLost", sch.quorumLost(s, entry), naiveQuorumLost(e, qw, qa, s, entry)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Fatalf("E%d Qw%d Qa%d set %v entry %d: %s = %v, naive model says %v", e, qw, qa, s, entry, c.name, c.got, c.want)
		}
	}
}

// TestScheduleExhaustive compares every rule with the model for every
// shape up to E=7, every set of positions and every stripe.
func TestScheduleExhaustive(t *testing.T) {
	n := 0
	for e := 1; e <= 7; e++ {
		for qw := 1; qw <= e; qw++ {
			for qa := 1; qa <= qw; qa++ {
				for s := idxSet(0); s < 1<<uint(e); s++ {
					for entry := int64(0); entry < int64(e); entry++ {
						checkSchedule(t, e, qw, qa, s, entry+int64(e)*int64(s)) // vary the entry's magnitude too
						n++
					}
				}
			}
		}
	}
	t.Logf("%d cases", n)
}

// TestScheduleQuick samples the large shapes (E up to 16) with testing/quick.
func TestScheduleQuick(t *testing.T) {
	f := func(seed uint64, rawSet uint32, entry uint32) bool {
		r := rand.New(rand.NewPCG(seed, 1))
		e := 8 + r.IntN(catalog.MaxEnsembleSize-7)
		qw := 1 + r.IntN(min(e, 6)) // the naive model enumerates Qa-subsets of Qw
		qa := 1 + r.IntN(qw)
		checkSchedule(t, e, qw, qa, idxSet(rawSet), int64(entry))
		return !t.Failed()
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 3000}); err != nil {
		t.Fatal(err)
	}
}

// TestCoverageMeaning states coverage by what it is for: when fenced
// positions cover the ensemble, no entry can gain Qa acks from unfenced
// positions alone; when they do not, some entry can.
func TestCoverageMeaning(t *testing.T) {
	for e := 1; e <= 6; e++ {
		for qw := 1; qw <= e; qw++ {
			for qa := 1; qa <= qw; qa++ {
				sch, _ := NewSchedule(catalog.Replication{Ensemble: e, WriteQuorum: qw, AckQuorum: qa})
				for fenced := idxSet(0); fenced < 1<<uint(e); fenced++ {
					unfenced := idxSet(1<<uint(e)-1) &^ fenced
					canSneak := false
					for entry := int64(0); entry < int64(e); entry++ {
						canSneak = canSneak || sch.ackQuorum(unfenced, entry)
					}
					if sch.ensembleCovered(fenced) == canSneak {
						t.Fatalf("E%d Qw%d Qa%d fenced %v: covered=%v but an entry can reach Qa unfenced=%v", e, qw, qa, fenced, sch.ensembleCovered(fenced), canSneak)
					}
				}
			}
		}
	}
}
