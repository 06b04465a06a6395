package checker

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
)

// The checks that use sorting and binary search are compared with naive
// quadratic versions of their definitions on many small random histories.

// randomOps sorts ops into completion order (as a Recorder writes them).
func sortOps(ops []history.Op) []history.Op {
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	return ops
}

func lastLines(res Result, k Kind) []int {
	var ls []int
	for _, a := range res.Examples[k] {
		ls = append(ls, a.Lines[len(a.Lines)-1])
	}
	slices.Sort(ls)
	return ls
}

func TestCommitChecksMatchNaiveModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var stale, backwards int
	for trial := range 400 {
		var ops []history.Op
		window := func() (time.Duration, time.Duration) {
			inv := time.Duration(rng.IntN(200))
			return inv, inv + time.Duration(rng.IntN(60))
		}
		for range 1 + rng.IntN(30) {
			inv, done := window()
			outcome := []history.Outcome{history.Accepted, history.Accepted, history.Accepted, history.Rejected, history.Indeterminate}[rng.IntN(5)]
			ops = append(ops, history.Op{Kind: history.Commit, Group: "g", Member: "m", Topic: "t", Partition: 0,
				Offset: rng.Int64N(20), LeaseEpoch: rng.Int64N(5), Outcome: outcome, Invoke: inv, Time: done})
		}
		for range rng.IntN(4) {
			inv, done := window()
			ops = append(ops, history.Op{Kind: history.Reset, Group: "g", Topic: "t", Offset: rng.Int64N(20), Invoke: inv, Time: done})
		}
		for range rng.IntN(6) {
			ops = append(ops, history.Op{Kind: history.Lease, Group: "g", Member: "m", Topic: "t", LeaseEpoch: rng.Int64N(6), Time: time.Duration(rng.IntN(260))})
		}
		// Another group's and another partition's ops must not interfere.
		ops = append(ops,
			history.Op{Kind: history.Lease, Group: "h", Member: "m", Topic: "t", LeaseEpoch: 99, Time: 0},
			history.Op{Kind: history.Commit, Group: "g", Member: "m", Topic: "t", Partition: 1, Offset: 99, Outcome: history.Accepted, Time: 1})
		ops = sortOps(ops)

		var wantStale, wantBack []int
		for ci, c := range ops {
			if c.Kind != history.Commit || c.Outcome != history.Accepted || c.Partition != 0 {
				continue
			}
			for _, g := range ops {
				if c.LeaseEpoch > 0 && g.Kind == history.Lease && g.Group == "g" && g.LeaseEpoch > c.LeaseEpoch && g.Time < c.Invoke {
					wantStale = append(wantStale, ci+2)
					break
				}
			}
		witness:
			for _, p := range ops {
				if p.Kind != history.Commit || p.Outcome != history.Accepted || p.Partition != 0 || p.Time >= c.Invoke || p.Offset <= c.Offset {
					continue
				}
				for _, r := range ops {
					if r.Kind == history.Reset && r.Invoke < c.Time && r.Time > p.Invoke {
						continue witness
					}
				}
				wantBack = append(wantBack, ci+2)
				break
			}
		}

		res, err := checkOps(history.Header{}, ops, Options{MaxExamples: MaxExamplesLimit})
		if err != nil {
			t.Fatal(err)
		}
		if got := lastLines(res, StaleCommit); !slices.Equal(got, wantStale) {
			t.Fatalf("trial %d: stale commits at lines %v, the model says %v\n%s", trial, got, wantStale, dump(ops))
		}
		if got := lastLines(res, CommitBackwards); !slices.Equal(got, wantBack) {
			t.Fatalf("trial %d: backwards commits at lines %v, the model says %v\n%s", trial, got, wantBack, dump(ops))
		}
		stale += len(wantStale)
		backwards += len(wantBack)
	}
	if stale < 50 || backwards < 50 {
		t.Errorf("only %d stale and %d backwards commits in all trials: the comparison is too weak", stale, backwards)
	}
}

func TestSkipCheckMatchesNaiveModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var found int
	for trial := range 400 {
		var ops []history.Op
		for i := range 1 + rng.IntN(40) {
			ops = append(ops, history.Op{Kind: history.Consume, Group: "g", Member: fmt.Sprint("m", rng.IntN(3)), LeaseEpoch: rng.Int64N(2),
				Topic: "t", Partition: rng.Int32N(2), Offset: rng.Int64N(15), Value: fmt.Sprint("v", i), Time: time.Duration(i)})
		}
		type session struct {
			member    string
			partition int32
			epoch     int64
		}
		var want []int
		last := map[session]int64{}
		for i, o := range ops {
			s := session{o.Member, o.Partition, o.LeaseEpoch}
			prev, ok := last[s]
			last[s] = o.Offset
			if !ok {
				continue
			}
			for _, w := range ops {
				if w.Partition == o.Partition && w.Offset > prev && w.Offset < o.Offset {
					want = append(want, i+2)
					break
				}
			}
		}
		res, err := checkOps(history.Header{}, ops, Options{MaxExamples: MaxExamplesLimit})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, a := range res.Examples[ConsumerSkip] {
			// The lines are the previous read, this read and the witness;
			// this read is the later of the member's two.
			got = append(got, a.Lines...)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Fatalf("trial %d: the model finds a skip at line %d, the checker does not (%v)\n%s", trial, w, res.Examples[ConsumerSkip], dump(ops))
			}
		}
		if res.Anomalies[ConsumerSkip] != len(want) {
			t.Fatalf("trial %d: %d skips, the model says %d (%v)\n%s", trial, res.Anomalies[ConsumerSkip], len(want), res.Examples[ConsumerSkip], dump(ops))
		}
		found += len(want)
	}
	if found < 100 {
		t.Errorf("only %d skips in all trials: the comparison is too weak", found)
	}
}

func dump(ops []history.Op) string {
	var s string
	for i, o := range ops {
		s += fmt.Sprintf("%d: %+v\n", i+2, o)
	}
	return s
}
