package compactor

import (
	"bytes"
	"testing"

	"github.com/sluicemq/sluice/pkg/catalog"
	"github.com/sluicemq/sluice/pkg/record"
)

// BenchmarkOffload measures offload throughput (MB/s of segment written):
// read a sealed 16 MiB ledger (256 entries of 64 KiB) from three
// in-process bookies on in-memory filesystems, write its segment to a
// mem:// bucket, read it back to verify, mark it OFFLOADED. So it is the
// compactor's own cost (ledger reads, segment encoding, verification)
// without disk or network.
func BenchmarkOffload(b *testing.B) {
	e := newEnv(b)
	e.topic("bench", catalog.DefaultTopicConfig())
	c := e.compactor(func(c *Config, _ *Deps) { c.OffloadAge = -1 })
	first := int64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var payloads [][]byte
		for range 256 {
			payloads = append(payloads, benchBatch(b, first, 64)) // 64 records of 1 KiB
			first += 64
		}
		m := e.ledgerOf("bench", first-256*64, first-1, payloads)
		b.StartTimer()
		n, _, err := c.offload(e.ctx(), m)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(n)
	}
}

func benchBatch(t testing.TB, base int64, n int) []byte {
	t.Helper()
	bld, err := record.NewBuilder(record.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := bytes.Repeat([]byte("v"), 1<<10)
	for i := range n {
		if err := bld.Append(&record.Record{Timestamp: 1_700_000_000_000 + base + int64(i), Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(out, base)
	return out
}
