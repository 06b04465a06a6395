package storage

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// pacedOptions: a write buffer of 8 MiB (flushes start at 4 MiB, four
// pacing steps) and 64 KiB entries.
func pacedOptions(spread time.Duration, flushed chan<- FlushInfo) Options {
	o := testOptions(vfs.NewMem())
	o.MaxEntrySize, o.MaxReadBytes = 64<<10, 64<<10
	o.MaxWriteBufferBytes, o.MaxLogFileSize, o.GCChunkBytes = 8<<20, 64<<20, 8<<20
	o.MaxFlushSpread = spread
	o.Hooks.Flushed = func(f FlushInfo) {
		select {
		case flushed <- f:
		default:
		}
	}
	return o
}

// adder adds 64 KiB entries to ledger 1 every interval until stop closes.
func adder(t *testing.T, s *Storage, interval time.Duration, stop <-chan struct{}) <-chan error {
	done := make(chan error, 1)
	payload := make([]byte, 64<<10)
	go func() {
		defer close(done)
		for e := int64(0); ; e++ {
			if err := s.AddEntry(context.Background(), request(1, e, e-1, payload)); err != nil {
				done <- err
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
		}
	}()
	return done
}

func TestFlushPacedWhileAddsArrive(t *testing.T) {
	flushed := make(chan FlushInfo, 16)
	s := mustOpen(t, pacedOptions(time.Second, flushed))
	defer mustClose(t, s)
	stop := make(chan struct{})
	done := adder(t, s, 20*time.Millisecond, stop) // ~3 MB/s: 4 MiB fill in ~1.3 s, a spread of ~0.65 s
	f := <-flushed
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.Err != nil || f.Bytes < 4<<20 {
		t.Fatalf("first flush %+v; want ≥ 4 MiB written", f)
	}
	// The flush spreads its writes over half its buffer's fill time: it
	// waited for its schedule, most of its duration.
	if f.Paced <= 0 || f.Paced > f.Duration {
		t.Errorf("flush of %d bytes took %v, paced %v; want some pacing, within the duration", f.Bytes, f.Duration, f.Paced)
	}
}

func TestFlushHurriesWhenAddsWaitForSpace(t *testing.T) {
	flushed := make(chan FlushInfo, 16)
	o := pacedOptions(time.Minute, flushed)
	o.MaxWriteBufferBytes = 4 << 20 // flushes start at 2 MiB: 32 entries
	s := mustOpen(t, o)
	defer mustClose(t, s)
	// Fill half the buffer slowly, so its flush's spread is long (half the
	// fill time, ~1.5 s), then flood at once: the flood keeps adds arriving
	// (so the flush paces), fills the new buffer and waits for space, and
	// must hurry the flush instead of waiting out its schedule.
	payload := make([]byte, 64<<10)
	add := func(e int64) {
		if err := s.AddEntry(context.Background(), request(1, e, e-1, payload)); err != nil {
			t.Fatal(err)
		}
	}
	for e := range int64(32) {
		add(e)
		time.Sleep(100 * time.Millisecond)
	}
	for e := int64(32); e < 32+128; e++ { // 8 MiB: more than the buffer holds
		add(e)
	}
	if s.Stats().BufferFullWaits == 0 {
		t.Fatal("no add waited for buffer space; the test did not fill the buffer")
	}
	// The first flush is the slowly filled one. Its schedule is what the
	// flood would have waited out unhurried; the verdict rests on the
	// hurry being seen, not on how fast a loaded machine ran the flood.
	f := <-flushed
	if f.Err != nil || f.Spread < 500*time.Millisecond {
		t.Fatalf("first flush %+v; want a paced flush with a long spread", f)
	}
	if !f.Hurried {
		t.Errorf("first flush %+v: adds waited for space but the flush was not hurried", f)
	}
}

func TestFlushNotPacedWithoutAdds(t *testing.T) {
	flushed := make(chan FlushInfo, 16)
	s := mustOpen(t, pacedOptions(time.Minute, flushed))
	defer mustClose(t, s)
	payload := make([]byte, 64<<10)
	for e := range int64(60) { // 3.75 MiB: under the flush threshold
		if err := s.AddEntry(context.Background(), request(1, e, e-1, payload)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // a long fill: a spread of ~250 ms
	start := time.Now()
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	f := <-flushed
	if f.Paced != 0 {
		t.Errorf("a flush with no add meanwhile waited %v for its schedule (took %v since the call)", f.Paced, time.Since(start))
	}
}
