package storage

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func isLogSyncData(op errorfs.Op) bool {
	return op.Kind == errorfs.OpFileSyncData && strings.Contains(op.Path, logPrefix)
}

// A flush stuck on a slow disk holds its buffer; adds fill the next one
// and then wait, and give up with ErrBufferFull when their context ends.
// Reads keep being served from both buffers meanwhile.
func TestBufferFullBackpressure(t *testing.T) {
	gate := make(chan struct{})
	var blocking atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if blocking.Load() && isLogSyncData(op) {
			<-gate
		}
		return nil
	})
	s := mustOpen(t, testOptions(errorfs.Wrap(vfs.NewMem(), inj)))
	defer mustClose(t, s)
	blocking.Store(true)

	var e int64
	var full error
	for ; e < 1000; e++ {
		p := payloadOf(1, e, 1000)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		full = s.AddEntry(ctx, request(1, e, e-1, p))
		cancel()
		if full != nil {
			break
		}
	}
	wantErr(t, "add to a full buffer", full, ErrBufferFull)
	wantErr(t, "add to a full buffer", full, context.DeadlineExceeded)
	// Two buffers' worth were taken: one being flushed, one full.
	if taken := e * frameSize(1000); taken < 64<<10 || taken > 2*(64<<10) {
		t.Fatalf("%d bytes taken before the buffer was full, bound 64 KiB", taken)
	}
	for i := int64(0); i < e; i++ {
		if _, err := s.ReadEntry(1, i); err != nil {
			t.Fatalf("read %d while the flush is stuck: %v", i, err)
		}
	}
	if st := s.Stats(); st.BufferFullErrs != 1 {
		t.Fatalf("Stats %+v", st)
	}
	// A waiting add goes through once the flush finishes.
	done := make(chan error, 1)
	go func() { done <- s.AddEntry(context.Background(), request(1, e, e-1, []byte("late"))) }()
	blocking.Store(false)
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("waiting add: %v", err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadEntry(1, e); err != nil {
		t.Fatal(err)
	}
}

// A failed entry log sync fails the storage for good (no retried fsync):
// every later call returns ErrFailed; a reopen recovers what the last
// successful checkpoint made durable.
func TestFailedSyncFailsStorage(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var armed atomic.Bool
	ioErr := errors.New("injected EIO")
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && isLogSyncData(op) {
			return ioErr
		}
		return nil
	})
	var flushErrs atomic.Int32
	o := testOptions(errorfs.Wrap(mem, inj))
	o.Hooks.Flushed = func(fi FlushInfo) {
		if fi.Err != nil {
			flushErrs.Add(1)
		}
	}
	s := mustOpen(t, o)
	for e := int64(0); e < 10; e++ {
		mustAdd(t, s, 1, e)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for e := int64(10); e < 20; e++ {
		mustAdd(t, s, 1, e)
	}
	armed.Store(true)
	err := s.Checkpoint()
	wantErr(t, "Checkpoint with a failing sync", err, ErrFailed)
	wantErr(t, "Checkpoint with a failing sync", err, ioErr)
	if flushErrs.Load() != 1 {
		t.Fatalf("Flushed hook saw %d failures", flushErrs.Load())
	}
	armed.Store(false) // the disk "recovers": the storage must still refuse
	wantErr(t, "add after failure", s.AddEntry(context.Background(), request(1, 20, 19, nil)), ErrFailed)
	_, err = s.ReadEntry(1, 0)
	wantErr(t, "read after failure", err, ErrFailed)
	wantErr(t, "Checkpoint after failure", s.Checkpoint(), ErrFailed)
	_, err = s.Fence(1, keyOf(1))
	wantErr(t, "fence after failure", err, ErrFailed)
	if err := s.Close(); err != nil {
		t.Fatalf("Close of a failed storage: %v", err)
	}

	s = mustOpen(t, testOptions(mem.CrashClone(vfs.CrashCloneCfg{})))
	defer mustClose(t, s)
	for e := int64(0); e < 10; e++ {
		checkEntry(t, s, 1, e)
	}
	if _, err := s.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}
