package checker

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/chaos/history"
)

// Each anomaly kind has a hand-written history that shows it — the checker
// must find it and name the lines — and near misses that must pass. A check
// that never fails proves nothing, so the failing case comes first.

func TestLostWrite(t *testing.T) {
	t.Run("acknowledged, drained past, never read", func(t *testing.T) {
		b := newBuilder(t)
		b.produce("a", 0, 0)
		lost := b.produce("b", 0, 1)
		b.produce("c", 0, 2)
		b.consume("m", 0, 0, "a")
		b.consume("m", 0, 2, "c")
		drain := b.drain(0, 3)
		res := b.check(Options{})
		expect(t, res, one(LostWrite))
		expectLines(t, res, LostWrite, []int{lost, drain}, `"b"`, "t/0@1", "reached offset 3")
		if res.Acknowledged != 3 || res.AcknowledgedRead != 2 || res.Undrained != 0 {
			t.Errorf("acknowledged %d, read %d, undrained %d; want 3, 2, 0", res.Acknowledged, res.AcknowledgedRead, res.Undrained)
		}
	})
	t.Run("read by members, missing from the final drain", func(t *testing.T) {
		b := newBuilder(t)
		b.produce("a", 0, 0)
		lost := b.produce("b", 0, 1)
		b.consume("m", 0, 0, "a")
		b.consume("m", 0, 1, "b")
		b.op(history.Op{Kind: history.Consume, Topic: "t", Partition: 0, Offset: 0, Value: "a", Member: "drainer"})
		drain := b.op(history.Op{Kind: history.Drain, Topic: "t", Partition: 0, Offset: 1, Member: "drainer"})
		res := b.check(Options{})
		expect(t, res, one(LostWrite))
		expectLines(t, res, LostWrite, []int{lost, drain}, `"b"`, "is gone", "ended at offset 1")
	})
	t.Run("an incomplete drain: acknowledged records past it are unreadable", func(t *testing.T) {
		b := newBuilder(t)
		b.produce("a", 0, 0)
		lost := b.produce("b", 0, 1)
		b.consume("m", 0, 1, "b")
		b.op(history.Op{Kind: history.Consume, Topic: "t", Partition: 0, Offset: 0, Value: "a", Member: "drainer"})
		drain := b.op(history.Op{Kind: history.Drain, Topic: "t", Partition: 0, Offset: 1, Member: "drainer", Error: "no replica has entry 1"})
		res := b.check(Options{})
		expect(t, res, one(LostWrite))
		expectLines(t, res, LostWrite, []int{lost, drain}, `"b"`, "unreadable", "no replica has entry 1")
	})
	t.Run("no drain: not checked, counted", func(t *testing.T) {
		b := newBuilder(t)
		b.produce("a", 0, 0)
		b.produce("b", 0, 1)
		b.consume("m", 0, 0, "a")
		res := b.check(Options{})
		expect(t, res, none())
		if res.Undrained != 1 {
			t.Errorf("undrained %d, want 1", res.Undrained)
		}
	})
	t.Run("drain ended before the offset", func(t *testing.T) {
		b := newBuilder(t)
		b.produce("a", 0, 0)
		b.produce("b", 0, 1)
		b.consume("m", 0, 0, "a")
		b.drain(0, 1)
		b.drain(1, 5) // another partition's drain covers nothing here
		expect(t, b.check(Options{}), none())
	})
	t.Run("indeterminate and failed writes never read", func(t *testing.T) {
		b := newBuilder(t)
		b.attempt("x", 0, history.Indeterminate)
		b.attempt("y", -1, history.Indeterminate)
		b.attempt("z", 0, history.Failed)
		b.produce("a", 0, 0)
		b.consume("m", 0, 0, "a")
		b.drain(0, 1)
		res := b.check(Options{})
		expect(t, res, none())
		if res.Indeterminate != 2 || res.IndeterminateUnread != 2 || res.Failed != 1 {
			t.Errorf("indeterminate %d (unread %d), failed %d; want 2 (2), 1", res.Indeterminate, res.IndeterminateUnread, res.Failed)
		}
	})
}

func TestDuplicate(t *testing.T) {
	t.Run("idempotent value at two offsets", func(t *testing.T) {
		b := newBuilder(t)
		p := b.produceIdem("a", 0, 0, 0)
		r1 := b.consume("m", 0, 0, "a")
		r2 := b.consume("m", 0, 1, "a")
		res := b.check(Options{})
		expect(t, res, one(Duplicate))
		expectLines(t, res, Duplicate, []int{p, r1, r2}, `"a"`, "t/0@0", "t/0@1", "idempotent")
	})
	t.Run("non-idempotent retry: tolerated, reported separately", func(t *testing.T) {
		b := newBuilder(t)
		b.attempt("a", 0, history.Indeterminate)
		b.consume("m", 0, 0, "a")
		b.consume("m", 0, 1, "a")
		res := b.check(Options{})
		expect(t, res, one(RetryDuplicate))
		if !res.OK() {
			t.Error("a tolerated duplicate failed the check")
		}
	})
	t.Run("policy: no duplicates from anyone", func(t *testing.T) {
		b := newBuilder(t)
		b.attempt("a", 0, history.Indeterminate)
		b.consume("m", 0, 0, "a")
		b.consume("m", 0, 1, "a")
		expect(t, b.check(Options{AllowDuplicates: func(string, bool) bool { return false }}), one(Duplicate))
	})
	t.Run("policy per producer name", func(t *testing.T) {
		b := newBuilder(t)
		b.op(history.Op{Kind: history.Produce, Producer: "legacy", Topic: "t", Partition: 0, Value: "a", Outcome: history.Indeterminate})
		b.op(history.Op{Kind: history.Produce, Producer: "strict", Topic: "t", Partition: 0, Value: "b", Outcome: history.Indeterminate})
		for i, v := range []string{"a", "a", "b", "b"} {
			b.consume("m", 0, int64(i), v)
		}
		policy := func(producer string, _ bool) bool { return producer == "legacy" }
		expect(t, b.check(Options{AllowDuplicates: policy}), map[Kind]int{Duplicate: 1, RetryDuplicate: 1})
	})
	t.Run("same offset read twice is no duplicate", func(t *testing.T) {
		b := newBuilder(t)
		b.produceIdem("a", 0, 0, 0)
		b.consume("m", 0, 0, "a")
		b.consume("n", 0, 0, "a")
		b.consume("m", 0, 0, "a") // a re-read
		expect(t, b.check(Options{}), none())
	})
}

func TestInconsistentOffset(t *testing.T) {
	t.Run("one offset read with two values", func(t *testing.T) {
		b := newBuilder(t)
		b.attempt("a", 0, history.Indeterminate)
		b.attempt("b", 0, history.Indeterminate)
		r1 := b.consume("m", 0, 4, "a")
		r2 := b.consume("n", 0, 4, "b")
		res := b.check(Options{})
		expect(t, res, one(InconsistentOffset))
		expectLines(t, res, InconsistentOffset, []int{r1, r2}, "t/0@4", `"a" (read`, `"b" (read`)
	})
	t.Run("acknowledged offset read with another value", func(t *testing.T) {
		b := newBuilder(t)
		ack := b.produce("a", 0, 4)
		b.attempt("b", 0, history.Indeterminate)
		r := b.consume("m", 0, 4, "b")
		res := b.check(Options{})
		expect(t, res, one(InconsistentOffset))
		expectLines(t, res, InconsistentOffset, []int{ack, r}, `"a" (acknowledged`, `"b" (read`)
	})
	t.Run("two values acknowledged at one offset", func(t *testing.T) {
		b := newBuilder(t)
		b.produce("a", 0, 4)
		b.produce("b", 0, 4)
		expect(t, b.check(Options{}), one(InconsistentOffset))
	})
	t.Run("read in another partition than acknowledged", func(t *testing.T) {
		b := newBuilder(t)
		ack := b.produce("a", 0, 4)
		b.consume("m", 0, 4, "a")
		r := b.consume("m", 1, 4, "a")
		res := b.check(Options{})
		expect(t, res, map[Kind]int{InconsistentOffset: 1, RetryDuplicate: 1})
		expectLines(t, res, InconsistentOffset, []int{ack, r}, "t/1@4", "wrote to t/0@4")
	})
	t.Run("unacknowledged write read in another partition", func(t *testing.T) {
		b := newBuilder(t)
		p := b.attempt("a", 2, history.Indeterminate)
		r := b.consume("m", 3, 0, "a")
		res := b.check(Options{})
		expect(t, res, one(InconsistentOffset))
		expectLines(t, res, InconsistentOffset, []int{p, r}, "wrote to t/2")
	})
	t.Run("server-chosen partition read in another topic", func(t *testing.T) {
		b := newBuilder(t)
		b.attempt("a", -1, history.Indeterminate)
		b.op(history.Op{Kind: history.Consume, Member: "m", Topic: "other", Partition: 0, Offset: 0, Value: "a"})
		expect(t, b.check(Options{}), one(InconsistentOffset))
	})
	t.Run("acknowledged at one offset, found at another", func(t *testing.T) {
		b := newBuilder(t)
		ack := b.produce("a", 0, 4)
		r := b.consume("m", 0, 5, "a")
		res := b.check(Options{})
		expect(t, res, one(InconsistentOffset))
		expectLines(t, res, InconsistentOffset, []int{ack, r}, "acknowledged at t/0@4", "nobody read", "read at t/0@5")
	})
	t.Run("consistent", func(t *testing.T) {
		b := newBuilder(t)
		b.produce("a", 0, 4)
		b.attempt("b", -1, history.Indeterminate)
		b.consume("m", 0, 4, "a")
		b.consume("n", 0, 4, "a")
		b.consume("n", 7, 0, "b") // the server chose partition 7
		expect(t, b.check(Options{}), none())
	})
}

func TestSequenceOrder(t *testing.T) {
	t.Run("later sequence at a lower offset", func(t *testing.T) {
		b := newBuilder(t)
		s0 := b.produceIdem("a", 0, 5, 0)
		s1 := b.produceIdem("b", 0, 3, 1)
		res := b.check(Options{})
		expect(t, res, one(SequenceOrder))
		expectLines(t, res, SequenceOrder, []int{s0, s1}, "sequence 0", "offset 5", "sequence 1", "offset 3")
	})
	t.Run("sequence written twice", func(t *testing.T) {
		b := newBuilder(t)
		s0 := b.produceIdem("a", 0, 5, 0)
		s1 := b.produceIdem("b", 0, 6, 0)
		res := b.check(Options{})
		expect(t, res, one(SequenceOrder))
		expectLines(t, res, SequenceOrder, []int{s0, s1}, "sequence 0 written twice")
	})
	t.Run("indeterminate write placed by its read", func(t *testing.T) {
		b := newBuilder(t)
		b.produceIdem("a", 0, 5, 0)
		b.op(history.Op{Kind: history.Produce, Producer: "i", Idempotence: &history.Idempotence{ProducerID: 1, Sequence: 1},
			Topic: "t", Partition: -1, Value: "b", Outcome: history.Indeterminate})
		b.consume("m", 0, 2, "b")
		expect(t, b.check(Options{}), one(SequenceOrder))
	})
	t.Run("in order; other epochs, producers and partitions are independent", func(t *testing.T) {
		b := newBuilder(t)
		b.produceIdem("a", 0, 3, 0)
		b.produceIdem("b", 0, 5, 1) // a gap in offsets is fine
		b.produceIdem("c", 1, 0, 2) // another partition
		b.op(history.Op{Kind: history.Produce, Producer: "i", Idempotence: &history.Idempotence{ProducerID: 1, ProducerEpoch: 1, Sequence: 0},
			Topic: "t", Partition: 0, Offset: 1, Value: "d", Outcome: history.OK}) // a new epoch starts over
		b.op(history.Op{Kind: history.Produce, Producer: "j", Idempotence: &history.Idempotence{ProducerID: 2, Sequence: 9},
			Topic: "t", Partition: 0, Offset: 2, Value: "e", Outcome: history.OK})
		b.produce("f", 0, 0) // not idempotent
		expect(t, b.check(Options{}), map[Kind]int{})
	})
}

func TestFailedWriteRead(t *testing.T) {
	b := newBuilder(t)
	p := b.attempt("a", 0, history.Failed)
	b.attempt("b", 0, history.Failed)
	r := b.consume("m", 0, 0, "a")
	res := b.check(Options{})
	expect(t, res, one(FailedWriteRead))
	expectLines(t, res, FailedWriteRead, []int{p, r}, `"a"`, "t/0@0")
}

func TestUnknownValue(t *testing.T) {
	b := newBuilder(t)
	b.produce("a", 0, 0)
	b.consume("m", 0, 0, "a")
	r := b.consume("m", 0, 1, "ghost")
	b.consume("n", 0, 1, "ghost") // reported once per value
	res := b.check(Options{})
	expect(t, res, one(UnknownValue))
	expectLines(t, res, UnknownValue, []int{r}, `"ghost"`, "t/0@1")
}

func TestStaleCommit(t *testing.T) {
	// c0 holds epoch 1 from t=10; c1 is granted epoch 2, and learns of it
	// at t=100.
	base := func(t *testing.T) *builder {
		b := newBuilder(t)
		b.lease("c0", 0, 1, 10)
		b.lease("c1", 0, 2, 100)
		return b
	}
	t.Run("accepted after the newer grant", func(t *testing.T) {
		b := base(t)
		cm := b.commit("c0", 0, 7, 1, history.Accepted, 110, 120)
		res := b.check(Options{})
		expect(t, res, one(StaleCommit))
		expectLines(t, res, StaleCommit, []int{3, cm}, "lease epoch 1", "lease epoch 2", "c0", "c1")
	})
	t.Run("rejected", func(t *testing.T) {
		b := base(t)
		b.commit("c0", 0, 7, 1, history.Rejected, 110, 120)
		b.commit("c0", 0, 7, 1, history.Indeterminate, 130, 140)
		expect(t, b.check(Options{}), none())
	})
	t.Run("concurrent with the grant", func(t *testing.T) {
		b := base(t)
		// Invoked before c1 saw its grant: the server may have applied it
		// before granting epoch 2.
		b.commit("c0", 0, 7, 1, history.Accepted, 100, 120)
		expect(t, b.check(Options{}), none())
	})
	t.Run("standalone commit", func(t *testing.T) {
		b := base(t)
		b.op(history.Op{Kind: history.Commit, Group: "g", Topic: "t", Partition: 0, Offset: 7, Outcome: history.Accepted, Invoke: 110, Time: 120})
		expect(t, b.check(Options{}), none())
	})
	t.Run("current epoch, or another partition's lease", func(t *testing.T) {
		b := base(t)
		b.lease("c2", 1, 5, 105)
		b.commit("c1", 0, 7, 2, history.Accepted, 110, 120)
		b.commit("c0", 1, 7, 4, history.Accepted, 90, 130)
		expect(t, b.check(Options{}), none())
	})
}

func TestCommitBackwards(t *testing.T) {
	t.Run("lower offset after a completed commit", func(t *testing.T) {
		b := newBuilder(t)
		p := b.commit("c0", 0, 10, 1, history.Accepted, 10, 20)
		cm := b.commit("c0", 0, 5, 1, history.Accepted, 30, 40)
		res := b.check(Options{})
		expect(t, res, one(CommitBackwards))
		expectLines(t, res, CommitBackwards, []int{p, cm}, "offset 5", "offset 10")
	})
	t.Run("a reset before the first commit excuses nothing", func(t *testing.T) {
		b := newBuilder(t)
		b.reset(0, 0, 1, 5)
		b.commit("c0", 0, 10, 1, history.Accepted, 10, 20)
		b.commit("c0", 0, 5, 1, history.Accepted, 30, 40)
		expect(t, b.check(Options{}), one(CommitBackwards))
	})
	t.Run("the highest earlier commit counts, not the last", func(t *testing.T) {
		b := newBuilder(t)
		b.commit("c0", 0, 10, 1, history.Accepted, 10, 20)
		b.commit("c0", 0, 3, 1, history.Accepted, 10, 25) // concurrent with the first: fine
		b.commit("c0", 0, 8, 1, history.Accepted, 30, 40) // below 10
		expect(t, b.check(Options{}), one(CommitBackwards))
	})
	t.Run("concurrent commits may apply in either order", func(t *testing.T) {
		b := newBuilder(t)
		b.commit("c0", 0, 10, 1, history.Accepted, 10, 30)
		b.commit("c1", 0, 5, 2, history.Accepted, 20, 40)
		expect(t, b.check(Options{}), none())
	})
	t.Run("a reset in between", func(t *testing.T) {
		b := newBuilder(t)
		b.commit("c0", 0, 10, 1, history.Accepted, 10, 20)
		b.reset(0, 0, 25, 28)
		b.commit("c0", 0, 5, 1, history.Accepted, 30, 40)
		expect(t, b.check(Options{}), none())
	})
	t.Run("a reset concurrent with either commit", func(t *testing.T) {
		b := newBuilder(t)
		b.commit("c0", 0, 10, 1, history.Accepted, 10, 20)
		b.commit("c0", 0, 5, 1, history.Accepted, 30, 40)
		b.reset(0, 0, 35, 50) // began before the second commit ended
		expect(t, b.check(Options{}), none())
	})
	t.Run("rejected, indeterminate, other partitions and groups", func(t *testing.T) {
		b := newBuilder(t)
		b.commit("c0", 0, 10, 1, history.Accepted, 10, 20)
		b.commit("c0", 0, 5, 1, history.Rejected, 30, 40)
		b.commit("c0", 0, 4, 1, history.Indeterminate, 30, 40)
		b.commit("c0", 1, 3, 1, history.Accepted, 30, 40)
		b.op(history.Op{Kind: history.Commit, Group: "h", Member: "c0", Topic: "t", Partition: 0, Offset: 2, LeaseEpoch: 1, Outcome: history.Accepted, Invoke: 45, Time: 50})
		b.commit("c0", 0, 10, 1, history.Accepted, 55, 60) // equal is not backwards
		expect(t, b.check(Options{}), none())
	})
}

func TestConsumerSkip(t *testing.T) {
	t.Run("skips a record another member read", func(t *testing.T) {
		b := newBuilder(t)
		for i, v := range vals("v", 4) {
			b.produce(v, 0, int64(i))
		}
		b.consume("m", 0, 0, "v0")
		before := b.consume("m", 0, 1, "v1")
		witness := b.consume("n", 0, 2, "v2")
		after := b.consume("m", 0, 3, "v3")
		res := b.check(Options{})
		expect(t, res, one(ConsumerSkip))
		expectLines(t, res, ConsumerSkip, []int{before, witness, after}, "member m", "t/0@1", "t/0@3", "skipping 1 offset", "first t/0@2")
	})
	t.Run("a gap nobody read", func(t *testing.T) {
		b := newBuilder(t)
		b.consume("m", 0, 0, "v0")
		b.consume("m", 0, 2, "v2") // offset 1 is a hole (or lost: that check's business)
		b.attempt("v0", 0, history.Indeterminate)
		b.attempt("v2", 0, history.Indeterminate)
		expect(t, b.check(Options{}), none())
	})
	t.Run("a new lease starts anywhere; re-reads go back", func(t *testing.T) {
		b := newBuilder(t)
		for i, v := range vals("v", 6) {
			b.attempt(v, 0, history.Indeterminate)
			b.consume("n", 0, int64(i), v)
		}
		b.consume("m", 0, 0, "v0")
		b.op(history.Op{Kind: history.Consume, Group: "g", Member: "m", LeaseEpoch: 2, Topic: "t", Partition: 0, Offset: 4, Value: "v4"})
		b.consume("m", 0, 1, "v1") // still lease 1: continues at 1
		b.consume("m", 0, 0, "v0") // back to 0
		b.consume("m", 0, 1, "v1")
		expect(t, b.check(Options{}), none())
	})
}

func TestInvalidHistory(t *testing.T) {
	b := newBuilder(t)
	b.produce("a", 0, 0)
	b.attempt("a", 0, history.Failed)
	_, err := Check(bytes.NewReader(b.bytes()), Options{})
	if !errors.Is(err, ErrInvalidHistory) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("value produced twice: %v, want ErrInvalidHistory naming line 3", err)
	}

	b = newBuilder(t)
	b.produce("a", 0, 0)
	b.produce("b", 0, 1)
	in := b.bytes()
	in = append(in[:len(in)-1], "\n{\"op\":\"consume\"}\n"...)
	_, err = Check(bytes.NewReader(in), Options{})
	var fe *history.FormatError
	if !errors.As(err, &fe) || fe.Line != 4 || fe.Field != "time" {
		t.Errorf("malformed history: %v, want a FormatError for line 4, field time", err)
	}

	if _, err := Check(strings.NewReader(""), Options{MaxExamples: -1}); err == nil || !strings.Contains(err.Error(), "MaxExamples") {
		t.Errorf("bad options: %v", err)
	}
}

func TestCheckFile(t *testing.T) {
	b := newBuilder(t)
	b.produce("a", 0, 0)
	b.drain(0, 1)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, b.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := CheckFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, res, one(LostWrite))
	if res.Header.Scenario != "test" || res.Ops != 2 {
		t.Errorf("header %+v, ops %d", res.Header, res.Ops)
	}
	if _, err := CheckFile(filepath.Join(t.TempDir(), "missing"), Options{}); err == nil {
		t.Error("missing file: no error")
	}
}

// All anomalies are counted; the first MaxExamples by line are kept.
func TestExamplesAreTheFirstByLine(t *testing.T) {
	b := newBuilder(t)
	var lines []int
	for i, v := range vals("v", 25) {
		lines = append(lines, b.produce(v, 0, int64(i)))
	}
	b.drain(0, 25)
	res := b.check(Options{MaxExamples: 4})
	if res.Anomalies[LostWrite] != 25 || len(res.Examples[LostWrite]) != 4 {
		t.Fatalf("%d lost writes, %d examples; want 25, 4", res.Anomalies[LostWrite], len(res.Examples[LostWrite]))
	}
	for i, a := range res.Examples[LostWrite] {
		if a.Lines[0] != lines[i] {
			t.Errorf("example %d starts at line %d, want %d", i, a.Lines[0], lines[i])
		}
	}
}

func TestReport(t *testing.T) {
	b := newBuilder(t)
	b.produce("a", 0, 0)
	b.produce("b", 0, 1)
	b.consume("m", 0, 0, "a")
	b.drain(0, 2)
	res := b.check(Options{})
	var out strings.Builder
	if err := res.Report(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`scenario "test"`,
		"acknowledged 2 (read 1, lost 1, not drained 0)",
		"lost-write           1",
		"retry-duplicate      0",
		"result: FAIL (1 anomalies)",
		"lost-write: first 1 of 1",
		`lines 3, 5: value "b" acknowledged at t/0@1`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	b = newBuilder(t)
	b.produce("a", 0, 0)
	out.Reset()
	res = b.check(Options{})
	res.Report(&out)
	if !strings.Contains(out.String(), "result: OK") || !strings.Contains(out.String(), "warning: no drain ops") {
		t.Errorf("report of a passing, undrained history:\n%s", out.String())
	}

	if err := res.Report(failWriter{}); err == nil {
		t.Error("Report hid a write error")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
