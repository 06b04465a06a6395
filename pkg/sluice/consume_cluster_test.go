package sluice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// produceSpread produces n records to topic, record i to partition
// i % partitions with value "v<i>", and waits for all of them.
func produceSpread(t *testing.T, c *sluice.Client, topic string, partitions, n int) {
	t.Helper()
	p := producer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		r := &sluice.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))}
		p.Produce(ctx, r, func(res sluice.Result) {
			defer wg.Done()
			if res.Err != nil {
				errs <- res.Err
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("produce: %v", err)
	}
}

// checkPartitionOrder checks that recs (of one partition, in the order
// received) are exactly that partition's records: offsets 0.. dense, and
// the values produced to it in order.
func checkPartitionOrder(t *testing.T, part int32, partitions int, recs []sluice.ConsumedRecord, want int) {
	t.Helper()
	if len(recs) != want {
		t.Fatalf("partition %d: %d records; want %d", part, len(recs), want)
	}
	for i, r := range recs {
		if r.Offset != int64(i) || r.Partition != part {
			t.Fatalf("partition %d: record %d has offset %d (partition %d)", part, i, r.Offset, r.Partition)
		}
		if v := fmt.Sprintf("v%d", i*partitions+int(part)); string(r.Value) != v {
			t.Fatalf("partition %d offset %d: value %q; want %q", part, i, r.Value, v)
		}
	}
}

// A Reader per partition reads everything produced, in order, following
// next_offset, and then waits at the end.
func TestClusterReaderReadsAll(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const parts, n = 3, 600
	if _, err := c.CreateTopic(ctx, "r", parts, nil); err != nil {
		t.Fatal(err)
	}
	produceSpread(t, c, "r", parts, n)
	for p := range int32(parts) {
		r, err := c.NewReader("r", p, sluice.WithFetchMaxRecords(37), sluice.WithFetchMaxWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var got []sluice.ConsumedRecord
		for len(got) < n/parts {
			recs, err := r.Poll(ctx)
			if err != nil {
				t.Fatalf("partition %d after %d records: %v", p, len(got), err)
			}
			got = append(got, recs...)
		}
		checkPartitionOrder(t, p, parts, got, n/parts)
		if r.Offset() != n/parts || r.HighWatermark() != n/parts {
			t.Fatalf("partition %d: offset %d, high watermark %d; want %d", p, r.Offset(), r.HighWatermark(), n/parts)
		}
		if recs, err := r.Poll(ctx); err != nil || len(recs) != 0 {
			t.Fatalf("Poll at the end: %d records, %v", len(recs), err)
		}
		_ = r.Close()
	}
	// Past the end: OUT_OF_RANGE with the valid range.
	r, err := c.NewReader("r", 0, sluice.StartAt(sluice.AtOffset(n/parts+5)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Poll(ctx)
	var oe *sluice.OffsetOutOfRangeError
	if !errors.As(err, &oe) || oe.LogStartOffset != 0 || oe.HighWatermark != n/parts || oe.Offset != n/parts+5 {
		t.Fatalf("Poll past the end: %v; want an OffsetOutOfRangeError with the range 0..%d", err, n/parts)
	}
}

// Two members of a group share the partitions; every record is consumed
// once, in order per partition; their commits leave the group with no lag.
func TestClusterGroupOfTwoConsumesAllOnce(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const parts, n = 4, 800
	if _, err := c.CreateTopic(ctx, "g", parts, nil); err != nil {
		t.Fatal(err)
	}
	var members [2]*sluice.Consumer
	for i := range members {
		k, err := c.NewConsumer("grp", []string{"g"}, sluice.WithCreditWindow(50, sluice.MinCreditBytes),
			sluice.WithMaxPollRecords(20), sluice.WithAutoCommit(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		members[i] = k
		defer func() {
			if err := k.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
	}
	// Produce only once the leases have settled, two each: records
	// consumed during a rebalance may be consumed twice (at-least-once).
	waitFor(t, "two partitions per member", 30*time.Second, func() bool {
		return len(members[0].Assignment()) == 2 && len(members[1].Assignment()) == 2
	})
	produceSpread(t, c, "g", parts, n)

	var mu sync.Mutex
	byPart := make(map[int32][]sluice.ConsumedRecord)
	owner := make(map[int32]int)
	total := 0
	var wg sync.WaitGroup
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	for i, k := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				recs, err := k.Poll(pctx)
				if err != nil {
					if pctx.Err() == nil {
						t.Errorf("member %d Poll: %v", i, err)
					}
					return
				}
				mu.Lock()
				for _, r := range recs {
					if o, ok := owner[r.Partition]; ok && o != i {
						t.Errorf("partition %d consumed by members %d and %d", r.Partition, o, i)
					}
					owner[r.Partition] = i
					byPart[r.Partition] = append(byPart[r.Partition], r)
				}
				total += len(recs)
				if total >= n {
					stop()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("consumed %d of %d records before the deadline", total, n)
	}
	for p := range int32(parts) {
		checkPartitionOrder(t, p, parts, byPart[p], n/parts)
	}
	// The auto-commits (or Close's) store everything: no lag.
	for _, k := range members {
		if _, err := k.Poll(contextWithTimeout(t, 10*time.Millisecond)); err == nil {
			t.Fatal("records after all were consumed")
		}
	}
	for _, k := range members {
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "no lag", 30*time.Second, func() bool {
		d, err := c.DescribeGroup(ctx, "grp")
		if err != nil {
			t.Fatal(err)
		}
		lag := int64(0)
		for _, p := range d.GetPartitions() {
			lag += p.GetLag()
			if p.GetCommittedOffset() < 0 {
				lag++
			}
		}
		return len(d.GetPartitions()) == parts && lag == 0
	})
}

func contextWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A member joining mid-way takes partitions from the first one, which
// commits what it processed when they are revoked (in the background: it
// is not polling then). Nothing is lost; what the first member had
// returned but not processed is consumed again by the second
// (at-least-once), never more than one Poll's worth per partition.
func TestClusterRebalanceCommitsOnRevoke(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const parts, n, pollMax = 4, 400, 10
	if _, err := c.CreateTopic(ctx, "rb", parts, nil); err != nil {
		t.Fatal(err)
	}
	produceSpread(t, c, "rb", parts, n)
	var revoked sync.Map
	newMember := func(name string) *sluice.Consumer {
		k, err := c.NewConsumer("rbg", []string{"rb"}, sluice.WithCreditWindow(20, sluice.MinCreditBytes),
			sluice.WithMaxPollRecords(pollMax), sluice.WithAutoCommit(time.Hour),
			sluice.OnRevoked(func(_ context.Context, ps []sluice.TopicPartition, lost bool) {
				if lost {
					t.Errorf("%s lost %v", name, ps)
				}
				revoked.Store(name, true)
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
		return k
	}
	seen := make(map[[2]int64]int)
	last := make(map[string]map[int32]int64) // member → partition → last offset
	take := func(name string, recs []sluice.ConsumedRecord) {
		if last[name] == nil {
			last[name] = make(map[int32]int64)
		}
		for _, r := range recs {
			if l, ok := last[name][r.Partition]; ok && r.Offset <= l && seen[[2]int64{int64(r.Partition), r.Offset}] == 0 {
				t.Fatalf("%s: partition %d went back from %d to %d", name, r.Partition, l, r.Offset)
			}
			last[name][r.Partition] = r.Offset
			seen[[2]int64{int64(r.Partition), r.Offset}]++
		}
	}
	a := newMember("a")
	waitFor(t, "a leases every partition", 30*time.Second, func() bool { return len(a.Assignment()) == parts })
	for range 5 {
		recs, err := a.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		take("a", recs)
	}
	b := newMember("b")
	waitFor(t, "b leases two partitions", 30*time.Second, func() bool { return len(b.Assignment()) == 2 })
	for len(seen) < n {
		for name, k := range map[string]*sluice.Consumer{"a": a, "b": b} {
			recs, err := k.Poll(contextWithTimeout(t, 50*time.Millisecond))
			if err != nil && ctx.Err() != nil {
				t.Fatalf("%d of %d records consumed: %v", len(seen), n, err)
			}
			take(name, recs)
		}
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	if _, ok := revoked.Load("a"); !ok {
		t.Fatal("a was never told of the revocation")
	}
	// At most the last Poll of a (not yet processed when the revocation
	// came) is consumed again.
	if dups > pollMax {
		t.Fatalf("%d records consumed twice; want at most %d (one Poll)", dups, pollMax)
	}
	t.Logf("%d records consumed twice after the rebalance", dups)
}

// Stored record batches (the default) and per-record messages
// (WithRecordBatches(false)) give the same records: compressed and
// uncompressed batches, headers, timestamps; starts by offset and by time
// inside a batch skip the batch's earlier records; a group consumer with a
// credit window smaller than a batch still reads everything once, in order.
func TestClusterStoredBatchesMatchRecords(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const n = 400
	if _, err := c.CreateTopic(ctx, "sb", 1, nil); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	for half, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		p := producer(t, c, sluice.WithCompression(codec), sluice.WithLinger(20*time.Millisecond))
		var wg sync.WaitGroup
		for i := half * n / 2; i < (half+1)*n/2; i++ {
			wg.Add(1)
			r := &sluice.Record{Topic: "sb", Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat(fmt.Appendf(nil, "v%d;", i), 10),
				Headers: []sluice.Header{{Key: "i", Value: fmt.Append(nil, i)}}, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
			p.Produce(ctx, r, func(res sluice.Result) {
				defer wg.Done()
				if res.Err != nil {
					t.Errorf("produce %d: %v", i, res.Err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	readAll := func(from sluice.Position, opts ...sluice.ReaderOption) []sluice.ConsumedRecord {
		t.Helper()
		r, err := c.NewReader("sb", 0, append(opts, sluice.StartAt(from), sluice.WithFetchMaxRecords(37), sluice.WithFetchMaxWait(10*time.Millisecond))...)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got []sluice.ConsumedRecord
		for r.Offset() < n {
			recs, err := r.Poll(ctx)
			if err != nil {
				t.Fatalf("after %d records: %v", len(got), err)
			}
			got = append(got, recs...)
		}
		return got
	}
	batches := readAll(sluice.Earliest())
	records := readAll(sluice.Earliest(), sluice.WithRecordBatches(false))
	if len(batches) != n || !reflect.DeepEqual(batches, records) {
		t.Fatalf("stored batches gave %d records, per-record delivery %d; equal: %v", len(batches), len(records), reflect.DeepEqual(batches, records))
	}
	for i, r := range batches {
		if r.Offset != int64(i) || string(r.Key) != fmt.Sprintf("k%d", i) || !r.Timestamp.Equal(base.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("record %d: offset %d key %q time %v", i, r.Offset, r.Key, r.Timestamp)
		}
	}
	for _, start := range []int{103, 317} {
		for name, pos := range map[string]sluice.Position{"offset": sluice.AtOffset(int64(start)), "time": sluice.AtTime(base.Add(time.Duration(start) * time.Millisecond))} {
			got := readAll(pos)
			if len(got) != n-start || got[0].Offset != int64(start) {
				t.Fatalf("start at %s %d: %d records from offset %d", name, start, len(got), got[0].Offset)
			}
		}
	}

	k, err := c.NewConsumer("sbg", []string{"sb"}, sluice.WithCreditWindow(7, sluice.MinCreditBytes), sluice.WithMaxPollRecords(20))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	var got []sluice.ConsumedRecord
	for len(got) < n {
		recs, err := k.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll after %d records: %v", len(got), err)
		}
		got = append(got, recs...)
	}
	if !reflect.DeepEqual(got, batches) {
		t.Fatalf("the group consumer's %d records differ from the reader's", len(got))
	}
}
