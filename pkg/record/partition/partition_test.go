package partition

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka's own vectors: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
// (testMurmur2).
func TestMurmur2KafkaVectors(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := Murmur2([]byte(in)); got != want {
			t.Errorf("Murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

// Every tail length (len % 4 = 0..3) and the empty key, against franz-go's
// Kafka-compatible key partitioner, over several partition counts.
func TestForKeyMatchesFranzGo(t *testing.T) {
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	keys := [][]byte{{}, {0}, {0xff}, []byte("ab"), []byte("abc"), []byte("abcd"), []byte("abcde")}
	for range 2000 {
		k := make([]byte, rng.IntN(40))
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		keys = append(keys, k)
	}
	for _, n := range []int32{1, 2, 3, 7, 16, 100, 1000} {
		for _, k := range keys {
			want := kp.Partition(&kgo.Record{Key: k}, int(n))
			if got := ForKey(k, n); int(got) != want {
				t.Fatalf("ForKey(%x, %d) = %d, franz-go says %d", k, n, got, want)
			}
		}
	}
}

// toPositive clears the sign bit; it is not abs (Kafka's Utils.toPositive).
func TestToPositive(t *testing.T) {
	for in, want := range map[int32]int32{0: 0, 5: 5, -1: 0x7fffffff, -2147483648: 0, -790332482: 1357151166} {
		if got := toPositive(in); got != want {
			t.Errorf("toPositive(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestPartitionExplicitAndKeyed(t *testing.T) {
	p, err := New(10, rand.NewPCG(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key      []byte
		explicit int32
		want     int32
	}{
		{nil, 0, 0},
		{[]byte("k"), 9, 9}, // explicit wins over the key
		{[]byte("foobar"), Unset, ForKey([]byte("foobar"), 10)},
		{[]byte{}, Unset, ForKey([]byte{}, 10)}, // empty key is hashed, as in Kafka
	} {
		got, err := p.Partition(tc.key, tc.explicit)
		if err != nil || got != tc.want {
			t.Errorf("Partition(%q, %d) = %d, %v; want %d", tc.key, tc.explicit, got, err, tc.want)
		}
	}
	for _, bad := range []int32{10, 11, -2} {
		if _, err := p.Partition(nil, bad); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Partition(nil, %d) err = %v, want ErrOutOfRange", bad, err)
		}
	}
	if _, err := New(0, nil); err == nil {
		t.Error("New(0) accepted")
	}
}

func TestStickyStaysUntilBatchDone(t *testing.T) {
	p, _ := New(8, rand.NewPCG(7, 7))
	first, _ := p.Partition(nil, Unset)
	for range 100 {
		if got, _ := p.Partition(nil, Unset); got != first {
			t.Fatalf("keyless record went to %d, sticky partition is %d", got, first)
		}
	}
	// A batch closing on another partition does not move the sticky one.
	p.BatchDone((first + 1) % 8)
	if got, _ := p.Partition(nil, Unset); got != first {
		t.Fatalf("moved to %d after an unrelated batch closed", got)
	}
	p.BatchDone(first)
	second, _ := p.Partition(nil, Unset)
	if second == first {
		t.Fatalf("still on %d after its batch closed", first)
	}
}

// The same seed gives the same sequence of sticky partitions; the sequence
// never repeats a partition back to back and covers all partitions.
func TestStickyDeterministicAndSpread(t *testing.T) {
	run := func() []int32 {
		p, _ := New(5, rand.NewPCG(42, 43))
		var seq []int32
		for range 200 {
			c, _ := p.Partition(nil, Unset)
			seq = append(seq, c)
			p.BatchDone(c)
		}
		return seq
	}
	a, b := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("same seed, different sticky sequences")
	}
	seen := map[int32]int{}
	for i, c := range a {
		seen[c]++
		if i > 0 && a[i-1] == c {
			t.Fatalf("sticky partition repeated at step %d: %d", i, c)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("only partitions %v used", seen)
	}
	for c, n := range seen {
		if n < 20 { // 200 picks over 5 partitions: expect ~40 each
			t.Errorf("partition %d chosen only %d times: %v", c, n, seen)
		}
	}
}

func TestStickySinglePartitionAndResize(t *testing.T) {
	p, _ := New(1, rand.NewPCG(1, 1))
	for range 3 {
		if c, _ := p.Partition(nil, Unset); c != 0 {
			t.Fatalf("got %d with one partition", c)
		}
		p.BatchDone(0)
	}
	if err := p.SetPartitions(4); err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Partition(nil, Unset); c != 0 {
		t.Fatalf("sticky partition 0 dropped on growth, got %d", c)
	}
	if c, _ := p.Partition([]byte("abc"), Unset); c != ForKey([]byte("abc"), 4) {
		t.Fatalf("keyed record ignores the new count: %d", c)
	}
	if err := p.SetPartitions(0); err == nil {
		t.Fatal("SetPartitions(0) accepted")
	}
}

func BenchmarkForKey(b *testing.B) {
	key := []byte("user-1234567890")
	for b.Loop() {
		ForKey(key, 16)
	}
}
