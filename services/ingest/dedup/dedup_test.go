package dedup

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// step is one line of a script run against a State by a minimal writer:
// "send" is Check, then Pending at the writer's next offset if the answer is
// Append (the writer's next offset then advances by Count); "check" is Check
// alone; "commit" and "abort" take at; "wait" advances the clock by d.
type step struct {
	do   string
	h    Header
	at   int64
	d    time.Duration
	want Kind  // for send/check: the expected decision (0 if err)
	off  int64 // for Append: the base offset given; for duplicates: the original base offset
	err  error
}

func send(pid int64, epoch int16, seq, count int32, want Kind, off int64) step {
	return step{do: "send", h: Header{pid, epoch, seq, count}, want: want, off: off}
}

func sendErr(pid int64, epoch int16, seq, count int32, err error) step {
	return step{do: "send", h: Header{pid, epoch, seq, count}, err: err}
}

func commit(at int64) step      { return step{do: "commit", at: at} }
func abort(at int64) step       { return step{do: "abort", at: at} }
func wait(d time.Duration) step { return step{do: "wait", d: d} }

// writer is the minimal partition writer of the scripts.
type writer struct {
	s    *State
	next int64
	now  time.Time
}

func (w *writer) run(t *testing.T, i int, st step) {
	t.Helper()
	switch st.do {
	case "send", "check":
		d, err := w.s.Check(st.h, w.now)
		if st.err != nil || err != nil {
			if !errors.Is(err, st.err) || st.err == nil {
				t.Fatalf("step %d %+v: err %v, want %v", i, st.h, err, st.err)
			}
			return
		}
		if d.Kind != st.want {
			t.Fatalf("step %d %+v: %v, want %v", i, st.h, d.Kind, st.want)
		}
		switch d.Kind {
		case Append:
			if st.do == "send" {
				if st.off != w.next {
					t.Fatalf("step %d %+v: script expects offset %d, writer is at %d", i, st.h, st.off, w.next)
				}
				w.s.Pending(st.h, w.next, w.now)
				w.next += int64(st.h.Count)
			}
		default:
			if d.BaseOffset != st.off || d.LastOffset != st.off+int64(st.h.Count)-1 {
				t.Fatalf("step %d %+v: offsets [%d, %d], want base %d", i, st.h, d.BaseOffset, d.LastOffset, st.off)
			}
		}
	case "commit":
		w.s.Commit(st.at)
	case "abort":
		w.s.Abort(st.at)
		w.next = st.at
	case "wait":
		w.now = w.now.Add(st.d)
	default:
		t.Fatalf("step %d: unknown %q", i, st.do)
	}
}

func TestRules(t *testing.T) {
	const maxSeq = math.MaxInt32
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"not idempotent bypasses", Config{}, []step{
			send(NoProducerID, -1, -1, 3, Append, 0),
			send(NoProducerID, -1, -1, 3, Append, 3), // same fields again: no dedup
			send(1, 0, 0, 1, Append, 6),
		}},
		{"invalid fields", Config{}, []step{
			sendErr(-2, 0, 0, 1, ErrInvalidSequence),
			sendErr(1, -1, 0, 1, ErrInvalidSequence),
			sendErr(1, 0, -1, 1, ErrInvalidSequence),
			sendErr(1, 0, 0, 0, ErrInvalidSequence),
			sendErr(1, 0, 0, -5, ErrInvalidSequence),
		}},
		{"unknown producer starts at 0", Config{}, []step{
			sendErr(1, 0, 1, 1, ErrUnknownProducer),
			sendErr(1, 3, 7, 1, ErrUnknownProducer),
			send(1, 3, 0, 2, Append, 0), // any epoch, at 0
			send(1, 3, 2, 1, Append, 2),
		}},
		{"in sequence, gap, older than window", Config{WindowBatches: 2}, []step{
			send(1, 0, 0, 2, Append, 0),
			send(1, 0, 2, 3, Append, 2),
			sendErr(1, 0, 6, 1, ErrOutOfOrderSequence), // gap: expected 5
			sendErr(1, 0, 5, 1, ErrTooManyInFlight),    // the window bounds batches in flight too
			commit(4),
			send(1, 0, 5, 1, Append, 5),
			commit(5),
			sendErr(1, 0, 0, 2, ErrOutOfOrderSequence), // first batch left the window of 2
			send(1, 0, 2, 3, Duplicate, 2),
			send(1, 0, 5, 1, Duplicate, 5),
			sendErr(1, 0, 2, 2, ErrOutOfOrderSequence), // same first sequence, different count
			sendErr(1, 0, 3, 2, ErrOutOfOrderSequence), // overlaps, not a batch
			send(1, 0, 6, 1, Append, 6),
		}},
		{"duplicate returns original offsets among producers", Config{}, []step{
			send(1, 0, 0, 3, Append, 0),
			send(2, 0, 0, 2, Append, 3),
			send(1, 0, 3, 1, Append, 5),
			commit(5),
			send(1, 0, 0, 3, Duplicate, 0),
			send(2, 0, 0, 2, Duplicate, 3),
			send(1, 0, 3, 1, Duplicate, 5),
		}},
		{"epochs", Config{}, []step{
			send(1, 4, 0, 2, Append, 0),
			commit(1),
			sendErr(1, 3, 2, 1, ErrProducerFenced),
			sendErr(1, 3, 0, 2, ErrProducerFenced), // even a retry in the window
			sendErr(1, 5, 2, 1, ErrOutOfOrderSequence),
			send(1, 5, 0, 1, Append, 2),
			sendErr(1, 4, 2, 1, ErrProducerFenced), // the bump counts while in flight
			commit(2),
			sendErr(1, 5, 2, 1, ErrOutOfOrderSequence), // expected 1
			send(1, 5, 0, 1, Duplicate, 2),
		}},
		{"sequence wraps at MaxInt32", Config{}, []step{
			send(1, 0, 0, maxSeq, Append, 0), // sequences 0 .. MaxInt32-1
			send(1, 0, maxSeq, 1, Append, maxSeq),
			send(1, 0, 0, 2, Append, maxSeq+1), // wrapped
			commit(maxSeq + 2),
			send(1, 0, maxSeq, 1, Duplicate, maxSeq),
			send(1, 0, 0, 2, Duplicate, maxSeq+1),
			send(1, 0, 2, 1, Append, maxSeq+3),
		}},
		{"batch spanning the wrap", Config{}, []step{
			send(1, 0, 0, maxSeq-1, Append, 0),        // 0 .. MaxInt32-2
			send(1, 0, maxSeq-1, 4, Append, maxSeq-1), // MaxInt32-1, MaxInt32, 0, 1
			send(1, 0, maxSeq-1, 4, DuplicateInFlight, maxSeq-1),
			sendErr(1, 0, 0, 1, ErrOutOfOrderSequence),
			send(1, 0, 2, 1, Append, maxSeq+3),
		}},
		{"in flight: duplicate and bound", Config{WindowBatches: 3}, []step{
			send(1, 0, 0, 1, Append, 0),
			send(1, 0, 1, 1, Append, 1),
			send(1, 0, 2, 1, Append, 2),
			send(1, 0, 1, 1, DuplicateInFlight, 1),
			sendErr(1, 0, 3, 1, ErrTooManyInFlight),
			send(2, 0, 0, 1, Append, 3), // other producers are not held up
			commit(0),
			send(1, 0, 0, 1, Duplicate, 0),
			send(1, 0, 1, 1, DuplicateInFlight, 1),
			send(1, 0, 3, 1, Append, 4),
			sendErr(1, 0, 4, 1, ErrTooManyInFlight),
		}},
		{"abort rolls back to the earliest aborted batch", Config{}, []step{
			send(1, 0, 0, 2, Append, 0),
			send(2, 0, 0, 1, Append, 2),
			send(1, 0, 2, 2, Append, 3),
			send(2, 0, 1, 1, Append, 5),
			send(1, 0, 4, 1, Append, 6),
			commit(2),
			abort(3), // producer 1's [2,4) and [4,5), producer 2's [1,2)
			send(1, 0, 0, 2, Duplicate, 0),
			sendErr(1, 0, 4, 1, ErrOutOfOrderSequence),
			send(2, 0, 0, 1, Duplicate, 2),
			send(1, 0, 2, 2, Append, 3), // the retry is appended anew, at the freed offsets
			send(2, 0, 1, 1, Append, 5),
		}},
		{"abort undoes an epoch bump", Config{}, []step{
			send(1, 1, 0, 2, Append, 0),
			commit(1),
			send(1, 2, 0, 1, Append, 2),
			sendErr(1, 1, 2, 1, ErrProducerFenced),
			abort(2),
			send(1, 1, 0, 2, Duplicate, 0), // epoch 1 is current again
			send(1, 1, 2, 1, Append, 2),
		}},
		{"abort of a new producer's batches forgets it", Config{}, []step{
			send(1, 0, 0, 1, Append, 0),
			send(1, 0, 1, 1, Append, 1),
			abort(0),
			sendErr(1, 0, 1, 1, ErrUnknownProducer),
			send(1, 0, 0, 1, Append, 0),
		}},
		{"abort beyond everything is a no-op", Config{}, []step{
			send(1, 0, 0, 1, Append, 0),
			abort(10),
			send(1, 0, 0, 1, DuplicateInFlight, 0),
		}},
		{"commit of an entry of several batches", Config{}, []step{
			send(1, 0, 0, 1, Append, 0),
			send(1, 0, 1, 1, Append, 1),
			send(2, 0, 0, 1, Append, 2),
			commit(1),
			send(1, 0, 1, 1, Duplicate, 1),
			send(2, 0, 0, 1, DuplicateInFlight, 2),
			commit(100), // beyond every pending batch (non-idempotent ones after)
			send(2, 0, 0, 1, Duplicate, 2),
		}},
		{"expiry", Config{ProducerExpiry: time.Minute}, []step{
			send(1, 0, 0, 1, Append, 0),
			wait(2 * time.Minute), // in flight: does not expire
			send(1, 0, 1, 1, Append, 1),
			commit(1),
			wait(59 * time.Second),
			send(1, 0, 1, 1, Duplicate, 1),
			wait(time.Second),
			sendErr(1, 0, 1, 1, ErrUnknownProducer),
			sendErr(1, 0, 2, 1, ErrUnknownProducer),
			send(1, 0, 0, 1, Append, 2), // starts over (the documented seq-0 hole)
			send(1, 0, 1, 1, Append, 3),
		}},
		{"eviction of the producer idle longest", Config{MaxProducers: 2}, []step{
			send(1, 0, 0, 1, Append, 0),
			send(2, 0, 0, 1, Append, 1),
			commit(1), // 1 then 2 become idle: 1 is idle longest
			send(3, 0, 0, 1, Append, 2),
			sendErr(1, 0, 1, 1, ErrUnknownProducer),
			send(2, 0, 1, 1, Append, 3),
			sendErr(4, 0, 0, 1, ErrTooManyProducers), // 2 and 3 both in flight
			commit(2),
			send(4, 0, 0, 1, Append, 4), // evicts 3, idle now
			sendErr(3, 0, 1, 1, ErrUnknownProducer),
			send(2, 0, 1, 1, DuplicateInFlight, 3),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := &writer{s: s, now: t0}
			for i, st := range tc.steps {
				w.run(t, i, st)
			}
		})
	}
}

func TestRebuild(t *testing.T) {
	type rb struct {
		h    Header
		base int64
	}
	log := []rb{
		{Header{1, 0, 0, 2}, 0},
		{Header{NoProducerID, -1, -1, 5}, 2},
		{Header{2, 7, 40, 1}, 7},  // first seen mid-run: trusted
		{Header{1, 0, 2, 1}, 8},   // continues
		{Header{1, 1, 0, 1}, 9},   // epoch bump
		{Header{2, 7, 41, 2}, 10}, // continues
		{Header{3, 0, 9, 1}, 12},
		{Header{3, 0, 3, 1}, 13}, // not the next: a new run (e.g. restarted after eviction)
	}
	s, err := New(Config{WindowBatches: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range log {
		if err := s.Rebuild(b.h, b.base, t0); err != nil {
			t.Fatal(err)
		}
	}
	w := &writer{s: s, now: t0.Add(time.Minute), next: 14}
	for i, st := range []step{
		sendErr(1, 0, 3, 1, ErrProducerFenced),
		send(1, 1, 0, 1, Duplicate, 9),
		send(2, 7, 40, 1, Duplicate, 7),
		send(2, 7, 41, 2, Duplicate, 10),
		sendErr(3, 0, 9, 1, ErrOutOfOrderSequence), // left with the old run
		send(3, 0, 3, 1, Duplicate, 13),
		send(3, 0, 4, 1, Append, 14),
		send(2, 7, 43, 1, Append, 15),
		send(1, 1, 1, 1, Append, 16),
	} {
		w.run(t, i, st)
	}

	// Corrupt input is an error, not a panic; nothing changes.
	s, _ = New(Config{})
	if err := s.Rebuild(Header{1, 0, 0, 3}, 10, t0); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []rb{
		{Header{1, 0, 3, 1}, 12},  // overlaps the previous batch
		{Header{1, 0, 3, 0}, 13},  // no records
		{Header{1, -1, 3, 1}, 13}, // bad epoch
		{Header{-3, 0, 3, 1}, 13}, // bad id
	} {
		if err := s.Rebuild(bad.h, bad.base, t0); err == nil {
			t.Errorf("Rebuild(%+v, %d) = nil, want an error", bad.h, bad.base)
		}
	}
	if d, err := s.Check(Header{1, 0, 3, 1}, t0); err != nil || d.Kind != Append {
		t.Errorf("after rejected rebuilds: %v %v", d, err)
	}

	// Rebuild evicts like live traffic and starts the expiry clock at seen.
	s, _ = New(Config{MaxProducers: 2, ProducerExpiry: time.Hour})
	for i, pid := range []int64{1, 2, 1, 3} { // 2 is idle longest when 3 arrives
		if err := s.Rebuild(Header{pid, 0, 0, 1}, int64(i), t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	w = &writer{s: s, now: t0.Add(time.Hour + 2*time.Minute), next: 4}
	for i, st := range []step{
		sendErr(2, 0, 1, 1, ErrUnknownProducer),
		send(3, 0, 0, 1, Duplicate, 3),
		sendErr(1, 0, 1, 1, ErrUnknownProducer), // seen at t0+2m: expired
	} {
		w.run(t, i, st)
	}
}

func TestMisusePanics(t *testing.T) {
	setup := func() *State {
		s, _ := New(Config{})
		s.Pending(Header{1, 0, 0, 3}, 10, t0) // [10, 12]
		s.Commit(12)
		s.Pending(Header{1, 0, 3, 3}, 13, t0) // [13, 15]
		return s
	}
	for name, f := range map[string]func(s *State){
		"pending without append":   func(s *State) { s.Pending(Header{1, 0, 9, 1}, 16, t0) },
		"pending of a duplicate":   func(s *State) { s.Pending(Header{1, 0, 3, 3}, 16, t0) },
		"pending offset goes back": func(s *State) { s.Pending(Header{1, 0, 6, 1}, 15, t0) },
		"commit inside a batch":    func(s *State) { s.Commit(14) },
		"abort inside a batch":     func(s *State) { s.Abort(14) },
		"abort of committed":       func(s *State) { s.Abort(12) },
		"rebuild while pending":    func(s *State) { _ = s.Rebuild(Header{2, 0, 0, 1}, 20, t0) },
	} {
		t.Run(name, func(t *testing.T) {
			s := setup()
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f(s)
		})
	}
	// And the legal neighbours do not panic.
	s := setup()
	s.Commit(15)
	s.Abort(16)
	s.Pending(Header{1, 0, 6, 1}, 16, t0)
	s.Abort(16)
	s.Pending(Header{NoProducerID, -1, -1, 1}, 0, t0) // ignored, whatever the offset
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	s, _ := New(Config{})
	if c := s.Config(); c.WindowBatches != DefaultWindowBatches || c.MaxProducers != DefaultMaxProducers || c.ProducerExpiry != DefaultProducerExpiry {
		t.Errorf("defaults: %+v", c)
	}
	_, err := New(Config{WindowBatches: -1, MaxProducers: MaxMaxProducers + 1, ProducerExpiry: time.Millisecond})
	if err == nil {
		t.Fatal("no error")
	}
	for _, field := range []string{"WindowBatches", "MaxProducers", "ProducerExpiry"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not report %s: %v", field, err)
		}
	}
}

func TestHeaderLastSeq(t *testing.T) {
	for _, tc := range []struct {
		h    Header
		want int32
	}{
		{Header{FirstSeq: 0, Count: 1}, 0},
		{Header{FirstSeq: 5, Count: 3}, 7},
		{Header{FirstSeq: math.MaxInt32, Count: 1}, math.MaxInt32},
		{Header{FirstSeq: math.MaxInt32, Count: 2}, 0},
		{Header{FirstSeq: math.MaxInt32 - 1, Count: 5}, 2},
		{Header{FirstSeq: 1, Count: math.MaxInt32}, math.MaxInt32},
		{Header{FirstSeq: 2, Count: math.MaxInt32}, 0},
	} {
		if got := tc.h.LastSeq(); got != tc.want {
			t.Errorf("%+v.LastSeq() = %d, want %d", tc.h, got, tc.want)
		}
	}
}

// Check must not allocate on the append path: it runs for every batch.
func TestCheckDoesNotAllocate(t *testing.T) {
	s, _ := New(Config{})
	var off int64
	for seq := int32(0); seq < 20; seq++ {
		s.Pending(Header{1, 0, seq, 1}, off, t0)
		s.Commit(off)
		off++
	}
	s.Pending(Header{1, 0, 20, 1}, off, t0)
	if n := testing.AllocsPerRun(100, func() {
		if d, err := s.Check(Header{1, 0, 21, 1}, t0); err != nil || d.Kind != Append {
			t.Fatal(d, err)
		}
		if d, _ := s.Check(Header{1, 0, 18, 1}, t0); d.Kind != Duplicate {
			t.Fatal(d)
		}
	}); n != 0 {
		t.Errorf("Check allocates %v times", n)
	}
}

func TestHeaderOf(t *testing.T) {
	bld, err := record.NewBuilder(record.BuilderOptions{Producer: &record.Producer{ID: 42, Epoch: 3, BaseSequence: 17}})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := bld.Append(&record.Record{Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if h, want := HeaderOf(b), (Header{ProducerID: 42, Epoch: 3, FirstSeq: 17, Count: 4}); h != want {
		t.Errorf("HeaderOf = %+v, want %+v", h, want)
	}
}
