package checker

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
)

// The property test: a simulated, correct queue produces a history that must
// pass; then one targeted mutation per anomaly kind must make the checker
// report exactly that kind. The simulation is the "simple model": an
// append-only log per partition, a lease table and a committed offset per
// partition, and clients whose ops take effect at one instant inside their
// [invoke, time] window.

// simOp is an op with what the test (not the checker) knows about it.
type simOp struct {
	op  history.Op
	gen int // generation order, to keep ops with equal times in order
	// For commits: rejected because its lease epoch was stale, and the
	// group's committed offset when it took effect.
	staleReject bool
	committed   int64
}

type simTP struct {
	topic     string
	partition int32
}

type simEntry struct {
	offset int64
	value  string
}

type simProducer struct {
	name  string
	idem  bool
	pid   int64
	epoch int32
	seq   map[int]int32 // per partition index
	n     int
}

type simLease struct {
	epoch  int64
	pos    int64 // next offset to read
	zombie bool  // revoked; the member does not know yet
	left   int   // actions a zombie still takes
}

type simMember struct {
	name   string
	leases map[int]*simLease // by partition index
}

type sim struct {
	rng       *rand.Rand
	now       time.Duration
	ops       []simOp
	tps       []simTP
	logs      [][]simEntry
	next      []int64
	holder    []int // member index holding each partition's lease, -1 none
	epoch     []int64
	committed []int64
	producers []*simProducer
	members   []*simMember
	resets    bool
}

const simGroup = "g"

// simulate runs a random correct history of about steps actions, then heals
// and drains every partition.
func simulate(seed uint64, steps int, resets bool) []simOp {
	s := &sim{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), resets: resets}
	for _, t := range []struct {
		topic string
		n     int32
	}{{"a", 3}, {"b", 1}} {
		for p := range t.n {
			s.tps = append(s.tps, simTP{t.topic, p})
		}
	}
	n := len(s.tps)
	s.logs, s.next, s.holder, s.epoch, s.committed = make([][]simEntry, n), make([]int64, n), make([]int, n), make([]int64, n), make([]int64, n)
	for i, idem := range []bool{true, true, false, false} {
		s.producers = append(s.producers, &simProducer{name: fmt.Sprint("p", i), idem: idem, pid: int64(100 + i), seq: map[int]int32{}})
	}
	for i := range 3 {
		s.members = append(s.members, &simMember{name: fmt.Sprint("c", i), leases: map[int]*simLease{}})
	}
	for tp := range s.tps {
		s.holder[tp] = -1
		s.grant(tp, s.rng.IntN(len(s.members)))
	}
	for range steps {
		s.now += time.Duration(1 + s.rng.IntN(40))
		switch x := s.rng.IntN(100); {
		case x < 50:
			s.produce()
		case x < 82:
			s.consume(s.rng.IntN(len(s.members)))
		case x < 94:
			s.commit(s.rng.IntN(len(s.members)))
		case x < 98:
			s.grant(s.rng.IntN(len(s.tps)), s.rng.IntN(len(s.members)))
		case s.resets:
			s.reset(s.rng.IntN(len(s.tps)))
		}
	}
	s.drain()
	slices.SortStableFunc(s.ops, func(a, b simOp) int { return cmp.Or(cmp.Compare(a.op.Time, b.op.Time), cmp.Compare(a.gen, b.gen)) })
	return s.ops
}

func (s *sim) emit(o simOp) {
	o.gen = len(s.ops)
	s.ops = append(s.ops, o)
}

// window returns an invoke and completion time around now.
func (s *sim) window(before, after int) (time.Duration, time.Duration) {
	return max(0, s.now-time.Duration(s.rng.IntN(before+1))), s.now + time.Duration(s.rng.IntN(after+1))
}

func (s *sim) append(tp int, value string) int64 {
	if s.rng.IntN(30) == 0 {
		s.next[tp]++ // a hole: an offset no client sees (a control record)
	}
	off := s.next[tp]
	s.logs[tp] = append(s.logs[tp], simEntry{off, value})
	s.next[tp]++
	return off
}

func (s *sim) produce() {
	p := s.producers[s.rng.IntN(len(s.producers))]
	if p.idem && s.rng.IntN(100) == 0 {
		p.epoch++ // a new producer session: sequences start over
		clear(p.seq)
	}
	tp := s.rng.IntN(len(s.tps))
	named := s.rng.IntN(10) < 7 // else the server chooses the partition
	op := history.Op{Kind: history.Produce, Producer: p.name, Topic: s.tps[tp].topic, Partition: -1, Value: fmt.Sprintf("%s-%d", p.name, p.n)}
	p.n++
	if named {
		op.Partition = s.tps[tp].partition
	} else {
		tp = s.randomPartitionOf(op.Topic)
	}
	if p.idem {
		op.Idempotence = &history.Idempotence{ProducerID: p.pid, ProducerEpoch: p.epoch, Sequence: p.seq[tp]}
		p.seq[tp]++
	}
	op.Invoke, op.Time = s.window(50, 200)
	switch x := s.rng.IntN(100); {
	case x < 75:
		op.Outcome = history.OK
		off := s.append(tp, op.Value)
		if !p.idem && s.rng.IntN(10) == 0 {
			off = s.append(tp, op.Value) // a retry whose first attempt landed too
		}
		op.Partition, op.Offset = s.tps[tp].partition, off
	case x < 85:
		op.Outcome, op.Error = history.Failed, "definite error"
	default:
		op.Outcome, op.Error = history.Indeterminate, "timeout"
		if s.rng.IntN(2) == 0 {
			s.append(tp, op.Value)
			if !p.idem && s.rng.IntN(5) == 0 {
				s.append(tp, op.Value)
			}
		}
	}
	s.emit(simOp{op: op})
}

func (s *sim) randomPartitionOf(topic string) int {
	var c []int
	for i, t := range s.tps {
		if t.topic == topic {
			c = append(c, i)
		}
	}
	return c[s.rng.IntN(len(c))]
}

// grant moves a partition's lease to member m with a new epoch, starting at
// the committed offset. The previous holder becomes a zombie for a while.
func (s *sim) grant(tp, m int) {
	if old := s.holder[tp]; old >= 0 && old != m {
		l := s.members[old].leases[tp]
		l.zombie, l.left = true, s.rng.IntN(6)
	}
	s.epoch[tp]++
	s.holder[tp] = m
	s.members[m].leases[tp] = &simLease{epoch: s.epoch[tp], pos: s.committed[tp]}
	s.emit(simOp{op: history.Op{Kind: history.Lease, Group: simGroup, Member: s.members[m].name, Topic: s.tps[tp].topic,
		Partition: s.tps[tp].partition, LeaseEpoch: s.epoch[tp], Time: s.now + time.Duration(s.rng.IntN(30))}})
}

// pick returns one of m's leases, retiring zombies that are done.
func (s *sim) pick(m int) (int, *simLease) {
	mem := s.members[m]
	var tps []int
	for tp, l := range mem.leases {
		if l.zombie {
			if l.left == 0 {
				delete(mem.leases, tp)
				continue
			}
			l.left--
		}
		tps = append(tps, tp)
	}
	if len(tps) == 0 {
		return -1, nil
	}
	slices.Sort(tps) // map order is random; the seed must decide
	tp := tps[s.rng.IntN(len(tps))]
	return tp, mem.leases[tp]
}

func (s *sim) consume(m int) {
	tp, l := s.pick(m)
	if l == nil {
		return
	}
	s.readFrom(s.members[m].name, tp, l, 1+s.rng.IntN(3))
}

// readFrom reads up to n records at or after l.pos that are in the log now.
func (s *sim) readFrom(member string, tp int, l *simLease, n int) {
	log := s.logs[tp]
	i, _ := slices.BinarySearchFunc(log, l.pos, func(e simEntry, off int64) int { return cmp.Compare(e.offset, off) })
	for ; i < len(log) && n > 0; i, n = i+1, n-1 {
		e := log[i]
		s.emit(simOp{op: history.Op{Kind: history.Consume, Group: simGroup, Member: member, LeaseEpoch: l.epoch,
			Topic: s.tps[tp].topic, Partition: s.tps[tp].partition, Offset: e.offset, Value: e.value, Time: s.now}})
		l.pos = e.offset + 1
	}
}

// commit commits m's position; the server accepts only the current epoch.
func (s *sim) commit(m int) {
	tp, l := s.pick(m)
	if l == nil {
		return
	}
	op := history.Op{Kind: history.Commit, Group: simGroup, Member: s.members[m].name, Topic: s.tps[tp].topic,
		Partition: s.tps[tp].partition, Offset: l.pos, LeaseEpoch: l.epoch}
	op.Invoke, op.Time = s.window(50, 100)
	o := simOp{committed: s.committed[tp]}
	if l.epoch == s.epoch[tp] {
		s.committed[tp] = l.pos
		op.Outcome = history.Accepted
	} else {
		op.Outcome, op.Error, o.staleReject = history.Rejected, "stale lease epoch", true
	}
	if s.rng.IntN(10) == 0 {
		op.Outcome, op.Error = history.Indeterminate, "timeout"
	}
	o.op = op
	s.emit(o)
}

// reset moves the committed offset back and hands the partition to a new
// lease, which starts there.
func (s *sim) reset(tp int) {
	off := s.rng.Int64N(s.committed[tp] + 1)
	op := history.Op{Kind: history.Reset, Group: simGroup, Topic: s.tps[tp].topic, Partition: s.tps[tp].partition, Offset: off}
	op.Invoke, op.Time = s.window(30, 30)
	s.committed[tp] = off
	s.emit(simOp{op: op})
	s.grant(tp, s.rng.IntN(len(s.members)))
}

// drain heals: after every op completed, a reader outside the group reads
// every partition from offset 0 to the end and marks the drain.
func (s *sim) drain() {
	for _, o := range s.ops {
		s.now = max(s.now, o.op.Time)
	}
	s.now += 1000
	for tp := range s.tps {
		s.now += 100
		for _, e := range s.logs[tp] {
			s.emit(simOp{op: history.Op{Kind: history.Consume, Member: "drainer",
				Topic: s.tps[tp].topic, Partition: s.tps[tp].partition, Offset: e.offset, Value: e.value, Time: s.now}})
		}
		s.emit(simOp{op: history.Op{Kind: history.Drain, Member: "drainer", Topic: s.tps[tp].topic, Partition: s.tps[tp].partition, Offset: s.next[tp], Time: s.now}})
	}
}

// checkSim checks a simulated history: through the Recorder, a file and the
// Reader when viaFile, else from memory (the same checks, much faster).
func checkSim(t testing.TB, ops []simOp, viaFile bool) Result {
	t.Helper()
	plain := make([]history.Op, len(ops))
	for i, o := range ops {
		plain[i] = o.op
	}
	opts := Options{MaxExamples: 3}
	var res Result
	var err error
	if viaFile {
		res, err = Check(bytes.NewReader(recordOps(t, plain)), opts)
	} else {
		res, err = checkOps(history.Header{Format: history.Format, Version: history.Version}, plain, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func report(res Result) string {
	var b strings.Builder
	res.Report(&b)
	return b.String()
}

// A mutation changes a correct history so that it has exactly one kind of
// anomaly. It returns false when the history offers no place for it.
type mutation struct {
	name string
	kind Kind
	fn   func(rng *rand.Rand, ops []simOp) ([]simOp, bool)
}

func mutations() []mutation {
	return []mutation{
		{"drop every read of an acknowledged value", LostWrite, dropReads},
		{"swap the values of two acknowledged offsets in every read", InconsistentOffset, swapOffsets},
		{"read an idempotent value again at a new offset", Duplicate, duplicateRead(true)},
		{"read a non-idempotent value again at a new offset", RetryDuplicate, duplicateRead(false)},
		{"accept a commit rejected for its stale epoch", StaleCommit, acceptStale},
		{"move an accepted commit below an earlier one", CommitBackwards, moveCommitBack},
		{"swap the sequences of two idempotent writes", SequenceOrder, swapSequences},
		{"turn a read acknowledged write into a failure", FailedWriteRead, failReadWrite},
		{"read a value nobody produced", UnknownValue, ghostRead},
		{"drop a read in the middle of a lease that others also read", ConsumerSkip, dropMiddleRead},
		{"lose a partition's tail after members read it: the drain ends below acknowledged offsets", LostWrite, shrinkDrain},
	}
}

// TestSimulatedHistories: every simulated correct history passes, and every
// mutation makes the checker report its kind and nothing else. A checker
// that cannot fail proves nothing, so the test also fails when a mutation
// found no place to apply in too many histories, or when the simulation did
// not produce what the checks must tolerate (indeterminate writes read and
// unread, retry duplicates, stale commits rejected, resets).
func TestSimulatedHistories(t *testing.T) {
	const seeds = 16
	ran := map[string]int{}
	var total Result
	for seed := range uint64(seeds) {
		ops := simulate(seed, 1500, seed%2 == 0)
		base := checkSim(t, ops, true)
		if !base.OK() || base.Undrained != 0 || base.Acknowledged != base.AcknowledgedRead {
			t.Fatalf("seed %d: the correct history fails:\n%s", seed, report(base))
		}
		total.Acknowledged += base.Acknowledged
		total.IndeterminateRead += base.IndeterminateRead
		total.IndeterminateUnread += base.IndeterminateUnread
		total.CommitsRejected += base.CommitsRejected
		total.Resets += base.Resets
		total.Failed += base.Failed
		total.Leases += base.Leases
		if total.Anomalies == nil {
			total.Anomalies = map[Kind]int{}
		}
		total.Anomalies[RetryDuplicate] += base.Anomalies[RetryDuplicate]

		for _, m := range mutations() {
			rng := rand.New(rand.NewPCG(seed, 7))
			mutated, ok := m.fn(rng, slices.Clone(ops))
			if !ok {
				continue
			}
			ran[m.name]++
			res := checkSim(t, mutated, false)
			for _, k := range Kinds() {
				want := base.Anomalies[k]
				if k == m.kind {
					if res.Anomalies[k] <= want {
						t.Errorf("seed %d, %s: no %s found:\n%s", seed, m.name, k, report(res))
					}
					continue
				}
				if res.Anomalies[k] != want {
					t.Errorf("seed %d, %s: %d %s anomalies, want %d:\n%s", seed, m.name, res.Anomalies[k], k, want, report(res))
				}
			}
			if res.OK() != m.kind.Tolerated() {
				t.Errorf("seed %d, %s: OK() = %v", seed, m.name, res.OK())
			}
		}
	}
	// The simulation must exercise what the checks tolerate, or passing
	// proves little; and every mutation must have run.
	if total.IndeterminateRead == 0 || total.IndeterminateUnread == 0 || total.CommitsRejected == 0 || total.Resets == 0 ||
		total.Failed == 0 || total.Anomalies[RetryDuplicate] == 0 || total.Leases < seeds*5 {
		t.Errorf("the simulation is too tame: %+v", total)
	}
	for _, m := range mutations() {
		if ran[m.name] < seeds/2 {
			t.Errorf("mutation %q ran on %d of %d histories; the checker's ability to find %s is not shown", m.name, ran[m.name], seeds, m.kind)
		}
	}
}

// Helpers for mutations. They index ops by line order (ops are sorted).

func pick[T any](rng *rand.Rand, xs []T) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	return xs[rng.IntN(len(xs))], true
}

// readPositions maps each value to the distinct (partition, offset) it was
// read at.
type simPos struct {
	topic     string
	partition int32
	offset    int64
}

func readPositions(ops []simOp) map[string][]simPos {
	m := map[string][]simPos{}
	for _, o := range ops {
		if o.op.Kind == history.Consume {
			p := simPos{o.op.Topic, o.op.Partition, o.op.Offset}
			if !slices.Contains(m[o.op.Value], p) {
				m[o.op.Value] = append(m[o.op.Value], p)
			}
		}
	}
	return m
}

func acknowledged(ops []simOp) []int {
	var idx []int
	for i, o := range ops {
		if o.op.Kind == history.Produce && o.op.Outcome == history.OK {
			idx = append(idx, i)
		}
	}
	return idx
}

func dropReads(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	reads := readPositions(ops)
	var cands []int
	for _, i := range acknowledged(ops) {
		if len(reads[ops[i].op.Value]) == 1 { // not a retry duplicate, which would vanish too
			cands = append(cands, i)
		}
	}
	i, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	v := ops[i].op.Value
	return slices.DeleteFunc(ops, func(o simOp) bool { return o.op.Kind == history.Consume && o.op.Value == v }), true
}

func swapOffsets(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	reads := readPositions(ops)
	byTP := map[simTP][]int{}
	for _, i := range acknowledged(ops) {
		o := ops[i].op
		if len(reads[o.Value]) == 1 {
			k := simTP{o.Topic, o.Partition}
			byTP[k] = append(byTP[k], i)
		}
	}
	var cands [][]int
	for _, tp := range sortedKeys(byTP) {
		if len(byTP[tp]) >= 2 {
			cands = append(cands, byTP[tp])
		}
	}
	c, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	x := rng.IntN(len(c))
	y := (x + 1 + rng.IntN(len(c)-1)) % len(c)
	a, b := ops[c[x]].op, ops[c[y]].op
	for i := range ops {
		o := &ops[i].op
		switch {
		case o.Kind != history.Consume:
		case o.Value == a.Value:
			o.Value = b.Value
		case o.Value == b.Value:
			o.Value = a.Value
		}
	}
	return ops, true
}

func sortedKeys(m map[simTP][]int) []simTP {
	keys := make([]simTP, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b simTP) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return keys
}

func duplicateRead(idempotent bool) func(*rand.Rand, []simOp) ([]simOp, bool) {
	return func(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
		reads := readPositions(ops)
		var cands []int
		for _, i := range acknowledged(ops) {
			if (ops[i].op.Idempotence != nil) == idempotent && len(reads[ops[i].op.Value]) == 1 {
				cands = append(cands, i)
			}
		}
		i, ok := pick(rng, cands)
		if !ok {
			return nil, false
		}
		p := ops[i].op
		last := ops[len(ops)-1].op.Time
		return append(ops, simOp{op: history.Op{Kind: history.Consume, Member: "dup-reader", Topic: p.Topic, Partition: p.Partition,
			Offset: p.Offset + 1_000_000, Value: p.Value, Time: last}}), true
	}
}

func acceptStale(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	var cands []int
	for i, o := range ops {
		if !o.staleReject || o.op.Outcome != history.Rejected {
			continue
		}
		// Flagged only if a newer grant was seen before the commit was
		// invoked; otherwise the two were concurrent.
		for _, g := range ops[:i] {
			if g.op.Kind == history.Lease && g.op.Topic == o.op.Topic && g.op.Partition == o.op.Partition &&
				g.op.LeaseEpoch > o.op.LeaseEpoch && g.op.Time < o.op.Invoke {
				cands = append(cands, i)
				break
			}
		}
	}
	i, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	o := &ops[i]
	// The offset the group had anyway: accepting it moves nothing.
	o.op.Outcome, o.op.Error, o.op.Offset = history.Accepted, "", o.committed
	return ops, true
}

func moveCommitBack(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	var accepted []int
	var resets []history.Op
	for i, o := range ops {
		switch {
		case o.op.Kind == history.Commit && o.op.Outcome == history.Accepted:
			accepted = append(accepted, i)
		case o.op.Kind == history.Reset:
			resets = append(resets, o.op)
		}
	}
	type pair struct{ p, c int }
	var cands []pair
	for _, c := range accepted {
		oc := ops[c].op
		for _, p := range accepted {
			op := ops[p].op
			if op.Topic == oc.Topic && op.Partition == oc.Partition && op.Time < oc.Invoke && op.Offset > 0 &&
				!resetBetween(resets, op, oc) {
				cands = append(cands, pair{p, c})
			}
		}
	}
	x, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	ops[x.c].op.Offset = ops[x.p].op.Offset - 1
	return ops, true
}

// resetBetween reports whether a reset of the commits' partition may have
// taken effect between p and c: the definition, checked naively.
func resetBetween(resets []history.Op, p, c history.Op) bool {
	for _, r := range resets {
		if r.Topic == c.Topic && r.Partition == c.Partition && r.Invoke < c.Time && r.Time > p.Invoke {
			return true
		}
	}
	return false
}

func swapSequences(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	type key struct {
		tp    simTP
		pid   int64
		epoch int32
	}
	groups := map[key][]int{}
	var keys []key
	for _, i := range acknowledged(ops) {
		o := ops[i].op
		if o.Idempotence == nil {
			continue
		}
		k := key{simTP{o.Topic, o.Partition}, o.Idempotence.ProducerID, o.Idempotence.ProducerEpoch}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	var cands [][]int
	for _, k := range keys {
		if len(groups[k]) >= 2 {
			cands = append(cands, groups[k])
		}
	}
	g, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	x := rng.IntN(len(g))
	y := (x + 1 + rng.IntN(len(g)-1)) % len(g)
	a, b := *ops[g[x]].op.Idempotence, *ops[g[y]].op.Idempotence
	a.Sequence, b.Sequence = b.Sequence, a.Sequence
	ops[g[x]].op.Idempotence, ops[g[y]].op.Idempotence = &a, &b
	return ops, true
}

func failReadWrite(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	reads := readPositions(ops)
	var cands []int
	for _, i := range acknowledged(ops) {
		if len(reads[ops[i].op.Value]) > 0 {
			cands = append(cands, i)
		}
	}
	i, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	o := &ops[i].op
	o.Outcome, o.Offset, o.Error = history.Failed, 0, "definite error"
	return ops, true
}

func ghostRead(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	last := ops[len(ops)-1].op.Time
	return append(ops, simOp{op: history.Op{Kind: history.Consume, Member: "ghost-reader", Topic: "a", Partition: 0,
		Offset: 1_000_000 + rng.Int64N(100), Value: "ghost", Time: last}}), true
}

func dropMiddleRead(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	type session struct {
		group, member string
		tp            simTP
		epoch         int64
	}
	readers := map[simPos]int{} // reads per position
	bySession := map[session][]int{}
	var order []session
	for i, o := range ops {
		if o.op.Kind != history.Consume || o.op.Member == "drainer" { // the drain is the final log, not a lease
			continue
		}
		readers[simPos{o.op.Topic, o.op.Partition, o.op.Offset}]++
		s := session{o.op.Group, o.op.Member, simTP{o.op.Topic, o.op.Partition}, o.op.LeaseEpoch}
		if bySession[s] == nil {
			order = append(order, s)
		}
		bySession[s] = append(bySession[s], i)
	}
	var cands []int
	for _, s := range order {
		r := bySession[s]
		for j := 1; j+1 < len(r); j++ {
			prev, cur, next := ops[r[j-1]].op.Offset, ops[r[j]].op.Offset, ops[r[j+1]].op.Offset
			if prev < cur && cur < next && readers[simPos{s.tp.topic, s.tp.partition, cur}] > 1 {
				cands = append(cands, r[j])
			}
		}
	}
	i, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	return slices.Delete(ops, i, i+1), true
}

// shrinkDrain models a log that lost its tail after group members read it
// (a power loss under a journal that does not fsync): the final drain of
// one partition misses its last 1-3 records, acknowledged ones among them,
// and ends where they began.
func shrinkDrain(rng *rand.Rand, ops []simOp) ([]simOp, bool) {
	acked := map[string]int64{} // value -> acknowledged offset
	drained := map[string]int{} // value -> the drainer's reads of it
	byTP := map[simTP][]int{}   // the drainer's reads, in order
	drains := map[simTP]int{}
	for i, o := range ops {
		tp := simTP{o.op.Topic, o.op.Partition}
		switch {
		case o.op.Kind == history.Produce && o.op.Outcome == history.OK:
			acked[o.op.Value] = o.op.Offset
		case o.op.Kind == history.Consume && o.op.Member == "drainer":
			byTP[tp] = append(byTP[tp], i)
			drained[o.op.Value]++
		case o.op.Kind == history.Drain:
			drains[tp] = i
		}
	}
	// Cut only records the drain read once, at their acknowledged offset
	// (a non-idempotent retry's twin elsewhere would add an inconsistent
	// offset to the lost write), and only tails ending in an acknowledged
	// record.
	clean := func(i int) bool {
		o := ops[i].op
		off, ok := acked[o.Value]
		return drained[o.Value] == 1 && (!ok || off == o.Offset)
	}
	var cands []simTP
	for tp, r := range byTP {
		last := r[len(r)-1]
		if _, ok := acked[ops[last].op.Value]; len(r) >= 3 && ok && clean(last) && clean(r[len(r)-2]) && clean(r[len(r)-3]) {
			cands = append(cands, tp)
		}
	}
	slices.SortFunc(cands, func(a, b simTP) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	tp, ok := pick(rng, cands)
	if !ok {
		return nil, false
	}
	r := byTP[tp]
	k := 1 + rng.IntN(3)
	cut := r[len(r)-k:]
	ops[drains[tp]].op.Offset = ops[cut[0]].op.Offset
	out := ops[:0:0]
	for i, o := range ops {
		if !slices.Contains(cut, i) {
			out = append(out, o)
		}
	}
	return out, true
}
