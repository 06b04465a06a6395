package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Entries of three ledgers, interleaved, across many rotated files: read
// from the buffer, from the entry log, and again after a reopen.
func TestAddReadRoundTripAcrossRotation(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	const n = 200
	for e := int64(0); e < n; e++ {
		for l := int64(1); l <= 3; l++ {
			mustAdd(t, s, l, e)
			checkEntry(t, s, l, e) // from the write buffer
		}
		if e%50 == 49 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if files := s.Stats().LogFiles; files < 10 {
		t.Fatalf("%d entry log files; the test wants rotation", files)
	}
	for l := int64(1); l <= 3; l++ {
		for e := int64(0); e < n; e++ {
			checkEntry(t, s, l, e)
		}
		info, err := s.Ledger(l)
		if err != nil || info.LastEntry != n-1 || info.LAC != n-2 || info.Fenced {
			t.Fatalf("Ledger(%d) = %+v, %v", l, info, err)
		}
	}
	mustClose(t, s)

	s = mustOpen(t, testOptions(fs))
	defer mustClose(t, s)
	for l := int64(1); l <= 3; l++ {
		for e := int64(0); e < n; e++ {
			checkEntry(t, s, l, e)
		}
		info, err := s.Ledger(l)
		if err != nil || info.LastEntry != n-1 || info.LAC != n-2 {
			t.Fatalf("after reopen Ledger(%d) = %+v, %v", l, info, err)
		}
	}
	if res, err := s.Verify(context.Background()); err != nil || res.Entries != 3*n {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}

func TestReadRange(t *testing.T) {
	o := testOptions(vfs.NewMem())
	o.MaxReadBytes = 1 << 20
	s := mustOpen(t, o)
	defer mustClose(t, s)
	for e := int64(0); e < 40; e++ {
		mustAdd(t, s, 7, e)
		if e == 20 {
			if err := s.Checkpoint(); err != nil { // half flushed, half buffered
				t.Fatal(err)
			}
		}
	}
	got, err := s.ReadRange(7, 5, 100, 1<<20)
	if err != nil || len(got) != 35 {
		t.Fatalf("ReadRange(5..100) = %d entries, %v; want 35 (stops at the end)", len(got), err)
	}
	for i, e := range got {
		if e.Entry != int64(5+i) {
			t.Fatalf("entry %d is %d", i, e.Entry)
		}
	}
	// A byte limit stops before the entry that would cross it, but the
	// first entry always comes.
	limit := sizeOf(7, 10) + sizeOf(7, 11) + 1
	if got, err := s.ReadRange(7, 10, 30, limit); err != nil || len(got) != 2 {
		t.Fatalf("ReadRange with %d bytes = %d entries, %v", limit, len(got), err)
	}
	if got, err := s.ReadRange(7, 12, 30, 1); err != nil || len(got) != 1 {
		t.Fatalf("ReadRange with 1 byte = %d entries, %v", len(got), err)
	}
	_, err = s.ReadRange(7, 40, 50, 0)
	wantErr(t, "ReadRange past the end", err, ErrNoSuchEntry)
	_, err = s.ReadRange(8, 0, 5, 0)
	wantErr(t, "ReadRange of an unknown ledger", err, ErrNoSuchLedger)
	_, err = s.ReadRange(7, 5, 4, 0)
	wantErr(t, "ReadRange backwards", err, ErrInvalidArgument)
}

// A range of one ledger's flushed entries (written together by a flush,
// though added interleaved with another ledger's) is read with one entry
// log read; a damaged entry in it fails the whole range.
func TestReadRangeReadsAdjacentEntriesAtOnce(t *testing.T) {
	fs := vfs.NewMem()
	o := testOptions(fs)
	o.MaxReadBytes = 1 << 20
	s := mustOpen(t, o)
	defer mustClose(t, s)
	for e := int64(0); e < 30; e++ {
		mustAdd(t, s, 7, e)
		mustAdd(t, s, 8, e)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	got, err := s.ReadRange(7, 3, 29, 1<<20)
	if err != nil || len(got) != 27 {
		t.Fatalf("ReadRange = %d entries, %v", len(got), err)
	}
	for i, e := range got {
		want := payloadOf(7, int64(3+i), sizeOf(7, int64(3+i)))
		if e.Entry != int64(3+i) || !bytes.Equal(e.Payload, want) || e.LAC != int64(2+i) {
			t.Fatalf("entry %d: got %d/%d lac %d", i, e.Ledger, e.Entry, e.LAC)
		}
	}
	after := s.Stats()
	// One read per run of entries next to each other (write buffers that
	// filled flushed on their own, so there may be a few runs).
	runs := uint64(0)
	var prev location
	for e := int64(3); e <= 29; e++ {
		loc, found, err := s.lookup(entryKey(7, e))
		if err != nil || !found {
			t.Fatalf("lookup %d: %v %v", e, found, err)
		}
		if e == 3 || !prev.precedes(loc) {
			runs++
		}
		prev = loc
	}
	if n := after.LogReads - before.LogReads; n != runs || runs > 5 {
		t.Fatalf("27 entries in %d runs took %d entry log reads", runs, n)
	}
	if after.Reads-before.Reads != 27 {
		t.Fatalf("Stats.Reads grew by %d for 27 entries", after.Reads-before.Reads)
	}

	loc, found, err := s.lookup(entryKey(7, 10))
	if err != nil || !found {
		t.Fatalf("lookup: %v %v", found, err)
	}
	flipByte(t, fs, loc.file, loc.offset+FrameHeaderSize+int64(loc.length)/2)
	_, err = s.ReadRange(7, 3, 29, 1<<20)
	wantErr(t, "a range over a damaged entry", err, ErrCorrupt)
	if got, err := s.ReadRange(7, 11, 29, 1<<20); err != nil || len(got) != 19 {
		t.Fatalf("the range after the damaged entry = %d entries, %v", len(got), err)
	}
}

func TestMasterKeyMismatchRefused(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	mustAdd(t, s, 1, 0)
	other := request(1, 1, 0, []byte("x"))
	other.MasterKey = []byte("someone-else")
	wantErr(t, "add with another key", s.AddEntry(context.Background(), other), ErrUnauthorized)
	_, err := s.Fence(1, []byte("someone-else"))
	wantErr(t, "fence with another key", err, ErrUnauthorized)
	wantErr(t, "WriteLAC with another key", s.WriteLAC(1, []byte("someone-else"), 5), ErrUnauthorized)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)

	s = mustOpen(t, testOptions(fs))
	defer mustClose(t, s)
	wantErr(t, "add with another key after reopen", s.AddEntry(context.Background(), other), ErrUnauthorized)
	mustAdd(t, s, 1, 1) // the right key still works
	if _, err := s.ReadEntry(1, 1); err != nil {
		t.Fatal(err)
	}
	empty := request(2, 0, -1, nil)
	empty.MasterKey = nil
	wantErr(t, "add without a key", s.AddEntry(context.Background(), empty), ErrInvalidArgument)
}

// A fence is durable when Fence returns, with no Checkpoint: a crash image
// holding only synced data has it.
func TestFencePersistedAcrossCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := mustOpen(t, testOptions(mem))
	for e := int64(0); e < 5; e++ {
		mustAdd(t, s, 1, e)
	}
	info, err := s.Fence(1, keyOf(1))
	if err != nil || !info.Fenced || info.LastEntry != 4 || info.LAC != 3 {
		t.Fatalf("Fence = %+v, %v", info, err)
	}
	late := request(1, 5, 4, []byte("late"))
	wantErr(t, "add after fence", s.AddEntry(context.Background(), late), ErrFenced)
	// A ledger this bookie never saw is fenced too, and takes the key.
	if info, err := s.Fence(9, keyOf(9)); err != nil || info.LastEntry != -1 || info.LAC != -1 {
		t.Fatalf("Fence(unknown) = %+v, %v", info, err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{}) // only synced data
	mustClose(t, s)

	s = mustOpen(t, testOptions(crashed))
	defer mustClose(t, s)
	for _, l := range []int64{1, 9} {
		info, err := s.Ledger(l)
		if err != nil || !info.Fenced {
			t.Fatalf("after crash Ledger(%d) = %+v, %v; want fenced", l, info, err)
		}
	}
	wantErr(t, "add after fence and crash", s.AddEntry(context.Background(), late), ErrFenced)
	// The journal replays the adds accepted before the fence, and the
	// recovering writer re-replicates: both pass the fence.
	for e := int64(0); e < 5; e++ {
		r := request(1, e, e-1, payloadOf(1, e, sizeOf(1, e)))
		r.Replay = true
		if err := s.AddEntry(context.Background(), r); err != nil {
			t.Fatalf("replay %d: %v", e, err)
		}
	}
	rec := request(1, 5, 4, []byte("late"))
	rec.Recovery = true
	if err := s.AddEntry(context.Background(), rec); err != nil {
		t.Fatalf("recovery add: %v", err)
	}
	info, err = s.Fence(1, keyOf(1))
	if err != nil || info.LastEntry != 5 {
		t.Fatalf("Fence again = %+v, %v", info, err)
	}
	wantErr(t, "fence of ledger 9 with another key", func() error { _, err := s.Fence(9, keyOf(1)); return err }(), ErrUnauthorized)
}

func TestLAC(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := mustOpen(t, testOptions(mem))
	add := func(e, lac int64) {
		t.Helper()
		if err := s.AddEntry(context.Background(), request(3, e, lac, []byte("p"))); err != nil {
			t.Fatal(err)
		}
	}
	lacOf := func(s *Storage) int64 {
		t.Helper()
		info, err := s.Ledger(3)
		if err != nil {
			t.Fatal(err)
		}
		return info.LAC
	}
	add(0, -1)
	add(2, 1) // out of order: the LAC is the highest seen
	add(1, 0)
	if got := lacOf(s); got != 1 {
		t.Fatalf("LAC %d, want 1", got)
	}
	if err := s.WriteLAC(3, keyOf(3), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteLAC(3, keyOf(3), 0); err != nil { // lower: ignored
		t.Fatal(err)
	}
	if got := lacOf(s); got != 2 {
		t.Fatalf("LAC %d after WriteLAC, want 2", got)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteLAC(3, keyOf(3), 7); err != nil { // not checkpointed
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	mustClose(t, s)
	s = mustOpen(t, testOptions(crashed))
	defer mustClose(t, s)
	if got := lacOf(s); got != 2 {
		t.Fatalf("LAC %d after crash, want the checkpointed 2", got)
	}
	wantErr(t, "WriteLAC below -1", s.WriteLAC(3, keyOf(3), -2), ErrInvalidArgument)
}

func TestDeleteLedger(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	for e := int64(0); e < 30; e++ {
		mustAdd(t, s, 1, e)
		mustAdd(t, s, 2, e)
		if e == 15 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.DeleteLedger(1); err != nil { // flushed and buffered entries
		t.Fatal(err)
	}
	_, err := s.ReadEntry(1, 3)
	wantErr(t, "read of a deleted ledger", err, ErrNoSuchLedger)
	_, err = s.ReadEntry(1, 25)
	wantErr(t, "read of a deleted ledger's buffered entry", err, ErrNoSuchLedger)
	wantErr(t, "add to a deleted ledger", s.AddEntry(context.Background(), request(1, 30, 29, nil)), ErrLedgerDeleted)
	replay := request(1, 3, 2, payloadOf(1, 3, sizeOf(1, 3)))
	replay.Replay = true
	if err := s.AddEntry(context.Background(), replay); err != nil {
		t.Fatalf("replayed add to a deleted ledger: %v, want it dropped", err)
	}
	_, err = s.Fence(1, keyOf(1))
	wantErr(t, "fence of a deleted ledger", err, ErrLedgerDeleted)
	if err := s.DeleteLedger(1); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := s.DeleteLedger(99); err != nil {
		t.Fatalf("delete of an unknown ledger: %v", err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().ReplayDropped; got != 1 {
		t.Fatalf("ReplayDropped %d", got)
	}
	mustClose(t, s)

	s = mustOpen(t, testOptions(fs))
	defer mustClose(t, s)
	_, err = s.ReadEntry(1, 3)
	wantErr(t, "read of a deleted ledger after reopen", err, ErrNoSuchLedger)
	wantErr(t, "add to a deleted ledger after reopen", s.AddEntry(context.Background(), request(99, 0, -1, nil)), ErrLedgerDeleted)
	for e := int64(0); e < 30; e++ {
		checkEntry(t, s, 2, e)
	}
	if _, err := s.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLimitsAndBadInput(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.NewMem()))
	defer mustClose(t, s)
	ctx := context.Background()
	big := request(1, 0, -1, make([]byte, 4097))
	wantErr(t, "entry above MaxEntrySize", s.AddEntry(ctx, big), ErrEntryTooLarge)
	if err := s.AddEntry(ctx, request(1, 0, -1, make([]byte, 4096))); err != nil {
		t.Fatalf("entry of MaxEntrySize: %v", err)
	}
	bad := request(1, 1, 0, []byte("payload"))
	bad.Checksum++
	wantErr(t, "bad checksum", s.AddEntry(ctx, bad), ErrBadChecksum)
	if _, err := s.ReadEntry(1, 1); err == nil {
		t.Fatal("an add with a bad checksum was stored")
	}
	for name, r := range map[string]AddRequest{
		"negative ledger": request(-1, 0, -1, nil),
		"negative entry":  request(1, -1, -1, nil),
		"LAC below -1":    request(1, 2, -2, nil),
	} {
		wantErr(t, name, s.AddEntry(ctx, r), ErrInvalidArgument)
	}
	long := request(1, 2, 1, nil)
	long.MasterKey = make([]byte, MaxMasterKeySize+1)
	wantErr(t, "oversized master key", s.AddEntry(ctx, long), ErrInvalidArgument)
	_, err := s.ReadEntry(1, -1)
	wantErr(t, "read of entry -1", err, ErrInvalidArgument)
	_, err = s.ReadEntry(1, 5)
	wantErr(t, "read of a missing entry", err, ErrNoSuchEntry)
	_, err = s.ReadEntry(2, 0)
	wantErr(t, "read of a missing ledger", err, ErrNoSuchLedger)
}

func TestOptionsValidateReportsEverything(t *testing.T) {
	err := Options{
		MaxEntrySize: MaxEntrySizeLimit + 1, MaxOpenFiles: -1, GCThreshold: 1.5,
		BookieID: "has space", InstanceID: "", RequireStorageID: "xyz",
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted bad options")
	}
	for _, want := range []string{"Dir is required", "BookieID", "InstanceID is required", "RequireStorageID",
		"MaxEntrySize", "MaxOpenFiles", "GCThreshold", "MaxWriteBufferBytes", "MaxReadBytes", "GCChunkBytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error does not mention %s: %v", want, err)
		}
	}
	o := testOptions(vfs.NewMem())
	o.IndexDir = o.Dir + "/"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "IndexDir must differ") {
		t.Errorf("IndexDir == Dir: %v", err)
	}
	if err := (Options{Dir: "/d", BookieID: "b", InstanceID: "i"}).Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestClosedStorageRefuses(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.NewMem()))
	mustAdd(t, s, 1, 0)
	mustClose(t, s)
	wantErr(t, "second Close", s.Close(), ErrClosed)
	wantErr(t, "add after Close", s.AddEntry(context.Background(), request(1, 1, 0, nil)), ErrClosed)
	_, err := s.ReadEntry(1, 0)
	wantErr(t, "read after Close", err, ErrClosed)
	wantErr(t, "Checkpoint after Close", s.Checkpoint(), ErrClosed)
	_, err = s.GC(context.Background())
	wantErr(t, "GC after Close", err, ErrClosed)
}

func TestHasLedgers(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	check := func(want bool, when string) {
		t.Helper()
		got, err := s.HasLedgers()
		if err != nil || got != want {
			t.Fatalf("%s: HasLedgers = %v, %v; want %v", when, got, err, want)
		}
	}
	check(false, "new storage")
	if _, err := s.Ledger(7); !errors.Is(err, ErrNoSuchLedger) {
		t.Fatalf("Ledger(7) = %v; want ErrNoSuchLedger", err)
	}
	check(false, "after looking up an unknown ledger")
	mustAdd(t, s, 7, 0)
	check(true, "with a buffered entry")
	mustClose(t, s)

	s = mustOpen(t, testOptions(fs))
	check(true, "after reopening")
	if err := s.DeleteLedger(7); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	s = mustOpen(t, testOptions(fs))
	check(true, "with only a deletion mark")
	mustClose(t, s)

	fs2 := vfs.NewMem()
	s = mustOpen(t, testOptions(fs2))
	if _, err := s.Fence(3, keyOf(3)); err != nil {
		t.Fatal(err)
	}
	check(true, "with only a fence")
	mustClose(t, s)
}

// ListLedgers pages through the known ledgers in id order — buffered,
// flushed, and after a reopen — and leaves out deleted ones.
func TestListLedgers(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, testOptions(fs))
	for _, l := range []int64{7, 3, 12, 5} {
		mustAdd(t, s, l, 0)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, 9, 0) // buffered only
	if err := s.DeleteLedger(5); err != nil {
		t.Fatal(err)
	}
	page := func(after int64, limit int) []int64 {
		t.Helper()
		ids, err := s.ListLedgers(after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	all := func() []int64 {
		var out []int64
		for after := int64(-1); ; {
			ids := page(after, 2)
			if len(ids) == 0 {
				return out
			}
			out = append(out, ids...)
			after = ids[len(ids)-1]
		}
	}
	if got := fmt.Sprint(all()); got != "[3 7 9 12]" {
		t.Fatalf("ListLedgers pages: %s, want [3 7 9 12]", got)
	}
	if _, err := s.ListLedgers(0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("limit 0: %v", err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	s = mustOpen(t, testOptions(fs))
	defer mustClose(t, s)
	if got := fmt.Sprint(all()); got != "[3 7 9 12]" {
		t.Fatalf("ListLedgers after a reopen: %s, want [3 7 9 12]", got)
	}
	if got := fmt.Sprint(page(7, 10)); got != "[9 12]" {
		t.Fatalf("ListLedgers(7, 10) = %s", got)
	}
}
