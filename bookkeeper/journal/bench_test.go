package journal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkAppend runs the journal on the real disk (b.TempDir, vfs.Default,
// real fdatasync): N appenders, each keeping one record in flight
// (AppendWait), records of 1 KiB and 64 KiB, with no group wait (the
// default) and with 1 ms. Reported besides ns/op and MB/s: group commits
// (fdatasyncs) per record, records per group, and append latency
// percentiles.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, appenders := range []int{1, 16, 64} {
			for _, wait := range []time.Duration{0, time.Millisecond} {
				name := fmt.Sprintf("size=%dKiB/appenders=%d/wait=%v", size>>10, appenders, wait)
				b.Run(name, func(b *testing.B) { benchAppend(b, size, appenders, wait) })
			}
		}
	}
}

func benchAppend(b *testing.B, size, appenders int, wait time.Duration) {
	j, err := Open(Config{Dir: b.TempDir(), MaxGroupWait: wait}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	rec := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range rec {
		rec[i] = byte(r.Uint32())
	}
	lat := make([][]time.Duration, appenders)
	var next atomic.Int64
	before := j.Stats()
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				if _, err := j.AppendWait(context.Background(), rec); err != nil {
					b.Error(err)
					return
				}
				lat[a] = append(lat[a], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	groups := j.Stats().Groups - before.Groups
	b.ReportMetric(float64(groups)/float64(b.N), "syncs/op")
	b.ReportMetric(float64(b.N)/float64(max(groups, 1)), "recs/sync")
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
}

// BenchmarkAppendPipelined is one stream of appends with a bounded number
// in flight, the way a bookie connection pipelines adds: Append with a
// DoneFunc, no goroutine per record.
func BenchmarkAppendPipelined(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, inflight := range []int{64, 1024} {
			for _, wait := range []time.Duration{0, time.Millisecond} {
				b.Run(fmt.Sprintf("size=%dKiB/inflight=%d/wait=%v", size>>10, inflight, wait), func(b *testing.B) {
					benchPipelined(b, size, inflight, wait)
				})
			}
		}
	}
}

func benchPipelined(b *testing.B, size, inflight int, wait time.Duration) {
	j, err := Open(Config{Dir: b.TempDir(), MaxGroupWait: wait}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	rec := make([]byte, size)
	slots := make(chan struct{}, inflight)
	var failed atomic.Pointer[error]
	done := func(_ uint64, err error) {
		if err != nil {
			failed.Store(&err)
		}
		<-slots
	}
	before := j.Stats()
	b.SetBytes(int64(size))
	for b.Loop() {
		slots <- struct{}{}
		if err := j.Append(context.Background(), rec, done); err != nil {
			b.Fatal(err)
		}
	}
	for range inflight {
		slots <- struct{}{}
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	st := j.Stats()
	b.ReportMetric(float64(st.Groups-before.Groups)/float64(st.Appends-before.Appends), "syncs/op")
}

// BenchmarkFdatasyncProbe is the device bound the journal works against:
// append a block and fdatasync it, in a loop, with nothing else.
func BenchmarkFdatasyncProbe(b *testing.B) {
	for _, size := range []int{4 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "probe"), vfs.WriteCategoryUnspecified)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.SyncData(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenReusedNewest measures Open (and Close) on the real disk when
// the newest file is a reused one: its records end at a terminator near the
// start, and recovery's proof scan walks the old contents after it (up to
// MaxFileSize, 32 MiB by default).
func BenchmarkOpenReusedNewest(b *testing.B) {
	cfg := Config{Dir: b.TempDir()}
	j, err := Open(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	rec := make([]byte, 64<<10)
	for i := range rec {
		rec[i] = byte(rand.Uint32()) // stale contents that look like data, not zeros
	}
	for range 6 * (DefaultMaxFileSize / len(rec)) { // six files
		if _, err := j.AppendWait(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Checkpoint(j.Durable()); err != nil {
		b.Fatal(err)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	reused := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		j, err := Open(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		reused += j.Stats().Reused
		// The file Open started becomes the next Open's newest; recycle
		// the older ones so the pool never runs dry.
		err = errors.Join(j.Checkpoint(j.Durable()), j.Close())
		if err != nil {
			b.Fatal(err)
		}
	}
	if reused == 0 {
		b.Fatal("no Open reused a recycled file")
	}
}
