package balance

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/quick"
)

func newBalancer(t *testing.T, cfg Config) *Balancer {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parts builds partitions t/0, t/1, ... owned as listed ("" = free).
func parts(owners ...string) []Partition {
	ps := make([]Partition, len(owners))
	for i, o := range owners {
		ps[i] = Partition{Key{"t", i}, o}
	}
	return ps
}

func repeat(o string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = o
	}
	return s
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		in          Input
		held, share int
		acq, rel    int
	}{
		{name: "all free: smallest id gets the remainder", in: Input{"a", []string{"c", "b", "a"}, parts(repeat("", 7)...)},
			held: 0, share: 3, acq: 3},
		{name: "all free: others get the floor", in: Input{"c", []string{"c", "b", "a"}, parts(repeat("", 7)...)},
			held: 0, share: 2, acq: 2},
		{name: "acquisitions capped per round", cfg: Config{MaxAcquiresPerRound: 10}, in: Input{"a", []string{"a"}, parts(repeat("", 100)...)},
			held: 0, share: 100, acq: 10},
		{name: "balanced: nothing to do", in: Input{"a", []string{"a", "b", "c"}, parts("a", "a", "a", "b", "b", "c", "c")},
			held: 3, share: 3},
		{name: "balanced with the remainder elsewhere: nothing to do", in: Input{"a", []string{"a", "b", "c"}, parts("a", "a", "b", "b", "b", "c", "c")},
			held: 2, share: 2},
		{name: "balanced, the owner at the ceiling", in: Input{"b", []string{"a", "b", "c"}, parts("a", "a", "b", "b", "b", "c", "c")},
			held: 3, share: 3},
		{name: "a newcomer: the others release to it", in: Input{"a", []string{"a", "b", "c"}, parts("a", "a", "a", "a", "b", "b", "b", "b")},
			held: 4, share: 3, rel: 1},
		{name: "a newcomer: nothing free to take yet", in: Input{"c", []string{"a", "b", "c"}, parts("a", "a", "a", "a", "b", "b", "b", "b")},
			held: 0, share: 2},
		{name: "a dead owner's partitions are free", in: Input{"b", []string{"a", "b"}, parts("a", "a", "a", "x", "x", "x")},
			held: 0, share: 3, acq: 3},
		{name: "no release while free partitions cover the others", cfg: Config{MaxAcquiresPerRound: 1}, in: Input{"a", []string{"a", "b"}, parts("a", "a", "a", "a", "a", "a", "", "")},
			held: 6, share: 4},
		{name: "release what the others can take beyond the free ones", in: Input{"a", []string{"a", "b"}, parts("a", "a", "a", "a", "a", "a", "", "")},
			held: 6, share: 4, rel: 2},
		{name: "releases capped per round", cfg: Config{MaxReleasesPerRound: 3}, in: Input{"a", []string{"a", "b"}, parts(repeat("a", 20)...)},
			held: 20, share: 10, rel: 3},
		{name: "releases split in id order: the first takes it all", cfg: Config{MaxAcquiresPerRound: 1}, in: Input{"a", []string{"a", "b", "c"}, parts("a", "a", "a", "b", "b", "b")},
			held: 3, share: 2, rel: 1},
		{name: "releases split in id order: the next waits", cfg: Config{MaxAcquiresPerRound: 1}, in: Input{"b", []string{"a", "b", "c"}, parts("a", "a", "a", "b", "b", "b")},
			held: 3, share: 2},
		{name: "more owners than partitions", in: Input{"c", []string{"a", "b", "c"}, parts("", "")},
			held: 0, share: 0},
		{name: "no partitions", in: Input{"a", []string{"a"}, nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newBalancer(t, tc.cfg).Plan(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.Held != tc.held || p.Share != tc.share || len(p.Acquire) != tc.acq || len(p.Release) != tc.rel {
				t.Fatalf("plan %+v: want held %d share %d, %d acquires, %d releases", p, tc.held, tc.share, tc.acq, tc.rel)
			}
			owner := map[Key]string{}
			for _, q := range tc.in.Partitions {
				owner[q.Key] = q.Owner
			}
			for _, k := range p.Acquire {
				if o := owner[k]; slices.Contains(tc.in.Owners, o) {
					t.Errorf("acquires %v, owned by live %q", k, o)
				}
			}
			for _, k := range p.Release {
				if owner[k] != tc.in.Me {
					t.Errorf("releases %v, owned by %q", k, owner[k])
				}
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	b := newBalancer(t, Config{})
	for _, tc := range []struct {
		in   Input
		want error
	}{
		{Input{"z", []string{"a", "b"}, parts("z")}, ErrNotLive},
		{Input{"", []string{"a"}, nil}, ErrInvalidInput},
		{Input{"a", []string{"a", ""}, nil}, ErrInvalidInput},
		{Input{"a", []string{"a", "b", "a"}, nil}, ErrInvalidInput},
		{Input{"a", []string{"a"}, []Partition{{Key{"t", 0}, ""}, {Key{"u", 0}, ""}, {Key{"t", 0}, "a"}}}, ErrInvalidInput},
	} {
		if _, err := b.Plan(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("Plan(%+v) = %v, want %v", tc.in, err, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	b := newBalancer(t, Config{})
	if b.cfg.MaxAcquiresPerRound != DefaultMaxAcquiresPerRound || b.cfg.MaxReleasesPerRound != DefaultMaxReleasesPerRound {
		t.Errorf("defaults: %+v", b.cfg)
	}
	_, err := New(Config{MaxAcquiresPerRound: -1, MaxReleasesPerRound: MaxPerRound + 1})
	if err == nil || !strings.Contains(err.Error(), "MaxAcquiresPerRound") || !strings.Contains(err.Error(), "MaxReleasesPerRound") {
		t.Errorf("error does not report both fields: %v", err)
	}
}

// Copies acquiring at once go mostly for different partitions.
func TestRendezvousSpreadsAcquisitions(t *testing.T) {
	b := newBalancer(t, Config{})
	owners := []string{"ingest-0", "ingest-1", "ingest-2", "ingest-3"}
	in := Input{Owners: owners, Partitions: parts(repeat("", 400)...)}
	taken := map[Key]int{}
	for _, me := range owners {
		in.Me = me
		p, err := b.Plan(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range p.Acquire {
			taken[k]++
		}
	}
	collisions := 0
	for _, n := range taken {
		collisions += n - 1
	}
	// 4 × 64 picks out of 400: random picks would collide about 70 times.
	if collisions > 100 {
		t.Errorf("%d of %d picks collide", collisions, 4*DefaultMaxAcquiresPerRound)
	}
}

// world is the simulation's catalog: live owners and partition owners.
type world struct {
	live  []string // sorted
	owner map[Key]string
	keys  []Key
}

func (w *world) isLive(o string) bool { _, ok := slices.BinarySearch(w.live, o); return ok }

func (w *world) free(k Key) bool { return !w.isLive(w.owner[k]) }

// input is w as owner me sees it, in a shuffled order (Plan must not care).
func (w *world) input(r *rand.Rand, me string) Input {
	in := Input{Me: me, Owners: slices.Clone(w.live)}
	for _, k := range w.keys {
		in.Partitions = append(in.Partitions, Partition{k, w.owner[k]})
	}
	r.Shuffle(len(in.Owners), func(i, j int) { in.Owners[i], in.Owners[j] = in.Owners[j], in.Owners[i] })
	r.Shuffle(len(in.Partitions), func(i, j int) { in.Partitions[i], in.Partitions[j] = in.Partitions[j], in.Partitions[i] })
	return in
}

func (w *world) counts() map[string]int {
	c := map[string]int{}
	for _, k := range w.keys {
		if o := w.owner[k]; w.isLive(o) {
			c[o]++
		}
	}
	return c
}

// shares is the spec of the shares, written out naively.
func (w *world) shares() map[string]int {
	c := w.counts()
	ranked := slices.Clone(w.live)
	slices.SortFunc(ranked, func(a, b string) int {
		if c[a] != c[b] {
			return c[b] - c[a]
		}
		return strings.Compare(a, b)
	})
	s := map[string]int{}
	for i, o := range ranked {
		s[o] = len(w.keys) / len(w.live)
		if i < len(w.keys)%len(w.live) {
			s[o]++
		}
	}
	return s
}

// checkPlan checks a plan against the view it was made from.
func (w *world) checkPlan(cfg Config, me string, p Plan) error {
	c, s := w.counts(), w.shares()
	if p.Held != c[me] || p.Share != s[me] {
		return fmt.Errorf("%s: held %d share %d, want %d %d", me, p.Held, p.Share, c[me], s[me])
	}
	if len(p.Acquire) > 0 && len(p.Release) > 0 {
		return fmt.Errorf("%s acquires and releases", me)
	}
	if len(p.Acquire) > cfg.MaxAcquiresPerRound || len(p.Release) > cfg.MaxReleasesPerRound {
		return fmt.Errorf("%s: %d acquires, %d releases over the caps", me, len(p.Acquire), len(p.Release))
	}
	if (len(p.Acquire) > 0 && p.Held+len(p.Acquire) > p.Share) || (len(p.Release) > 0 && p.Held-len(p.Release) < p.Share) {
		return fmt.Errorf("%s overshoots its share: %+v", me, p)
	}
	for _, k := range p.Acquire {
		if !w.free(k) {
			return fmt.Errorf("%s acquires %v held by %s", me, k, w.owner[k])
		}
	}
	for _, k := range p.Release {
		if w.owner[k] != me {
			return fmt.Errorf("%s releases %v held by %s", me, k, w.owner[k])
		}
	}
	if len(p.Release) > 0 && !slices.ContainsFunc(w.live, func(o string) bool { return o != me && c[o] < s[o] }) {
		return fmt.Errorf("%s releases with no other owner below its share", me)
	}
	return nil
}

// round has every live owner plan once, in random order. Sequential: each
// plans on the current state and acts at once. Concurrent: all plan on the
// same snapshot, then act in random order, acquisitions succeeding only if
// the partition is still free (the catalog's conditional write).
func (w *world) round(r *rand.Rand, b *Balancer, concurrent bool) (moves int, err error) {
	order := slices.Clone(w.live)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	plans := map[string]Plan{}
	plan := func(me string) error {
		p, err := b.Plan(w.input(r, me))
		if err != nil {
			return err
		}
		if err := w.checkPlan(b.cfg, me, p); err != nil {
			return err
		}
		again, _ := b.Plan(w.input(r, me))
		if !reflect.DeepEqual(p, again) {
			return fmt.Errorf("%s: plan depends on input order: %+v vs %+v", me, p, again)
		}
		plans[me] = p
		return nil
	}
	act := func(me string) {
		p := plans[me]
		for _, k := range p.Release {
			w.owner[k] = ""
			moves++
		}
		for _, k := range p.Acquire {
			if w.free(k) {
				w.owner[k] = me
				moves++
			}
		}
	}
	if concurrent {
		for _, me := range order {
			if err := plan(me); err != nil {
				return 0, err
			}
		}
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, me := range order {
			act(me)
		}
		return moves, nil
	}
	for _, me := range order {
		if err := plan(me); err != nil {
			return 0, err
		}
		act(me)
	}
	return moves, nil
}

// balanced reports whether w is at rest: every partition owned by a live
// owner, each holding floor(P/N) or ceil(P/N).
func (w *world) balanced() error {
	c := w.counts()
	lo, hi := len(w.keys)/len(w.live), (len(w.keys)+len(w.live)-1)/len(w.live)
	for _, k := range w.keys {
		if w.free(k) {
			return fmt.Errorf("%v is free", k)
		}
	}
	for _, o := range w.live {
		if c[o] < lo || c[o] > hi {
			return fmt.Errorf("%s holds %d, outside [%d, %d]: %v", o, c[o], lo, hi, c)
		}
	}
	return nil
}

// TestConvergence: owners join, crash (their partitions stay theirs, dead)
// and leave gracefully (their partitions are released) while rounds run;
// then, with membership steady, rounds must reach a balanced assignment
// within the documented bound, after which no owner plans anything.
func TestConvergence(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		t.Run(fmt.Sprintf("concurrent=%v", concurrent), func(t *testing.T) {
			worst := 0.0
			f := func(seed uint64) bool {
				rounds, bound, err := simulate(seed, concurrent)
				if err != nil {
					t.Errorf("seed %d: %v", seed, err)
					return false
				}
				worst = max(worst, float64(rounds)/float64(bound))
				return true
			}
			if err := quick.Check(f, &quick.Config{MaxCount: runs(150)}); err != nil {
				t.Fatal(err)
			}
			t.Logf("worst convergence: %.0f%% of the bound", 100*worst)
		})
	}
}

func simulate(seed uint64, concurrent bool) (rounds, bound int, err error) {
	r := rand.New(rand.NewPCG(seed, 4))
	cfg := Config{MaxAcquiresPerRound: 1 + r.IntN(8), MaxReleasesPerRound: 1 + r.IntN(8)}
	if r.IntN(3) == 0 {
		cfg = Config{}
	}
	b, err := New(cfg)
	if err != nil {
		return 0, 0, err
	}
	var pool []string
	for i := range 10 {
		pool = append(pool, fmt.Sprintf("ingest-%02d", i))
	}
	w := &world{owner: map[Key]string{}}
	w.live = append(w.live, pool[:1+r.IntN(len(pool))]...)
	topics := 1 + r.IntN(3)
	for i := range r.IntN(150) {
		k := Key{fmt.Sprint("topic-", i%topics), i / topics}
		w.keys = append(w.keys, k)
		switch r.IntN(3) {
		case 0: // free
		default: // anyone's, live or dead
			w.owner[k] = pool[r.IntN(len(pool))]
		}
	}
	slices.SortFunc(w.keys, func(a, b Key) int { return cmp.Or(strings.Compare(a.Topic, b.Topic), a.Index-b.Index) })

	for i := range 8 {
		if r.IntN(3) == 0 {
			o := pool[r.IntN(len(pool))]
			switch {
			case !w.isLive(o):
				w.live = append(w.live, o) // joins
				slices.Sort(w.live)
			case len(w.live) > 1 && r.IntN(2) == 0:
				w.live = slices.DeleteFunc(w.live, func(x string) bool { return x == o }) // crashes
			case len(w.live) > 1:
				w.live = slices.DeleteFunc(w.live, func(x string) bool { return x == o }) // leaves
				for k, x := range w.owner {
					if x == o {
						w.owner[k] = ""
					}
				}
			}
		}
		if _, err := w.round(r, b, concurrent); err != nil {
			return 0, 0, fmt.Errorf("churn round %d: %w", i, err)
		}
	}

	cfg = b.cfg
	p := len(w.keys)
	bound = ceilDiv(p, min(cfg.MaxAcquiresPerRound, cfg.MaxReleasesPerRound)) + 2
	if concurrent {
		bound *= 2 // acquirers may collide on the same partition
	}
	for rounds = 1; ; rounds++ {
		moves, err := w.round(r, b, concurrent)
		if err != nil {
			return 0, 0, fmt.Errorf("round %d: %w", rounds, err)
		}
		if moves == 0 {
			break
		}
		if rounds > bound {
			return 0, 0, fmt.Errorf("not balanced after %d rounds (P=%d N=%d %+v): %v", rounds, p, len(w.live), cfg, w.counts())
		}
	}
	if err := w.balanced(); err != nil {
		return 0, 0, fmt.Errorf("at rest but not balanced: %w", err)
	}
	return rounds, bound, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// TestBalancedIsStable: any assignment where everyone holds floor or ceil
// and nothing is free produces no action for anyone.
func TestBalancedIsStable(t *testing.T) {
	b := newBalancer(t, Config{})
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 5))
		n, p := 1+r.IntN(12), r.IntN(200)
		w := &world{owner: map[Key]string{}}
		for i := range n {
			w.live = append(w.live, fmt.Sprintf("o%02d", i))
		}
		// Random owners get the ceiling.
		holders := slices.Clone(w.live)
		r.Shuffle(n, func(i, j int) { holders[i], holders[j] = holders[j], holders[i] })
		var slots []string
		for i, o := range holders {
			c := p / n
			if i < p%n {
				c++
			}
			slots = append(slots, repeat(o, c)...)
		}
		r.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
		for i, o := range slots {
			k := Key{"t", i}
			w.keys = append(w.keys, k)
			w.owner[k] = o
		}
		for _, me := range w.live {
			pl, err := b.Plan(w.input(r, me))
			if err != nil || len(pl.Acquire) > 0 || len(pl.Release) > 0 {
				t.Errorf("seed %d: %s plans %+v, %v on a balanced assignment", seed, me, pl, err)
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: runs(300)}); err != nil {
		t.Fatal(err)
	}
}

// runs is the number of seeds a property test tries.
func runs(n int) int {
	if raceEnabled {
		return max(1, n/5)
	}
	return n
}
