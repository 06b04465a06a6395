package checker

import (
	"fmt"
	"testing"
)

// copyFixture is a source of two keys on two partitions and its correct
// copy: producer "w.0" copies partition 0 in transactions at epochs 0
// (2 records) and 1 (1 record), "w.1" partition 1 at epoch 0.
func copyFixture() (src, out []CopyRecord) {
	src = []CopyRecord{
		{0, 0, "a", "a0", ""}, {0, 1, "a", "a1", ""}, {0, 2, "a", "a2", ""},
		{1, 0, "b", "b0", ""}, {1, 1, "b", "b1", ""},
	}
	out = []CopyRecord{
		{0, 0, "a", "a0", "w.0:0:2"}, {0, 1, "a", "a1", "w.0:0:2"}, {0, 3, "a", "a2", "w.0:1:1"},
		{1, 0, "b", "b0", "w.1:0:2"}, {1, 1, "b", "b1", "w.1:0:2"},
	}
	return src, out
}

func TestCheckCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(out []CopyRecord) []CopyRecord
		want map[Kind]int
	}{
		{"correct", func(out []CopyRecord) []CopyRecord { return out }, nil},
		{"lost", func(out []CopyRecord) []CopyRecord { return out[1:] }, map[Kind]int{CopyLost: 1, CopyTorn: 1}},
		{"duplicate within one transaction", func(out []CopyRecord) []CopyRecord {
			return append(out, CopyRecord{1, 2, "b", "b1", "w.1:0:2"})
		}, map[Kind]int{CopyDuplicate: 1, CopyTorn: 1}},
		{"aborted read: a transaction redone and both visible", func(out []CopyRecord) []CopyRecord {
			// w.0 epoch 1 copied a2 and aborted; epoch 2 copied it again.
			return append(out, CopyRecord{0, 4, "a", "a2", "w.0:2:1"})
		}, map[Kind]int{CopyAbortedRead: 1}},
		{"torn transaction", func(out []CopyRecord) []CopyRecord {
			return append(out[:3], out[4:]...) // b0 of w.1's two
		}, map[Kind]int{CopyLost: 1, CopyTorn: 1}},
		{"zombie write: an older epoch after a newer one", func(out []CopyRecord) []CopyRecord {
			// a2 at epoch 1 lands after a1 at epoch 2.
			out[0].Tag, out[1].Tag = "w.0:0:1", "w.0:2:1"
			return out
		}, map[Kind]int{CopyZombie: 1}},
		{"order", func(out []CopyRecord) []CopyRecord {
			out[0].Value, out[1].Value = "a1", "a0"
			return out
		}, map[Kind]int{CopyOrder: 1}},
		{"unknown value", func(out []CopyRecord) []CopyRecord {
			return append(out, CopyRecord{1, 9, "b", "zz", "w.1:1:1"})
		}, map[Kind]int{CopyUnknown: 1}},
		{"no tag", func(out []CopyRecord) []CopyRecord {
			out[4].Tag = ""
			return out
		}, map[Kind]int{CopyUnknown: 1, CopyTorn: 1, CopyLost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, out := copyFixture()
			res := CheckCopy(src, tc.edit(out), nil)
			for _, k := range CopyKinds {
				if res.Anomalies[k] != tc.want[k] {
					t.Fatalf("%s: %d, want %d; all: %v %v", k, res.Anomalies[k], tc.want[k], res.Anomalies, res.Examples)
				}
			}
			if (res.Failures() == 0) != (len(tc.want) == 0) {
				t.Fatalf("Failures() = %d", res.Failures())
			}
		})
	}
}

func TestParseCopyTag(t *testing.T) {
	for s, ok := range map[string]bool{"w.0:1:2": true, "a:b:c:3:4": true, "w.0:x:2": false, "w:1:0": false, ":1:2": false, "w1": false, "": false} {
		if _, got := parseCopyTag(s); got != ok {
			t.Errorf("parseCopyTag(%q) ok = %v, want %v", s, got, ok)
		}
	}
	if tag, _ := parseCopyTag("a:b:7:9"); fmt.Sprint(tag) != "{a:b 7 9}" {
		t.Errorf("parseCopyTag(a:b:7:9) = %v", tag)
	}
}

// A record a read_committed reader saw while the copy ran that is not in
// the final log is an aborted read.
func TestCheckCopyLiveReads(t *testing.T) {
	src, out := copyFixture()
	live := []CopyRecord{out[0], out[3]}
	if res := CheckCopy(src, out, live); res.Failures() != 0 {
		t.Fatalf("live reads of committed records: %v", res.Anomalies)
	}
	live = append(live, CopyRecord{0, 2, "a", "a2", "w.0:0:3"}) // offset 2 holds nothing in the end
	if res := CheckCopy(src, out, live); res.Anomalies[CopyAbortedRead] != 1 || res.Failures() != 1 {
		t.Fatalf("a live read of an aborted record: %v", res.Anomalies)
	}
}
