package checker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
)

// ErrInvalidHistory means the history is well-formed line by line but
// breaks a rule of the whole (a value produced twice). The harness that
// wrote it is at fault, not the system under test.
var ErrInvalidHistory = errors.New("checker: invalid history")

// CheckFile checks the history in the file at path.
func CheckFile(path string, opts Options) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("checker: %w", err)
	}
	defer f.Close()
	res, err := Check(f, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// Check reads a whole history from r and checks it. The error is about the
// input (unreadable, malformed, invalid); anomalies are in the Result.
func Check(r io.Reader, opts Options) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	opts = opts.withDefaults()
	hr, err := history.NewReader(r, opts.Reader)
	if err != nil {
		return Result{}, err
	}
	h := newHist(hr.Header())
	for {
		op, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Result{}, err
		}
		if err := h.add(hr.Line(), &op); err != nil {
			return Result{}, err
		}
	}
	return h.check(opts), nil
}

// checkOps checks ops held in memory, as Check would after reading them
// (line numbers count from 2). Tests use it to check many mutated histories
// without encoding each.
func checkOps(header history.Header, ops []history.Op, opts Options) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	opts = opts.withDefaults()
	h := newHist(header)
	var last time.Duration
	for i := range ops {
		if err := ops[i].Validate(); err != nil {
			return Result{}, fmt.Errorf("op %d: %w", i, err)
		}
		if ops[i].Time < last {
			return Result{}, fmt.Errorf("op %d: time %v before %v", i, ops[i].Time, last)
		}
		last = ops[i].Time
		if err := h.add(i+2, &ops[i]); err != nil {
			return Result{}, err
		}
	}
	return h.check(opts), nil
}

// The history in compact tables, in line order. Strings are interned;
// values, partitions, sessions and group partitions become small integers.

type (
	tpID      int32 // a (topic, partition)
	valID     int32 // a value
	sessionID int32 // a (group, member, topic, partition, lease epoch)
	gpID      int32 // a (group, topic, partition)
)

type topicPartition struct {
	topic     string
	partition int32
}

type pos struct {
	tp     tpID
	offset int64
}

type produceOp struct {
	line      int
	value     valID
	producer  string
	topic     string
	partition int32 // as recorded: -1 when the server chose and did not say
	tp        tpID  // -1 when partition is -1
	offset    int64 // acknowledged offset (outcome ok)
	outcome   history.Outcome
	idem      *history.Idempotence
}

type consumeOp struct {
	line    int
	value   valID
	tp      tpID
	offset  int64
	session sessionID
	member  string
}

type sessionKey struct {
	group, member string
	tp            tpID
	leaseEpoch    int64
}

type commitOp struct {
	line         int
	gp           gpID
	member       string
	offset       int64
	leaseEpoch   int64
	outcome      history.Outcome
	invoke, done time.Duration // op.Invoke, op.Time
}

type leaseOp struct {
	line   int
	member string
	epoch  int64
	at     time.Duration // op.Time: when the member learned of the grant
}

type resetOp struct {
	line         int
	offset       int64
	invoke, done time.Duration
}

type drainOp struct {
	line int
	end  int64
	// member is who drained (from offset 0): its reads of the partition
	// are the final log. "" (a drain that names no member): the reads of
	// every consumer together are.
	member string
	// err: the drain could read no further than end (incomplete).
	err string
}

type gpKey struct {
	group string
	tp    tpID
}

type valueInfo struct {
	str     string
	produce int32 // index in hist.produces, or -1
}

type hist struct {
	header history.Header
	ops    int

	strs map[string]string

	tps     []topicPartition
	tpIndex map[topicPartition]tpID

	vals     []valueInfo
	valIndex map[string]valID

	sessions     []sessionKey
	sessionIndex map[sessionKey]sessionID

	gps     []gpKey
	gpIndex map[gpKey]gpID

	produces []produceOp
	consumes []consumeOp
	commits  []commitOp
	leases   map[gpID][]leaseOp // in line (= time) order
	resets   map[gpID][]resetOp // in line order
	drains   map[tpID]drainOp   // the highest end per partition
	nLeases  int
	nResets  int
	nFaults  int
}

func newHist(h history.Header) *hist {
	return &hist{
		header:       h,
		strs:         map[string]string{},
		tpIndex:      map[topicPartition]tpID{},
		valIndex:     map[string]valID{},
		sessionIndex: map[sessionKey]sessionID{},
		gpIndex:      map[gpKey]gpID{},
		leases:       map[gpID][]leaseOp{},
		resets:       map[gpID][]resetOp{},
		drains:       map[tpID]drainOp{},
	}
}

func (h *hist) intern(s string) string {
	if v, ok := h.strs[s]; ok {
		return v
	}
	h.strs[s] = s
	return s
}

func (h *hist) tp(topic string, partition int32) tpID {
	k := topicPartition{topic, partition}
	if id, ok := h.tpIndex[k]; ok {
		return id
	}
	k.topic = h.intern(topic)
	id := tpID(len(h.tps))
	h.tps = append(h.tps, k)
	h.tpIndex[k] = id
	return id
}

func (h *hist) value(v string) valID {
	if id, ok := h.valIndex[v]; ok {
		return id
	}
	id := valID(len(h.vals))
	h.vals = append(h.vals, valueInfo{str: v, produce: -1})
	h.valIndex[v] = id
	return id
}

func (h *hist) session(k sessionKey) sessionID {
	if id, ok := h.sessionIndex[k]; ok {
		return id
	}
	k.group, k.member = h.intern(k.group), h.intern(k.member)
	id := sessionID(len(h.sessions))
	h.sessions = append(h.sessions, k)
	h.sessionIndex[k] = id
	return id
}

func (h *hist) gp(group string, tp tpID) gpID {
	k := gpKey{group, tp}
	if id, ok := h.gpIndex[k]; ok {
		return id
	}
	k.group = h.intern(group)
	id := gpID(len(h.gps))
	h.gps = append(h.gps, k)
	h.gpIndex[k] = id
	return id
}

// add stores one op (valid, as the Reader returns them).
func (h *hist) add(line int, op *history.Op) error {
	h.ops++
	switch op.Kind {
	case history.Produce:
		v := h.value(op.Value)
		if prev := h.vals[v].produce; prev >= 0 {
			return fmt.Errorf("%w: line %d: value %q was already produced at line %d (each produce attempt needs a unique value)",
				ErrInvalidHistory, line, op.Value, h.produces[prev].line)
		}
		h.vals[v].produce = int32(len(h.produces))
		p := produceOp{
			line: line, value: v, producer: h.intern(op.Producer), topic: h.intern(op.Topic),
			partition: op.Partition, tp: -1, offset: op.Offset, outcome: op.Outcome, idem: op.Idempotence,
		}
		if op.Partition >= 0 {
			p.tp = h.tp(op.Topic, op.Partition)
		}
		h.produces = append(h.produces, p)
	case history.Consume:
		tp := h.tp(op.Topic, op.Partition)
		h.consumes = append(h.consumes, consumeOp{
			line: line, value: h.value(op.Value), tp: tp, offset: op.Offset,
			session: h.session(sessionKey{op.Group, op.Member, tp, op.LeaseEpoch}),
			member:  h.intern(op.Member),
		})
	case history.Commit:
		h.commits = append(h.commits, commitOp{
			line: line, gp: h.gp(op.Group, h.tp(op.Topic, op.Partition)), member: h.intern(op.Member),
			offset: op.Offset, leaseEpoch: op.LeaseEpoch, outcome: op.Outcome, invoke: op.Invoke, done: op.Time,
		})
	case history.Lease:
		g := h.gp(op.Group, h.tp(op.Topic, op.Partition))
		h.leases[g] = append(h.leases[g], leaseOp{line: line, member: h.intern(op.Member), epoch: op.LeaseEpoch, at: op.Time})
		h.nLeases++
	case history.Reset:
		g := h.gp(op.Group, h.tp(op.Topic, op.Partition))
		h.resets[g] = append(h.resets[g], resetOp{line: line, offset: op.Offset, invoke: op.Invoke, done: op.Time})
		h.nResets++
	case history.Drain:
		tp := h.tp(op.Topic, op.Partition)
		if d, ok := h.drains[tp]; !ok || op.Offset > d.end {
			h.drains[tp] = drainOp{line: line, end: op.Offset, member: h.intern(op.Member), err: op.Error}
		}
	case history.Fault:
		// Faults are context for the report: the checker judges only what
		// clients observed, whatever the harness did to the servers.
		h.nFaults++
	default:
		// The Reader validates kinds; a new kind without a case here is a
		// programmer error.
		panic(fmt.Sprintf("checker: op kind %q not handled", op.Kind))
	}
	return nil
}

func (h *hist) posString(p pos) string {
	tp := h.tps[p.tp]
	return fmt.Sprintf("%s/%d@%d", tp.topic, tp.partition, p.offset)
}

func (h *hist) tpString(id tpID) string {
	tp := h.tps[id]
	return fmt.Sprintf("%s/%d", tp.topic, tp.partition)
}

// check runs the checks over a loaded history.
type check struct {
	*hist
	opts Options
	out  *collector
	res  Result
}

func (h *hist) check(opts Options) Result {
	c := &check{hist: h, opts: opts, out: newCollector(opts.MaxExamples)}
	return c.run()
}

func (c *check) run() Result {
	c.res = Result{
		Header:            c.header,
		Ops:               c.ops,
		Consumed:          len(c.consumes),
		Leases:            c.nLeases,
		Resets:            c.nResets,
		Faults:            c.nFaults,
		DrainedPartitions: len(c.drains),
	}
	r := c.checkReads()
	c.checkProduces(r)
	c.checkSkips(r)
	c.checkCommits()
	c.res.Anomalies = c.out.counts
	c.res.Examples = c.out.kept
	return c.res
}
