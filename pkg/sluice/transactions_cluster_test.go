package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/pkg/bookkeeping"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// readCommitted reads every partition of topic with read_committed Readers
// until a Poll brings nothing, and returns the values.
func readCommitted(t *testing.T, c *sluice.Client, topic string, parts int32) []string {
	t.Helper()
	ctx := contextWithTimeout(t, 30*time.Second)
	var out []string
	for p := range parts {
		r, err := c.NewReader(topic, p, sluice.WithReadCommitted(true), sluice.WithFetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for {
			recs, err := r.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			for _, rec := range recs {
				out = append(out, string(rec.Value))
			}
		}
		_ = r.Close()
	}
	sort.Strings(out)
	return out
}

// copyInput creates topics "in" and "out" with parts partitions each and
// produces n records v000, v001, ... to "in" (keyed k0, k1, ... when
// keyed), and returns the producer.
func copyInput(ctx context.Context, t *testing.T, c *sluice.Client, parts int32, n int, keyed bool) *sluice.Producer {
	t.Helper()
	for _, name := range []string{"in", "out"} {
		if _, err := c.CreateTopic(ctx, name, parts, nil); err != nil {
			t.Fatal(err)
		}
	}
	pr := producer(t, c)
	for i := range n {
		var key []byte
		if keyed {
			key = fmt.Appendf(nil, "k%d", i)
		}
		if _, err := pr.ProduceSync(ctx, sluice.NewRecord("in", key, fmt.Appendf(nil, "v%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	return pr
}

// wantCopiedOnce fails unless got (sorted values) is copyInput's n values,
// each once.
func wantCopiedOnce(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d records copied; want %d, each once", len(got), n)
	}
	for i, v := range got {
		if want := fmt.Sprintf("v%03d", i); v != want {
			t.Fatalf("copy %d is %q; want %q (a record lost or copied twice)", i, v, want)
		}
	}
}

// A transaction's records across topics become visible to read_committed
// readers together when it commits, an aborted one's never; a new session
// of the transactional id fences the old one.
func TestClusterTransactionalProducer(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 60*time.Second)
	for _, name := range []string{"a", "b"} {
		if _, err := c.CreateTopic(ctx, name, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.NewTransactionalProducer(ctx, "writer")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.Send(ctx, sluice.NewRecord("a", nil, nil)); !errors.Is(err, sluice.ErrNoTransaction) {
		t.Fatalf("Send before Begin: %v; want ErrNoTransaction", err)
	}
	send := func(values ...string) {
		t.Helper()
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			for _, topic := range []string{"a", "b"} {
				if err := p.Send(ctx, sluice.NewRecord(topic, []byte(v), []byte(v))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	send("c1", "c2", "c3")
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readCommitted(t, c, "a", 2); len(got) != 0 {
		t.Fatalf("read_committed before the commit: %v", got)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	send("x1", "x2")
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	send("c4")
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"a", "b"} {
		if got := fmt.Sprint(readCommitted(t, c, topic, 2)); got != "[c1 c2 c3 c4]" {
			t.Fatalf("read_committed %s: %s; want [c1 c2 c3 c4]", topic, got)
		}
	}

	// A new session fences this one.
	send("z")
	p2, err := c.NewTransactionalProducer(ctx, "writer")
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close(ctx)
	if err := p.Commit(ctx); !errors.Is(err, sluice.ErrProducerFenced) {
		t.Fatalf("Commit of the fenced session: %v; want ErrProducerFenced", err)
	}
	if got := fmt.Sprint(readCommitted(t, c, "a", 2)); got != "[c1 c2 c3 c4]" {
		t.Fatalf("read_committed after the fenced session: %s", got)
	}
}

// A TransactionalProducer outlives its producer id's epochs: the commit
// whose bump would reach the last epoch answers with a new producer id,
// which the producer goes on with.
func TestClusterTransactionalProducerOutlivesTheEpochSpace(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 60*time.Second)
	if _, err := c.CreateTopic(ctx, "a", 1, nil); err != nil {
		t.Fatal(err)
	}
	// As if the transactional id had ended 32,764 transactions: the
	// InitProducer's bump gives 32765.
	pid, err := tc.c.Bookkeeping.AllocateProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.c.Bookkeeping.PutTxn(ctx, bookkeeping.Txn{TransactionalID: "worn", ProducerID: pid, Epoch: 32764, Status: bookkeeping.TxnCompleteCommit}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewTransactionalProducer(ctx, "worn")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var sessions []string
	for i := range 3 {
		sessions = append(sessions, fmt.Sprintf("%d/%d", p.ProducerID(), p.Epoch()))
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		if err := p.Send(ctx, sluice.NewRecord("a", nil, fmt.Appendf(nil, "v%d", i))); err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatalf("commit %d at %s: %v", i, sessions[i], err)
		}
	}
	next := p.ProducerID()
	if want := fmt.Sprintf("[%d/32765 %d/32766 %d/0]", pid, pid, next); fmt.Sprint(sessions) != want || next == pid {
		t.Fatalf("sessions %v; want %s with a new producer id", sessions, want)
	}
	if got := fmt.Sprint(readCommitted(t, c, "a", 1)); got != "[v0 v1 v2]" {
		t.Fatalf("read_committed: %s; want [v0 v1 v2]", got)
	}
}

// RunTransactions copies a topic exactly once while the copiers of the
// group come and go: every input record's copy is in the output once.
func TestClusterRunTransactionsCopiesOnce(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 120*time.Second)
	const parts, n = 4, 400
	copyInput(ctx, t, c, parts, n, true)
	copier := func(ctx context.Context, name string) error {
		k, err := c.NewConsumer("copiers", []string{"in"}, sluice.WithAutoCommit(0), sluice.WithCommitOnRevoke(false),
			sluice.WithSessionTimeout(3*time.Second), sluice.WithMaxPollRecords(25))
		if err != nil {
			return err
		}
		defer k.Close(context.Background())
		return k.RunTransactions(ctx, "copy", func(ctx context.Context, tp sluice.TopicPartition, recs []sluice.ConsumedRecord, out *sluice.Txn) error {
			for _, r := range recs {
				if err := out.Send(&sluice.Record{Topic: "out", Partition: sluice.AnyPartition, Key: r.Key, Value: r.Value}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// Copier 1 runs alone for a while, then 2 joins, then 1 leaves.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	ctx1, stop1 := context.WithCancel(ctx)
	wg.Go(func() { errs <- copier(ctx1, "one") })
	time.Sleep(500 * time.Millisecond)
	ctx2, stop2 := context.WithCancel(ctx)
	wg.Go(func() { errs <- copier(ctx2, "two") })
	time.Sleep(2 * time.Second)
	stop1()
	waitFor(t, "the copy", 60*time.Second, func() bool { return len(readCommitted(t, c, "out", parts)) >= n })
	stop2()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("copier: %v", err)
		}
	}
	wantCopiedOnce(t, readCommitted(t, c, "out", parts), n)
}

// Keyless records of a transaction go to one partition (the sticky one,
// as the Producer's), not one each: a small transaction touches one
// partition and writes one marker. The next transaction moves on.
func TestClusterTransactionalProducerIsSticky(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 60*time.Second)
	const parts = 8
	if _, err := c.CreateTopic(ctx, "s", parts, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewTransactionalProducer(ctx, "sticky")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	touched := map[int]bool{}
	prev := make([]int64, parts)
	for txn := range 4 {
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if err := p.Send(ctx, sluice.NewRecord("s", nil, fmt.Appendf(nil, "%d-%d", txn, i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := c.DescribeTopic(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		var grew []int
		for i, pi := range info.GetPartitions() {
			if end := pi.GetEndOffset(); end != prev[i] {
				grew = append(grew, i)
				if end-prev[i] != 51 {
					t.Fatalf("transaction %d: partition %d grew by %d; want its 50 records and the marker", txn, i, end-prev[i])
				}
				prev[i] = end
			}
		}
		if len(grew) != 1 {
			t.Fatalf("transaction %d of 50 keyless records touched partitions %v; want one", txn, grew)
		}
		touched[grew[0]] = true
	}
	if len(touched) < 2 {
		t.Fatalf("4 transactions all went to partition %v; want the sticky partition to move on after each", touched)
	}
}

// Send flushes on its own once WithTxnMaxBuffered bytes are buffered: a
// large transaction is written as it goes (and stays invisible to
// read_committed readers until it commits).
func TestClusterTransactionalProducerBoundsItsBuffer(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 60*time.Second)
	if _, err := c.CreateTopic(ctx, "big", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewTransactionalProducer(ctx, "w", sluice.WithTxnMaxBuffered(10)); !errors.Is(err, sluice.ErrInvalidOption) {
		t.Fatalf("WithTxnMaxBuffered(10): %v; want ErrInvalidOption", err)
	}
	p, err := c.NewTransactionalProducer(ctx, "w", sluice.WithTxnMaxBuffered(1024))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := p.Send(ctx, sluice.NewRecord("big", nil, fmt.Appendf(nil, "%0100d", i))); err != nil {
			t.Fatal(err)
		}
	}
	info, err := c.DescribeTopic(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if end := info.GetPartitions()[0].GetEndOffset(); end < 10 {
		t.Fatalf("end offset %d after 3 KB sent with a 1 KiB buffer and no Flush; want the records written", end)
	}
	if got := readCommitted(t, c, "big", 1); len(got) != 0 {
		t.Fatalf("read_committed sees %d records of an open transaction", len(got))
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readCommitted(t, c, "big", 1); len(got) != 30 {
		t.Fatalf("read_committed after the commit: %d records; want 30", len(got))
	}
}

// RunTransactions runs a transaction that failed for a reason a retry may
// clear again (with a new producer session), and ends on fn's own errors:
// the first attempt of each partition's first transaction fails after
// sending its records, as a cut connection would fail it; the copy is
// still exactly once. Then an fn that fails with its own error ends
// RunTransactions with it.
func TestClusterRunTransactionsRetriesTransientFailures(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 120*time.Second)
	const parts, n = 2, 100
	pr := copyInput(ctx, t, c, parts, n, true)
	newConsumer := func() *sluice.Consumer {
		k, err := c.NewConsumer("copiers", []string{"in"}, sluice.WithAutoCommit(0), sluice.WithCommitOnRevoke(false), sluice.WithMaxPollRecords(20))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := newConsumer()
	failed := map[int32]bool{}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- k.RunTransactions(runCtx, "copy", func(ctx context.Context, tp sluice.TopicPartition, recs []sluice.ConsumedRecord, out *sluice.Txn) error {
			for _, r := range recs {
				if err := out.Send(&sluice.Record{Topic: "out", Partition: sluice.AnyPartition, Key: r.Key, Value: r.Value}); err != nil {
					return err
				}
			}
			if !failed[tp.Partition] {
				failed[tp.Partition] = true
				if err := out.Flush(); err != nil {
					return err
				}
				return fmt.Errorf("%w: %w", sluice.ErrTransactionFailed, connect.NewError(connect.CodeUnavailable, errors.New("connection cut (test)")))
			}
			return nil
		})
	}()
	waitFor(t, "the copy", 60*time.Second, func() bool { return len(readCommitted(t, c, "out", parts)) >= n })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("RunTransactions: %v", err)
	}
	_ = k.Close(ctx)
	if len(failed) != parts {
		t.Fatalf("%d partitions had their first transaction failed; want %d", len(failed), parts)
	}
	wantCopiedOnce(t, readCommitted(t, c, "out", parts), n)

	// fn's own error ends RunTransactions.
	if _, err := pr.ProduceSync(ctx, sluice.NewRecord("in", []byte("k"), []byte("more"))); err != nil {
		t.Fatal(err)
	}
	k = newConsumer()
	defer k.Close(ctx)
	boom := errors.New("boom")
	err := k.RunTransactions(ctx, "copy", func(context.Context, sluice.TopicPartition, []sluice.ConsumedRecord, *sluice.Txn) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("RunTransactions with fn failing: %v; want fn's error", err)
	}
}

// A transaction the coordinator aborts for its timeout fails (it does not
// fence the producer, KIP-588) while the partition is still leased here:
// RunTransactions must not go on past the records it consumed and could
// not commit (they would be lost), so it runs them again from the
// committed offset.
func TestClusterRunTransactionsRunsAgainWhenTimedOutWhileLeased(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 120*time.Second)
	const n = 60
	copyInput(ctx, t, c, 1, n, false)
	k, err := c.NewConsumer("copiers", []string{"in"}, sluice.WithAutoCommit(0), sluice.WithCommitOnRevoke(false), sluice.WithMaxPollRecords(10))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	calls := 0
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- k.RunTransactions(runCtx, "copy", func(ctx context.Context, tp sluice.TopicPartition, recs []sluice.ConsumedRecord, out *sluice.Txn) error {
			calls++
			for _, r := range recs {
				if err := out.Send(&sluice.Record{Topic: "out", Partition: 0, Value: r.Value}); err != nil {
					return err
				}
			}
			if calls == 2 {
				// Written, then outlive the transaction timeout: the
				// sweeper aborts it.
				if err := out.Flush(); err != nil {
					return err
				}
				time.Sleep(3 * time.Second)
			}
			return nil
		}, sluice.WithTransactionTimeout(time.Second))
	}()
	waitFor(t, "the copy", 60*time.Second, func() bool { return len(readCommitted(t, c, "out", 1)) >= n })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("RunTransactions: %v", err)
	}
	wantCopiedOnce(t, readCommitted(t, c, "out", 1), n)
}

// The first record of a transaction adds its partition in the background
// (the coordinator's compare-and-set off Commit's path): the transaction is
// ongoing with that partition before anything is flushed, and a commit
// after it stores the records as usual.
func TestClusterTransactionalProducerAddsItsPartitionAhead(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 60*time.Second)
	if _, err := c.CreateTopic(ctx, "ahead", 1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewTransactionalProducer(ctx, "ahead-w")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(ctx, sluice.NewRecord("ahead", nil, []byte("v0"))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := tc.c.Bookkeeping.GetTxn(ctx, "ahead-w")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status == bookkeeping.TxnOngoing && len(rec.Partitions) == 1 && rec.Partitions[0].Partition == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the first Send, with nothing flushed, the record is %+v; want the transaction ongoing with partition 0", rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := readCommitted(t, c, "ahead", 1); len(got) != 0 {
		t.Fatalf("read_committed sees %v before the commit", got)
	}
	if err := p.Send(ctx, sluice.NewRecord("ahead", nil, []byte("v1"))); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readCommitted(t, c, "ahead", 1); len(got) != 2 {
		t.Fatalf("read_committed after the commit: %v; want v0 and v1", got)
	}
}

// With a linger, Send writes what waited that long in the background: the
// records are stored (still invisible to read_committed readers) before any
// Flush, the transaction stays on its sticky partition, and Commit makes
// them all visible.
func TestClusterTransactionalProducerSendsAhead(t *testing.T) {
	tc := startCluster(t, nil)
	c := tc.client()
	ctx := contextWithTimeout(t, 60*time.Second)
	if _, err := c.CreateTopic(ctx, "linger", 4, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewTransactionalProducer(ctx, "bad", sluice.WithTxnLinger(-time.Millisecond)); !errors.Is(err, sluice.ErrInvalidOption) {
		t.Fatalf("WithTxnLinger(-1ms): %v; want ErrInvalidOption", err)
	}
	p, err := c.NewTransactionalProducer(ctx, "linger-w", sluice.WithTxnLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	stored := func() int64 {
		info, err := c.DescribeTopic(ctx, "linger")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, part := range info.GetPartitions() {
			n += part.GetEndOffset()
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; stored() == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d records sent over 10 s with a 1 ms linger and no Flush; none stored", i)
		}
		if err := p.Send(ctx, sluice.NewRecord("linger", nil, fmt.Appendf(nil, "v%03d", i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := readCommitted(t, c, "linger", 4); len(got) != 0 {
		t.Fatalf("read_committed sees %d records of an open transaction", len(got))
	}
	for i := range 20 {
		if err := p.Send(ctx, sluice.NewRecord("linger", nil, fmt.Appendf(nil, "w%03d", i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := readCommitted(t, c, "linger", 4)
	if n := stored(); len(got) < 21 || int64(len(got)) > n {
		t.Fatalf("read_committed after the commit: %d records (%d offsets stored); want every record sent", len(got), n)
	}
	info, err := c.DescribeTopic(ctx, "linger")
	if err != nil {
		t.Fatal(err)
	}
	touched := 0
	for _, part := range info.GetPartitions() {
		if part.GetEndOffset() > 0 {
			touched++
		}
	}
	if touched != 1 {
		t.Fatalf("the transaction's keyless records went to %d partitions; want its one sticky partition", touched)
	}
}

// countingTransport counts the RPCs of a client by method name and, when
// refuse is set, answers the ones named so with HTTP 404 (a server
// without the method: UNIMPLEMENTED).
type countingTransport struct {
	next   http.RoundTripper
	refuse string
	mu     sync.Mutex
	calls  map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	method := path.Base(r.URL.Path)
	c.mu.Lock()
	c.calls[method]++
	c.mu.Unlock()
	if method == c.refuse {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Proto: "HTTP/2.0", ProtoMajor: 2,
			Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	}
	return c.next.RoundTrip(r)
}

func (c *countingTransport) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

// A commit whose last batch is the only one left stores it in the commit
// call (CommitTxn: no ProduceStream, no EndTxn), and a producer whose
// server has no CommitTxn stores it first and ends with EndTxn, asking
// once.
func TestClusterTransactionalProducerCommitsItsLastBatchInOneCall(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := contextWithTimeout(t, 60*time.Second)
	if _, err := tc.client().CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	for _, refuse := range []string{"", "CommitTxn"} {
		ct := &countingTransport{next: &http.Transport{Protocols: &h2c}, refuse: refuse, calls: map[string]int{}}
		c := tc.client(sluice.WithHTTPClient(&http.Client{Transport: ct}))
		p, err := c.NewTransactionalProducer(ctx, "writer-"+refuse)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := p.Begin(); err != nil {
				t.Fatal(err)
			}
			for j := range 3 {
				if err := p.Send(ctx, sluice.NewRecord("t", nil, fmt.Appendf(nil, "%s%d%d", refuse, i, j))); err != nil {
					t.Fatal(err)
				}
			}
			ct.take()
			if err := p.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := ct.take()
			delete(got, "AddPartitionsToTxn") // sent by Send, in the background
			var want map[string]int
			switch {
			case refuse == "":
				want = map[string]int{"CommitTxn": 1}
			case i == 0:
				want = map[string]int{"CommitTxn": 1, "ProduceStream": 1, "EndTxn": 1}
			default:
				want = map[string]int{"ProduceStream": 1, "EndTxn": 1}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("server without %q, commit %d: calls %v; want %v", refuse, i, got, want)
			}
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(readCommitted(t, tc.client(), "t", 1)); got != "[00 01 02 10 11 12 CommitTxn00 CommitTxn01 CommitTxn02 CommitTxn10 CommitTxn11 CommitTxn12]" {
		t.Fatalf("read_committed: %s", got)
	}
}

// A commit names where the next transaction writes (the next sticky
// partition, the partitions keys chose): the coordinator opens it with
// them, so a producer that keeps writing there adds no partition after
// its first transaction — one coordinator write per transaction.
func TestClusterTransactionalProducerOpensItsNextTransaction(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := contextWithTimeout(t, 60*time.Second)
	if _, err := tc.client().CreateTopic(ctx, "t", 4, nil); err != nil {
		t.Fatal(err)
	}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	ct := &countingTransport{next: &http.Transport{Protocols: &h2c}, calls: map[string]int{}}
	c := tc.client(sluice.WithHTTPClient(&http.Client{Transport: ct}))
	p, err := c.NewTransactionalProducer(ctx, "sticky")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	commit := func(keys ...string) {
		t.Helper()
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			var key []byte
			if k != "" {
				key = []byte(k)
			}
			if err := p.Send(ctx, sluice.NewRecord("t", key, []byte(k+"v"))); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		commit("", "", "")
	}
	if got := ct.take()["AddPartitionsToTxn"]; got != 1 {
		t.Fatalf("5 keyless transactions added partitions %d times; want 1 (the first: each commit opens the next with its sticky partition)", got)
	}
	commit("a", "b")
	ct.take()
	commit("a", "b", "a")
	if got := ct.take()["AddPartitionsToTxn"]; got != 0 {
		t.Fatalf("a transaction writing the keys of the one before added partitions %d times; want 0", got)
	}
	if got := len(readCommitted(t, tc.client(), "t", 4)); got != 20 {
		t.Fatalf("read_committed: %d records, want 20", got)
	}
}

// A transaction open past its timeout is aborted by the coordinator, and
// the producer is not fenced (KIP-588): Commit fails with ErrTxnTimedOut,
// Abort succeeds and the next transaction commits. A producer idle past
// its timeout after a commit (whose next transaction the coordinator
// opened, then aborted) goes on without an error.
func TestClusterTransactionalProducerSurvivesItsTimeout(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := contextWithTimeout(t, 60*time.Second)
	if _, err := tc.client().CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := tc.client()
	p, err := c.NewTransactionalProducer(ctx, "slow", sluice.WithTransactionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	send := func(v string) {
		t.Helper()
		if err := p.Send(ctx, sluice.NewRecord("t", nil, []byte(v))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	send("first")
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Idle past the timeout: the transaction the commit opened is aborted.
	time.Sleep(3 * time.Second)
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	send("after idle")
	if err := p.Commit(ctx); err != nil {
		t.Fatalf("Commit after idling past the timeout: %v", err)
	}
	// A transaction that outlives its timeout.
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	send("too slow")
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	err = p.Commit(ctx)
	if !errors.Is(err, sluice.ErrTxnTimedOut) || !errors.Is(err, sluice.ErrTransactionFailed) || errors.Is(err, sluice.ErrProducerFenced) {
		t.Fatalf("Commit past the timeout: %v; want ErrTransactionFailed wrapping ErrTxnTimedOut", err)
	}
	if err := p.Abort(ctx); err != nil {
		t.Fatalf("Abort of the timed-out transaction: %v", err)
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	send("last")
	if err := p.Commit(ctx); err != nil {
		t.Fatalf("Commit after the timed-out transaction: %v", err)
	}
	if got := fmt.Sprint(readCommitted(t, tc.client(), "t", 1)); got != "[after idle first last]" {
		t.Fatalf("read_committed: %s", got)
	}
	// A newer session still fences this one for good.
	if _, err := c.NewTransactionalProducer(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	send("zombie")
	if err := p.Commit(ctx); !errors.Is(err, sluice.ErrProducerFenced) {
		t.Fatalf("Commit of a fenced producer: %v; want ErrProducerFenced", err)
	}
}
