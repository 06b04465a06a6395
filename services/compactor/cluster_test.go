package compactor_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
	"github.com/sluicemq/sluice/services/compactor"
	"github.com/sluicemq/sluice/services/ingest"
	"github.com/sluicemq/sluice/services/ingest/partition"
)

var h2c = func() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}()

// The in-process cluster (what `sluice dev` runs) offloads on its own:
// records produced through the ingest service, with small ledgers, end up
// in segment objects of its file:// store that decode to exactly the
// records produced, in order, and the bookies drop their copies.
func TestClusterOffloadsProducedRecords(t *testing.T) {
	dir := t.TempDir()
	c, err := cluster.New(cluster.Config{
		Dir: dir, Addr: "127.0.0.1:0",
		Ingest:    ingest.Config{Writer: partition.Config{MaxEntryBytes: 2048, RollBytes: 4096}},
		Compactor: compactor.Config{OffloadAge: -1, BookieDeleteGrace: -1, Interval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("cluster Run: %v", err)
		}
	}()
	url := "http://" + c.Addr()
	admin := sluicev1connect.NewAdminServiceClient(h2c, url, connect.WithGRPC())
	prod := sluicev1connect.NewProducerServiceClient(h2c, url, connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "events", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	const n = 300
	var want [][]byte
	p0 := int32(0)
	for i := 0; i < n; i += 10 {
		var recs []*sluicev1.Record
		for j := i; j < i+10; j++ {
			v := fmt.Appendf(nil, "value-%04d-%s", j, bytes.Repeat([]byte("x"), 64))
			want = append(want, v)
			recs = append(recs, &sluicev1.Record{Value: v})
		}
		if _, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "events", Partition: &p0, Records: recs})); err != nil {
			t.Fatal(err)
		}
	}

	// Wait until every ledger but the open tail is offloaded and gone from
	// the bookies (the compactor drops the bookie copies just after it
	// marks a ledger OFFLOADED), then read everything back. The writer's
	// last roll-over runs after the last produce returned, so the tail read
	// here may be sealed and offloaded while it is read: then look again.
	var p catalog.Partition
	var got [][]byte
attempts:
	for attempt := 1; ; attempt++ {
		for {
			if p, err = c.Catalog.GetPartition(ctx, "events", 0); err != nil {
				t.Fatal(err)
			}
			offloaded := 0
			for _, r := range p.Ledgers[:len(p.Ledgers)-1] {
				m, err := c.Catalog.GetLedger(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if m.State == catalog.LedgerOffloaded && !onBookies(c, m.ID) {
					offloaded++
				}
			}
			if len(p.Ledgers) > 2 && offloaded == len(p.Ledgers)-1 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("not offloaded in time: %d of %d ledgers", offloaded, len(p.Ledgers)-1)
			}
			time.Sleep(20 * time.Millisecond)
		}

		got = got[:0]
		it := record.NewIterator(record.Limits{})
		take := func(batches []byte) {
			for len(batches) > 0 {
				b, rest, err := record.Split(batches)
				if err != nil {
					t.Fatal(err)
				}
				batches = rest
				if err := it.Reset(b); err != nil {
					t.Fatal(err)
				}
				for it.Next() {
					got = append(got, bytes.Clone(it.Record().Value))
				}
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, r := range p.Ledgers[:len(p.Ledgers)-1] {
			m, _ := c.Catalog.GetLedger(ctx, r.ID)
			for _, b := range c.Bookies {
				if ents, _, err := b.Read(int64(m.ID), 0, 0, 1<<20, false, nil); err == nil && len(ents) > 0 {
					t.Fatalf("offloaded ledger %d still on bookie", m.ID)
				}
			}
			data, err := c.Objects.ReadAll(ctx, m.Location)
			if err != nil {
				t.Fatal(err)
			}
			sr, err := segment.Open(bytes.NewReader(data), int64(len(data)), segment.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rng := sr.All()
			raw, err := sr.ReadRange(rng, nil)
			if err != nil {
				t.Fatal(err)
			}
			bi := sr.Batches(rng, raw)
			for bi.Next() {
				take(bi.Batch())
			}
			if err := bi.Err(); err != nil {
				t.Fatal(err)
			}
		}
		tail := p.Ledgers[len(p.Ledgers)-1]
		rd, err := c.Ledgers.OpenReader(ctx, tail.ID)
		if err != nil {
			t.Fatal(err)
		}
		if lac, _ := rd.PollLAC(ctx); lac >= 0 {
			ents, err := c.Ledgers.ReadEntries(ctx, tail.ID, 0, lac)
			if err != nil {
				if m, gerr := c.Catalog.GetLedger(ctx, tail.ID); gerr == nil && m.State != catalog.LedgerOpen && attempt < 5 {
					continue attempts // rolled over and offloaded meanwhile
				}
				t.Fatal(err)
			}
			for _, e := range ents {
				take(e)
			}
		}
		break
	}
	if len(got) != n {
		t.Fatalf("read back %d records, want %d", len(got), n)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d = %q, want %q", i, got[i], want[i])
		}
	}

	// Through the fetch service: consuming from offset 0 reads the
	// offloaded ledgers from the objects (the bookies no longer have
	// them) and the tail from the bookies: all records, in order.
	t.Run("fetch", func(t *testing.T) {
		cons := sluicev1connect.NewConsumerServiceClient(h2c, url, connect.WithGRPC())
		var fetched [][]byte
		for off := int64(0); len(fetched) < n; {
			resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "events", Partition: 0, Offset: off, MaxRecords: 100, MaxWaitMs: 500}))
			if err != nil {
				t.Fatalf("fetch at %d: %v", off, err)
			}
			for _, r := range resp.Msg.GetRecords() {
				fetched = append(fetched, r.GetValue())
			}
			off = resp.Msg.GetNextOffset()
		}
		for i := range want {
			if !bytes.Equal(fetched[i], want[i]) {
				t.Fatalf("fetched record %d = %q, want %q", i, fetched[i], want[i])
			}
		}
	})
}

// A compacted topic read back through fetch: gaps and empty batches in the
// compacted segments are skipped, offsets only grow, and the newest value
// of every key is what a consumer ends up with.
func TestClusterCompactedTopicReadsThroughFetch(t *testing.T) {
	c, err := cluster.New(cluster.Config{
		Dir: t.TempDir(), Addr: "127.0.0.1:0",
		Ingest: ingest.Config{Writer: partition.Config{MaxEntryBytes: 2048, RollBytes: 4096}},
		Compactor: compactor.Config{OffloadAge: -1, BookieDeleteGrace: -1, Interval: 20 * time.Millisecond,
			CompactInterval: time.Millisecond, TombstoneDelay: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("cluster Run: %v", err)
		}
	}()
	url := "http://" + c.Addr()
	admin := sluicev1connect.NewAdminServiceClient(h2c, url, connect.WithGRPC())
	prod := sluicev1connect.NewProducerServiceClient(h2c, url, connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "state", Partitions: 1,
		Config: map[string]string{catalog.KeyCleanupPolicy: string(catalog.CleanupCompact)}})); err != nil {
		t.Fatal(err)
	}
	const n = 300
	newest := map[string]string{}
	p0 := int32(0)
	for i := 0; i < n; i += 10 {
		var recs []*sluicev1.Record
		for j := i; j < i+10; j++ {
			k, v := fmt.Sprintf("k%d", j%7), fmt.Sprintf("v%04d-%s", j, bytes.Repeat([]byte("x"), 64))
			newest[k] = v
			recs = append(recs, &sluicev1.Record{Key: []byte(k), Value: []byte(v)})
		}
		if _, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "state", Partition: &p0, Records: recs})); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until every ledger but the tail is offloaded and compacted.
	for {
		p, err := c.Catalog.GetPartition(ctx, "state", 0)
		if err != nil {
			t.Fatal(err)
		}
		compacted := 0
		for _, r := range p.Ledgers[:len(p.Ledgers)-1] {
			if m, err := c.Catalog.GetLedger(ctx, r.ID); err == nil && bytes.Contains([]byte(m.Location), []byte(".c")) {
				compacted++
			}
		}
		if len(p.Ledgers) > 3 && compacted >= len(p.Ledgers)-2 { // the newest offloaded one may hold only newest values
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not compacted in time: %d of %d", compacted, len(p.Ledgers)-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cons := sluicev1connect.NewConsumerServiceClient(h2c, url, connect.WithGRPC())
	got := map[string]string{}
	count, last := 0, int64(-1)
	for off := int64(0); ; {
		resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "state", Partition: 0, Offset: off, MaxRecords: 100, MaxWaitMs: 500}))
		if err != nil {
			t.Fatalf("fetch at %d: %v", off, err)
		}
		for _, r := range resp.Msg.GetRecords() {
			if r.GetOffset() <= last {
				t.Fatalf("offset %d after %d", r.GetOffset(), last)
			}
			last = r.GetOffset()
			got[string(r.GetKey())] = string(r.GetValue())
			count++
		}
		// Until the last offset produced: the high watermark may trail
		// the producer's acks for a moment.
		if off = resp.Msg.GetNextOffset(); off >= n {
			break
		}
	}
	if count >= n {
		t.Fatalf("read %d records of %d: nothing compacted", count, n)
	}
	for k, v := range newest {
		if got[k] != v {
			t.Fatalf("%s = %.10q, want %.10q", k, got[k], v)
		}
	}
}

// onBookies reports whether any bookie of the cluster still stores ledger id.
func onBookies(c *cluster.Cluster, id catalog.LedgerID) bool {
	for _, b := range c.Bookies {
		if ents, _, err := b.Read(int64(id), 0, 0, 1<<20, false, nil); err == nil && len(ents) > 0 {
			return true
		}
	}
	return false
}
