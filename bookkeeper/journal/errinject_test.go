package journal

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// gate is an errorfs injector acting on one kind of operation on journal
// files (a handle keeps the *.tmp name it was created under). It can hold
// the n-th such operation until released, and fail every one from a given
// index on (decided when the operation starts).
type gate struct {
	kind    errorfs.OpKind
	held    chan struct{} // receives when the held operation starts
	release chan struct{} // lets the held operation go on

	mu       sync.Mutex
	count    int
	holdAt   int // index of the operation to hold; -1 for none
	failFrom int // first failing index; -1 for none
}

func newGate(kind errorfs.OpKind) *gate {
	return &gate{kind: kind, held: make(chan struct{}), release: make(chan struct{}), holdAt: -1, failFrom: -1}
}

func (g *gate) String() string { return "journal test gate" }

// waitHeld waits for the held operation; the deadline only turns a hang
// (the operation never happens: a bug) into a failure.
func (g *gate) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the gated operation never happened")
	}
}

func (g *gate) MaybeError(op errorfs.Op) error {
	base := op.Path[strings.LastIndex(op.Path, "/")+1:]
	if op.Kind != g.kind || !strings.HasPrefix(base, filePrefix) {
		return nil
	}
	g.mu.Lock()
	i := g.count
	g.count++
	hold := i == g.holdAt
	fail := g.failFrom >= 0 && i >= g.failFrom
	g.mu.Unlock()
	if hold {
		g.held <- struct{}{}
		<-g.release
	}
	if fail {
		return errorfs.ErrInjected
	}
	return nil
}

// set arms the gate; indexes count from this call.
func (g *gate) set(holdAt, failFrom int) {
	g.mu.Lock()
	g.count, g.holdAt, g.failFrom = 0, holdAt, failFrom
	g.mu.Unlock()
}

// outcome collects DoneFunc results.
type outcome struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	seqs []uint64
	errs []error
}

func (o *outcome) done() DoneFunc {
	o.wg.Add(1)
	return func(seq uint64, err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		defer o.wg.Done()
		if err != nil {
			o.errs = append(o.errs, err)
		} else {
			o.seqs = append(o.seqs, seq)
		}
	}
}

func mustAppend(t *testing.T, j *Journal, rec []byte, done DoneFunc) {
	t.Helper()
	if err := j.Append(context.Background(), rec, done); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

// A failing fdatasync fails every record of its group and every queued
// record, and the journal then refuses appends for good.
func TestSyncFailureFailsGroupAndJournal(t *testing.T) {
	g := newGate(errorfs.OpFileSyncData)
	mem := vfs.NewMem()
	cfg := memConfig(errorfs.Wrap(mem, g))
	cfg.GroupBytes = 64 << 10
	cfg.MaxFileSize = 1 << 20
	var groups []GroupInfo
	cfg.Hooks.GroupCommitted = func(gi GroupInfo) { groups = append(groups, gi) }
	j, _ := mustOpen(t, cfg)

	g.set(0, -1) // hold the first group's sync
	var first, rest outcome
	mustAppend(t, j, []byte("first"), first.done())
	g.waitHeld(t)
	for i := range 10 {
		mustAppend(t, j, payload(uint64(i), 100), rest.done())
	}
	g.set(-1, 0) // the next group's sync fails
	g.release <- struct{}{}
	first.wg.Wait()
	rest.wg.Wait()

	if len(first.errs) != 0 || len(first.seqs) != 1 || first.seqs[0] != 1 {
		t.Fatalf("first record: seqs %v errs %v", first.seqs, first.errs)
	}
	if len(rest.seqs) != 0 || len(rest.errs) != 10 {
		t.Fatalf("failed group: %d acked, %d failed; want 0 and 10", len(rest.seqs), len(rest.errs))
	}
	for _, err := range rest.errs {
		if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("group error %v: want ErrFailed wrapping the sync error", err)
		}
	}
	if j.Durable() != 1 {
		t.Fatalf("Durable() = %d, want 1", j.Durable())
	}
	if _, err := j.AppendWait(context.Background(), []byte("after")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v, want ErrFailed", err)
	}
	if err := j.Checkpoint(1); err != nil {
		t.Fatalf("checkpoint of durable record after failure: %v", err)
	}
	if err := j.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close: %v, want ErrFailed", err)
	}
	if len(groups) != 2 || groups[1].Records != 10 || groups[1].Err == nil {
		t.Fatalf("groups seen by hook: %+v", groups)
	}
	if st := j.Stats(); st.Appends != 1 || st.Groups != 1 {
		t.Fatalf("stats %+v", st)
	}

	// Reopening re-reads the disk: the checkpointed record is not replayed,
	// the failed ones may be (they were never acknowledged), and appends work.
	cfg.FS = mem
	j, got := mustOpen(t, cfg)
	defer mustClose(t, j)
	for i, r := range got {
		if r.seq != uint64(i+2) || string(r.rec) != string(payload(uint64(i), 100)) {
			t.Fatalf("replayed %d: seq %d %q", i, r.seq, r.rec)
		}
	}
	if seq, err := j.AppendWait(context.Background(), []byte("again")); err != nil || seq != uint64(len(got)+2) {
		t.Fatalf("append after reopen: seq %d, %v", seq, err)
	}
}

// A failing write is handled like a failing sync.
func TestWriteFailureFailsJournal(t *testing.T) {
	g := newGate(errorfs.OpFileWriteAt) // groups are written at their offset
	cfg := memConfig(errorfs.Wrap(vfs.NewMem(), g))
	j, _ := mustOpen(t, cfg)
	g.set(-1, 2) // writes 0 and 1 succeed (records 1 and 2 with AppendWait)
	for i := range 2 {
		if _, err := j.AppendWait(context.Background(), []byte("ok")); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if _, err := j.AppendWait(context.Background(), []byte("boom")); !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("append with failing write: %v", err)
	}
	if err := j.Append(context.Background(), []byte("x"), func(uint64, error) {}); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	if err := j.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close: %v", err)
	}
}

// Failing to create the next file at rotation fails the journal too.
func TestRotationFailureFailsJournal(t *testing.T) {
	fail := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && strings.Contains(op.Path, fileName(2)) {
			return errorfs.ErrInjected
		}
		return nil
	})
	cfg := memConfig(errorfs.Wrap(vfs.NewMem(), fail))
	j, _ := mustOpen(t, cfg)
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		_, err = j.AppendWait(context.Background(), make([]byte, 1000))
	}
	if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("append across a failing rotation: %v", err)
	}
	if err := j.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close: %v", err)
	}
}

// With the queue full, Append gives up with ErrQueueFull when its context
// ends, and otherwise waits for room.
func TestQueueFull(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit func(*Config)
	}{
		{"records", func(c *Config) { c.MaxQueueRecords = 3 }},
		{"bytes", func(c *Config) { c.MaxRecordSize = 100; c.MaxQueueBytes = 3 * (RecordHeaderSize + 100) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(errorfs.OpFileSyncData)
			cfg := memConfig(errorfs.Wrap(vfs.NewMem(), g))
			tc.limit(&cfg)
			j, _ := mustOpen(t, cfg)
			defer mustClose(t, j)

			g.set(0, -1)
			var o outcome
			mustAppend(t, j, make([]byte, 100), o.done())
			g.waitHeld(t) // record 1 is being synced and still counts
			mustAppend(t, j, make([]byte, 100), o.done())
			mustAppend(t, j, make([]byte, 100), o.done())

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := j.Append(ctx, []byte("x"), func(uint64, error) { t.Error("rejected record completed") })
			if !errors.Is(err, ErrQueueFull) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Append on a full queue: %v, want ErrQueueFull and context.Canceled", err)
			}
			if n := j.Stats().QueueFullErr; n != 1 {
				t.Fatalf("QueueFullErr = %d", n)
			}

			waited := make(chan error, 1)
			go func() { waited <- j.Append(context.Background(), []byte("x"), o.done()) }()
			g.release <- struct{}{}
			if err := <-waited; err != nil {
				t.Fatalf("Append waiting for room: %v", err)
			}
			o.wg.Wait()
			if len(o.errs) != 0 || len(o.seqs) != 4 {
				t.Fatalf("seqs %v errs %v", o.seqs, o.errs)
			}
		})
	}
}

// Close wakes appenders waiting for queue space (they get ErrClosed) and
// still drains what was queued.
func TestCloseWakesQueueWaiters(t *testing.T) {
	g := newGate(errorfs.OpFileSyncData)
	cfg := memConfig(errorfs.Wrap(vfs.NewMem(), g))
	cfg.MaxQueueRecords = 2
	j, _ := mustOpen(t, cfg)
	g.set(0, -1)
	var o outcome
	mustAppend(t, j, []byte("a"), o.done())
	g.waitHeld(t)
	mustAppend(t, j, []byte("b"), o.done())

	waiter := make(chan error, 1)
	go func() {
		waiter <- j.Append(context.Background(), []byte("c"), func(uint64, error) { t.Error("refused record completed") })
	}()
	closed := make(chan error, 1)
	go func() { closed <- j.Close() }()
	if err := <-waiter; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiting Append: %v, want ErrClosed", err)
	}
	g.release <- struct{}{}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	o.wg.Wait()
	if len(o.seqs) != 2 || len(o.errs) != 0 {
		t.Fatalf("queued records: seqs %v errs %v", o.seqs, o.errs)
	}
}

// After a failed fsync the written bytes may still be readable (page cache)
// without being durable. Reopening replays them, so Open must make them
// durable before the journal moves on to a new file: otherwise a later
// power loss would tear a file that is no longer the newest.
func TestReopenAfterSyncFailureMakesReplayedTailDurable(t *testing.T) {
	g := newGate(errorfs.OpFileSyncData)
	mem := vfs.NewCrashableMem()
	cfg := memConfig(errorfs.Wrap(mem, g))
	j, _ := mustOpen(t, cfg)
	for range 3 {
		if _, err := j.AppendWait(context.Background(), []byte("synced")); err != nil {
			t.Fatal(err)
		}
	}
	g.set(-1, 0)
	if _, err := j.AppendWait(context.Background(), []byte("written, sync failed")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append with failing sync: %v", err)
	}
	if err := j.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close: %v", err)
	}

	g.set(-1, -1)
	j, got := mustOpen(t, cfg)
	if len(got) != 4 {
		t.Fatalf("replayed %d records, want the 3 acked and the unsynced one", len(got))
	}
	for range 2 {
		if _, err := j.AppendWait(context.Background(), []byte("after reopen")); err != nil {
			t.Fatal(err)
		}
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{}) // power loss: synced data only
	mustClose(t, j)

	j, got = mustOpen(t, memConfig(crashed))
	defer mustClose(t, j)
	if len(got) != 6 {
		t.Fatalf("after power loss: replayed %d records, want 6", len(got))
	}
}
