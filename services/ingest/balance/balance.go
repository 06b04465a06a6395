// Package balance decides how ingest copies share partition writer leases
// (DESIGN §2.3): each copy, every round, looks at the live copies and every
// partition's owner and computes which partitions it should acquire and
// which it should release. Every copy runs the same pure function on (nearly)
// the same view, so they agree without talking to each other; the catalog's
// conditional writes settle the races that remain (AcquireWriter takes a
// partition only if it is free or its owner's heartbeat is gone).
//
// Pure: no I/O, no goroutines, no clock. Plan is deterministic and does not
// depend on the order of its inputs.
//
// # Rules
//
// Let P be the number of partitions and N the number of live owners. A
// partition is free when it has no owner or its owner is not live (not in
// Owners). Each live owner's share is floor(P/N) or ceil(P/N), with exactly
// P mod N owners at the ceiling: those holding the most partitions now, ties
// broken by smaller owner id. Choosing the ceiling owners by what they hold
// keeps moves to the minimum — in particular an assignment where everyone
// holds floor or ceil and nothing is free is already balanced — and the id
// tie-break makes every copy pick the same ones.
//
//   - Below my share: acquire free partitions, up to the shortfall and at
//     most MaxAcquiresPerRound (no thundering herd after a mass failure).
//     If none are free, wait: the owners above their share release.
//   - Above my share: release, but only as many as the owners below their
//     share can take next round beyond the free partitions already waiting
//     for them (so a released partition — unwritable until someone takes
//     it — does not wait long), at most MaxReleasesPerRound. The owners
//     above their share split that amount in owner id order. Releases
//     therefore happen only when another live owner is below its share,
//     and nothing moves when everyone is at its share.
//   - At my share: nothing.
//
// A copy never acquires and releases in the same round. Partitions are
// chosen by rendezvous hashing of (owner, topic, index): each copy prefers
// the free partitions that hash lowest for it, so copies acquiring at the
// same time mostly go for different partitions instead of racing for the
// same ones, and releases the partitions that hash highest for it, which it
// would not pick again.
//
// Convergence: once membership stops changing, every round moves
// partitions towards the shares. With rounds where each copy plans on a
// fresh view, the assignment is balanced within
// ceil(P/min(MaxAcquiresPerRound, MaxReleasesPerRound)) + 2 rounds; when all
// copies plan on the same view and race for partitions (the catalog's
// conditional writes pick one winner), within twice that. The property test
// checks both, through owners joining, crashing and leaving.
//
// Cost: O(P log P) time and O(P) memory per Plan.
package balance

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
)

// Defaults for zero Config fields, and the bounds Validate enforces.
const (
	DefaultMaxAcquiresPerRound = 64
	DefaultMaxReleasesPerRound = 64
	MaxPerRound                = 1 << 16
)

// Errors of Plan.
var (
	// ErrNotLive: Me is not among the live owners — its heartbeat lapsed.
	// It must not acquire (the catalog would refuse), and its partitions
	// count as free for the others.
	ErrNotLive = errors.New("balance: this owner is not live")
	// ErrInvalidInput: an empty or duplicate owner id, or a duplicate
	// partition.
	ErrInvalidInput = errors.New("balance: invalid input")
)

// Config bounds the work of one round. Zero fields take the documented
// defaults; Validate reports every violation at once.
type Config struct {
	// MaxAcquiresPerRound: zero means DefaultMaxAcquiresPerRound; within
	// [1, MaxPerRound].
	MaxAcquiresPerRound int
	// MaxReleasesPerRound: zero means DefaultMaxReleasesPerRound; within
	// [1, MaxPerRound].
	MaxReleasesPerRound int
}

func (c Config) withDefaults() Config {
	if c.MaxAcquiresPerRound == 0 {
		c.MaxAcquiresPerRound = DefaultMaxAcquiresPerRound
	}
	if c.MaxReleasesPerRound == 0 {
		c.MaxReleasesPerRound = DefaultMaxReleasesPerRound
	}
	return c
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MaxAcquiresPerRound < 1 || c.MaxAcquiresPerRound > MaxPerRound {
		errs = append(errs, fmt.Errorf("balance config: MaxAcquiresPerRound: %d outside [1, %d]", c.MaxAcquiresPerRound, MaxPerRound))
	}
	if c.MaxReleasesPerRound < 1 || c.MaxReleasesPerRound > MaxPerRound {
		errs = append(errs, fmt.Errorf("balance config: MaxReleasesPerRound: %d outside [1, %d]", c.MaxReleasesPerRound, MaxPerRound))
	}
	return errors.Join(errs...)
}

// Key names a partition.
type Key struct {
	Topic string
	Index int
}

// Partition is a partition and its current owner ("" when it has none).
type Partition struct {
	Key
	Owner string
}

// Input is one round's view: the caller's own id, the live owners (the
// catalog's ListLiveOwners, Me included), and every partition to balance
// with its owner. Owners is the only source of liveness — a partition whose
// owner is not in it is free — so counts and shares cannot disagree with a
// per-partition flag read at another moment.
type Input struct {
	Me         string
	Owners     []string
	Partitions []Partition
}

// Plan is what Me should do this round. At most one of Acquire and Release
// is non-empty; each is in the order to act on.
type Plan struct {
	Acquire []Key
	Release []Key
	// Held is how many partitions Me holds now, Share how many it should.
	Held, Share int
}

// Balancer plans rounds. Create it with New.
type Balancer struct {
	cfg Config
}

// New returns a Balancer for cfg.
func New(cfg Config) (*Balancer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Balancer{cfg: cfg.withDefaults()}, nil
}

// owner is a live owner's standing in this round.
type owner struct {
	id          string
	held, share int
}

// Plan decides Me's round. Errors: ErrNotLive, ErrInvalidInput.
func (b *Balancer) Plan(in Input) (Plan, error) {
	if in.Me == "" {
		return Plan{}, fmt.Errorf("%w: empty Me", ErrInvalidInput)
	}
	owners := make([]owner, 0, len(in.Owners))
	index := make(map[string]int, len(in.Owners))
	for _, id := range in.Owners {
		if id == "" {
			return Plan{}, fmt.Errorf("%w: empty owner id", ErrInvalidInput)
		}
		if _, dup := index[id]; dup {
			return Plan{}, fmt.Errorf("%w: owner %q listed twice", ErrInvalidInput, id)
		}
		index[id] = len(owners)
		owners = append(owners, owner{id: id})
	}
	if _, ok := index[in.Me]; !ok {
		return Plan{}, fmt.Errorf("%w: %q", ErrNotLive, in.Me)
	}

	seen := make(map[Key]struct{}, len(in.Partitions))
	var free, mine []Key
	for _, p := range in.Partitions {
		if _, dup := seen[p.Key]; dup {
			return Plan{}, fmt.Errorf("%w: partition %s/%d listed twice", ErrInvalidInput, p.Topic, p.Index)
		}
		seen[p.Key] = struct{}{}
		i, live := index[p.Owner]
		if !live {
			free = append(free, p.Key)
			continue
		}
		owners[i].held++
		if p.Owner == in.Me {
			mine = append(mine, p.Key)
		}
	}

	// Shares: the P mod N owners holding most (then smallest id) get the
	// ceiling.
	n, total := len(owners), len(in.Partitions)
	slices.SortFunc(owners, func(a, b owner) int {
		if c := cmp.Compare(b.held, a.held); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	for i := range owners {
		owners[i].share = total / n
		if i < total%n {
			owners[i].share++
		}
	}

	var me owner
	for _, o := range owners {
		if o.id == in.Me {
			me = o
		}
	}
	plan := Plan{Held: me.held, Share: me.share}
	switch {
	case me.held < me.share:
		k := min(me.share-me.held, b.cfg.MaxAcquiresPerRound, len(free))
		plan.Acquire = preferred(in.Me, free, k, false)
	case me.held > me.share:
		// What the owners below their share can take next round, beyond
		// the free partitions waiting for them.
		need := -len(free)
		for _, o := range owners {
			if o.held < o.share {
				need += min(o.share-o.held, b.cfg.MaxAcquiresPerRound)
			}
		}
		// The owners above their share split it in id order.
		slices.SortFunc(owners, func(a, b owner) int { return cmp.Compare(a.id, b.id) })
		for _, o := range owners {
			if need <= 0 {
				break
			}
			if o.held <= o.share {
				continue
			}
			give := min(o.held-o.share, b.cfg.MaxReleasesPerRound, need)
			if o.id == in.Me {
				plan.Release = preferred(in.Me, mine, give, true)
				break
			}
			need -= give
		}
	}
	return plan, nil
}

// preferred returns the k keys that hash lowest for me (highest if worst).
func preferred(me string, keys []Key, k int, worst bool) []Key {
	if k <= 0 {
		return nil
	}
	type ranked struct {
		key  Key
		rank uint64
	}
	rs := make([]ranked, len(keys))
	for i, key := range keys {
		rs[i] = ranked{key, rendezvous(me, key)}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		c := cmp.Compare(a.rank, b.rank)
		if c == 0 { // a 64-bit collision: still a total order
			if c = cmp.Compare(a.key.Topic, b.key.Topic); c == 0 {
				c = cmp.Compare(a.key.Index, b.key.Index)
			}
		}
		if worst {
			return -c
		}
		return c
	})
	out := make([]Key, k)
	for i := range out {
		out[i] = rs[i].key
	}
	return out
}

// rendezvous is owner me's rank for key: FNV-1a of the three fields, then
// SplitMix64's finalizer for avalanche. Stable across processes and
// versions — it decides placement, so changing it moves partitions.
func rendezvous(me string, key Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(me))
	h.Write([]byte{0})
	h.Write([]byte(key.Topic))
	h.Write([]byte{0})
	var idx [8]byte
	for i := range idx {
		idx[i] = byte(uint64(key.Index) >> (8 * i))
	}
	h.Write(idx[:])
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
