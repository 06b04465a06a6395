package sluice_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// BenchmarkProduce: 1 KiB records, keyless (sticky), 16 partitions, against
// the in-process cluster (3 bookies, fsync), default producer options.
// Reports MB/s of record values acknowledged, for compressible text and
// random bytes.
func BenchmarkProduce(b *testing.B) {
	dir := b.TempDir()
	c, err := cluster.New(cluster.Config{Dir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() { stop(); <-done }()
	client, err := sluice.NewClient(c.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := client.CreateTopic(ctx, "bench", 16, nil); err != nil {
		b.Fatal(err)
	}
	text := make([]byte, 1024)
	for i := range text {
		text[i] = "the quick brown fox jumps over the lazy dog "[i%44] // compressible
	}
	random := make([]byte, 1024)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32()) // incompressible: stored uncompressed
	}
	for _, bc := range []struct {
		name  string
		value []byte
	}{{"text", text}, {"random", random}} {
		b.Run(bc.name, func(b *testing.B) { benchProduce(ctx, b, client, bc.value) })
	}
}

func benchProduce(ctx context.Context, b *testing.B, client *sluice.Client, value []byte) {
	p, err := client.NewProducer()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Close(ctx) }()
	if _, err := p.ProduceSync(ctx, sluice.NewRecord("bench", nil, value)); err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	cb := func(r sluice.Result) {
		if r.Err != nil {
			failed.Add(1)
		}
	}
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for range b.N {
		p.Produce(ctx, sluice.NewRecord("bench", nil, value), cb)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if failed.Load() > 0 {
		b.Fatalf("%d records failed", failed.Load())
	}
}
