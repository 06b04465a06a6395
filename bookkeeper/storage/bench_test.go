package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/bookkeeper/wire"
)

func benchOptions(b *testing.B) Options {
	return Options{Dir: b.TempDir(), FS: vfs.Default, BookieID: "bench", InstanceID: "bench"}
}

// BenchmarkAddCheckpoint measures the storage's write path on a real disk:
// adds into the write buffer and a Checkpoint (entry log write + fdatasync
// + synced index commit) every ~4 MiB, which is how a bookie drives it
// (the journal, not measured here, is what acknowledges adds).
func BenchmarkAddCheckpoint(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("entry=%dKiB", size>>10), func(b *testing.B) {
			s := mustOpen(b, benchOptions(b))
			defer mustClose(b, s)
			payload := payloadOf(1, 0, size)
			every := max(1, (4<<20)/size)
			ctx := context.Background()
			var ckpts []time.Duration
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := range b.N {
				ledger, entry := int64(i%8), int64(i/8) // 8 interleaved ledgers
				r := AddRequest{Ledger: ledger, Entry: entry, LAC: entry - 1, Payload: payload,
					Checksum: wire.EntryChecksum(ledger, entry, entry-1, payload), MasterKey: keyOf(ledger)}
				if err := s.AddEntry(ctx, r); err != nil {
					b.Fatal(err)
				}
				if i%every == every-1 || i == b.N-1 {
					start := time.Now()
					if err := s.Checkpoint(); err != nil {
						b.Fatal(err)
					}
					ckpts = append(ckpts, time.Since(start))
				}
			}
			b.StopTimer()
			reportPercentiles(b, "ckpt", ckpts)
		})
	}
}

// BenchmarkReadEntry measures random reads of flushed 1 KiB entries
// (index lookup + pread + checksum), with latency percentiles.
func BenchmarkReadEntry(b *testing.B) {
	s := mustOpen(b, benchOptions(b))
	defer mustClose(b, s)
	const ledgers, perLedger = 16, 4096
	payload := payloadOf(1, 0, 1<<10)
	ctx := context.Background()
	for e := int64(0); e < perLedger; e++ {
		for l := int64(0); l < ledgers; l++ {
			r := AddRequest{Ledger: l, Entry: e, LAC: e - 1, Payload: payload,
				Checksum: wire.EntryChecksum(l, e, e-1, payload), MasterKey: keyOf(l)}
			if err := s.AddEntry(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(1 << 10)
	b.ResetTimer()
	for range b.N {
		l, e := rng.Int64N(ledgers), rng.Int64N(perLedger)
		start := time.Now()
		if _, err := s.ReadEntry(l, e); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, "read", lat)
}

func reportPercentiles(b *testing.B, name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	for _, p := range []float64{50, 99, 99.9} {
		i := min(len(d)-1, int(float64(len(d))*p/100))
		b.ReportMetric(float64(d[i].Microseconds()), fmt.Sprintf("%s-p%v-µs", name, p))
	}
}
