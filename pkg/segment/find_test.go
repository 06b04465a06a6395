package segment

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/pkg/record"
)

// Find and FindTime against a linear scan over the batches, for random
// ledgers (gaps, timestamps that go back, pauses) and index intervals:
// the range returned is one interval and holds exactly the batch the scan
// picks; out-of-range queries fail as documented.
func TestFindMatchesLinearScan(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		g := genOpts{
			entries:     1 + rng.IntN(300),
			maxBatches:  1 + rng.IntN(3),
			maxRecords:  1 + rng.IntN(20),
			maxValue:    rng.IntN(200),
			gaps:        rng.IntN(2) == 0,
			firstOffset: rng.Int64N(1 << 40),
		}
		interval := []int{1, 61, 100, 1000, 5000, 1 << 20}[rng.IntN(6)]
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			l := genLedger(t, seed, g)
			seg, info := writeSegment(t, testWriterOptions(interval), l)
			r := mustOpen(t, seg)
			pos := make([]int64, len(l.batches)) // object position of each batch
			for i := range l.batches {
				pos[i] = HeaderSize + int64(offsetOf(l.batches, i))
			}
			inInterval := func(what string, rng Range, want int) {
				t.Helper()
				if i := sortIntervalOf(r, rng.Start); i < 0 || r.Interval(i) != rng {
					t.Fatalf("%s: %v is not one interval", what, rng)
				}
				if pos[want] < rng.Start || pos[want]+int64(len(l.batches[want])) > rng.End {
					t.Fatalf("%s: batch %d at %d is not in %v", what, want, pos[want], rng)
				}
			}

			// Offsets: every batch boundary and a sample in between.
			var offsets []int64
			for _, b := range l.batches {
				offsets = append(offsets, b.BaseOffset()-1, b.BaseOffset(), b.LastOffset(), b.LastOffset()+1)
			}
			for range 200 {
				offsets = append(offsets, info.FirstOffset-5+rng.Int64N(info.LastOffset-info.FirstOffset+10))
			}
			offsets = append(offsets, 0, -1, math.MinInt64, math.MaxInt64)
			for _, o := range offsets {
				got, err := r.Find(o)
				want := firstWithLast(l.batches, o)
				if want < 0 {
					if !errors.Is(err, ErrOutOfRange) {
						t.Fatalf("Find(%d) past the end: %v, %v", o, got, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Find(%d): %v", o, err)
				}
				inInterval(fmt.Sprintf("Find(%d)", o), got, want)
			}

			var stamps []int64
			for _, b := range l.batches {
				stamps = append(stamps, b.MaxTimestamp()-1, b.MaxTimestamp(), b.MaxTimestamp()+1)
			}
			stamps = append(stamps, 0, -1, math.MinInt64, math.MaxInt64, info.MaxTimestamp, info.MaxTimestamp+1)
			for _, ts := range stamps {
				got, err := r.FindTime(ts)
				want := firstWithTime(l.batches, ts)
				if want < 0 {
					if !errors.Is(err, ErrNoTimestamp) {
						t.Fatalf("FindTime(%d) past the max: %v, %v", ts, got, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("FindTime(%d): %v", ts, err)
				}
				inInterval(fmt.Sprintf("FindTime(%d)", ts), got, want)
			}
		})
	}
}

// A segment written from batches whose timestamps only go down has one
// time index entry, and FindTime still finds the first batch.
func TestFindTimeDecreasing(t *testing.T) {
	b, err := record.NewBuilder(record.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var l ledger
	for i := range 50 {
		if err := b.Append(&record.Record{Timestamp: int64(10_000 - i*100), Value: make([]byte, 30)}); err != nil {
			t.Fatal(err)
		}
		bt, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		record.SetBaseOffset(bt, int64(i))
		l.batches = append(l.batches, bt)
		l.entries = append(l.entries, bt)
	}
	seg, info := writeSegment(t, testWriterOptions(200), l)
	if info.TimeIndexEntries != 1 || info.IndexEntries < 5 {
		t.Fatalf("%d time entries, %d offset entries", info.TimeIndexEntries, info.IndexEntries)
	}
	r := mustOpen(t, seg)
	for _, ts := range []int64{0, 5000, 10_000} {
		if got, err := r.FindTime(ts); err != nil || got != r.Interval(0) {
			t.Fatalf("FindTime(%d) = %v, %v; want the first interval", ts, got, err)
		}
	}
}
