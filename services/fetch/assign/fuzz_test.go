package assign

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// fuzzID maps a byte to a member id: 0 is "", the rest one of a few ids so
// that members, owners and Me often coincide.
func fuzzID(b byte) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("m%d", b%12)
}

// FuzzDecide: Decide never panics, fails exactly on invalid input, and its
// plans are valid for the view (checkPlan), independent of member order,
// and do not wait needlessly.
func FuzzDecide(f *testing.F) {
	f.Add(byte(1), []byte{1, 2, 3}, int32(7), []byte{0, 0, 1, 0, 1, 2}, 0, 0)
	f.Add(byte(2), []byte{1, 2, 3}, int32(9), []byte{0, 3, 3, 0, 4, 3, 0, 5, 3, 0, 6, 3}, 1, 2)
	f.Add(byte(5), []byte{1, 2}, int32(4), []byte{0, 1, 5}, 0, 1)
	f.Add(byte(1), []byte{1, 1}, int32(4), []byte{}, 0, 0)
	f.Add(byte(1), []byte{1}, int32(3), []byte{0, 3, 1}, 0, 0)
	f.Add(byte(1), []byte{1}, int32(-1), []byte{}, -1, 70000)
	f.Add(byte(1), []byte{1}, int32(MaxPartitions), []byte{255, 255, 1}, 0, 0)
	f.Fuzz(func(t *testing.T, me byte, memberBytes []byte, partitions int32, ownerBytes []byte, maxAcq, maxRel int) {
		in := Input{Me: fuzzID(me), Partitions: partitions, Owners: make(map[int32]string)}
		for _, b := range memberBytes {
			in.Members = append(in.Members, fuzzID(b))
		}
		// Owners: 3 bytes each, a big-endian int16 partition and an owner.
		for ; len(ownerBytes) >= 3; ownerBytes = ownerBytes[3:] {
			p := int32(int16(binary.BigEndian.Uint16(ownerBytes)))
			in.Owners[p] = fuzzID(ownerBytes[2])
		}
		cfg := Config{MaxAcquirePerRound: maxAcq, MaxReleasePerRound: maxRel}

		plan, err := Decide(cfg, in)
		if valid := validInput(cfg, in); (err == nil) != valid {
			t.Fatalf("Decide(%+v, %+v) = %v, input valid: %v", cfg, in, err, valid)
		}
		if err != nil {
			return
		}
		if err := checkPlan(cfg, in, plan); err != nil {
			t.Fatalf("Decide(%+v, %+v) = %+v: %v", cfg, in, plan, err)
		}
		reversed := in
		reversed.Members = slices.Clone(in.Members)
		slices.Reverse(reversed.Members)
		if again, err := Decide(cfg, reversed); err != nil || !reflect.DeepEqual(again, plan) {
			t.Fatalf("members reversed: %+v, %v; want %+v", again, err, plan)
		}
		// Progress: extras are always released, and the first member below
		// its share (in id order) never waits while partitions are free.
		cfg = cfg.withDefaults()
		held, free := 0, 0
		for p := range in.Partitions {
			switch o := in.Owners[p]; {
			case o == in.Me:
				held++
			case o == "" || !slices.Contains(in.Members, o):
				free++
			}
		}
		share := Share(in.Members, in.Me, in.Partitions)
		if held > share && len(plan.Release) != min(held-share, cfg.MaxReleasePerRound) {
			t.Fatalf("holds %d, share %d: releases %v", held, share, plan.Release)
		}
		if held < share && firstBelowShare(in) == in.Me && len(plan.Acquire) != min(share-held, cfg.MaxAcquirePerRound, free) {
			t.Fatalf("holds %d, share %d, %d free, first below its share: acquires %v", held, share, free, plan.Acquire)
		}
	})
}

// validInput is Decide's contract on its input, stated independently.
func validInput(cfg Config, in Input) bool {
	if cfg.Validate() != nil || in.Me == "" || in.Partitions < 0 || in.Partitions > MaxPartitions || len(in.Members) > MaxMembers {
		return false
	}
	seen := make(map[string]bool)
	for _, m := range in.Members {
		if m == "" || seen[m] {
			return false
		}
		seen[m] = true
	}
	for p := range in.Owners {
		if p < 0 || p >= in.Partitions {
			return false
		}
	}
	return true
}

// firstBelowShare returns the lowest member id holding less than its share
// in the view, or "".
func firstBelowShare(in Input) string {
	held := make(map[string]int)
	for _, o := range in.Owners {
		held[o]++
	}
	sorted := slices.Sorted(slices.Values(in.Members))
	for _, m := range sorted {
		if held[m] < Share(in.Members, m, in.Partitions) {
			return m
		}
	}
	return ""
}
