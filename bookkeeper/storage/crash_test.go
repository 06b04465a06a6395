package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// crashModel is what the workload did, as far as a crash image must
// reflect it. Updated by the workload goroutine, read by the injector on
// whatever goroutine does I/O (the flusher, Pebble's own), hence the lock.
type crashModel struct {
	mu        sync.Mutex
	attempted map[entryRef]bool // AddEntry called: may be in an image
	returned  map[entryRef]bool // AddEntry returned nil
	durable   map[entryRef]bool // returned before a Checkpoint that returned nil
	deleting  map[int64]bool    // DeleteLedger called
	deleted   map[int64]bool    // DeleteLedger returned nil
	fenced    map[int64]bool    // Fence returned nil
}

func newCrashModel() *crashModel {
	return &crashModel{
		attempted: map[entryRef]bool{}, returned: map[entryRef]bool{}, durable: map[entryRef]bool{},
		deleting: map[int64]bool{}, deleted: map[int64]bool{}, fenced: map[int64]bool{},
	}
}

func (m *crashModel) update(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

// crashImage is a crash-consistent copy of the filesystem taken just
// before one filesystem operation, with what it must hold.
type crashImage struct {
	label  string
	fs     *vfs.MemFS
	expect crashExpect
}

// crashExpect is a model snapshot taken with an image: everything the
// model recorded happened before the operation the image precedes.
type crashExpect struct {
	attempted, durable map[entryRef]bool
	deleting, deleted  map[int64]bool
	fenced             map[int64]bool
}

func (m *crashModel) snapshot() crashExpect {
	m.mu.Lock()
	defer m.mu.Unlock()
	return crashExpect{
		attempted: maps.Clone(m.attempted), durable: maps.Clone(m.durable),
		deleting: maps.Clone(m.deleting), deleted: maps.Clone(m.deleted), fenced: maps.Clone(m.fenced),
	}
}

// crasher is an errorfs injector that injects no errors: before randomly
// chosen operations it takes a CrashClone (all synced data, plus a random
// share of unsynced blocks and directory entries).
type crasher struct {
	mem   *vfs.MemFS
	model *crashModel

	// opening is set while Storage.Open runs. Images then keep all or
	// none of the unsynced data: every pebble.Open writes a new manifest
	// and moves its marker before syncing the directory, relying (like
	// RocksDB) on directory entries becoming durable in creation order, as
	// on ext4 and xfs; a partial clone may keep the marker and lose the
	// manifest. Pebble's own crash tests take partial clones only after
	// Open, too.
	opening atomic.Bool

	mu     sync.Mutex
	rng    *rand.Rand
	ops    int
	images []crashImage
	max    int
}

func (c *crasher) String() string { return "crasher" }

func (c *crasher) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops++
	if len(c.images) >= c.max || c.rng.IntN(40) != 0 {
		return nil
	}
	expect := c.model.snapshot() // before the clone: all of it happened before
	pct := []int{0, 30, 100}[c.rng.IntN(3)]
	if pct == 30 && c.opening.Load() {
		pct = 0
	}
	c.images = append(c.images, crashImage{
		label:  fmt.Sprintf("crash before op %d (%v %s), %d%% of unsynced data kept", c.ops, op.Kind, op.Path, pct),
		fs:     c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: c.rng}),
		expect: expect,
	})
	return nil
}

// crashWorkload drives a storage with adds, re-adds, LACs, fences,
// deletes, checkpoints and GCs, chosen by rng, recording them in m.
func crashWorkload(t *testing.T, s *Storage, m *crashModel, rng *rand.Rand, steps int) {
	ctx := context.Background()
	live := []int64{1, 2, 3, 4}
	next := map[int64]int64{}
	newLedger := int64(5)
	replace := func(i int) { live[i] = newLedger; newLedger++ }
	for step := 0; step < steps; step++ {
		i := rng.IntN(len(live))
		l := live[i]
		switch r := rng.IntN(100); {
		case r < 65:
			e := next[l]
			next[l]++
			ref := entryRef{l, e}
			m.update(func() { m.attempted[ref] = true })
			mustAdd(t, s, l, e)
			m.update(func() { m.returned[ref] = true })
		case r < 70 && next[l] > 0: // a replayed or recovery re-add
			e := rng.Int64N(next[l])
			p := payloadOf(l, e, sizeOf(l, e))
			req := request(l, e, e-1, p)
			req.Replay = true
			if err := s.AddEntry(ctx, req); err != nil {
				t.Fatalf("re-add %d/%d: %v", l, e, err)
			}
		case r < 80:
			m.mu.Lock()
			pending := maps.Clone(m.returned)
			m.mu.Unlock()
			if err := s.Checkpoint(); err != nil {
				t.Fatalf("Checkpoint: %v", err)
			}
			m.update(func() { maps.Copy(m.durable, pending) })
		case r < 84:
			if err := s.WriteLAC(l, keyOf(l), next[l]-1); err != nil {
				t.Fatalf("WriteLAC: %v", err)
			}
		case r < 87:
			if _, err := s.Fence(l, keyOf(l)); err != nil {
				t.Fatalf("Fence: %v", err)
			}
			m.update(func() { m.fenced[l] = true })
			replace(i)
		case r < 91:
			m.update(func() { m.deleting[l] = true })
			if err := s.DeleteLedger(l); err != nil {
				t.Fatalf("DeleteLedger: %v", err)
			}
			m.update(func() { m.deleted[l] = true })
			replace(i)
		default:
			if _, err := s.GC(ctx); err != nil {
				t.Fatalf("GC: %v", err)
			}
		}
	}
}

// checkImage opens a crash image and checks it against what it must hold.
func checkImage(t *testing.T, img crashImage, o Options) {
	o.FS = img.fs
	s, err := Open(o)
	if err != nil {
		t.Fatalf("%s: Open: %v", img.label, err)
	}
	defer mustClose(t, s)
	x := img.expect
	check := func(stage string) {
		for ref := range x.attempted {
			err := entryMatches(s, ref.ledger, ref.entry)
			switch {
			case x.deleted[ref.ledger]:
				if !errors.Is(err, ErrNoSuchLedger) {
					t.Fatalf("%s, %s: entry %d/%d of a deleted ledger: %v", img.label, stage, ref.ledger, ref.entry, err)
				}
			case x.durable[ref] && !x.deleting[ref.ledger]:
				if err != nil {
					t.Fatalf("%s, %s: checkpointed entry lost or damaged: %v", img.label, stage, err)
				}
			case err != nil && !errors.Is(err, ErrNoSuchEntry) && !errors.Is(err, ErrNoSuchLedger):
				// Not checkpointed: absent is fine, anything else is not.
				t.Fatalf("%s, %s: entry %d/%d: %v", img.label, stage, ref.ledger, ref.entry, err)
			}
		}
		for l := range x.fenced {
			if x.deleting[l] {
				continue
			}
			if info, err := s.Ledger(l); err != nil || !info.Fenced {
				t.Fatalf("%s, %s: ledger %d fenced before the crash: %+v, %v", img.label, stage, l, info, err)
			}
		}
		if _, err := s.Verify(context.Background()); err != nil {
			t.Fatalf("%s, %s: Verify: %v", img.label, stage, err)
		}
	}
	check("after reopen")
	// Finish whatever GC the crash interrupted, then check again.
	if _, err := s.GC(context.Background()); err != nil {
		t.Fatalf("%s: GC after reopen: %v", img.label, err)
	}
	check("after GC")
}

// Crash at random points of a random workload (mid-flush, mid-GC,
// mid-rotation, mid-fence, inside Pebble): after reopen everything added
// before the last completed Checkpoint is there and intact, fences and
// deletions that returned hold, nothing else is returned but correct
// data or "no such entry", and Verify finds the index pointing at nothing
// but valid frames — also after GC finishes on the image.
func TestCrashRecovery(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	total := 0
	for seed := range uint64(seeds) {
		mem := vfs.NewCrashableMem()
		model := newCrashModel()
		c := &crasher{mem: mem, model: model, rng: rand.New(rand.NewPCG(seed, 99)), max: 25}
		o := testOptions(mem)
		o.MaxWriteBufferBytes = 24 << 10 // background flushes happen too
		s := mustOpen(t, o)
		o.FS = errorfs.Wrap(mem, c)
		// Reopen through the crasher (the first Open formatted it).
		mustClose(t, s)
		c.opening.Store(true)
		s = mustOpen(t, o)
		c.opening.Store(false)
		crashWorkload(t, s, model, rand.New(rand.NewPCG(seed, 1)), 600)
		mustClose(t, s)
		if len(c.images) < 10 {
			t.Fatalf("seed %d: only %d crash images in %d ops", seed, len(c.images), c.ops)
		}
		for _, img := range c.images {
			checkImage(t, img, testOptions(nil))
		}
		total += len(c.images)
	}
	t.Logf("%d crash images checked", total)
}
