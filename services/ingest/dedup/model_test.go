package dedup

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/quick"
	"time"
)

// The naive model keeps the whole log — every batch ever appended, committed
// or pending, in offset order — and decides each batch by scanning it. It
// shares no code with State: runs, windows, roll-back on abort and the idle
// order all come from the full history, where State keeps rings, a pending
// queue and a linked list.

type mBatch struct {
	pid           int64
	epoch         int16
	first, last   int32
	base, lastOff int64
	pending       bool
}

type mProd struct {
	from      int64 // the producer's history is its batches at offsets >= from
	lastSeen  time.Time
	idleSince int64 // when it last became idle (a counter); valid with nothing pending
}

type model struct {
	cfg   Config
	log   []mBatch
	prods map[int64]*mProd
	tick  int64
	next  int64 // the writer's next offset
}

func newModel(cfg Config) *model {
	return &model{cfg: cfg.withDefaults(), prods: map[int64]*mProd{}}
}

func seqPlus(s int32, n int64) int32 { return int32((int64(s) + n) % (1 << 31)) }

func (m *model) history(pid int64) []mBatch {
	p := m.prods[pid]
	var h []mBatch
	for _, b := range m.log {
		if b.pid == pid && p != nil && b.base >= p.from {
			h = append(h, b)
		}
	}
	return h
}

func (m *model) pendingOf(pid int64) int {
	n := 0
	for _, b := range m.log {
		if b.pid == pid && b.pending {
			n++
		}
	}
	return n
}

// idle is the producers with nothing pending, idle longest first.
func (m *model) idle() []int64 {
	var ids []int64
	for id := range m.prods {
		if m.pendingOf(id) == 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b int64) int { return int(m.prods[a].idleSince - m.prods[b].idleSince) })
	return ids
}

func (m *model) expired(pid int64, now time.Time) bool {
	p := m.prods[pid]
	return p != nil && m.pendingOf(pid) == 0 && now.Sub(p.lastSeen) >= m.cfg.ProducerExpiry
}

func (m *model) check(h Header, now time.Time) (Decision, error) {
	if h.ProducerID == -1 {
		return Decision{Kind: Append}, nil
	}
	if h.ProducerID < -1 || h.Epoch < 0 || h.FirstSeq < 0 || h.Count < 1 {
		return Decision{}, ErrInvalidSequence
	}
	if m.prods[h.ProducerID] == nil || m.expired(h.ProducerID, now) {
		if h.FirstSeq != 0 {
			return Decision{}, ErrUnknownProducer
		}
		if len(m.prods) >= m.cfg.MaxProducers && len(m.idle()) == 0 {
			return Decision{}, ErrTooManyProducers
		}
		return Decision{Kind: Append}, nil
	}
	hist := m.history(h.ProducerID)
	run := 0
	for i := 1; i < len(hist); i++ {
		if hist[i].epoch != hist[i-1].epoch || hist[i].first != seqPlus(hist[i-1].last, 1) {
			run = i
		}
	}
	last := hist[len(hist)-1]
	switch {
	case h.Epoch < last.epoch:
		return Decision{}, ErrProducerFenced
	case h.Epoch > last.epoch:
		if h.FirstSeq != 0 {
			return Decision{}, ErrOutOfOrderSequence
		}
	default:
		lastSeq := seqPlus(h.FirstSeq, int64(h.Count)-1)
		for i := len(hist) - 1; i >= max(run, len(hist)-m.cfg.WindowBatches); i-- {
			if b := hist[i]; b.first == h.FirstSeq && b.last == lastSeq {
				k := Duplicate
				if b.pending {
					k = DuplicateInFlight
				}
				return Decision{Kind: k, BaseOffset: b.base, LastOffset: b.lastOff}, nil
			}
		}
		if h.FirstSeq != seqPlus(last.last, 1) {
			return Decision{}, ErrOutOfOrderSequence
		}
	}
	if m.pendingOf(h.ProducerID) >= m.cfg.WindowBatches {
		return Decision{}, ErrTooManyInFlight
	}
	return Decision{Kind: Append}, nil
}

func (m *model) pending(h Header, now time.Time) {
	if h.ProducerID == -1 {
		m.next += int64(h.Count)
		return
	}
	for _, id := range m.idle() {
		if !m.expired(id, now) {
			break
		}
		delete(m.prods, id)
	}
	if m.expired(h.ProducerID, now) {
		delete(m.prods, h.ProducerID)
	}
	p := m.prods[h.ProducerID]
	if p == nil {
		if len(m.prods) >= m.cfg.MaxProducers {
			delete(m.prods, m.idle()[0])
		}
		p = &mProd{from: m.next}
		m.prods[h.ProducerID] = p
	}
	m.log = append(m.log, mBatch{
		pid: h.ProducerID, epoch: h.Epoch, first: h.FirstSeq, last: seqPlus(h.FirstSeq, int64(h.Count)-1),
		base: m.next, lastOff: m.next + int64(h.Count) - 1, pending: true,
	})
	p.lastSeen = now
	m.next += int64(h.Count)
}

// checkMarker and pendingMarker: a marker is a batch of sequences -1..-1,
// one offset long, at the marker's epoch (see dedup.go).
func (m *model) checkMarker(pid int64, epoch int16, now time.Time) error {
	if pid < 0 || epoch < 0 {
		return ErrInvalidSequence
	}
	if m.prods[pid] == nil || m.expired(pid, now) {
		if len(m.prods) >= m.cfg.MaxProducers && len(m.idle()) == 0 {
			return ErrTooManyProducers
		}
		return nil
	}
	hist := m.history(pid)
	if epoch < hist[len(hist)-1].epoch {
		return ErrProducerFenced
	}
	if m.pendingOf(pid) >= m.cfg.WindowBatches {
		return ErrTooManyInFlight
	}
	return nil
}

func (m *model) pendingMarker(pid int64, epoch int16, now time.Time) {
	if m.prods[pid] != nil && !m.expired(pid, now) {
		if hist := m.history(pid); hist[len(hist)-1].epoch == epoch {
			m.pending(Header{ProducerID: -1, Count: 1}, now) // changes nothing but the offset
			return
		}
	}
	m.pending(Header{ProducerID: pid, Epoch: epoch, FirstSeq: -1, Count: 1}, now)
	m.log[len(m.log)-1].last = -1
}

func (m *model) commit(through int64) {
	for i := range m.log {
		if b := &m.log[i]; b.pending && b.lastOff <= through {
			b.pending = false
			if m.pendingOf(b.pid) == 0 {
				m.tick++
				m.prods[b.pid].idleSince = m.tick
			}
		}
	}
}

func (m *model) abort(from int64) {
	for n := len(m.log); n > 0 && m.log[n-1].pending && m.log[n-1].base >= from; n = len(m.log) {
		pid := m.log[n-1].pid
		m.log = m.log[:n-1]
		if m.pendingOf(pid) == 0 {
			if len(m.history(pid)) == 0 {
				delete(m.prods, pid)
			} else {
				m.tick++
				m.prods[pid].idleSince = m.tick
			}
		}
	}
	m.next = from
}

// pendingBounds are the base and last offsets of the pending batches.
func (m *model) pendingBounds() (bases, lasts []int64) {
	for _, b := range m.log {
		if b.pending {
			bases, lasts = append(bases, b.base), append(lasts, b.lastOff)
		}
	}
	return bases, lasts
}

var sentinels = []error{ErrProducerFenced, ErrOutOfOrderSequence, ErrInvalidSequence, ErrUnknownProducer, ErrTooManyInFlight, ErrTooManyProducers}

func classify(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// sim drives a State and the model with the same random traffic.
type sim struct {
	r    *rand.Rand
	s    *State
	m    *model
	now  time.Time
	pids []int64
	// steady: time never jumps to the expiry.
	steady bool
}

// header makes a batch header worth asking about: mostly what clients send
// (the next batch, retries, epoch bumps), sometimes nonsense.
func (x *sim) header() Header {
	r := x.r
	pid := x.pids[r.IntN(len(x.pids))]
	count := int32(1 + r.IntN(4))
	if r.IntN(40) == 0 {
		count = 1 + r.Int32N(math.MaxInt32) // to get near and across the wrap
	}
	hist := x.m.history(pid)
	if len(hist) == 0 || x.m.expired(pid, x.now) {
		switch r.IntN(6) {
		case 0:
			return Header{pid, int16(r.IntN(3)), int32(r.IntN(5)), count}
		default:
			return Header{pid, int16(r.IntN(3)), 0, count}
		}
	}
	last := hist[len(hist)-1]
	switch r.IntN(12) {
	case 0, 1, 2, 3:
		return Header{pid, last.epoch, seqPlus(last.last, 1), count}
	case 4, 5, 6: // a retry, usually recent
		b := hist[len(hist)-1-min(len(hist)-1, r.IntN(r.IntN(8)+1))]
		return Header{pid, b.epoch, b.first, int32(int64(seqPlus(b.last, -int64(b.first))) + 1)}
	case 7:
		return Header{pid, last.epoch + int16(1+r.IntN(2)), 0, count}
	case 8:
		return Header{pid, last.epoch + 1, int32(1 + r.IntN(3)), count}
	case 9:
		return Header{pid, max(0, last.epoch-1), seqPlus(last.last, 1), count}
	case 10:
		return Header{pid, last.epoch, seqPlus(last.last, int64(r.IntN(7))-3), count}
	default:
		switch r.IntN(4) {
		case 0:
			return Header{NoProducerID, -1, -1, count}
		case 1:
			return Header{pid, -1, 0, count}
		case 2:
			return Header{pid, last.epoch, -1, count}
		default:
			return Header{pid, last.epoch, 0, 0}
		}
	}
}

func (x *sim) step() error {
	r := x.r
	switch op := r.IntN(21); {
	case op == 20:
		// A transaction marker, mostly at the producer's epoch or the
		// next (the coordinator bumps it), sometimes an older one.
		pid := x.pids[r.IntN(len(x.pids))]
		epoch := int16(r.IntN(3))
		if hist := x.m.history(pid); len(hist) > 0 {
			epoch = max(0, hist[len(hist)-1].epoch+int16(r.IntN(3)-1))
		}
		gerr := x.s.CheckMarker(pid, epoch, x.now)
		werr := x.m.checkMarker(pid, epoch, x.now)
		if classify(gerr) != werr {
			return fmt.Errorf("CheckMarker(%d, %d) = %v; model %v", pid, epoch, gerr, werr)
		}
		if gerr == nil && r.IntN(10) > 0 {
			x.s.PendingMarker(pid, epoch, x.m.next, x.now)
			x.m.pendingMarker(pid, epoch, x.now)
		}
	case op < 12:
		h := x.header()
		got, gerr := x.s.Check(h, x.now)
		want, werr := x.m.check(h, x.now)
		if classify(gerr) != werr || got != want {
			return fmt.Errorf("Check(%+v) = %+v, %v; model %+v, %v", h, got, gerr, want, werr)
		}
		if got.Kind == Append && r.IntN(10) > 0 {
			x.s.Pending(h, x.m.next, x.now)
			x.m.pending(h, x.now)
		}
	case op < 16:
		if _, lasts := x.m.pendingBounds(); len(lasts) > 0 {
			through := lasts[r.IntN(len(lasts))]
			x.s.Commit(through)
			x.m.commit(through)
		}
	case op < 18:
		if bases, _ := x.m.pendingBounds(); len(bases) > 0 {
			from := bases[r.IntN(len(bases))]
			x.s.Abort(from)
			x.m.abort(from)
		}
	default:
		d := time.Duration(r.IntN(3000)) * time.Millisecond
		if !x.steady && r.IntN(10) == 0 {
			d = x.m.cfg.ProducerExpiry - time.Second + time.Duration(r.IntN(2000))*time.Millisecond
		}
		x.now = x.now.Add(d)
	}
	if x.s.Producers() != len(x.m.prods) || x.s.InFlight() != len(slices.DeleteFunc(slices.Clone(x.m.log), func(b mBatch) bool { return !b.pending })) {
		return fmt.Errorf("tracking %d producers, %d in flight; model %d, %+v", x.s.Producers(), x.s.InFlight(), len(x.m.prods), x.m.log)
	}
	return nil
}

// TestStateAgainstModel: random producers sending new batches, retries,
// epoch bumps and nonsense; the writer committing and aborting at random
// entry boundaries; time passing over the expiry; few producer slots so
// eviction is frequent. Every Check must equal the model's.
func TestStateAgainstModel(t *testing.T) {
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 1))
		cfg := Config{WindowBatches: 1 + r.IntN(5), MaxProducers: 1 + r.IntN(4), ProducerExpiry: time.Duration(5+r.IntN(20)) * time.Second}
		if err := runSim(r, cfg, 400, 2+cfg.MaxProducers); err != nil {
			t.Errorf("seed %d %+v: %v", seed, cfg, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: runs(150)}); err != nil {
		t.Fatal(err)
	}
}

func runSim(r *rand.Rand, cfg Config, steps, producers int) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	x := &sim{r: r, s: s, m: newModel(cfg), now: t0}
	for i := range producers {
		x.pids = append(x.pids, int64(i+1))
	}
	for i := range steps {
		if err := x.step(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

// TestExactlyOnceAndRebuild runs the same traffic with no eviction or
// expiry and checks what clients rely on, independent of the model:
//
//   - per producer and epoch, the committed log holds every sequence once,
//     in order, from 0: retries were never written twice, gaps never
//     accepted;
//
// and what failover relies on: whenever nothing is in flight, a State
// rebuilt from the whole committed log, and one rebuilt from the shortest
// suffix holding every producer's window, decide every probe like the live
// State.
func TestExactlyOnceAndRebuild(t *testing.T) {
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 2))
		cfg := Config{WindowBatches: 1 + r.IntN(5), MaxProducers: 64, ProducerExpiry: MaxProducerExpiry}
		s, _ := New(cfg)
		x := &sim{r: r, s: s, m: newModel(cfg), now: t0, pids: []int64{1, 2, 3, 4}, steady: true}
		for i := range 300 {
			if err := x.step(); err != nil {
				t.Errorf("seed %d step %d: %v", seed, i, err)
				return false
			}
			if s.InFlight() == 0 && r.IntN(10) == 0 {
				if err := x.compareRebuilds(); err != nil {
					t.Errorf("seed %d step %d: %v", seed, i, err)
					return false
				}
			}
		}
		if err := x.exactlyOnce(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: runs(100)}); err != nil {
		t.Fatal(err)
	}
}

func (x *sim) exactlyOnce() error {
	type key struct {
		pid   int64
		epoch int16
	}
	next := map[key]int32{}
	for _, b := range x.m.log {
		if b.pending {
			continue
		}
		k := key{b.pid, b.epoch}
		if b.first == -1 { // a marker: the next batch follows its last
			next[k] = seqPlus(b.last, 1)
			continue
		}
		if b.first != next[k] { // 0 for a new (producer, epoch)
			return fmt.Errorf("producer %d epoch %d: batch at offset %d starts at sequence %d, want %d", b.pid, b.epoch, b.base, b.first, next[k])
		}
		next[k] = seqPlus(b.last, 1)
	}
	return nil
}

func (x *sim) compareRebuilds() error {
	// The suffix: from the earliest batch of any producer's window.
	from := x.m.next
	for id := range x.m.prods {
		hist := x.m.history(id)
		run := 0
		for i := 1; i < len(hist); i++ {
			if hist[i].epoch != hist[i-1].epoch || hist[i].first != seqPlus(hist[i-1].last, 1) {
				run = i
			}
		}
		from = min(from, hist[max(run, len(hist)-x.s.cfg.WindowBatches)].base)
	}
	for _, start := range []int64{0, from} {
		rb, _ := New(x.s.cfg)
		for _, b := range x.m.log {
			if b.base < start {
				continue
			}
			if b.first == -1 {
				if err := rb.RebuildMarker(b.pid, b.epoch, b.base, x.now); err != nil {
					return fmt.Errorf("rebuild from %d: %w", start, err)
				}
				continue
			}
			h := Header{b.pid, b.epoch, b.first, int32(b.lastOff-b.base) + 1}
			if err := rb.Rebuild(h, b.base, x.now); err != nil {
				return fmt.Errorf("rebuild from %d: %w", start, err)
			}
		}
		for _, pid := range append(slices.Clone(x.pids), 99) {
			for _, h := range x.probes(pid) {
				got, gerr := rb.Check(h, x.now)
				want, werr := x.s.Check(h, x.now)
				if got != want || classify(gerr) != classify(werr) {
					return fmt.Errorf("rebuilt from offset %d: Check(%+v) = %+v, %v; live %+v, %v", start, h, got, gerr, want, werr)
				}
			}
		}
	}
	return nil
}

// probes are headers around everything the producer did.
func (x *sim) probes(pid int64) []Header {
	hs := []Header{{pid, 0, 0, 1}, {pid, 1, 0, 1}, {pid, 0, 1, 1}}
	for _, b := range x.m.history(pid) {
		n := int32(int64(seqPlus(b.last, -int64(b.first))) + 1)
		hs = append(hs,
			Header{pid, b.epoch, b.first, n},
			Header{pid, b.epoch, seqPlus(b.last, 1), 1},
			Header{pid, b.epoch + 1, 0, 1},
			Header{pid, b.epoch, b.first, n + 1},
		)
		if b.epoch > 0 {
			hs = append(hs, Header{pid, b.epoch - 1, b.first, n})
		}
	}
	return hs
}

// runs is the number of seeds a property test tries.
func runs(n int) int {
	if raceEnabled {
		return max(1, n/5)
	}
	return n
}
