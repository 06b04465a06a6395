package assign

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// owners builds an Owners map from a string with one character per partition:
// '.' is free, any other character is the id of the owner.
func owners(s string) map[int32]string {
	m := make(map[int32]string)
	for i, c := range s {
		if c != '.' {
			m[int32(i)] = string(c)
		}
	}
	return m
}

func TestShare(t *testing.T) {
	tests := []struct {
		members []string
		me      string
		p       int32
		want    int
	}{
		{[]string{"c", "b", "a"}, "a", 7, 3}, // the remainder goes to the lowest ids
		{[]string{"c", "b", "a"}, "b", 7, 2},
		{[]string{"c", "b", "a"}, "c", 7, 2},
		{[]string{"a", "b", "c"}, "b", 8, 3},
		{[]string{"a", "b", "c"}, "c", 8, 2},
		{[]string{"a", "b", "c"}, "c", 9, 3},
		{[]string{"a", "b", "c"}, "b", 2, 1}, // fewer partitions than members
		{[]string{"a", "b", "c"}, "c", 2, 0},
		{[]string{"a"}, "a", 5, 5},
		{[]string{"a", "b"}, "z", 5, 0}, // not a member
		{nil, "a", 5, 0},
		{[]string{"a", "b"}, "a", 0, 0},
		{[]string{"a", "b"}, "a", -3, 0},
		{[]string{"b", "a", "b"}, "b", 5, 2}, // duplicates count once
	}
	for _, tt := range tests {
		if got := Share(tt.members, tt.me, tt.p); got != tt.want {
			t.Errorf("Share(%q, %q, %d) = %d, want %d", tt.members, tt.me, tt.p, got, tt.want)
		}
	}
}

func TestShareSums(t *testing.T) {
	for n := 1; n <= 9; n++ {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf("m%d", n-i) // not sorted
		}
		for p := int32(0); p <= 40; p++ {
			sum, lo, hi := 0, int(p), 0
			for _, m := range members {
				s := Share(members, m, p)
				sum += s
				lo, hi = min(lo, s), max(hi, s)
			}
			if sum != int(p) || hi-lo > 1 {
				t.Errorf("n=%d p=%d: shares sum to %d (min %d, max %d)", n, p, sum, lo, hi)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {MaxAcquirePerRound: 1, MaxReleasePerRound: MaxPerRound}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	err := Config{MaxAcquirePerRound: -1, MaxReleasePerRound: MaxPerRound + 1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "MaxAcquirePerRound") || !strings.Contains(err.Error(), "MaxReleasePerRound") {
		t.Errorf("want both fields reported, got %v", err)
	}
	if _, err := Decide(Config{MaxReleasePerRound: -1}, Input{Me: "a", Members: []string{"a"}}); err == nil {
		t.Error("Decide accepted an invalid config")
	}
}

func TestDecide(t *testing.T) {
	abc := []string{"c", "a", "b"}
	tests := []struct {
		name    string
		cfg     Config
		me      string
		members []string
		p       int32
		owners  string // see owners(); its length need not be p
		acquire []int32
		release []int32
	}{
		{name: "all free: a takes its home block", me: "a", members: abc, p: 7, acquire: []int32{0, 1, 2}},
		{name: "all free: b takes its home block", me: "b", members: abc, p: 7, acquire: []int32{3, 4}},
		{name: "all free: c takes its home block", me: "c", members: abc, p: 7, acquire: []int32{5, 6}},
		{name: "acquisitions are capped", cfg: Config{MaxAcquirePerRound: 2}, me: "a", members: []string{"a"}, p: 10,
			acquire: []int32{0, 1}},
		{name: "balanced: nothing to do", me: "a", members: abc, p: 7, owners: "aaabbcc"},
		{name: "balanced, any layout", me: "b", members: abc, p: 7, owners: "cbaacab"},
		{name: "below share, the rest held by live members: wait", me: "c", members: abc, p: 7, owners: "aaabbbb"},
		{name: "never takes a live member's partition", me: "b", members: []string{"a", "b"}, p: 4, owners: "aaaa"},
		{name: "above share: release the highest-numbered extras", me: "a", members: []string{"a", "b"}, p: 6, owners: "aaaaa.",
			release: []int32{3, 4}},
		{name: "releases are capped", cfg: Config{MaxReleasePerRound: 1}, me: "a", members: []string{"a", "b"}, p: 6, owners: "aaaaa.",
			release: []int32{4}},
		{name: "above share with free partitions: release only", me: "a", members: []string{"a", "b", "c"}, p: 6, owners: "a.a.aa",
			release: []int32{4, 5}},
		{name: "owner not live counts as free (stealing)", me: "a", members: []string{"a", "b"}, p: 6, owners: "zzzbbb",
			acquire: []int32{0, 1, 2}},
		{name: "the first below its share starts at the first free partition", me: "b", members: abc, p: 9, owners: "aaab.....",
			acquire: []int32{4, 5}},
		{name: "its slot comes after the shortfalls of the members before it", me: "c", members: abc, p: 7, owners: ".aa.bb.",
			acquire: []int32{3, 6}},
		{name: "its slot comes after the shortfalls of the members before it (2)", me: "b", members: abc, p: 7, owners: "...aa.c",
			acquire: []int32{1, 2}},
		{name: "slots count at most the per-round limit", cfg: Config{MaxAcquirePerRound: 1}, me: "c", members: abc, p: 9,
			acquire: []int32{2}},
		{name: "slot past the free list: wait for releases", me: "b", members: abc, p: 9, owners: "cccccc...",
			acquire: nil},
		{name: "slot within the free list while others release", me: "a", members: abc, p: 9, owners: "cccccc...",
			acquire: []int32{6, 7, 8}},
		{name: "a crashed member's partitions are split, not fought over", me: "b", members: []string{"a", "b", "d"}, p: 8, owners: "aabbzzdd",
			acquire: []int32{5}},
		{name: "a crashed member's partitions are split (2)", me: "a", members: []string{"a", "b", "d"}, p: 8, owners: "aabbzzdd",
			acquire: []int32{4}},
		{name: "a crashed member's partitions are split (3)", me: "d", members: []string{"a", "b", "d"}, p: 8, owners: "aabbzzdd"},
		{name: "fewer free partitions than the shortfall", me: "a", members: abc, p: 9, owners: "b..bbbccc",
			acquire: []int32{1, 2}},
		{name: "share 0: release everything", me: "c", members: abc, p: 2, owners: "ac", release: []int32{1}},
		{name: "not a member: release everything, acquire nothing", me: "z", members: abc, p: 6, owners: ".z.zz.",
			release: []int32{1, 3, 4}},
		{name: "not a member: releases are capped", cfg: Config{MaxReleasePerRound: 2}, me: "z", members: abc, p: 6, owners: ".z.zz.",
			release: []int32{3, 4}},
		{name: "not a member, holding nothing", me: "z", members: abc, p: 6},
		{name: "no partitions", me: "a", members: abc, p: 0},
		{name: "no members: not a member", me: "a", p: 3, owners: "a..", release: []int32{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Me: tt.me, Members: tt.members, Partitions: tt.p, Owners: owners(tt.owners)}
			plan, err := Decide(tt.cfg, in)
			if err != nil {
				t.Fatal(err)
			}
			want := Plan{Acquire: tt.acquire, Release: tt.release}
			if !reflect.DeepEqual(plan, want) {
				t.Errorf("Decide = %+v, want %+v", plan, want)
			}
			// The order of Members does not matter.
			for range 5 {
				in.Members = slices.Clone(in.Members)
				rand.Shuffle(len(in.Members), func(i, j int) { in.Members[i], in.Members[j] = in.Members[j], in.Members[i] })
				if again, err := Decide(tt.cfg, in); err != nil || !reflect.DeepEqual(again, plan) {
					t.Fatalf("members %q: Decide = %+v, %v; want %+v", in.Members, again, err, plan)
				}
			}
		})
	}
}

// Members that start together from the same empty view plan disjoint blocks
// that cover every partition: no acquisition races at all.
func TestDecideFreshStartDisjoint(t *testing.T) {
	for n := 1; n <= 9; n++ {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf("m%d", i)
		}
		for p := int32(0); p <= 50; p++ {
			taken := make([]int, p)
			for _, m := range members {
				plan, err := Decide(Config{}, Input{Me: m, Members: members, Partitions: p})
				if err != nil {
					t.Fatal(err)
				}
				if len(plan.Acquire) != Share(members, m, p) {
					t.Fatalf("n=%d p=%d %s: acquires %v, share %d", n, p, m, plan.Acquire, Share(members, m, p))
				}
				for _, q := range plan.Acquire {
					taken[q]++
				}
			}
			for q, c := range taken {
				if c != 1 {
					t.Fatalf("n=%d p=%d: partition %d planned by %d members", n, p, q, c)
				}
			}
		}
	}
}

func TestDecideInvalid(t *testing.T) {
	many := make([]string, MaxMembers+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	tests := []struct {
		name string
		in   Input
	}{
		{"empty Me", Input{Members: []string{"a"}, Partitions: 1}},
		{"empty member", Input{Me: "a", Members: []string{"a", ""}, Partitions: 1}},
		{"duplicate member", Input{Me: "a", Members: []string{"b", "a", "b"}, Partitions: 1}},
		{"negative partitions", Input{Me: "a", Members: []string{"a"}, Partitions: -1}},
		{"too many partitions", Input{Me: "a", Members: []string{"a"}, Partitions: MaxPartitions + 1}},
		{"too many members", Input{Me: "0", Members: many, Partitions: 1}},
		{"owner of a partition past the end", Input{Me: "a", Members: []string{"a"}, Partitions: 2, Owners: map[int32]string{2: "a"}}},
		{"owner of a negative partition", Input{Me: "a", Members: []string{"a"}, Partitions: 2, Owners: map[int32]string{-1: ""}}},
		{"owners but no partitions", Input{Me: "a", Members: []string{"a"}, Owners: map[int32]string{0: "a"}}},
	}
	for _, tt := range tests {
		plan, err := Decide(Config{}, tt.in)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: Decide = %+v, %v; want ErrInvalidInput", tt.name, plan, err)
		}
	}
}
