//go:build integration

package processtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
)

// hwBound is how long after its restart a fetch copy may take to report a
// partition's full end once producers have stopped (docs/DESIGN.md,
// "Acknowledged means readable"): one Fetch asks every bookie of an open
// ledger's last segment for its LAC, so the first answer is already right;
// the bound leaves room for the catalog reads of a cold copy.
const hwBound = 5 * time.Second

// Separate processes (3 bookies, ingest, fetch): producers write to every
// partition while one bookie is killed with SIGKILL and restarted, then
// stop; another bookie is killed and restarted after that. The fetch copy
// is restarted, and each partition's high watermark, read with plain Fetch
// calls (no wait, no group), equals the end the owning ingest copy reports
// within hwBound; every acknowledged record is readable. (The exact case of
// one bookie whose LAC stayed behind is pinned by the ledger client's
// TestPollLACTakesTheHighestBookie.)
func TestIntegrationFetchEndAfterProducersStopAndFetchRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startCluster(ctx, t)
	const parts = 6
	if _, err := c.admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "hw", Partitions: parts})); err != nil {
		t.Fatal(err)
	}
	acked := make([][]string, parts)
	var mu sync.Mutex
	produce := func(from, to int) {
		var wg sync.WaitGroup
		for part := range int32(parts) {
			wg.Go(func() {
				for i := from; i < to; i++ {
					var recs []*sluicev1.Record
					for j := range 1 + i%4 {
						recs = append(recs, &sluicev1.Record{Value: fmt.Appendf(nil, "p%d-%d-%d", part, i, j)})
					}
					deadline := time.Now().Add(60 * time.Second)
					for {
						resp, err := c.producer.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "hw", Partition: &part, Records: recs}))
						if err == nil {
							mu.Lock()
							if got := resp.Msg.GetResults()[0].GetOffset(); got != int64(len(acked[part])) {
								mu.Unlock()
								t.Errorf("partition %d: batch acknowledged at %d, want %d", part, got, len(acked[part]))
								return
							}
							for _, r := range recs {
								acked[part] = append(acked[part], string(r.GetValue()))
							}
							mu.Unlock()
							break
						}
						if c := connect.CodeOf(err); (c != connect.CodeUnavailable && c != connect.CodeResourceExhausted) || time.Now().After(deadline) {
							t.Errorf("partition %d: produce: %v", part, err)
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
	}
	produce(0, 30)
	if err := c.procs["bookie-2"].Kill(); err != nil {
		t.Fatal(err)
	}
	produce(30, 40)
	if err := c.procs["bookie-2"].Start(); err != nil {
		t.Fatal(err)
	}
	produce(40, 80)
	if t.Failed() {
		t.FailNow()
	}
	// Producers have stopped for good, and the writers pushed their LACs.
	// A bookie killed now may come back knowing only the LAC its last
	// entries carried (explicit LACs are not journaled).
	time.Sleep(200 * time.Millisecond)
	if err := c.procs["bookie-1"].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.procs["bookie-1"].Start(); err != nil {
		t.Fatal(err)
	}
	// Restart the fetch copy.
	if err := c.procs["fetch"].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.procs["fetch"].Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	desc, err := c.admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "hw"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range desc.Msg.GetTopic().GetPartitions() {
		part := p.GetPartition()
		if end := p.GetEndOffset(); end != int64(len(acked[part])) {
			t.Fatalf("partition %d: the owner reports end %d; %d records were acknowledged", part, end, len(acked[part]))
		}
	}
	var slowest time.Duration
	for part := range int32(parts) {
		want := int64(len(acked[part]))
		var hw int64
		for {
			resp, err := c.consumer.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "hw", Partition: part, Offset: 0, MaxRecords: 1}))
			if err == nil {
				if hw = resp.Msg.GetHighWatermark(); hw == want {
					break
				}
			} else if connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("partition %d: fetch: %v", part, err)
			}
			if time.Since(restarted) > hwBound {
				t.Fatalf("partition %d: high watermark %d %v after the fetch copy's restart; the owner's end is %d (last error %v)", part, hw, hwBound, want, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		slowest = max(slowest, time.Since(restarted))
		var got []string
		for next := int64(0); next < want; {
			resp, err := c.consumer.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "hw", Partition: part, Offset: next, MaxRecords: 1000}))
			if err != nil {
				t.Fatalf("partition %d: fetch at %d: %v", part, next, err)
			}
			for _, r := range resp.Msg.GetRecords() {
				got = append(got, string(r.GetValue()))
			}
			if len(resp.Msg.GetRecords()) == 0 {
				t.Fatalf("partition %d: no records at %d below the high watermark %d", part, next, want)
			}
			next = resp.Msg.GetNextOffset()
		}
		for i, v := range acked[part] {
			if got[i] != v {
				t.Fatalf("partition %d offset %d holds %q; %q was acknowledged", part, i, got[i], v)
			}
		}
	}
	t.Logf("every partition's high watermark reached the owner's end %v after the fetch copy's restart", slowest.Round(time.Millisecond))
}
