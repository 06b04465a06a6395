package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Concurrent appenders, then a reopen replays exactly what was acked, in
// sequence order.
func TestRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	cfg.MaxFileSize = 1 << 20 // no rotation here
	j, got := mustOpen(t, cfg)
	if len(got) != 0 {
		t.Fatalf("fresh journal replayed %d records", len(got))
	}
	const workers, perWorker = 8, 50
	m := newModel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				id := uint64(w*perWorker + i)
				rec := payload(id, int(id*37%300)) // sizes 0..299, some empty
				seq, err := j.AppendWait(context.Background(), rec)
				if err != nil {
					t.Errorf("AppendWait: %v", err)
					return
				}
				m.mu.Lock()
				if _, dup := m.recs[seq]; dup {
					t.Errorf("seq %d handed out twice", seq)
				}
				m.recs[seq] = rec
				m.mu.Unlock()
			}
		})
	}
	wg.Wait()
	if d := j.Durable(); d != workers*perWorker {
		t.Fatalf("Durable() = %d, want %d", d, workers*perWorker)
	}
	st := j.Stats()
	if st.Appends != workers*perWorker || st.Groups == 0 || st.Groups > st.Appends {
		t.Fatalf("stats %+v", st)
	}
	mustClose(t, j)

	j, got = mustOpen(t, cfg)
	defer mustClose(t, j)
	if len(got) != workers*perWorker {
		t.Fatalf("replayed %d records, want %d", len(got), workers*perWorker)
	}
	checkReplay(t, got, 1, m.recs)
	if info := j.Recovery(); info.LastSeq != workers*perWorker || info.TornBytes != 0 {
		t.Fatalf("recovery %+v", info)
	}
}

// DoneFuncs run exactly once each, in sequence order, with the seq of the
// record they belong to.
func TestDoneOrder(t *testing.T) {
	j, _ := mustOpen(t, memConfig(vfs.NewMem()))
	var mu sync.Mutex
	var order []uint64
	var wg sync.WaitGroup
	const n = 500
	byID := make([]uint64, n)
	for i := range n {
		wg.Add(1)
		err := j.Append(context.Background(), payload(uint64(i), 16), func(seq uint64, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
			mu.Lock()
			order = append(order, seq)
			byID[i] = seq
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	mustClose(t, j)
	for i, seq := range order {
		if seq != uint64(i+1) {
			t.Fatalf("completion %d had seq %d", i, seq)
		}
	}
	// One appender: sequence follows Append order.
	for i, seq := range byID {
		if seq != uint64(i+1) {
			t.Fatalf("record %d got seq %d", i, seq)
		}
	}
}

// Small files: the journal rotates, never exceeds MaxFileSize, and replays
// across files.
func TestRotation(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	j, _ := mustOpen(t, cfg)
	var rotated []uint64
	m := newModel()
	for i := range 300 {
		rec := payload(uint64(i), 100+i%1000)
		seq, err := j.AppendWait(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		m.recs[seq] = rec
	}
	st := j.Stats()
	mustClose(t, j)
	files := journalFiles(t, fs)
	if st.Rotations == 0 || len(files) != int(st.Rotations)+1 {
		t.Fatalf("%d rotations, files %v", st.Rotations, files)
	}
	for _, f := range files {
		if n := len(readFile(t, fs, f)); n > int(cfg.MaxFileSize) {
			t.Fatalf("%s has %d bytes, limit %d", f, n, cfg.MaxFileSize)
		}
	}

	cfg.Hooks.FileRotated = func(seq uint64) { rotated = append(rotated, seq) }
	j, got := mustOpen(t, cfg)
	if len(got) != 300 {
		t.Fatalf("replayed %d, want 300", len(got))
	}
	checkReplay(t, got, 1, m.recs)
	if info := j.Recovery(); info.Files != len(files) {
		t.Fatalf("recovery read %d files, want %d", info.Files, len(files))
	}
	for i := range 100 {
		if _, err := j.AppendWait(context.Background(), payload(uint64(i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, j)
	if len(rotated) == 0 || rotated[0] != uint64(len(files)+2) {
		// Open created file len+1, so the first rotation makes len+2.
		t.Fatalf("FileRotated saw %v, want a first rotation to file %d", rotated, len(files)+2)
	}
}

// Every Open starts a new file and appends continue the sequence.
func TestReopenContinues(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	m := newModel()
	for round := range 4 {
		j, got := mustOpen(t, cfg)
		if len(got) != 5*round {
			t.Fatalf("round %d: replayed %d, want %d", round, len(got), 5*round)
		}
		checkReplay(t, got, 1, m.recs)
		for i := range 5 {
			rec := payload(uint64(round*5+i), 50)
			seq, err := j.AppendWait(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			if want := uint64(round*5 + i + 1); seq != want {
				t.Fatalf("seq %d, want %d", seq, want)
			}
			m.recs[seq] = rec
		}
		mustClose(t, j)
		if n := len(journalFiles(t, fs)); n != round+1 {
			t.Fatalf("round %d: %d files, want %d", round, n, round+1)
		}
	}
}

func TestOversizedRecordRejected(t *testing.T) {
	cfg := memConfig(vfs.NewMem())
	cfg.MaxRecordSize = 100
	j, _ := mustOpen(t, cfg)
	defer mustClose(t, j)
	_, err := j.AppendWait(context.Background(), make([]byte, 101))
	if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "101 bytes, limit 100") {
		t.Fatalf("101-byte record: %v, want ErrRecordTooLarge naming both sizes", err)
	}
	if _, err := j.AppendWait(context.Background(), make([]byte, 100)); err != nil {
		t.Fatalf("100-byte record: %v", err)
	}
	if got := j.Stats().Appends; got != 1 {
		t.Fatalf("%d appends counted, want 1", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{Dir: "x"}).Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	err := Config{
		MaxRecordSize:   MaxRecordSizeLimit + 1,
		GroupBytes:      1,
		MaxFileSize:     100,
		MaxQueueBytes:   10,
		MaxQueueRecords: -1,
		MaxGroupWait:    time.Minute,
	}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"Dir", "MaxRecordSize", "GroupBytes", "MaxGroupWait", "MaxFileSize", "MaxQueueBytes", "MaxQueueRecords"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not mention %s: %v", field, err)
		}
	}
	if _, err := Open(Config{}, nil); err == nil {
		t.Fatal("Open accepted a config without Dir")
	}
}

// The directory is locked while a Journal has it open.
func TestDirLocked(t *testing.T) {
	fs := vfs.NewMem()
	j, _ := mustOpen(t, memConfig(fs))
	if _, err := Open(memConfig(fs), nil); err == nil {
		t.Fatal("second Open of a locked dir succeeded")
	}
	mustClose(t, j)
	j, _ = mustOpen(t, memConfig(fs))
	mustClose(t, j)
}

// Close writes and acks everything already queued, even with a long group
// wait, then refuses appends; a second Close returns the same result.
func TestCloseDrains(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	cfg.MaxGroupWait = time.Second
	cfg.GroupBytes = 1 << 20
	cfg.MaxFileSize = 4 << 20
	j, _ := mustOpen(t, cfg)
	m := newModel()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		m.appendAsync(t, j, payload(uint64(i), 64), &wg, errs)
	}
	mustClose(t, j) // returns long before the 1s group wait
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("queued append failed at Close: %v", err)
	}
	if len(m.acked) != 100 {
		t.Fatalf("%d acked, want 100", len(m.acked))
	}
	if st := j.Stats(); st.Groups != 1 {
		t.Fatalf("%d groups, want the 100 queued records in 1", st.Groups)
	}
	if err := j.Append(context.Background(), []byte("x"), func(uint64, error) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := j.Checkpoint(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Checkpoint after Close: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	j, got := mustOpen(t, cfg)
	defer mustClose(t, j)
	checkReplay(t, got, 1, m.recs)
	if len(got) != 100 {
		t.Fatalf("replayed %d, want 100", len(got))
	}
}

// A group waits for more records while it is partial, and goes when
// MaxGroupWait passes even if nobody else appends.
func TestGroupWaitFlushesPartialGroup(t *testing.T) {
	cfg := memConfig(vfs.NewMem())
	cfg.MaxGroupWait = 5 * time.Millisecond
	var groups []GroupInfo
	cfg.Hooks.GroupCommitted = func(g GroupInfo) { groups = append(groups, g) }
	j, _ := mustOpen(t, cfg)
	seq, err := j.AppendWait(context.Background(), []byte("lonely"))
	if err != nil || seq != 1 {
		t.Fatalf("AppendWait = %d, %v", seq, err)
	}
	mustClose(t, j)
	if len(groups) != 1 || groups[0].Records != 1 || groups[0].Wait < cfg.MaxGroupWait {
		t.Fatalf("groups %+v: want one group of 1 that waited at least %v", groups, cfg.MaxGroupWait)
	}
}

// A record that finds room is queued even when the context is already done
// (a try-append); AppendWait then reports either the outcome or the cause.
func TestAppendWaitContext(t *testing.T) {
	j, _ := mustOpen(t, memConfig(vfs.NewMem()))
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := fmt.Errorf("caller gave up")
	cancel(cause)
	if seq, err := j.AppendWait(ctx, []byte("x")); err != nil && !errors.Is(err, cause) || err == nil && seq != 1 {
		t.Fatalf("AppendWait with done ctx: %d, %v", seq, err)
	}
	mustClose(t, j) // drains
	if n := j.Stats().Appends; n != 1 {
		t.Fatalf("%d records made durable, want the one queued with a done context", n)
	}
}

// A record appended in parts is the parts joined, as replay reads it; the
// size limit counts all of them.
func TestAppendParts(t *testing.T) {
	fs := vfs.NewMem()
	cfg := memConfig(fs)
	cfg.MaxRecordSize = 100
	j, _ := mustOpen(t, cfg)
	want := map[uint64][]byte{}
	for i, parts := range [][][]byte{
		{[]byte("head:"), []byte("payload")},
		{nil, []byte("only the second"), nil},
		{[]byte("a"), []byte("b"), []byte("c")},
		{},
	} {
		done := make(chan error, 1)
		if err := j.AppendParts(context.Background(), func(_ uint64, err error) { done <- err }, parts...); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want[uint64(i+1)] = bytes.Join(parts, nil)
	}
	err := j.AppendParts(context.Background(), func(uint64, error) { t.Error("a refused record's DoneFunc ran") }, make([]byte, 60), make([]byte, 41))
	if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "101 bytes, limit 100") {
		t.Fatalf("parts of 101 bytes: %v, want ErrRecordTooLarge", err)
	}
	mustClose(t, j)
	j, got := mustOpen(t, cfg)
	defer mustClose(t, j)
	checkReplay(t, got, 1, want)
}
