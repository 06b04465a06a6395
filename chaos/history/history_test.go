package history

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var testStart = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// fakeClock is a settable clock for deterministic times.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) set(d time.Duration)   { c.now.Store(int64(d)) }
func (c *fakeClock) get() time.Duration    { return time.Duration(c.now.Load()) }
func (c *fakeClock) cfg(cfg Config) Config { cfg.Clock = c.get; cfg.Start = testStart; return cfg }

// sampleOps has every kind, with optional fields both set and unset. Their
// Time is the time the test sets the clock to before recording them.
func sampleOps() []Op {
	return []Op{
		{Kind: Lease, Time: 100, Topic: "t", Partition: 0, Group: "g", Member: "c1", LeaseEpoch: 1},
		{Kind: Produce, Time: 200, Invoke: 150, Producer: "p1", Idempotence: &Idempotence{ProducerID: 7, ProducerEpoch: 0, Sequence: 0}, Topic: "t", Partition: 0, Offset: 0, Value: "p1-0", Outcome: OK},
		{Kind: Produce, Time: 300, Invoke: 160, Producer: "p2", Topic: "t", Partition: -1, Value: "p2-0", Outcome: Indeterminate, Error: "context deadline exceeded"},
		{Kind: Produce, Time: 300, Invoke: 300, Producer: "p2", Topic: "t", Partition: 1, Value: "p2-1", Outcome: Failed, Error: "record too large"},
		{Kind: Consume, Time: 400, Topic: "t", Partition: 0, Offset: 0, Value: "p1-0", Group: "g", Member: "c1", LeaseEpoch: 1},
		{Kind: Consume, Time: 410, Topic: "t", Partition: 1, Offset: 3, Value: "p2-0", Member: "reader"},
		{Kind: Commit, Time: 500, Invoke: 450, Topic: "t", Partition: 0, Offset: 1, Group: "g", Member: "c1", LeaseEpoch: 1, Outcome: Accepted},
		{Kind: Commit, Time: 600, Invoke: 550, Topic: "t", Partition: 0, Offset: 1, Group: "g", Member: "c0", LeaseEpoch: 0, Outcome: Rejected, Error: "stale lease epoch"},
		{Kind: Reset, Time: 700, Invoke: 650, Topic: "t", Partition: 0, Offset: 0, Group: "g"},
		{Kind: Drain, Time: 800, Topic: "t", Partition: 0, Offset: 1, Member: "drainer"},
		{Kind: Drain, Time: 800, Topic: "t", Partition: 1, Offset: 4},
		{Kind: Fault, Time: 900, FaultName: "kill", Target: "bookie-2"},
		{Kind: Fault, Time: 950, FaultName: "cut", Target: "ingest-1:bookie-3", Error: "proxy not running"},
	}
}

// sampleOpsV1 is sampleOps without the ops version 1 does not have.
func sampleOpsV1() []Op {
	var out []Op
	for _, op := range sampleOps() {
		if op.Kind != Fault {
			out = append(out, op)
		}
	}
	return out
}

// record writes ops through a Recorder with a fake clock set to each op's
// Time, and returns the bytes.
func record(t testing.TB, ops []Op) []byte {
	t.Helper()
	var buf bytes.Buffer
	var clk fakeClock
	r, err := NewRecorder(&buf, clk.cfg(Config{Scenario: "sample", Seed: 42}))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		clk.set(op.Time)
		op.Time = 0
		if err := r.Record(op); err != nil {
			t.Fatalf("record %+v: %v", op, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads a whole history.
func readAll(in []byte, cfg ReaderConfig) (Header, []Op, error) {
	r, err := NewReader(bytes.NewReader(in), cfg)
	if err != nil {
		return Header{}, nil, err
	}
	var ops []Op
	for {
		op, err := r.Next()
		if err == io.EOF {
			return r.Header(), ops, nil
		}
		if err != nil {
			return r.Header(), ops, err
		}
		ops = append(ops, op)
	}
}

func TestRecordAndReadBack(t *testing.T) {
	want := sampleOps()
	h, got, err := readAll(record(t, want), ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := Header{Format: Format, Version: Version, Start: testStart, Scenario: "sample", Seed: 42}
	if !reflect.DeepEqual(h, wantHeader) {
		t.Errorf("header %+v, want %+v", h, wantHeader)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n%+v\nwant\n%+v", got, want)
	}
}

func TestRecorderStampsNonDecreasingTimes(t *testing.T) {
	var buf bytes.Buffer
	var clk fakeClock
	r, err := NewRecorder(&buf, clk.cfg(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Duration{50, 40, 60} { // the clock steps back once
		clk.set(now)
		if err := r.Record(Op{Kind: Drain, Topic: "t", Offset: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Record(Op{Kind: Drain, Time: 5, Topic: "t"}); !errors.Is(err, ErrInvalidOp) {
		t.Errorf("op with Time set: %v, want ErrInvalidOp", err)
	}
	r.Close()
	_, ops, err := readAll(buf.Bytes(), ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var times []time.Duration
	for _, op := range ops {
		times = append(times, op.Time)
	}
	if want := []time.Duration{50, 50, 60}; !reflect.DeepEqual(times, want) {
		t.Errorf("times %v, want %v", times, want)
	}
}

// Invalid ops are refused with an error naming the field, and nothing of
// them reaches the writer.
func TestRecorderRefusesInvalidOps(t *testing.T) {
	valid := Op{Kind: Produce, Invoke: 0, Producer: "p", Topic: "t", Partition: 0, Offset: 5, Value: "v", Outcome: OK}
	for _, tc := range []struct {
		name  string
		edit  func(*Op)
		field string
	}{
		{"no kind", func(o *Op) { o.Kind = "" }, "op"},
		{"unknown kind", func(o *Op) { o.Kind = "poll" }, "op"},
		{"no value", func(o *Op) { o.Value = "" }, "value"},
		{"no producer", func(o *Op) { o.Producer = "" }, "producer"},
		{"no topic", func(o *Op) { o.Topic = "" }, "topic"},
		{"foreign field", func(o *Op) { o.Member = "c1" }, "member"},
		{"foreign lease epoch", func(o *Op) { o.LeaseEpoch = 3 }, "lease_epoch"},
		{"offset without ok", func(o *Op) { o.Outcome = Failed }, "offset"},
		{"error with ok", func(o *Op) { o.Error = "boom" }, "error"},
		{"commit outcome on produce", func(o *Op) { o.Outcome = Accepted }, "outcome"},
		{"negative offset", func(o *Op) { o.Offset = -1 }, "offset"},
		{"partition -1 with ok", func(o *Op) { o.Partition = -1 }, "partition"},
		{"partition -2", func(o *Op) { o.Partition = -2; o.Outcome = Indeterminate; o.Offset = 0 }, "partition"},
		{"invoke in the future", func(o *Op) { o.Invoke = time.Hour }, "invoke"},
		{"negative sequence", func(o *Op) { o.Idempotence = &Idempotence{Sequence: -1} }, "sequence"},
		{"bad utf-8", func(o *Op) { o.Value = "\xff" }, "value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r, err := NewRecorder(&buf, Config{Start: testStart})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			before := buf.Len()
			op := valid
			tc.edit(&op)
			err = r.Record(op)
			var fe *FormatError
			if !errors.Is(err, ErrInvalidOp) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Record: %v, want ErrInvalidOp for field %q", err, tc.field)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if buf.Len() != before {
				t.Errorf("refused op was written: %q", buf.Bytes()[before:])
			}
		})
	}
	// And the valid op itself is fine, or the table proves nothing.
	if err := (&valid).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRecorderLineTooLong(t *testing.T) {
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Config{MaxLineBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	op := Op{Kind: Consume, Topic: "t", Member: "m", Value: strings.Repeat("x", 300)}
	if err := r.Record(op); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("Record: %v, want ErrLineTooLong", err)
	}
	op.Value = "short"
	if err := r.Record(op); err != nil {
		t.Fatalf("a refused long line must not break the recorder: %v", err)
	}
	r.Close()
	if _, ops, err := readAll(buf.Bytes(), ReaderConfig{MaxLineBytes: 300}); err != nil || len(ops) != 1 {
		t.Fatalf("read back %d ops, %v", len(ops), err)
	}
}

// failingWriter accepts budget bytes, then fails (with a short write).
type failingWriter struct {
	budget int
	writes []int
}

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	if len(p) <= w.budget {
		w.budget -= len(p)
		return len(p), nil
	}
	n := w.budget
	w.budget = 0
	return n, errDiskFull
}

// A failed write is reported by the call that hit it, by every later call,
// and by Close: never dropped silently.
func TestRecorderWriteErrorIsSticky(t *testing.T) {
	w := &failingWriter{budget: 2000}
	r, err := NewRecorder(w, Config{BufferBytes: 1024, MaxLineBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	op := Op{Kind: Consume, Topic: "t", Member: "m", Value: strings.Repeat("v", 100)}
	var first error
	for i := 0; i < 100 && first == nil; i++ {
		first = r.Record(op)
	}
	if !errors.Is(first, ErrWrite) || !errors.Is(first, errDiskFull) {
		t.Fatalf("first error %v, want ErrWrite wrapping the writer's error", first)
	}
	if err := r.Record(op); !errors.Is(err, ErrWrite) {
		t.Errorf("Record after a failed write: %v, want ErrWrite", err)
	}
	if err := r.Flush(); !errors.Is(err, ErrWrite) {
		t.Errorf("Flush after a failed write: %v, want ErrWrite", err)
	}
	if err := r.Close(); !errors.Is(err, ErrWrite) {
		t.Errorf("Close after a failed write: %v, want ErrWrite", err)
	}
}

// A failure surfacing only at Close (the last buffered bytes) is reported
// by Close.
func TestRecorderCloseReportsFlushError(t *testing.T) {
	w := &failingWriter{budget: 0}
	r, err := NewRecorder(w, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Record(Op{Kind: Drain, Topic: "t"}); err != nil {
		t.Fatalf("buffered record failed early: %v", err)
	}
	if err := r.Close(); !errors.Is(err, errDiskFull) {
		t.Fatalf("Close: %v, want the writer's error", err)
	}
	if err := r.Record(Op{Kind: Drain, Topic: "t"}); err == nil {
		t.Fatal("Record after a failed Close succeeded")
	}
}

func TestRecorderClosed(t *testing.T) {
	r, err := NewRecorder(io.Discard, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(Op{Kind: Drain, Topic: "t"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v, want ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// The buffer is bounded: no write to the underlying writer exceeds
// BufferBytes, and the writer sees nothing until the buffer fills.
func TestRecorderBufferIsBounded(t *testing.T) {
	w := &failingWriter{budget: 1 << 30}
	r, err := NewRecorder(w, Config{BufferBytes: 4096, MaxLineBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	op := Op{Kind: Consume, Topic: "t", Member: "m", Value: strings.Repeat("v", 900)}
	if err := r.Record(op); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 0 {
		t.Fatalf("writer called before the buffer filled: %v", w.writes)
	}
	for range 50 {
		if err := r.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	for _, n := range w.writes {
		if n > 4096 {
			t.Fatalf("a write of %d bytes exceeds the 4096-byte buffer", n)
		}
	}
}

func TestRecorderConcurrent(t *testing.T) {
	var buf bytes.Buffer
	r, err := NewRecorder(&buf, Config{BufferBytes: 2048, MaxLineBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				inv := r.Now()
				err := r.Record(Op{Kind: Produce, Invoke: inv, Producer: fmt.Sprint("p", w), Topic: "t", Partition: int32(w), Offset: int64(i), Value: fmt.Sprintf("p%d-%d", w, i), Outcome: OK})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, ops, err := readAll(buf.Bytes(), ReaderConfig{}) // the Reader checks time order
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != writers*each {
		t.Fatalf("read %d ops, want %d", len(ops), writers*each)
	}
	next := make([]int64, writers) // each writer's ops in its own order
	for _, op := range ops {
		if op.Offset != next[op.Partition] {
			t.Fatalf("writer %d: offset %d, want %d", op.Partition, op.Offset, next[op.Partition])
		}
		next[op.Partition]++
	}
}

func TestConfigValidateReportsEverything(t *testing.T) {
	err := Config{MaxLineBytes: 10, BufferBytes: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "MaxLineBytes") || !strings.Contains(err.Error(), "BufferBytes") {
		t.Errorf("Config.Validate: %v, want both fields named", err)
	}
	err = ReaderConfig{MaxLineBytes: 1 << 30, MaxOps: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "MaxLineBytes") || !strings.Contains(err.Error(), "MaxOps") {
		t.Errorf("ReaderConfig.Validate: %v, want both fields named", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := (ReaderConfig{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

const header = `{"format":"sluice-history","version":1,"start":"2026-12-01T10:00:00Z","seed":0}`

// Every kind of malformed input gets an error naming its line and field.
func TestReaderErrors(t *testing.T) {
	okProduce := `{"op":"produce","time":10,"invoke":5,"producer":"p","topic":"t","partition":0,"offset":3,"value":"v","outcome":"ok"}`
	for _, tc := range []struct {
		name  string
		input string
		line  int
		field string
		msg   string
	}{
		{"empty", ``, 1, "", "no header"},
		{"header not json", "hello\n", 1, "", "invalid JSON"},
		{"other format", `{"format":"kafka","version":1,"start":"2026-12-01T10:00:00Z","seed":0}`, 1, "format", "not a history"},
		{"newer version", `{"format":"sluice-history","version":3,"start":"2026-12-01T10:00:00Z","seed":0}`, 1, "version", "unsupported version 3"},
		{"version zero", `{"format":"sluice-history","version":0,"start":"2026-12-01T10:00:00Z","seed":0}`, 1, "version", "unsupported version 0"},
		{"no start", `{"format":"sluice-history","version":1,"seed":0}`, 1, "start", "missing"},
		{"header unknown field", `{"format":"sluice-history","version":1,"start":"2026-12-01T10:00:00Z","seed":0,"x":1}`, 1, "x", "unknown field"},
		{"garbage line", header + "\n" + okProduce + "\n{nope\n", 3, "", "invalid JSON"},
		{"torn last line", header + "\n" + okProduce + "\n" + okProduce[:40], 3, "", "truncated"},
		{"empty line", header + "\n\n", 2, "", "empty line"},
		{"array", header + "\n[1]\n", 2, "", "want a JSON object"},
		{"trailing data", header + "\n" + okProduce + " {}\n", 2, "", "trailing data"},
		{"no op", header + "\n{\"time\":1}\n", 2, "op", "missing"},
		{"unknown op", header + "\n{\"op\":\"poll\",\"time\":1}\n", 2, "op", "unknown op"},
		{"unknown field", header + "\n" + strings.Replace(okProduce, `"op"`, `"colour":"red","op"`, 1) + "\n", 2, "colour", "unknown field"},
		{"wrong type", header + "\n" + strings.Replace(okProduce, `"offset":3`, `"offset":"3"`, 1) + "\n", 2, "offset", "wrong type"},
		{"fraction", header + "\n" + strings.Replace(okProduce, `"offset":3`, `"offset":3.5`, 1) + "\n", 2, "offset", "wrong type"},
		{"int32 overflow", header + "\n" + strings.Replace(okProduce, `"partition":0`, `"partition":4294967296`, 1) + "\n", 2, "partition", "wrong type"},
		{"missing offset", header + "\n" + strings.Replace(okProduce, `"offset":3,`, ``, 1) + "\n", 2, "offset", "missing"},
		{"missing time", header + "\n" + strings.Replace(okProduce, `"time":10,`, ``, 1) + "\n", 2, "time", "missing"},
		{"foreign field", header + "\n" + strings.Replace(okProduce, `"op"`, `"lease_epoch":1,"op"`, 1) + "\n", 2, "lease_epoch", "not part of a produce op"},
		{"half idempotence", header + "\n" + strings.Replace(okProduce, `"op"`, `"producer_id":1,"sequence":2,"op"`, 1) + "\n", 2, "producer_epoch", "come together"},
		{"bad outcome", header + "\n" + strings.Replace(okProduce, `"ok"`, `"accepted"`, 1) + "\n", 2, "outcome", "not a produce outcome"},
		{"negative offset", header + "\n" + strings.Replace(okProduce, `"offset":3`, `"offset":-3`, 1) + "\n", 2, "offset", "negative"},
		{"invoke after time", header + "\n" + strings.Replace(okProduce, `"invoke":5`, `"invoke":50`, 1) + "\n", 2, "invoke", "after time"},
		{"time goes back", header + "\n" + okProduce + "\n" + strings.Replace(strings.Replace(okProduce, `"time":10`, `"time":9`, 1), `"invoke":5`, `"invoke":1`, 1) + "\n", 3, "time", "completion order"},
		{"line too long", header + "\n" + `{"op":"drain","topic":"` + strings.Repeat("t", 300) + `"}` + "\n", 2, "", "longer than 256 bytes"},
		{"last line too long", header + "\n" + strings.Repeat("t", 257), 2, "", "longer than 256 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readAll([]byte(tc.input), ReaderConfig{MaxLineBytes: 256})
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v, want a *FormatError", err)
			}
			if fe.Line != tc.line || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("error %q: line %d field %q, want line %d field %q message containing %q", err, fe.Line, fe.Field, tc.line, tc.field, tc.msg)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("line %d", tc.line)) {
				t.Errorf("error %q does not name line %d", err, tc.line)
			}
		})
	}
}

func TestReaderAcceptsMissingFinalNewlineAndCRLF(t *testing.T) {
	in := header + "\r\n" + `{"op":"drain","time":1,"topic":"t","partition":0,"offset":0}`
	_, ops, err := readAll([]byte(in), ReaderConfig{})
	if err != nil || len(ops) != 1 {
		t.Fatalf("read %d ops, %v", len(ops), err)
	}
}

func TestReaderMaxOps(t *testing.T) {
	in := record(t, sampleOps())
	if _, _, err := readAll(in, ReaderConfig{MaxOps: len(sampleOps())}); err != nil {
		t.Fatalf("exactly MaxOps: %v", err)
	}
	_, ops, err := readAll(in, ReaderConfig{MaxOps: 3})
	if !errors.Is(err, ErrTooManyOps) || len(ops) != 3 {
		t.Fatalf("read %d ops, %v; want 3 and ErrTooManyOps", len(ops), err)
	}
}

func TestReaderErrorIsSticky(t *testing.T) {
	r, err := NewReader(strings.NewReader(header+"\n{bad\n"+`{"op":"drain","time":1,"topic":"t","partition":0,"offset":0}`+"\n"), ReaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v then %v, want the same error twice", err1, err2)
	}
}
