package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
)

// checkCommits counts commits and checks the accepted ones of each group
// partition for stale lease epochs and for going backwards.
func (c *check) checkCommits() {
	accepted := make([][]commitOp, len(c.gps))
	for _, cm := range c.commits {
		c.res.Commits++
		switch cm.outcome {
		case history.Accepted:
			c.res.CommitsAccepted++
			accepted[cm.gp] = append(accepted[cm.gp], cm)
		case history.Rejected:
			c.res.CommitsRejected++
		case history.Indeterminate:
			c.res.CommitsIndeterminate++
		}
	}
	for g, acc := range accepted {
		if len(acc) == 0 {
			continue
		}
		c.checkStale(gpID(g), acc)
		c.checkBackwards(gpID(g), acc)
	}
}

// checkStale reports an accepted commit whose lease epoch is lower than an
// epoch granted (for the same group partition) before the commit was
// invoked. Standalone commits (epoch 0) are not judged. Grants are in time
// order, so a prefix maximum and a binary search find the highest epoch
// granted before each commit.
func (c *check) checkStale(g gpID, acc []commitOp) {
	grants := c.leases[g]
	if len(grants) == 0 {
		return
	}
	best := make([]int, len(grants)) // best[i]: the grant with the highest epoch in grants[:i+1], earliest on ties
	for i := range grants {
		if i > 0 && grants[best[i-1]].epoch >= grants[i].epoch {
			best[i] = best[i-1]
		} else {
			best[i] = i
		}
	}
	for _, cm := range acc {
		if cm.leaseEpoch == 0 {
			continue // a standalone commit: allowed when no member is live, which leases alone cannot tell
		}
		n := sort.Search(len(grants), func(i int) bool { return grants[i].at >= cm.invoke })
		if n == 0 {
			continue
		}
		gr := grants[best[n-1]]
		if gr.epoch <= cm.leaseEpoch {
			continue
		}
		c.out.add(StaleCommit, []int{gr.line, cm.line}, func() string {
			return fmt.Sprintf("%s: commit of offset %d by %s with lease epoch %d (invoked at %v) was accepted, but lease epoch %d had been granted to %s before (seen at %v)",
				c.gpString(g), cm.offset, cm.member, cm.leaseEpoch, cm.invoke, gr.epoch, gr.member, gr.at)
		})
	}
}

// checkBackwards reports an accepted commit C with a lower offset than an
// accepted commit P of the same group partition that certainly took effect
// before it — P completed before C was invoked — when no reset can have
// taken effect between them.
//
// A reset R can fall between P and C unless it ended before P began or
// began after C ended. With B(C) the latest end of a reset that began
// before C ended, the witnesses of C are the P with P.done < C.invoke and
// P.invoke >= B(C). Taking the commits as queries in invoke order, adding
// each P once P.done is below the query's invoke, and keeping the highest
// offset per rank of P.invoke in a Fenwick tree answers each query in
// O(log n).
func (c *check) checkBackwards(g gpID, acc []commitOp) {
	resets := slices.Clone(c.resets[g])
	slices.SortFunc(resets, func(a, b resetOp) int { return cmp.Compare(a.invoke, b.invoke) })
	latestEnd := make([]time.Duration, len(resets)) // latestEnd[i]: max done of resets[:i+1]
	for i, r := range resets {
		latestEnd[i] = r.done
		if i > 0 {
			latestEnd[i] = max(latestEnd[i], latestEnd[i-1])
		}
	}
	barrier := func(cm *commitOp) time.Duration {
		n := sort.Search(len(resets), func(i int) bool { return resets[i].invoke >= cm.done })
		if n == 0 {
			return math.MinInt64
		}
		return latestEnd[n-1]
	}

	invokes := make([]time.Duration, len(acc)) // sorted, for ranks
	for i := range acc {
		invokes[i] = acc[i].invoke
	}
	slices.Sort(invokes)
	queries := make([]int, len(acc))
	for i := range queries {
		queries[i] = i
	}
	slices.SortStableFunc(queries, func(a, b int) int { return cmp.Compare(acc[a].invoke, acc[b].invoke) })

	// The tree is indexed by reversed rank so that "invoke >= B" is a prefix.
	n := len(acc)
	tree := make([]int, n+1)        // commit index + 1 with the highest offset; 0: none
	better := func(a, b int) bool { // does commit a beat b (offset, then earlier line)?
		return b == 0 || acc[a-1].offset > acc[b-1].offset || (acc[a-1].offset == acc[b-1].offset && a < b)
	}
	added := 0 // acc is in line order, hence in done order
	for _, q := range queries {
		cm := &acc[q]
		for ; added < n && acc[added].done < cm.invoke; added++ {
			rank, _ := slices.BinarySearch(invokes, acc[added].invoke)
			for i := n - rank; i <= n; i += i & -i {
				if better(added+1, tree[i]) {
					tree[i] = added + 1
				}
			}
		}
		lo, _ := slices.BinarySearch(invokes, barrier(cm))
		best := 0
		for i := n - lo; i > 0; i -= i & -i {
			if tree[i] != 0 && better(tree[i], best) {
				best = tree[i]
			}
		}
		if best == 0 || acc[best-1].offset <= cm.offset {
			continue
		}
		p := acc[best-1]
		c.out.add(CommitBackwards, []int{p.line, cm.line}, func() string {
			return fmt.Sprintf("%s: commit of offset %d by %s (lease epoch %d) was accepted after offset %d had been committed by %s (lease epoch %d), with no reset in between",
				c.gpString(g), cm.offset, cm.member, cm.leaseEpoch, p.offset, p.member, p.leaseEpoch)
		})
	}
}

func (c *check) gpString(g gpID) string {
	k := c.gps[g]
	return fmt.Sprintf("group %s %s", k.group, c.tpString(k.tp))
}
