package journal

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

var crashSeeds = flag.Int("crash.seeds", 32, "seeds for TestCrashConcurrentAppenders (soak with more)")

// crashPoint is a crash image taken just before one filesystem operation.
type crashPoint struct {
	label string
	fs    *vfs.MemFS
	acked map[uint64]bool // acknowledged before the crash: must survive
	ckpt  uint64          // a Checkpoint call had returned for this
}

// crasher is an errorfs injector that injects no errors: before the
// operations it picks, it takes a CrashClone of the underlying MemFS
// (everything synced, plus a random share of what was not).
type crasher struct {
	mem  *vfs.MemFS
	m    *model             // acks so far
	at   func(op int) []int // before op, one crash image per entry: the % of unsynced data it keeps
	ckpt atomic.Uint64      // highest checkpoint Checkpoint returned for

	mu      sync.Mutex
	rng     *rand.Rand
	count   int
	points  []crashPoint
	crashed chan struct{} // closed at the first crash point
}

func newCrasher(mem *vfs.MemFS, m *model, seed uint64, at func(int) []int) *crasher {
	return &crasher{mem: mem, m: m, at: at, rng: rand.New(rand.NewPCG(seed, 7)), crashed: make(chan struct{})}
}

func (c *crasher) String() string { return "crasher" }

func (c *crasher) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.count
	c.count++
	pcts := c.at(i)
	if len(pcts) == 0 {
		return nil
	}
	// Acks and checkpoints read before the clone happened before it.
	acked, ckpt := c.m.snapshot(), c.ckpt.Load()
	for _, pct := range pcts {
		c.points = append(c.points, crashPoint{
			label: fmt.Sprintf("crash before op %d (%v %s), %d%% of unsynced data kept", i, op.Kind, op.Path, pct),
			fs:    c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: c.rng}),
			acked: acked, ckpt: ckpt,
		})
	}
	if len(c.points) == len(pcts) {
		close(c.crashed)
	}
	return nil
}

// expectation is what a crash image must hold.
type expectation struct {
	recs  map[uint64][]byte // every record the image may hold, by seq
	acked map[uint64]bool   // records it must hold (unless checkpointed)
	ckpt  uint64            // lower bound of its checkpoint
}

// crashConfig makes groups deterministic: a group goes only when full (the
// group wait is long), so three 2000-byte records or one record above
// GroupBytes make one group, and op sequences repeat exactly. Groups span
// MemFS's 4 KiB blocks, so crash images can hold part of a group, holes
// included.
func crashConfig(fs vfs.FS) Config {
	return Config{
		Dir:           testDir,
		FS:            fs,
		MaxRecordSize: 8192,
		GroupBytes:    3 * (RecordHeaderSize + 2000),
		MaxFileSize:   20000,
		MaxGroupWait:  time.Second,
	}
}

// openChecked opens an image with cfg and checks it against e: no error,
// the checkpoint did not go back, the replay is a contiguous run of known
// records, and every acked record after the checkpoint is in it.
func openChecked(t *testing.T, label string, cfg Config, e expectation) (*Journal, RecoveryInfo) {
	t.Helper()
	fn, gotp := collector()
	j, err := Open(cfg, fn)
	if err != nil {
		t.Fatalf("%s: Open: %v", label, err)
	}
	got, info := *gotp, j.Recovery()
	if info.Checkpoint < e.ckpt {
		t.Fatalf("%s: checkpoint %d went back from %d", label, info.Checkpoint, e.ckpt)
	}
	for i, r := range got {
		want, ok := e.recs[r.seq]
		if r.seq != info.Checkpoint+1+uint64(i) || !ok || !bytes.Equal(r.rec, want) {
			t.Fatalf("%s: replayed #%d seq %d: not the record appended with that seq (known %v)", label, i, r.seq, ok)
		}
	}
	if last := info.Checkpoint + uint64(len(got)); info.LastSeq != last {
		t.Fatalf("%s: LastSeq %d, replay ended at %d", label, info.LastSeq, last)
	}
	for seq := range e.acked {
		if seq > info.LastSeq {
			t.Fatalf("%s: acknowledged record %d lost (recovered up to %d, checkpoint %d)", label, seq, info.LastSeq, info.Checkpoint)
		}
	}
	return j, info
}

// afterRecovery is what an image holds once recovered (info) and appended
// to (m's records): the recovered records, then the new ones, which reuse
// the sequence numbers of records the crash lost.
func afterRecovery(e expectation, info RecoveryInfo, m *model) map[uint64][]byte {
	recs := map[uint64][]byte{}
	for seq, rec := range e.recs {
		if seq <= info.LastSeq {
			recs[seq] = rec
		}
	}
	m.mu.Lock()
	maps.Copy(recs, m.recs)
	m.mu.Unlock()
	return recs
}

// checkRecovered opens an image (through wrap, if set, to crash during
// recovery), checks it with openChecked, appends three records and closes.
// It returns what the image holds now: everything, durably.
func checkRecovered(t *testing.T, label string, fs vfs.FS, e expectation, m *model, wrap func(vfs.FS) vfs.FS) (expectation, RecoveryInfo) {
	t.Helper()
	openFS := fs
	if wrap != nil {
		openFS = wrap(fs)
	}
	j, info := openChecked(t, label, crashConfig(openFS), e)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		m.appendAsync(t, j, payload(1<<40+info.LastSeq+uint64(i), 2000), &wg, errs)
	}
	wg.Wait()
	mustClose(t, j)
	close(errs)
	for err := range errs {
		t.Fatalf("%s: append after recovery: %v", label, err)
	}
	next := expectation{recs: afterRecovery(e, info, m), acked: map[uint64]bool{}, ckpt: info.Checkpoint}
	for seq := range next.recs {
		if seq > info.Checkpoint {
			next.acked[seq] = true
		}
	}
	return next, info
}

// crashScript runs a fixed workload: groups of three small records or one
// big one, rotations every few groups, two checkpoints, a reopen, more
// appends. Ops happen in the same order on every run.
func crashScript(t *testing.T, fs vfs.FS, m *model, c *crasher) {
	j, _ := mustOpen(t, crashConfig(fs))
	id := uint64(0)
	round := func(r int) {
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		sizes := []int{2000, 2000, 2000}
		if r%4 == 3 {
			sizes = []int{6100 + 100*r} // above GroupBytes: a group of its own
		}
		for _, n := range sizes {
			m.appendAsync(t, j, payload(id, n), &wg, errs)
			id++
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	checkpoint := func(seq uint64) {
		if err := j.Checkpoint(seq); err != nil {
			t.Fatal(err)
		}
		c.ckpt.Store(seq)
	}
	for r := range 12 {
		round(r)
		switch r {
		case 5:
			checkpoint(j.Durable() - 4)
		case 9:
			checkpoint(j.Durable() - 1)
		}
	}
	// Crash images must include journal files reused from the recycled
	// pool (stale records after their terminators).
	if j.Stats().Reused == 0 {
		t.Fatal("the crash script never reused a recycled file")
	}
	mustClose(t, j)
	j, _ = mustOpen(t, crashConfig(fs))
	for r := 12; r < 16; r++ {
		round(r)
	}
	checkpoint(j.Durable() - 2)
	round(16)
	mustClose(t, j)
}

// copyOf returns an identical, independent copy of an image.
func copyOf(fs *vfs.MemFS) *vfs.MemFS {
	return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(0, 0))})
}

// Crash before every filesystem operation of the script, three times:
// keeping none, half or all of the unsynced data. Every image must open without error with
// every acknowledged record intact and in order, accept appends, and hold
// them on the next open. Where recovery had to repair something (cut a torn
// tail, delete checkpointed files), crash again before every operation of
// that recovery and check those images the same way.
func TestCrashAtEveryOperation(t *testing.T) {
	never := func(int) []int { return nil }
	counter := newCrasher(vfs.NewCrashableMem(), newModel(), 0, never)
	crashScript(t, errorfs.Wrap(counter.mem, counter), newModel(), counter)
	ops := counter.count
	if ops < 100 {
		t.Fatalf("script ran only %d ops", ops)
	}

	every := func(int) []int { return []int{0, 50, 100} }
	mem := vfs.NewCrashableMem()
	m := newModel()
	c := newCrasher(mem, m, 1, every)
	crashScript(t, errorfs.Wrap(mem, c), m, c)
	if len(c.points) != 3*ops {
		t.Fatalf("ops differ between runs: %d then %d", ops, len(c.points)/3)
	}
	all := m.recs
	repaired, nested := 0, 0
	for _, p := range c.points {
		e := expectation{recs: all, acked: p.acked, ckpt: p.ckpt}
		img := copyOf(p.fs)
		e2, info := checkRecovered(t, p.label, img, e, newModel(), nil)
		checkRecovered(t, p.label+", reopened", img, e2, newModel(), nil)
		if info.TornBytes == 0 && info.RemovedFiles == 0 {
			continue
		}
		repaired++
		nm := newModel()
		maps.Copy(nm.acked, p.acked)
		img = copyOf(p.fs)
		nc := newCrasher(img, nm, 2, every)
		e3, _ := checkRecovered(t, p.label+", recovering", img, e, nm,
			func(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, nc) })
		for _, q := range nc.points {
			nested++
			// e3.recs: the image's records, then the ones appended after
			// recovery (whose seqs the lost tail had used).
			ne := expectation{recs: e3.recs, acked: q.acked, ckpt: p.ckpt}
			checkRecovered(t, p.label+", then "+q.label, q.fs, ne, newModel(), nil)
		}
	}
	if repaired == 0 {
		t.Fatal("no crash image needed repair; the test lost its teeth")
	}
	t.Logf("%d crash points (%d needed repair), %d more during those recoveries", len(c.points), repaired, nested)
}

// Concurrent appenders and a checkpointer on a crashable filesystem, crashed
// at a random operation; the image is recovered and checked, then appended
// to concurrently and crashed again, for a few generations per seed. The
// seed fixes the configuration, the workload, the crash operation and which
// unsynced blocks survive; goroutine scheduling stays the runtime's, so a
// failure names its seed and crash point (run it alone with -run).
func TestCrashConcurrentAppenders(t *testing.T) {
	seeds := *crashSeeds
	if testing.Short() {
		seeds = min(seeds, 8)
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { crashGenerations(t, seed, 4) })
	}
}

func crashGenerations(t *testing.T, seed uint64, gens int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	fs := vfs.NewCrashableMem()
	e := expectation{recs: map[uint64][]byte{}, acked: map[uint64]bool{}}
	var nextID atomic.Uint64
	for gen := range gens {
		m := newModel()
		maps.Copy(m.acked, e.acked)
		crashOp, pct := 15+rng.IntN(400), []int{0, 30, 70, 100}[rng.IntN(4)]
		c := newCrasher(fs, m, seed<<8+uint64(gen), func(op int) []int {
			if op == crashOp {
				return []int{pct}
			}
			return nil
		})
		cfg := Config{
			Dir:           testDir,
			FS:            errorfs.Wrap(fs, c),
			MaxRecordSize: 2048,
			GroupBytes:    []int{512, 2048, 8192}[rng.IntN(3)],
			MaxFileSize:   int64(16<<10 + rng.IntN(32<<10)),
			MaxGroupWait:  []time.Duration{0, 50 * time.Microsecond}[rng.IntN(2)],
			MaxQueueBytes: 32 << 10,
		}
		label := fmt.Sprintf("gen %d (config %+v)", gen, cfg)
		j, info := openChecked(t, label+" open", cfg, e)

		stop := make(chan struct{})
		var workers sync.WaitGroup
		for w := range 1 + rng.IntN(6) {
			wrng := rand.New(rand.NewPCG(seed, uint64(gen<<8+w)))
			workers.Go(func() {
				var pending sync.WaitGroup
				defer pending.Wait()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					rec := payload(nextID.Add(1), wrng.IntN(cfg.MaxRecordSize+1))
					pending.Add(1)
					err := j.Append(context.Background(), rec, func(seq uint64, err error) {
						defer pending.Done()
						if err != nil {
							t.Errorf("%s: append: %v", label, err)
							return
						}
						m.mu.Lock()
						m.recs[seq], m.acked[seq] = rec, true
						m.mu.Unlock()
					})
					if err != nil {
						t.Errorf("%s: Append: %v", label, err)
						return
					}
					if i%8 == 7 {
						pending.Wait() // bounded pipelining
					}
					if w == 0 && i%32 == 31 {
						if d := j.Durable(); d > 4 {
							cp := d - uint64(wrng.IntN(4))
							if err := j.Checkpoint(cp); err != nil {
								t.Errorf("%s: Checkpoint(%d): %v", label, cp, err)
								return
							}
							c.ckpt.Store(max(c.ckpt.Load(), cp))
						}
					}
				}
			})
		}
		<-c.crashed
		close(stop)
		workers.Wait()
		mustClose(t, j)
		if t.Failed() {
			return
		}
		p := c.points[0]
		fs = p.fs
		e = expectation{recs: afterRecovery(e, info, m), acked: p.acked, ckpt: p.ckpt}
		t.Logf("gen %d: %d records acked, %s", gen, len(m.acked), p.label)
	}
	checkRecovered(t, "last image", fs, e, newModel(), nil)
}
