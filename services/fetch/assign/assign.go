package assign

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
)

// Defaults for zero Config fields, and the limits Decide enforces.
const (
	DefaultMaxAcquirePerRound = 64
	DefaultMaxReleasePerRound = 64

	// MaxPartitions bounds Input.Partitions: the lease store accepts
	// partitions 0 ≤ p < bookkeeping.MaxPartitions, so a topic never has more.
	MaxPartitions = bookkeeping.MaxPartitions
	// MaxMembers bounds Input.Members: bookkeeping's ListMembers never
	// returns more than twice MaxGroupMembers.
	MaxMembers = 2 * bookkeeping.MaxGroupMembers
	// MaxPerRound bounds both Config fields; more than a topic's partitions
	// would never be used.
	MaxPerRound = MaxPartitions
)

// ErrInvalidInput is returned (wrapped) by Decide for an Input that breaks
// its contract: an empty or duplicate member id, an empty Me, a partition
// count outside [0, MaxPartitions], too many members, or an owner listed for
// a partition outside [0, Partitions). It is a programmer error of the
// caller or corrupt data from the store; the caller should not act on the
// round.
var ErrInvalidInput = errors.New("assign: invalid input")

// Config bounds the lease moves of one round. Zero fields take the
// documented defaults; Validate reports every violation at once.
type Config struct {
	// MaxAcquirePerRound bounds the partitions one Decide plans to acquire,
	// so a member does not flood the lease store after a mass failure (each
	// Acquire is a compare-and-set). Zero means DefaultMaxAcquirePerRound;
	// otherwise within [1, MaxPerRound].
	MaxAcquirePerRound int
	// MaxReleasePerRound bounds the partitions one Decide plans to release.
	// Zero means DefaultMaxReleasePerRound; otherwise within [1, MaxPerRound].
	MaxReleasePerRound int
}

func (c Config) withDefaults() Config {
	if c.MaxAcquirePerRound == 0 {
		c.MaxAcquirePerRound = DefaultMaxAcquirePerRound
	}
	if c.MaxReleasePerRound == 0 {
		c.MaxReleasePerRound = DefaultMaxReleasePerRound
	}
	return c
}

// Validate reports every field out of range, joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	check := func(name string, v int) {
		if v < 1 || v > MaxPerRound {
			errs = append(errs, fmt.Errorf("assign config: %s %d is outside [1, %d]", name, v, MaxPerRound))
		}
	}
	check("MaxAcquirePerRound", c.MaxAcquirePerRound)
	check("MaxReleasePerRound", c.MaxReleasePerRound)
	return errors.Join(errs...)
}

// Input is one member's view of one topic in one group for one round.
type Input struct {
	// Me is the member deciding. Must not be empty.
	Me string
	// Members are the live members subscribed to the topic, in any order,
	// Me included while it is live. Ids must be non-empty and distinct.
	// Members is the only source of liveness: an owner not in it holds
	// nothing.
	Members []string
	// Partitions is the topic's partition count, in [0, MaxPartitions].
	Partitions int32
	// Owners maps a partition to its owner as the lease store reports it.
	// A partition missing, mapped to "", or mapped to a member not in
	// Members is free. Keys must be in [0, Partitions).
	Owners map[int32]string
}

// Plan is what Me should do this round. At most one of Acquire and Release
// is non-empty; each is sorted ascending with no duplicates.
type Plan struct {
	// Acquire lists free partitions (in Me's view) to Acquire.
	Acquire []int32
	// Release lists partitions Me holds (in Me's view) to Release.
	Release []int32
}

// Share returns how many of partitions me should hold when the given members
// share them: with the n distinct members sorted by id, the member at index
// i gets partitions/n, plus one if i < partitions%n. The shares of all
// members add up to partitions. Share is 0 when me is not among members or
// partitions ≤ 0. Duplicate ids count once (Decide rejects them).
func Share(members []string, me string, partitions int32) int {
	if partitions <= 0 {
		return 0
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(members)))
	i, ok := slices.BinarySearch(sorted, me)
	if !ok {
		return 0
	}
	return shareAt(i, len(sorted), partitions)
}

// shareAt is the share of the member at sorted index i of n.
func shareAt(i, n int, partitions int32) int {
	p := int(partitions)
	s := p / n
	if i < p%n {
		s++
	}
	return s
}

// Decide plans Me's round. It is deterministic and does not depend on the
// order of in.Members. Cost: O(n log n + Partitions) time and O(n +
// Partitions) memory for n members. Errors: an invalid cfg (see
// Config.Validate) or ErrInvalidInput.
func Decide(cfg Config, in Input) (Plan, error) {
	if err := cfg.Validate(); err != nil {
		return Plan{}, err
	}
	cfg = cfg.withDefaults()
	members, err := validate(in)
	if err != nil {
		return Plan{}, err
	}
	me, live := slices.BinarySearch(members, in.Me)

	index := make(map[string]int, len(members))
	for i, m := range members {
		index[m] = i
	}
	// One pass over the partitions, ascending, so mine and free are sorted.
	held := make([]int, len(members)) // by index in members
	var mine, free []int32
	for p := range in.Partitions {
		o := in.Owners[p]
		if o == in.Me {
			// Mine even if I am not live: then my share is 0 and I give it up.
			mine = append(mine, p)
			continue
		}
		if i, ok := index[o]; ok { // members has no ""
			held[i]++
		} else {
			free = append(free, p) // no owner, or an expired or departed one
		}
	}

	share := 0
	if live {
		share = shareAt(me, len(members), in.Partitions)
	}
	switch {
	case len(mine) > share:
		// Give up the highest-numbered extras. Any member above its share
		// implies one below it (shares add up to Partitions), so a release
		// is never wasted.
		n := min(len(mine)-share, cfg.MaxReleasePerRound)
		return Plan{Release: slices.Clone(mine[len(mine)-n:])}, nil
	case len(mine) < share:
		// My slot of the free list starts after what the members sorted
		// before me will take this round, as far as I can see.
		offset := 0
		for i := range me {
			offset += min(max(shareAt(i, len(members), in.Partitions)-held[i], 0), cfg.MaxAcquirePerRound)
		}
		if offset >= len(free) {
			return Plan{}, nil // wait for the members above their share
		}
		n := min(share-len(mine), cfg.MaxAcquirePerRound, len(free)-offset)
		return Plan{Acquire: slices.Clone(free[offset : offset+n])}, nil
	default:
		return Plan{}, nil
	}
}

// validate checks in and returns its members sorted.
func validate(in Input) ([]string, error) {
	if in.Me == "" {
		return nil, fmt.Errorf("%w: empty Me", ErrInvalidInput)
	}
	if in.Partitions < 0 || in.Partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: partition count %d is outside [0, %d]", ErrInvalidInput, in.Partitions, MaxPartitions)
	}
	if len(in.Members) > MaxMembers {
		return nil, fmt.Errorf("%w: %d members, more than %d", ErrInvalidInput, len(in.Members), MaxMembers)
	}
	members := slices.Sorted(slices.Values(in.Members))
	for i, m := range members {
		if m == "" {
			return nil, fmt.Errorf("%w: empty member id", ErrInvalidInput)
		}
		if i > 0 && members[i-1] == m {
			return nil, fmt.Errorf("%w: member %q listed twice", ErrInvalidInput, m)
		}
	}
	// Report the lowest bad partition, so the error does not depend on map order.
	bad, found := int32(0), false
	for p := range in.Owners {
		if (p < 0 || p >= in.Partitions) && (!found || p < bad) {
			bad, found = p, true
		}
	}
	if found {
		return nil, fmt.Errorf("%w: owner listed for partition %d, outside [0, %d)", ErrInvalidInput, bad, in.Partitions)
	}
	return members, nil
}
