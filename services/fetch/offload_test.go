package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/segment"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/services/fetch"
	"github.com/sluicemq/sluice/services/fetch/partlog"
)

// Every sealed ledger offloaded and deleted from the bookies: a copy with
// the object store reads everything back identically (from offset 0, from
// the middle of an offloaded ledger, by timestamp, EARLIEST), with ranged
// GETs; a copy without an object store answers UNAVAILABLE saying so.
func TestFetchReadsOffloadedLedgers(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "o", 1)
	const n = 3000
	e.produce(t, "o", 0, 0, n, 50)
	b := memBucket(t)
	_, sealed := e.sealedLedgers(t, "o", 0)
	for _, ref := range sealed {
		e.offload(t, b, ref.ID, nil)
	}
	svc, cons := e.objectCopy(t, fetch.Config{}, b)
	readAll(t, cons, "o", 0, 0, n, 137)
	st := svc.Logs().Stats()
	if st.ObjectGets == 0 || st.Indexes == 0 || st.IndexOpens < uint64(len(sealed)) {
		t.Fatalf("read without ranged GETs or indexes: %+v", st)
	}

	ctx := context.Background()
	mid := sealed[1].FirstOffset + 17 // inside an offloaded ledger, no cursor hint
	for _, tc := range []struct {
		name string
		req  *sluicev1.FetchRequest
		want int64
	}{
		{"offset", &sluicev1.FetchRequest{Offset: mid}, mid},
		{"earliest", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_EARLIEST}, 0},
		{"timestamp", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 1_000_000 + mid}, mid},
		{"timestamp before all", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 5}, 0},
		{"timestamp in the tail", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 1_000_000 + n - 3}, n - 3},
	} {
		tc.req.Topic, tc.req.MaxRecords = "o", 3
		resp, err := cons.Fetch(ctx, connect.NewRequest(tc.req))
		if err != nil || len(resp.Msg.Records) != 3 {
			t.Fatalf("%s: %v %v", tc.name, resp, err)
		}
		for i, r := range resp.Msg.Records {
			checkRecord(t, r, tc.want+int64(i))
		}
	}
	// Every offset that starts an offloaded ledger, and the one before it,
	// found by timestamp (the time index across ledger boundaries).
	for _, ref := range sealed[1:] {
		for _, o := range []int64{ref.FirstOffset - 1, ref.FirstOffset} {
			resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "o", Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 1_000_000 + o, MaxRecords: 1}))
			if err != nil || len(resp.Msg.Records) != 1 {
				t.Fatalf("timestamp of %d: %v %v", o, resp, err)
			}
			checkRecord(t, resp.Msg.Records[0], o)
		}
	}

	// A copy without an object store: the bookies no longer hold the
	// ledger, and the answer says why.
	_, bare := e.objectCopy(t, fetch.Config{}, nil)
	_, err := bare.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "o", Offset: 0}))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "offloaded") || !strings.Contains(err.Error(), "no object store") {
		t.Fatalf("a copy without an object store: want UNAVAILABLE naming the offloaded ledger, got %v", err)
	}
}

// A damaged object is never returned as data: a batch's bytes or the
// index failing their checksums answer DATA_LOSS (fetch by offset and by
// timestamp); an object missing while the catalog says OFFLOADED answers
// UNAVAILABLE naming the ledger and the key.
func TestFetchDamagedOrMissingObject(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "d", 1)
	const n = 3000
	e.produce(t, "d", 0, 0, n, 50)
	b := memBucket(t)
	p, sealed := e.sealedLedgers(t, "d", 0)
	if len(sealed) < 3 {
		t.Fatalf("want at least 3 sealed ledgers, got %d", len(sealed))
	}
	e.offload(t, b, sealed[0].ID, func(obj []byte) { obj[segment.HeaderSize+200] ^= 0x10 })          // inside a batch
	e.offload(t, b, sealed[1].ID, func(obj []byte) { obj[len(obj)-segment.TrailerSize-40] ^= 0x01 }) // the footer
	missing := e.offload(t, b, sealed[2].ID, nil)
	if err := b.Delete(context.Background(), missing); err != nil {
		t.Fatal(err)
	}
	_, cons := e.objectCopy(t, fetch.Config{}, b)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  *sluicev1.FetchRequest
		code connect.Code
		says []string
	}{
		{"damaged batch", &sluicev1.FetchRequest{Offset: 0}, connect.CodeDataLoss, []string{"corrupt"}},
		{"by timestamp, into damaged objects", &sluicev1.FetchRequest{Start: sluicev1.StartPosition_START_POSITION_TIMESTAMP, StartTimestampMs: 1_000_000 + 1}, connect.CodeDataLoss, []string{"corrupt"}},
		{"damaged footer", &sluicev1.FetchRequest{Offset: sealed[1].FirstOffset + 3}, connect.CodeDataLoss, []string{"corrupt", "footer"}},
		{"missing object", &sluicev1.FetchRequest{Offset: sealed[2].FirstOffset + 3}, connect.CodeUnavailable,
			[]string{fmt.Sprintf("ledger %d", sealed[2].ID), missing, "OFFLOADED"}},
	} {
		tc.req.Topic = "d"
		resp, err := cons.Fetch(ctx, connect.NewRequest(tc.req))
		if connect.CodeOf(err) != tc.code {
			t.Fatalf("%s: want %v, got %v %v", tc.name, tc.code, resp, err)
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: the error does not say %q: %v", tc.name, s, err)
			}
		}
	}
	// The intact ledger after them reads on.
	readAll(t, cons, "d", 0, p.Ledgers[3].FirstOffset, n, 500)
}

// Reads of offloaded ledgers take the read budget (partlog's ReadGate:
// index opens and ranged GETs) and stay within the cache bounds: the
// entry cache's bytes, the index cache's count and bytes.
func TestOffloadedReadsBudgetAndCacheBounds(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "b", 1)
	const n = 3000
	e.produce(t, "b", 0, 0, n, 50)
	b := memBucket(t)
	p, sealed := e.sealedLedgers(t, "b", 0)
	for _, ref := range sealed {
		e.offload(t, b, ref.ID, nil)
	}
	end := p.Ledgers[len(p.Ledgers)-1].FirstOffset // the offloaded part
	ctx := context.Background()

	// A gate that refuses: nothing is read from the object store.
	refuse := errors.New("budget spent")
	logs, err := partlog.New(partlog.Config{Objects: b, ReadGate: func(context.Context) (func(), error) { return nil, refuse }}, e.c.Catalog, e.c.Ledgers)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := logs.Read(ctx, "b", 0, 0, partlog.Limits{MaxRecords: 10, MaxBytes: 1 << 20}); !errors.Is(err, refuse) {
		t.Fatalf("a read with the budget spent: want its error, got %v", err)
	}
	if st := logs.Stats(); st.ObjectGets != 0 || st.IndexOpens != 0 {
		t.Fatalf("object reads without the budget: %+v", st)
	}
	logs.Close()

	// Two slots, eight readers from offset 0, small caches.
	const slots, readers = 2, 8
	var mu sync.Mutex
	inFlight, most, calls := 0, 0, 0
	sem := make(chan struct{}, slots)
	gate := func(ctx context.Context) (func(), error) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		mu.Lock()
		inFlight++
		most, calls = max(most, inFlight), calls+1
		mu.Unlock()
		return func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
			<-sem
		}, nil
	}
	const cacheBytes, indexBytes = 8 << 10, 4 << 10
	logs, err = partlog.New(partlog.Config{Objects: b, ReadGate: gate, CacheBytes: cacheBytes,
		Segments: partlog.SegmentConfig{IndexCacheBytes: indexBytes, MaxIndexes: 2, ReadBytes: 4 << 10}}, e.c.Catalog, e.c.Ledgers)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := int64(0); next < end; {
				res, err := logs.Read(ctx, "b", 0, next, partlog.Limits{MaxRecords: 100, MaxBytes: 1 << 20})
				if err != nil {
					errs <- fmt.Errorf("read at %d: %w", next, err)
					return
				}
				for _, r := range res.Records {
					if r.Offset != next || string(r.Value) != fmt.Sprintf("v%d", next) {
						errs <- fmt.Errorf("at %d got offset %d value %q", next, r.Offset, r.Value)
						return
					}
					next++
				}
				if len(res.Records) == 0 {
					errs <- fmt.Errorf("read at %d: no record", next)
					return
				}
				if st := logs.Stats(); st.CacheBytes > cacheBytes || st.Indexes > 2 || st.IndexBytes > indexBytes {
					errs <- fmt.Errorf("caches beyond their bounds: %+v", st)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := logs.Stats()
	mu.Lock()
	defer mu.Unlock()
	if most > slots || uint64(calls) < st.ObjectGets+st.IndexOpens || st.ObjectGets == 0 || st.IndexOpens < uint64(len(sealed)) {
		t.Fatalf("%d budget calls, at most %d at once (slots %d); stats %+v", calls, most, slots, st)
	}
}

// A segment with gaps (what a key compaction leaves: offsets kept, records
// dropped, possibly up to the ledger's end) reads as the records it holds,
// in order, with next_offset moving over the gaps to the next ledger.
func TestFetchOffloadedLedgerWithGaps(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "g", 1)
	const n = 3000
	e.produce(t, "g", 0, 0, n, 50)
	b := memBucket(t)
	p, sealed := e.sealedLedgers(t, "g", 0)
	m, err := e.c.Catalog.GetLedger(context.Background(), sealed[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	last := int(m.LastEntry)
	if last < 4 {
		t.Fatalf("ledger %d has %d entries; want several", m.ID, last+1)
	}
	// Keep the odd entries but the last: gaps at the start, between
	// entries, and up to the ledger's end.
	keep := func(i int) bool { return i%2 == 1 && i < last }
	ents, err := e.c.Ledgers.ReadEntries(context.Background(), m.ID, 0, m.LastEntry)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i, p := range ents {
		for rest := p; keep(i) && len(rest) > 0; {
			bt, r, err := record.Split(rest)
			if err != nil {
				t.Fatal(err)
			}
			for o := bt.BaseOffset(); o <= bt.LastOffset(); o++ {
				want = append(want, o)
			}
			rest = r
		}
	}
	if len(want) == 0 || want[0] == 0 || want[len(want)-1] >= m.LastOffset {
		t.Fatalf("the gaps are not where the test wants them: %d records from %v", len(want), want[:min(1, len(want))])
	}
	e.offloadSome(t, b, m.ID, keep, nil)
	_, cons := e.objectCopy(t, fetch.Config{}, b)
	ctx := context.Background()
	var got []int64
	for next := int64(0); next < p.Ledgers[1].FirstOffset; {
		resp, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "g", Offset: next, MaxRecords: 20}))
		if err != nil {
			t.Fatalf("fetch at %d: %v", next, err)
		}
		if resp.Msg.NextOffset <= next {
			t.Fatalf("fetch at %d: next_offset %d does not move", next, resp.Msg.NextOffset)
		}
		for _, r := range resp.Msg.Records {
			if r.Offset < next || r.Offset >= resp.Msg.NextOffset {
				t.Fatalf("fetch at %d: record %d outside [%d, %d)", next, r.Offset, next, resp.Msg.NextOffset)
			}
			checkRecord(t, r, r.Offset)
			got = append(got, r.Offset)
		}
		next = resp.Msg.NextOffset
	}
	// The records are exactly those of the kept entries, in order.
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d records %v..., want %d %v...", len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
	}
	// Reading on crosses into the next ledger.
	readAll(t, cons, "g", 0, p.Ledgers[1].FirstOffset, p.Ledgers[1].FirstOffset+50, 25)
}

// A partition whose tail ledger was offloaded (sealed, idle past the
// offload age, bookie copies gone) can be written again: the writer that
// takes it over reads back only what is still on the bookies. (Before, the
// takeover failed for good: "rebuild producer state: no replica returned
// the entry".) An idempotent producer's state from before the offloaded
// ledger is not read back: the SDK starts its sequence over.
func TestWritingAfterTheTailWasOffloaded(t *testing.T) {
	e := startCluster(t, smallLedgers())
	e.createTopic(t, "idle", 1)
	ctx := context.Background()
	c, err := sluice.NewClient(strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := c.NewProducer(sluice.WithDeliveryTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close(ctx)
	send := func(v string) int64 {
		t.Helper()
		res, err := prod.ProduceSync(ctx, &sluice.Record{Topic: "idle", Partition: 0, Value: []byte(v)})
		if err != nil {
			t.Fatalf("send %s: %v", v, err)
		}
		return res.Offset
	}
	for i := range 20 {
		send(fmt.Sprintf("before-%d", i))
	}
	part, err := e.c.Catalog.GetPartition(ctx, "idle", 0)
	if err != nil {
		t.Fatal(err)
	}
	tail := part.Ledgers[len(part.Ledgers)-1].ID
	// Seal the tail as a takeover would (recovery fences the writer), then
	// offload it and drop its bookie copies.
	if _, err := e.c.Ledgers.Recover(ctx, tail, func(_ int64, payload []byte) (int64, error) { return record.EntryLastOffset(payload) }); err != nil {
		t.Fatal(err)
	}
	b := memBucket(t)
	e.offload(t, b, tail, nil)
	var last int64
	for i := range 20 {
		last = send(fmt.Sprintf("after-%d", i))
	}
	if last != 39 {
		t.Fatalf("the last record went to offset %d; want 39", last)
	}
	logs, err := partlog.New(partlog.Config{Objects: b}, e.c.Catalog, e.c.Ledgers)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var got []string
	for off := int64(0); off < 40; {
		res, err := logs.Read(ctx, "idle", 0, off, partlog.Limits{MaxRecords: 100, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		for _, r := range res.Records {
			got = append(got, string(r.Value))
		}
		off = res.Next
	}
	if len(got) != 40 || got[19] != "before-19" || got[20] != "after-0" || got[39] != "after-19" {
		t.Fatalf("read back %d records %v; want before-0..19, after-0..19", len(got), got)
	}
}
