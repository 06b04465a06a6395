package checker

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/chaos/history"
)

// readState is what the acknowledgements and consume ops say, per value and
// per position. It is built in one pass over both in line order.
type readState struct {
	vals     []valueReads // by valID
	posIndex map[pos]int32
	pos      []posInfo
}

type valueReads struct {
	reads     int32
	first     pos // where the value was first read
	firstLine int
	dup       bool // read at a second position (reported once)
	misplaced bool // read where its produce cannot have written (reported once)
	readAtAck bool // read at its acknowledged position
	finalRead bool // read by its partition's drain (the final log)
}

// posInfo is one (partition, offset) that was acknowledged or read.
type posInfo struct {
	value     valID // the first value observed here
	line      int   // where it was observed
	ack       bool  // observed by an acknowledgement (else by a read)
	firstRead int   // line of the first read here, 0 if none
	conflict  bool  // a second value was observed (reported once)
}

// checkReads finds, in one pass over acknowledgements and reads in line
// order: offsets holding two values, values read at two offsets, reads
// where the produce cannot have written, and values nobody produced.
func (c *check) checkReads() *readState {
	r := &readState{vals: make([]valueReads, len(c.vals)), posIndex: map[pos]int32{}}
	pi, ci := 0, 0
	for pi < len(c.produces) || ci < len(c.consumes) {
		if ci == len(c.consumes) || (pi < len(c.produces) && c.produces[pi].line < c.consumes[ci].line) {
			p := &c.produces[pi]
			pi++
			if p.outcome == history.OK {
				c.observe(r, pos{p.tp, p.offset}, p.value, p.line, false)
			}
			continue
		}
		cs := &c.consumes[ci]
		ci++
		c.observe(r, pos{cs.tp, cs.offset}, cs.value, cs.line, true)
		c.read(r, cs)
	}
	for i := range r.vals {
		if r.vals[i].reads > 0 {
			c.res.ValuesRead++
		}
	}
	return r
}

// observe records that value v was acknowledged or read at p, and reports
// the first time p shows a second value (inconsistent offset, form 1).
func (c *check) observe(r *readState, p pos, v valID, line int, read bool) {
	i, ok := r.posIndex[p]
	if !ok {
		i = int32(len(r.pos))
		r.pos = append(r.pos, posInfo{value: v, line: line, ack: !read})
		r.posIndex[p] = i
	}
	pi := &r.pos[i]
	if read && pi.firstRead == 0 {
		pi.firstRead = line
	}
	if pi.value == v || pi.conflict {
		return
	}
	pi.conflict = true
	first := *pi
	c.out.add(InconsistentOffset, []int{first.line, line}, func() string {
		return fmt.Sprintf("%s holds two values: %q (%s at line %d) and %q (%s at line %d)",
			c.posString(p), c.vals[first.value].str, how(!first.ack), first.line, c.vals[v].str, how(read), line)
	})
}

func how(read bool) string {
	if read {
		return "read"
	}
	return "acknowledged"
}

// read follows one consume op's value: duplicates, misplaced reads,
// unknown values.
func (c *check) read(r *readState, cs *consumeOp) {
	vr := &r.vals[cs.value]
	vi := &c.vals[cs.value]
	p := pos{cs.tp, cs.offset}
	vr.reads++
	if d, ok := c.drains[cs.tp]; ok && (d.member == "" || d.member == cs.member) {
		vr.finalRead = true
	}
	if vr.reads == 1 {
		vr.first, vr.firstLine = p, cs.line
		if vi.produce < 0 {
			c.out.add(UnknownValue, []int{cs.line}, func() string {
				return fmt.Sprintf("value %q read at %s was never produced", vi.str, c.posString(p))
			})
		}
	} else if p != vr.first && !vr.dup {
		vr.dup = true
		if vi.produce >= 0 {
			prod := &c.produces[vi.produce]
			kind, what := Duplicate, "idempotent"
			if prod.idem == nil {
				what = "not idempotent"
			}
			if c.opts.AllowDuplicates(prod.producer, prod.idem != nil) {
				kind = RetryDuplicate
			}
			first := vr.first
			firstLine := vr.firstLine
			c.out.add(kind, []int{prod.line, firstLine, cs.line}, func() string {
				return fmt.Sprintf("value %q (producer %s, %s; produce %s at line %d) read at %s (line %d) and at %s (line %d)",
					vi.str, prod.producer, what, prod.outcome, prod.line, c.posString(first), firstLine, c.posString(p), cs.line)
			})
		}
	}
	if vi.produce < 0 {
		return
	}
	prod := &c.produces[vi.produce]
	if prod.outcome == history.OK && p == (pos{prod.tp, prod.offset}) {
		vr.readAtAck = true
	}
	if !vr.misplaced && !c.reachable(prod, cs.tp) {
		vr.misplaced = true
		c.out.add(InconsistentOffset, []int{prod.line, cs.line}, func() string {
			return fmt.Sprintf("value %q read at %s, but its produce (%s, line %d) wrote to %s",
				vi.str, c.posString(p), prod.outcome, prod.line, c.produceTarget(prod))
		})
	}
}

// reachable reports whether a produce can have written to partition tp: its
// acknowledged partition; otherwise its topic, and its partition if it
// named one.
func (c *check) reachable(p *produceOp, tp tpID) bool {
	if p.outcome == history.OK {
		return tp == p.tp
	}
	t := c.tps[tp]
	return t.topic == p.topic && (p.partition < 0 || t.partition == p.partition)
}

func (c *check) produceTarget(p *produceOp) string {
	switch {
	case p.outcome == history.OK:
		return c.posString(pos{p.tp, p.offset})
	case p.partition < 0:
		return fmt.Sprintf("topic %s (partition chosen by the server)", p.topic)
	}
	return fmt.Sprintf("%s/%d", p.topic, p.partition)
}

// checkProduces walks the produces in line order: lost writes, failed
// writes read, acknowledged values found elsewhere (form 3), the outcome
// counts, and the idempotent sequence order.
func (c *check) checkProduces(r *readState) {
	seqs := map[seqKey][]seqEntry{}
	for i := range c.produces {
		p := &c.produces[i]
		vr := &r.vals[p.value]
		c.res.Produces++
		switch p.outcome {
		case history.OK:
			c.res.Acknowledged++
			ack := pos{p.tp, p.offset}
			d, drained := c.drains[p.tp]
			if vr.reads > 0 {
				c.res.AcknowledgedRead++
				if !vr.readAtAck && !vr.misplaced && r.pos[r.posIndex[ack]].firstRead == 0 {
					first, firstLine := vr.first, vr.firstLine
					c.out.add(InconsistentOffset, []int{p.line, firstLine}, func() string {
						return fmt.Sprintf("value %q acknowledged at %s (line %d), which nobody read, but read at %s (line %d)",
							c.vals[p.value].str, c.posString(ack), p.line, c.posString(first), firstLine)
					})
				}
			}
			switch {
			case drained && !vr.finalRead && d.end <= p.offset && d.err != "":
				c.out.add(LostWrite, []int{p.line, d.line}, func() string {
					return fmt.Sprintf("value %q acknowledged at %s (line %d) is unreadable: the final drain of %s could not read past offset %d (line %d: %s)",
						c.vals[p.value].str, c.posString(ack), p.line, c.tpString(p.tp), d.end, d.line, d.err)
				})
			case drained && !vr.finalRead && d.end <= p.offset && d.member != "":
				// The drain read the partition from 0 to its end: an end
				// at or below an acknowledged offset is a log that lost
				// its tail (whatever members read before).
				c.out.add(LostWrite, []int{p.line, d.line}, func() string {
					return fmt.Sprintf("value %q acknowledged at %s (line %d) is gone: the final drain of %s by %s ended at offset %d (line %d), at or below it (members read it %d times before)",
						c.vals[p.value].str, c.posString(ack), p.line, c.tpString(p.tp), d.member, d.end, d.line, vr.reads)
				})
			case drained && !vr.finalRead && d.end > p.offset:
				c.out.add(LostWrite, []int{p.line, d.line}, func() string {
					if vr.reads > 0 {
						return fmt.Sprintf("value %q acknowledged at %s (line %d) is gone: the final drain of %s by %s reached offset %d (line %d) without it (members read it %d times before)",
							c.vals[p.value].str, c.posString(ack), p.line, c.tpString(p.tp), d.member, d.end, d.line, vr.reads)
					}
					return fmt.Sprintf("value %q acknowledged at %s (line %d) was never read, though the drain of %s reached offset %d (line %d)",
						c.vals[p.value].str, c.posString(ack), p.line, c.tpString(p.tp), d.end, d.line)
				})
			case vr.reads == 0:
				c.res.Undrained++
			}
		case history.Failed:
			c.res.Failed++
			if vr.reads > 0 {
				first, firstLine := vr.first, vr.firstLine
				c.out.add(FailedWriteRead, []int{p.line, firstLine}, func() string {
					return fmt.Sprintf("value %q failed definitely (line %d) but was read at %s (line %d)",
						c.vals[p.value].str, p.line, c.posString(first), firstLine)
				})
			}
		case history.Indeterminate:
			c.res.Indeterminate++
			if vr.reads > 0 {
				c.res.IndeterminateRead++
			} else {
				c.res.IndeterminateUnread++
			}
		}
		if p.idem == nil {
			continue
		}
		// Where the record is: its acknowledgement, or else its one read
		// position. A value read at several positions is a duplicate
		// already, and its sequence order is ambiguous.
		var at pos
		switch {
		case p.outcome == history.OK:
			at = pos{p.tp, p.offset}
		case vr.reads > 0 && !vr.dup && !vr.misplaced:
			at = vr.first
		default:
			continue
		}
		k := seqKey{at.tp, p.idem.ProducerID, p.idem.ProducerEpoch}
		seqs[k] = append(seqs[k], seqEntry{seq: p.idem.Sequence, offset: at.offset, produce: int32(i)})
	}
	c.checkSequences(seqs)
}

// checkSkips finds a member that, within one lease, read offset o and then
// o' > o+1 although some read (by anyone) saw an offset in between.
func (c *check) checkSkips(r *readState) {
	offs := make([][]int64, len(c.tps)) // per partition: distinct offsets read, sorted
	for i := range c.consumes {
		cs := &c.consumes[i]
		offs[cs.tp] = append(offs[cs.tp], cs.offset)
	}
	for i := range offs {
		slices.Sort(offs[i])
		offs[i] = slices.Compact(offs[i])
	}
	type last struct {
		offset int64
		line   int
	}
	lasts := make([]last, len(c.sessions)) // line 0: no read yet
	for i := range c.consumes {
		cs := &c.consumes[i]
		l := &lasts[cs.session]
		if l.line != 0 && cs.offset > l.offset+1 {
			o := offs[cs.tp]
			from, _ := slices.BinarySearch(o, l.offset+1)
			to, _ := slices.BinarySearch(o, cs.offset)
			if to > from {
				prev := *l
				p := pos{cs.tp, o[from]}
				witness := r.pos[r.posIndex[p]].firstRead
				n := to - from
				s := c.sessions[cs.session]
				c.out.add(ConsumerSkip, []int{prev.line, cs.line, witness}, func() string {
					who := fmt.Sprintf("member %s of group %s (lease epoch %d)", s.member, s.group, s.leaseEpoch)
					if s.group == "" {
						who = fmt.Sprintf("reader %s (no group)", s.member)
					}
					return fmt.Sprintf("%s read %s (line %d) then %s (line %d), skipping %d offset(s) that other reads saw, first %s (line %d)",
						who, c.posString(pos{cs.tp, prev.offset}), prev.line, c.posString(pos{cs.tp, cs.offset}), cs.line, n, c.posString(p), witness)
				})
			}
		}
		l.offset, l.line = cs.offset, cs.line
	}
}
