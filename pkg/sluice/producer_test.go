package sluice_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/record/partition"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// collector gathers the results of async produces, indexed by produce
// order, and checks that callbacks come in per-partition produce order.
type collector struct {
	t       *testing.T
	mu      sync.Mutex
	results []sluice.Result
	got     []bool
	last    map[int32]int // per partition: index of the last callback
	n       atomic.Int64
	errs    atomic.Int64
}

func newCollector(t *testing.T, n int) *collector {
	return &collector{t: t, results: make([]sluice.Result, n), got: make([]bool, n), last: make(map[int32]int)}
}

func (c *collector) cb(i int) func(sluice.Result) {
	return func(r sluice.Result) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.got[i] {
			c.t.Errorf("record %d: second callback %+v", i, r)
		}
		c.got[i], c.results[i] = true, r
		if r.Err == nil {
			if prev, ok := c.last[r.Partition]; ok && prev > i {
				c.t.Errorf("partition %d: callback of record %d after record %d", r.Partition, i, prev)
			}
			c.last[r.Partition] = i
		} else {
			c.errs.Add(1)
		}
		c.n.Add(1)
	}
}

// checkDense checks every record succeeded and, per partition, offsets are
// 0, 1, 2, ... in produce order; it returns the produce indexes per
// partition in offset order.
func (c *collector) checkDense() map[int32][]int {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	byPart := make(map[int32][]int)
	for i, r := range c.results {
		if !c.got[i] {
			c.t.Fatalf("record %d: no callback", i)
		}
		if r.Err != nil {
			c.t.Fatalf("record %d: %v", i, r.Err)
		}
		if want := int64(len(byPart[r.Partition])); r.Offset != want {
			c.t.Fatalf("record %d: offset %d in partition %d; want %d (dense, in produce order)", i, r.Offset, r.Partition, want)
		}
		byPart[r.Partition] = append(byPart[r.Partition], i)
	}
	return byPart
}

// Records across partitions — keyed, keyless (sticky) and explicit — are
// all acknowledged with dense offsets in produce order per partition; keys
// land where Kafka's murmur2 puts them; the ledgers hold exactly these
// records; hooks see every batch.
func TestProduceAcrossPartitions(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const parts = 4
	if _, err := c.CreateTopic(ctx, "orders", parts, nil); err != nil {
		t.Fatal(err)
	}
	var sent, acked, ackedRecords atomic.Int64
	p := producer(t, c, sluice.WithLinger(2*time.Millisecond), sluice.WithBatchBytes(8<<10), sluice.WithHooks(sluice.Hooks{
		OnBatchSent:  func(sluice.BatchInfo) { sent.Add(1) },
		OnBatchAcked: func(b sluice.BatchInfo) { acked.Add(1); ackedRecords.Add(int64(b.Records)) },
	}))

	const n = 3000
	col := newCollector(t, n)
	recs := make([]*sluice.Record, n)
	for i := range n {
		r := sluice.NewRecord("orders", nil, fmt.Appendf(nil, "value-%d-%s", i, strings.Repeat("x", i%50)))
		switch i % 3 {
		case 0:
			r.Key = fmt.Appendf(nil, "key-%d", i%17)
		case 2:
			r.Partition = int32(i % parts)
		}
		r.Headers = []sluice.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}
		recs[i] = r
		p.Produce(ctx, r, col.cb(i))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := col.n.Load(); got != n {
		t.Fatalf("Flush returned with %d of %d callbacks done", got, n)
	}
	byPart := col.checkDense()
	for i, r := range col.results {
		switch i % 3 {
		case 0:
			if want := partition.ForKey(recs[i].Key, parts); r.Partition != want {
				t.Fatalf("record %d key %q: partition %d; murmur2 says %d", i, recs[i].Key, r.Partition, want)
			}
		case 2:
			if r.Partition != int32(i%parts) {
				t.Fatalf("record %d: partition %d; asked for %d", i, r.Partition, i%parts)
			}
		}
		if r.Duplicate {
			t.Fatalf("record %d: duplicate without any retry", i)
		}
	}
	if ackedRecords.Load() != n || sent.Load() < acked.Load() || acked.Load() < parts {
		t.Fatalf("hooks: %d sent, %d acked with %d records", sent.Load(), acked.Load(), ackedRecords.Load())
	}

	// The stored records are exactly these, in this order.
	closeProducer(t, p)
	tc.restart()
	for part := range int32(parts) {
		stored := tc.readPartition("orders", int(part))
		want := byPart[part]
		if len(stored) != len(want) {
			t.Fatalf("partition %d holds %d records; want %d", part, len(stored), len(want))
		}
		for j, i := range want {
			s := stored[j]
			if string(s.Value) != string(recs[i].Value) || string(s.Key) != string(recs[i].Key) ||
				len(s.Headers) != 1 || string(s.Headers[0].Value) != strconv.Itoa(i) {
				t.Fatalf("partition %d offset %d holds %q/%q; want record %d", part, j, s.Key, s.Value, i)
			}
		}
	}
}

func closeProducer(t *testing.T, p *sluice.Producer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Idempotent retries do not duplicate: the cluster is stopped and started
// again (same directory and address) while records are being produced; the
// producer reconnects and resends what was unacknowledged, the server
// deduplicates, and afterwards every record is stored exactly once, in
// produce order per partition.
func TestRestartMidStreamNoDuplicates(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const parts = 3
	if _, err := c.CreateTopic(ctx, "restart", parts, nil); err != nil {
		t.Fatal(err)
	}
	var retried, streamErrs atomic.Int64
	// A small buffer keeps the producer from running far ahead of the
	// acknowledgements (Produce blocks when it is full).
	p := producer(t, c, sluice.WithLinger(time.Millisecond), sluice.WithBatchBytes(4<<10), sluice.WithMaxBufferedBytes(64<<10),
		sluice.WithRetryBackoff(5*time.Millisecond, 100*time.Millisecond),
		sluice.WithHooks(sluice.Hooks{
			OnBatchRetried: func(sluice.BatchInfo, error) { retried.Add(1) },
			OnStreamError:  func(error) { streamErrs.Add(1) },
		}))

	// Produce at a steady pace until told to stop, so that batches are in
	// flight when the server goes away and while it is down.
	const maxRecords = 200_000
	col := newCollector(t, maxRecords)
	stopProducing := make(chan struct{})
	produced := make(chan int)
	go func() {
		i := 0
		defer func() { produced <- i }()
		for ; i < maxRecords; i++ {
			select {
			case <-stopProducing:
				return
			default:
			}
			r := sluice.NewRecord("restart", fmt.Appendf(nil, "k%d", i%11), fmt.Appendf(nil, "r%06d", i))
			p.Produce(ctx, r, col.cb(i))
			if i%50 == 49 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	waitFor(t, "records acknowledged before the restart", 60*time.Second, func() bool { return col.n.Load() >= 1500 })
	tc.restart()
	before := col.n.Load()
	waitFor(t, "records acknowledged after the restart", 60*time.Second, func() bool { return col.n.Load() >= before+1500 })
	close(stopProducing)
	n := <-produced
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	col.results, col.got = col.results[:n], col.got[:n]
	byPart := col.checkDense()
	dups := 0
	for _, r := range col.results {
		if r.Duplicate {
			dups++
		}
	}
	t.Logf("%d records, %d stream errors, %d batch retries, %d records answered as duplicates", n, streamErrs.Load(), retried.Load(), dups)
	if streamErrs.Load() == 0 || retried.Load() == 0 {
		t.Fatal("the restart did not break the stream with batches in flight: the test proved nothing")
	}

	closeProducer(t, p)
	tc.restart()
	seen := make(map[string]int)
	for part := range int32(parts) {
		stored := tc.readPartition("restart", int(part))
		want := byPart[part]
		if len(stored) != len(want) {
			t.Errorf("partition %d holds %d records; want %d", part, len(stored), len(want))
		}
		for j, s := range stored {
			seen[string(s.Value)]++
			if j < len(want) && string(s.Value) != fmt.Sprintf("r%06d", want[j]) {
				t.Fatalf("partition %d offset %d holds %q; want r%06d", part, j, s.Value, want[j])
			}
		}
	}
	for i := range n {
		if v := fmt.Sprintf("r%06d", i); seen[v] != 1 {
			t.Fatalf("%s stored %d times", v, seen[v])
		}
	}
}

// A batch the server refuses for good (here: a value over the server's
// limit, which the client's defaults allow) fails to its callbacks alone;
// the batches behind it, refused as out of order because it is missing,
// are re-sequenced under a bumped epoch and stored, in order.
func TestRefusedBatchBumpsEpoch(t *testing.T) {
	tc := startCluster(t, func(cfg *cluster.Config) { cfg.Ingest.Limits.MaxValueBytes = 1000 })
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "refuse", 1, nil); err != nil {
		t.Fatal(err)
	}
	var bumps atomic.Int64
	p := producer(t, c, sluice.WithLinger(0), sluice.WithHooks(sluice.Hooks{
		OnEpochBump: func(string, int32, int64, int16) { bumps.Add(1) },
	}))
	if _, err := p.ProduceSync(ctx, sluice.NewRecord("refuse", nil, []byte("first"))); err != nil {
		t.Fatal(err)
	}
	values := []string{"a", "b", strings.Repeat("x", 2000), "c", "d", "e"}
	col := newCollector(t, len(values))
	for i, v := range values {
		p.Produce(ctx, &sluice.Record{Topic: "refuse", Value: []byte(v)}, col.cb(i))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, r := range col.results {
		if i == 2 {
			if connect.CodeOf(r.Err) != connect.CodeInvalidArgument || sluice.IsRetriable(r.Err) {
				t.Fatalf("oversized record: %v; want a final InvalidArgument", r.Err)
			}
			continue
		}
		want := int64(i + 1)
		if i > 2 {
			want--
		}
		if r.Err != nil || r.Offset != want {
			t.Fatalf("record %q: offset %d, %v; want offset %d", values[i], r.Offset, r.Err, want)
		}
	}
	if bumps.Load() == 0 {
		t.Fatal("no epoch bump after the refused batch")
	}
	// Later records keep going under the new epoch.
	if r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "refuse", Value: []byte("last")}); err != nil || r.Offset != 6 {
		t.Fatalf("after the bump: %+v, %v", r, err)
	}
	closeProducer(t, p)
	tc.restart()
	var got []string
	for _, s := range tc.readPartition("refuse", 0) {
		got = append(got, string(s.Value))
	}
	if strings.Join(got, ",") != "first,a,b,c,d,e,last" {
		t.Fatalf("stored %v", got)
	}
}

// A record that cannot be delivered in time fails with ErrDeliveryTimeout
// (retriable for the caller); once the server is back the producer
// resumes, and the sequence hole the failed batch may have left is probed
// and resolved with an epoch bump (stored or not, nothing is written twice).
func TestDeliveryTimeout(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "slow", 1, nil); err != nil {
		t.Fatal(err)
	}
	var bumps atomic.Int64
	p := producer(t, c, sluice.WithLinger(0), sluice.WithDeliveryTimeout(300*time.Millisecond),
		sluice.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond),
		sluice.WithHooks(sluice.Hooks{OnEpochBump: func(string, int32, int64, int16) { bumps.Add(1) }}))
	if _, err := p.ProduceSync(ctx, &sluice.Record{Topic: "slow", Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	tc.stop()
	start := time.Now()
	_, err := p.ProduceSync(ctx, &sluice.Record{Topic: "slow", Value: []byte("lost")})
	if !errors.Is(err, sluice.ErrDeliveryTimeout) || !sluice.IsRetriable(err) {
		t.Fatalf("produce while down: %v; want ErrDeliveryTimeout", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("failed after %v; want about the delivery timeout", d)
	}
	tc.start()
	r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "slow", Value: []byte("after")})
	if err != nil {
		t.Fatal(err)
	}
	closeProducer(t, p)
	tc.restart()
	var got []string
	for _, s := range tc.readPartition("slow", 0) {
		got = append(got, string(s.Value))
	}
	// "lost" was never received by the server while it was down: "after",
	// sent with the next sequence, was refused as out of order, which
	// confirmed the hole; the epoch was bumped and "after" resent at 0.
	if strings.Join(got, ",") != "before,after" || r.Offset != 1 || bumps.Load() != 1 {
		t.Fatalf("stored %v, last offset %d, %d epoch bumps", got, r.Offset, bumps.Load())
	}
}

// Errors before a record is buffered come back at once and are classified:
// an unknown topic is NotFound (not retriable), an out-of-range partition
// and an oversized key are invalid records.
func TestProduceErrors(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "known", 2, nil); err != nil {
		t.Fatal(err)
	}
	p := producer(t, c)

	_, err := p.ProduceSync(ctx, sluice.NewRecord("unknown", nil, []byte("v")))
	if connect.CodeOf(err) != connect.CodeNotFound || !errors.Is(err, sluice.ErrUnknownTopic) || sluice.IsRetriable(err) {
		t.Fatalf("unknown topic: %v; want NotFound", err)
	}
	_, err = p.ProduceSync(ctx, &sluice.Record{Topic: "known", Partition: 2, Value: []byte("v")})
	if !errors.Is(err, sluice.ErrInvalidRecord) || !errors.Is(err, partition.ErrOutOfRange) {
		t.Fatalf("partition 2 of 2: %v", err)
	}
	_, err = p.ProduceSync(ctx, &sluice.Record{Topic: "known", Key: make([]byte, 70<<10)})
	var fe *record.FormatError
	if !errors.Is(err, sluice.ErrInvalidRecord) || !errors.As(err, &fe) || !strings.HasSuffix(fe.Field, ".key") {
		t.Fatalf("oversized key: %v", err)
	}
	_, err = p.ProduceSync(ctx, &sluice.Record{Value: []byte("v")})
	if !errors.Is(err, sluice.ErrInvalidRecord) {
		t.Fatalf("no topic: %v", err)
	}
	// A record larger than the batch size goes in a batch of its own.
	big := make([]byte, 600<<10)
	if r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "known", Value: big}); err != nil || r.Partition != 0 || r.Offset != 0 {
		t.Fatalf("600 KiB record: %+v, %v", r, err)
	}

	// Admin helpers.
	info, err := c.DescribeTopic(ctx, "known")
	if err != nil || len(info.GetPartitions()) != 2 {
		t.Fatalf("describe: %v, %v", info, err)
	}
	topics, err := c.ListTopics(ctx)
	if err != nil || len(topics) != 1 || topics[0].GetName() != "known" {
		t.Fatalf("list: %v, %v", topics, err)
	}
	if err := c.DeleteTopic(ctx, "known"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeTopic(ctx, "known"); !errors.Is(err, sluice.ErrUnknownTopic) {
		t.Fatalf("describe after delete: %v", err)
	}
}

// A record over a server limit the SDK cannot see (here the server's
// request size limit, below the topic's max.message.bytes) fails at once
// with the server's INVALID_ARGUMENT: it is not retried until the delivery
// timeout, and the records after it are stored.
func TestProduceOverServerLimitFailsAtOnce(t *testing.T) {
	tc := startCluster(t, func(cfg *cluster.Config) { cfg.Server.MaxRequestBytes = 256 << 10 })
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := producer(t, c)
	big := make([]byte, 300<<10)
	_, _ = rand.Read(big) // incompressible: the request stays over the limit
	began := time.Now()
	_, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Value: big})
	if connect.CodeOf(err) != connect.CodeInvalidArgument || sluice.IsRetriable(err) || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("a record over the server's request limit: %v; want InvalidArgument naming the limit", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the refusal took %v: retried?", d)
	}
	if _, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Value: []byte("small")}); err != nil {
		t.Fatalf("the next record: %v", err)
	}
}

// Flush waits for every callback; Close flushes, then refuses records;
// Close is idempotent. With the Connect protocol too.
func TestFlushAndClose(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client(sluice.WithConnect())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "fc", 2, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(sluice.WithLinger(time.Minute)) // only Flush and Close send
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	col := newCollector(t, n)
	for i := range n {
		p.Produce(ctx, sluice.NewRecord("fc", nil, []byte("a")), col.cb(i))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if col.n.Load() != n {
		t.Fatalf("Flush returned after %d of %d callbacks", col.n.Load(), n)
	}
	col.checkDense()

	col2 := newCollector(t, n)
	for i := range n {
		p.Produce(ctx, sluice.NewRecord("fc", []byte("k"), []byte("b")), col2.cb(i))
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if col2.n.Load() != n || col2.errs.Load() != 0 {
		t.Fatalf("Close returned after %d of %d callbacks (%d errors)", col2.n.Load(), n, col2.errs.Load())
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	called := false
	p.Produce(ctx, sluice.NewRecord("fc", nil, nil), func(r sluice.Result) {
		called = true
		if !errors.Is(r.Err, sluice.ErrClosed) {
			t.Errorf("produce after Close: %v", r.Err)
		}
	})
	if !called {
		t.Fatal("callback of a refused record not called before Produce returned")
	}
}

// With the buffer full and the server gone, Produce blocks until its
// context ends (ErrBufferFull), and Close with a short context fails the
// buffered records with ErrClosed and still stops every goroutine (goleak).
func TestBufferFullAndCloseGivingUp(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "full", 1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(sluice.WithBatchBytes(1<<10), sluice.WithMaxBufferedBytes(4<<10), sluice.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ProduceSync(ctx, sluice.NewRecord("full", nil, []byte("warm up"))); err != nil {
		t.Fatal(err)
	}
	tc.stop()
	col := newCollector(t, 3)
	for i := range 3 {
		p.Produce(ctx, sluice.NewRecord("full", nil, make([]byte, 1000)), col.cb(i))
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	var full error
	p.Produce(short, sluice.NewRecord("full", nil, make([]byte, 2000)), func(r sluice.Result) { full = r.Err })
	cancelShort()
	if !errors.Is(full, sluice.ErrBufferFull) || !errors.Is(full, context.DeadlineExceeded) {
		t.Fatalf("produce into a full buffer: %v", full)
	}
	closeCtx, cancelClose := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelClose()
	if err := p.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v; want the context's error", err)
	}
	for i, r := range col.results {
		if !col.got[i] || !errors.Is(r.Err, sluice.ErrClosed) {
			t.Fatalf("record %d after Close gave up: %+v", i, r)
		}
	}
}
