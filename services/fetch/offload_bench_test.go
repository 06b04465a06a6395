package fetch_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// Catch-up reads of the same records from bookie-resident ledgers and
// from offloaded ones (an in-memory object store: what it measures is the
// read path's own cost — index lookups, ranged reads, checks — not S3's
// latency). The entry caches are tiny, so nearly every read misses.
//
//	go test ./services/fetch -run '^$' -bench OffloadedVsBookies -benchtime 20x
func BenchmarkFetchOffloadedVsBookies(b *testing.B) {
	e := startCluster(b, smallLedgers())
	e.createTopic(b, "bench", 2)
	const n = 3000
	e.produce(b, "bench", 0, 0, n, 50)
	e.produce(b, "bench", 1, 0, n, 50)
	bucket := memBucket(b)
	_, sealed := e.sealedLedgers(b, "bench", 1)
	for _, ref := range sealed {
		e.offload(b, bucket, ref.ID, nil)
	}
	end := sealed[len(sealed)-1].FirstOffset // partition 1 is offloaded below it
	cfg := fetch.Config{Log: partlog.Config{CacheBytes: 4 << 10}}
	for _, bc := range []struct {
		name      string
		partition int32
	}{{"bookies", 0}, {"objects", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			_, cons := e.objectCopy(b, cfg, bucket)
			bytes := int64(0)
			for b.Loop() {
				for next := int64(0); next < end; {
					resp, err := cons.Fetch(context.Background(), connect.NewRequest(&sluicev1.FetchRequest{Topic: "bench", Partition: bc.partition, Offset: next, MaxRecords: 500}))
					if err != nil || len(resp.Msg.Records) == 0 {
						b.Fatalf("fetch at %d: %v", next, err)
					}
					for _, r := range resp.Msg.Records {
						bytes += int64(len(r.Key) + len(r.Value))
					}
					next = resp.Msg.NextOffset
				}
			}
			b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(end*int64(b.N))/b.Elapsed().Seconds(), "records/s")
		})
	}
}
