package partition

import (
	"context"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
)

// BenchmarkAppend measures the writer's own cost per batch: 16 producers
// append 1-record batches of 100 bytes to an in-memory ledger that
// acknowledges at once (on its own goroutine, as the real client does).
// It compares drivers of the writer, not storage.
func BenchmarkAppend(b *testing.B) {
	l, c := newMemLedgers(b), &memChain{}
	w, err := Open(context.Background(), Config{}, l, c, catalog.Partition{}, testLease, catalog.DefaultReplication)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = w.Close(context.Background()) }()
	tmpl := batchOf(b, 1, 100)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := w.Append(ctx, append([]byte(nil), tmpl...)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
