// Package partition chooses the partition of a record the way Kafka's
// producer does, so that Sluice and Kafka clients agree on where a key
// lives:
//
//   - an explicit partition is used as given (after a range check);
//   - a record with a key goes to toPositive(murmur2(key)) % numPartitions,
//     Kafka's BuiltInPartitioner.partitionForKey, with Kafka's murmur2
//     (Utils.murmur2, seed 0x9747b28c);
//   - a record without a key (nil; an empty key is a key, as in Kafka) goes
//     to a sticky partition (KIP-480): every keyless record goes to the same
//     partition until the batch for it is done, then the partitioner moves
//     to a different, randomly chosen partition.
//
// Randomness comes from an injected math/rand/v2 Source, so tests are
// deterministic.
package partition

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
)

// Murmur2 is Kafka's Utils.murmur2 (the 32-bit MurmurHash2 with seed
// 0x9747b28c), returned as Java's signed int.
func Murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// toPositive is Kafka's Utils.toPositive: clear the sign bit (not abs, so
// math.MinInt32 maps to 0).
func toPositive(h int32) int32 { return h & 0x7fffffff }

// ForKey is the partition of key among numPartitions (> 0), as Kafka's
// default partitioner computes it.
func ForKey(key []byte, numPartitions int32) int32 {
	if numPartitions <= 0 {
		panic(fmt.Sprintf("partition: ForKey with %d partitions", numPartitions))
	}
	return toPositive(Murmur2(key)) % numPartitions
}

// ErrOutOfRange: an explicit partition is not in [0, numPartitions).
var ErrOutOfRange = errors.New("partition: out of range")

// Unset is the explicit partition that means "choose one".
const Unset int32 = -1

// Partitioner chooses partitions for one topic. It is safe for concurrent use.
type Partitioner struct {
	mu  sync.Mutex
	n   int32
	rng *rand.Rand
	cur int32 // sticky partition for keyless records; -1 until first chosen
}

// New returns a Partitioner for a topic with numPartitions partitions.
// Randomness for sticky partitioning comes from src; nil means a randomly
// seeded source.
func New(numPartitions int32, src rand.Source) (*Partitioner, error) {
	if numPartitions <= 0 {
		return nil, fmt.Errorf("partition: %d partitions, want ≥ 1", numPartitions)
	}
	if src == nil {
		src = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	return &Partitioner{n: numPartitions, rng: rand.New(src), cur: -1}, nil
}

// Partition chooses the partition of a record: explicit if it is not Unset,
// else by key, else (nil key) the sticky partition. An explicit partition
// out of range is an error wrapping ErrOutOfRange.
func (p *Partitioner) Partition(key []byte, explicit int32) (int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case explicit != Unset:
		if explicit < 0 || explicit >= p.n {
			return 0, fmt.Errorf("%w: partition %d, topic has %d", ErrOutOfRange, explicit, p.n)
		}
		return explicit, nil
	case key != nil:
		return ForKey(key, p.n), nil
	}
	if p.cur < 0 {
		p.cur = p.pick(-1)
	}
	return p.cur, nil
}

// BatchDone tells the partitioner that the batch for partition was closed
// (full, or flushed by linger). If partition is the sticky one, keyless
// records move to a different partition (KIP-480's onNewBatch).
func (p *Partitioner) BatchDone(partition int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if partition == p.cur {
		p.cur = p.pick(p.cur)
	}
}

// SetPartitions updates the partition count (after a topic grew). The sticky
// partition is kept while it still exists.
func (p *Partitioner) SetPartitions(numPartitions int32) error {
	if numPartitions <= 0 {
		return fmt.Errorf("partition: %d partitions, want ≥ 1", numPartitions)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = numPartitions
	if p.cur >= p.n {
		p.cur = -1
	}
	return nil
}

// pick chooses a random partition other than old (when there is another).
func (p *Partitioner) pick(old int32) int32 {
	if old < 0 || p.n == 1 {
		return p.rng.Int32N(p.n)
	}
	c := p.rng.Int32N(p.n - 1)
	if c >= old {
		c++
	}
	return c
}
