package checker

import (
	"cmp"
	"fmt"
	"slices"
)

// seqKey is one idempotent producer session in one partition: the scope of
// a sequence number.
type seqKey struct {
	tp    tpID
	pid   int64
	epoch int32
}

type seqEntry struct {
	seq     int32
	offset  int64
	produce int32 // index in hist.produces
}

// checkSequences checks that within each producer session and partition,
// offsets strictly increase with sequence numbers. Sorting each session by
// sequence makes it a check of neighbours.
func (c *check) checkSequences(seqs map[seqKey][]seqEntry) {
	for k, es := range seqs {
		slices.SortFunc(es, func(a, b seqEntry) int {
			return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.offset, b.offset), cmp.Compare(a.produce, b.produce))
		})
		for i := 1; i < len(es); i++ {
			a, b := es[i-1], es[i]
			if a.seq != b.seq && a.offset < b.offset {
				continue
			}
			if a.seq == b.seq && a.offset == b.offset {
				continue // two values at one offset: an inconsistent offset, reported as such
			}
			pa, pb := &c.produces[a.produce], &c.produces[b.produce]
			c.out.add(SequenceOrder, []int{pa.line, pb.line}, func() string {
				who := fmt.Sprintf("producer %s (id %d, epoch %d) on %s", pa.producer, k.pid, k.epoch, c.tpString(k.tp))
				if a.seq == b.seq {
					return fmt.Sprintf("%s: sequence %d written twice, %q at offset %d (line %d) and %q at offset %d (line %d)",
						who, a.seq, c.vals[pa.value].str, a.offset, pa.line, c.vals[pb.value].str, b.offset, pb.line)
				}
				return fmt.Sprintf("%s: sequence %d (%q, line %d) is at offset %d but the later sequence %d (%q, line %d) is at offset %d",
					who, a.seq, c.vals[pa.value].str, pa.line, a.offset, b.seq, c.vals[pb.value].str, pb.line, b.offset)
			})
		}
	}
}
