package checker

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/chaos/history"
)

// builder writes a hand-made history through the real Recorder, with a
// fake clock that the builder moves. Every method returns the op's line.
type builder struct {
	t   testing.TB
	ops []history.Op
	now time.Duration
}

func newBuilder(t testing.TB) *builder { return &builder{t: t} }

// op appends op. A zero Time means 10ns after the previous op; a zero
// Invoke (for kinds that have one) means 5ns before Time.
func (b *builder) op(op history.Op) int {
	b.t.Helper()
	if op.Time == 0 {
		op.Time = b.now + 10
	}
	if op.Time < b.now {
		b.t.Fatalf("op %+v at %v before the previous op at %v", op, op.Time, b.now)
	}
	b.now = op.Time
	if op.Invoke == 0 && (op.Kind == history.Produce || op.Kind == history.Commit || op.Kind == history.Reset) {
		op.Invoke = op.Time - 5
	}
	b.ops = append(b.ops, op)
	return len(b.ops) + 1 // the header is line 1
}

// produce appends an acknowledged produce of value to t/partition@offset by
// the non-idempotent producer "p".
func (b *builder) produce(value string, partition int32, offset int64) int {
	return b.op(history.Op{Kind: history.Produce, Producer: "p", Topic: "t", Partition: partition, Offset: offset, Value: value, Outcome: history.OK})
}

// produceIdem is produce by the idempotent producer "i" (id 1, epoch 0).
func (b *builder) produceIdem(value string, partition int32, offset int64, seq int32) int {
	return b.op(history.Op{Kind: history.Produce, Producer: "i", Idempotence: &history.Idempotence{ProducerID: 1, Sequence: seq},
		Topic: "t", Partition: partition, Offset: offset, Value: value, Outcome: history.OK})
}

// attempt appends an unacknowledged produce (failed or indeterminate).
func (b *builder) attempt(value string, partition int32, outcome history.Outcome) int {
	return b.op(history.Op{Kind: history.Produce, Producer: "p", Topic: "t", Partition: partition, Value: value, Outcome: outcome})
}

// consume appends a read by member of group "g" under lease epoch 1.
func (b *builder) consume(member string, partition int32, offset int64, value string) int {
	return b.op(history.Op{Kind: history.Consume, Group: "g", Member: member, LeaseEpoch: 1, Topic: "t", Partition: partition, Offset: offset, Value: value})
}

func (b *builder) drain(partition int32, end int64) int {
	return b.op(history.Op{Kind: history.Drain, Topic: "t", Partition: partition, Offset: end})
}

func (b *builder) lease(member string, partition int32, epoch int64, at time.Duration) int {
	return b.op(history.Op{Kind: history.Lease, Group: "g", Member: member, Topic: "t", Partition: partition, LeaseEpoch: epoch, Time: at})
}

func (b *builder) commit(member string, partition int32, offset, epoch int64, outcome history.Outcome, invoke, done time.Duration) int {
	return b.op(history.Op{Kind: history.Commit, Group: "g", Member: member, Topic: "t", Partition: partition, Offset: offset,
		LeaseEpoch: epoch, Outcome: outcome, Invoke: invoke, Time: done})
}

func (b *builder) reset(partition int32, offset int64, invoke, done time.Duration) int {
	return b.op(history.Op{Kind: history.Reset, Group: "g", Topic: "t", Partition: partition, Offset: offset, Invoke: invoke, Time: done})
}

// bytes records the ops.
func (b *builder) bytes() []byte {
	b.t.Helper()
	return recordOps(b.t, b.ops)
}

func (b *builder) check(opts Options) Result {
	b.t.Helper()
	res, err := Check(bytes.NewReader(b.bytes()), opts)
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

// recordOps writes ops (in time order) through a Recorder whose clock is set
// to each op's Time.
func recordOps(t testing.TB, ops []history.Op) []byte {
	t.Helper()
	var buf bytes.Buffer
	var now time.Duration
	r, err := history.NewRecorder(&buf, history.Config{
		Scenario: "test", Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Clock: func() time.Duration { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		now, op.Time = op.Time, 0
		if err := r.Record(op); err != nil {
			t.Fatalf("record %+v: %v", op, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// expect fails unless res has exactly the anomalies in want (kind → count),
// printing the report when it does not.
func expect(t testing.TB, res Result, want map[Kind]int) {
	t.Helper()
	for _, k := range Kinds() {
		if res.Anomalies[k] != want[k] {
			t.Errorf("%s: %d anomalies, want %d", k, res.Anomalies[k], want[k])
		}
	}
	ok := true
	for k, n := range want {
		if n > 0 && !k.Tolerated() {
			ok = false
		}
	}
	if res.OK() != ok {
		t.Errorf("OK() = %v, want %v", res.OK(), ok)
	}
	if t.Failed() {
		var b strings.Builder
		res.Report(&b)
		t.Log("\n" + b.String())
	}
}

// expectLines fails unless the first example of kind involves exactly the
// given lines, and its description mentions every string in mentions.
func expectLines(t testing.TB, res Result, k Kind, lines []int, mentions ...string) {
	t.Helper()
	ex := res.Examples[k]
	if len(ex) == 0 {
		t.Fatalf("no %s example", k)
	}
	slices.Sort(lines)
	if !slices.Equal(ex[0].Lines, lines) {
		t.Errorf("%s: lines %v, want %v (%s)", k, ex[0].Lines, lines, ex[0])
	}
	for _, m := range mentions {
		if !strings.Contains(ex[0].Description, m) {
			t.Errorf("%s: description %q does not mention %q", k, ex[0].Description, m)
		}
	}
}

func none() map[Kind]int { return map[Kind]int{} }

func one(k Kind) map[Kind]int { return map[Kind]int{k: 1} }

func vals(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return s
}
