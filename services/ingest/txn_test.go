package ingest_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/pkg/bookkeeping"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/services/ingest"
)

// txnClient drives one transactional id against a copy, as a client
// would: InitProducer, AddPartitionsToTxn, transactional batches on a
// ProduceStream that names the transactional id, EndTxn.
type txnClient struct {
	t     *testing.T
	prod  sluicev1connect.ProducerServiceClient
	tid   string
	pid   int64
	epoch int32
	seq   map[int32]int32
	corr  uint64
}

func newTxnClient(t *testing.T, url, tid string, timeoutMS int32) (*txnClient, error) {
	c := &txnClient{t: t, prod: sluicev1connect.NewProducerServiceClient(h2cClient(), url, connect.WithGRPC()), tid: tid, seq: map[int32]int32{}}
	resp, err := c.prod.InitProducer(context.Background(), connect.NewRequest(&sluicev1.InitProducerRequest{TransactionalId: tid, TransactionTimeoutMs: timeoutMS}))
	if err != nil {
		return nil, err
	}
	c.pid, c.epoch = resp.Msg.ProducerId, resp.Msg.ProducerEpoch
	return c, nil
}

func (c *txnClient) session() *sluicev1.TxnSession {
	return &sluicev1.TxnSession{TransactionalId: c.tid, ProducerId: c.pid, ProducerEpoch: c.epoch}
}

func (c *txnClient) add(topic string, parts ...int32) error {
	_, err := c.prod.AddPartitionsToTxn(context.Background(), connect.NewRequest(&sluicev1.AddPartitionsToTxnRequest{
		Session: c.session(), Topics: []*sluicev1.TxnTopic{{Topic: topic, Partitions: parts}}}))
	return err
}

// send produces one transactional record to each partition, on one stream.
func (c *txnClient) send(topic string, parts ...int32) error {
	c.t.Helper()
	st := c.prod.ProduceStream(context.Background())
	defer func() { _ = st.CloseRequest(); _ = st.CloseResponse() }()
	req := c.batches(topic, parts...)
	c.corr++
	if err := st.Send(&sluicev1.ProduceStreamRequest{CorrelationId: c.corr, Request: req, ProducerId: c.pid, ProducerEpoch: c.epoch, TransactionalId: c.tid}); err != nil {
		return err
	}
	resp, err := st.Receive()
	if err != nil {
		return err
	}
	if e := resp.GetError(); e != nil {
		return apierr.WithReason(connect.NewError(connect.Code(e.GetCode()), errors.New(e.GetMessage())), e.GetReason(), nil)
	}
	for _, p := range parts {
		c.seq[p]++
	}
	return nil
}

// batches is a request of one transactional record to each partition, at
// the partitions' next sequence numbers (send takes them).
func (c *txnClient) batches(topic string, parts ...int32) *sluicev1.ProduceRequest {
	c.t.Helper()
	req := &sluicev1.ProduceRequest{Topic: topic}
	for _, p := range parts {
		b, err := record.NewBuilder(record.BuilderOptions{Producer: &record.Producer{ID: c.pid, Epoch: int16(c.epoch), BaseSequence: c.seq[p]}, Transactional: true})
		if err != nil {
			c.t.Fatal(err)
		}
		if err := b.Append(&record.Record{Timestamp: 1, Value: fmt.Appendf(nil, "%s-%d-%d", c.tid, c.epoch, c.seq[p])}); err != nil {
			c.t.Fatal(err)
		}
		data, err := b.Build()
		if err != nil {
			c.t.Fatal(err)
		}
		req.Batches = append(req.Batches, &sluicev1.EncodedBatch{Partition: p, Data: data})
	}
	return req
}

func (c *txnClient) end(commit bool) error {
	resp, err := c.prod.EndTxn(context.Background(), connect.NewRequest(&sluicev1.EndTxnRequest{Session: c.session(), Commit: commit}))
	if err != nil {
		return err
	}
	if id := resp.Msg.ProducerId; id != 0 {
		c.pid = id
	}
	c.epoch = resp.Msg.ProducerEpoch
	clear(c.seq)
	return nil
}

// ends returns the end offsets of topic's partitions as the copy at url
// sees them.
func ends(t *testing.T, url, topic string) []int64 {
	t.Helper()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, url)
	resp, err := admin.DescribeTopic(context.Background(), connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: topic}))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, p := range resp.Msg.Topic.Partitions {
		out = append(out, p.EndOffset)
	}
	return out
}

func wantReason(t *testing.T, what string, err error, code connect.Code, reason string) {
	t.Helper()
	if connect.CodeOf(err) != code || apierr.Reason(err) != reason {
		t.Fatalf("%s: %v; want %v with reason %s", what, err, code, reason)
	}
}

// A transaction over partitions written by two copies: the coordinator
// (the copy the client talks to) writes a marker into each, its own
// partitions' directly and the other copy's through PartitionService; a
// partition not added refuses the producer's batches; a newer session of
// the transactional id fences the older one's requests.
func TestTransactionAcrossCopies(t *testing.T) {
	tc := startCluster(t, func(c *cluster.Config) { c.ExtraIngest = 1 })
	ctx := context.Background()
	main, other := tc.url, "http://"+tc.c.Extra[0].Addr()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, main)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 4})); err != nil {
		t.Fatal(err)
	}
	// The other copy takes partitions 2 and 3 by writing them first.
	oprod := sluicev1connect.NewProducerServiceClient(http.DefaultClient, other)
	for _, p := range []int32{2, 3} {
		if _, err := oprod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p, Records: []*sluicev1.Record{{Value: []byte("plain")}}})); err != nil {
			t.Fatal(err)
		}
	}
	c, err := newTxnClient(t, main, "copier", 0)
	if err != nil {
		t.Fatal(err)
	}
	err = c.send("t", 0)
	wantReason(t, "a transactional batch before AddPartitionsToTxn", err, connect.CodeFailedPrecondition, ingest.ReasonInvalidTxnState)

	if err := c.add("t", 0, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.send("t", 0, 1, 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	mainEnds, otherEnds := ends(t, main, "t"), ends(t, other, "t")
	if mainEnds[0] != 2 || mainEnds[1] != 2 || otherEnds[2] != 3 || otherEnds[3] != 3 {
		t.Fatalf("ends before the commit: %v (main), %v (other)", mainEnds, otherEnds)
	}
	if err := c.end(true); err != nil {
		t.Fatal(err)
	}
	if c.epoch != 1 {
		t.Fatalf("epoch after EndTxn: %d; want 1", c.epoch)
	}
	mainEnds, otherEnds = ends(t, main, "t"), ends(t, other, "t")
	if mainEnds[0] != 3 || mainEnds[1] != 3 || otherEnds[2] != 4 || otherEnds[3] != 4 {
		t.Fatalf("ends after the commit: %v (main), %v (other); want one marker more in each partition", mainEnds, otherEnds)
	}

	// The next transaction, at the bumped epoch; partition 1 only.
	if err := c.add("t", 1); err != nil {
		t.Fatal(err)
	}
	err = c.send("t", 0)
	wantReason(t, "a batch for a partition the new transaction did not add", err, connect.CodeFailedPrecondition, ingest.ReasonInvalidTxnState)
	if err := c.send("t", 1); err != nil {
		t.Fatal(err)
	}

	// A new session of "copier" aborts the open transaction (and fences
	// the old session), then starts at a newer epoch.
	_, err = newTxnClient(t, main, "copier", 0)
	wantReason(t, "InitProducer over an open transaction", err, connect.CodeAborted, ingest.ReasonConcurrentTransactions)
	c2, err := newTxnClient(t, main, "copier", 0)
	if err != nil || c2.pid != c.pid || c2.epoch != 3 {
		t.Fatalf("InitProducer once the abort is done: %+v, %v; want producer %d at epoch 3", c2, err, c.pid)
	}
	if e := ends(t, main, "t"); e[1] != 5 {
		t.Fatalf("partition 1 ends at %d; want 5 (the record and the abort marker)", e[1])
	}
	wantReason(t, "the old session's AddPartitionsToTxn", c.add("t", 0), connect.CodeFailedPrecondition, ingest.ReasonProducerFenced)
	wantReason(t, "the old session's EndTxn", c.end(true), connect.CodeFailedPrecondition, ingest.ReasonProducerFenced)
	wantReason(t, "the old session's batch", c.send("t", 1), connect.CodeFailedPrecondition, ingest.ReasonProducerFenced)
}

// Each copy remembers the transaction states it stored (no read on a
// transaction's path), but another copy can move a transactional id on
// meanwhile: a remembered state must never let a fenced session through —
// neither by a request that stores nothing (an add of a partition already
// in) nor by one that stores (EndTxn).
func TestCoordinatorMemoryIsOnlyAHint(t *testing.T) {
	tc := startCluster(t, func(c *cluster.Config) { c.ExtraIngest = 1 })
	ctx := context.Background()
	main, other := tc.url, "http://"+tc.c.Extra[0].Addr()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, main)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	old, err := newTxnClient(t, main, "memo", 0)
	if err != nil {
		t.Fatal(err)
	}
	// A committed transaction, then an open one: main remembers it Ongoing
	// with partition 0 in.
	if err := old.add("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := old.send("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := old.end(true); err != nil {
		t.Fatal(err)
	}
	if err := old.add("t", 0); err != nil {
		t.Fatal(err)
	}
	// A new session through the other copy aborts it and fences old.
	var fresh *txnClient
	for range 50 {
		if fresh, err = newTxnClient(t, other, "memo", 0); connect.CodeOf(err) != connect.CodeAborted {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || fresh.epoch <= old.epoch {
		t.Fatalf("InitProducer through the other copy: %+v, %v; want an epoch above %d", fresh, err, old.epoch)
	}
	wantReason(t, "the fenced session adding a partition main remembers in", old.add("t", 0), connect.CodeFailedPrecondition, ingest.ReasonProducerFenced)
	wantReason(t, "the fenced session's EndTxn on main", old.end(true), connect.CodeFailedPrecondition, ingest.ReasonProducerFenced)
	// The new session goes on through main, whose memory is stale.
	if err := fresh.add("t", 1); err != nil {
		t.Fatal(err)
	}
	fresh.prod = sluicev1connect.NewProducerServiceClient(h2cClient(), main, connect.WithGRPC())
	if err := fresh.send("t", 1); err != nil {
		t.Fatal(err)
	}
	if err := fresh.end(true); err != nil {
		t.Fatalf("the new session's commit through main: %v", err)
	}
}

// A producer id's epochs run out after 32,766 transactions (every EndTxn
// bumps the epoch, KIP-890): the EndTxn whose bump would reach the last
// epoch moves the transactional id to a fresh producer id at epoch 0. The
// transaction commits (its markers at the old id's last epoch end it, and
// read_committed shows it), the client continues under the new id, and the
// old id is fenced, in the coordinator and at the partition.
func TestTransactionsOutliveTheEpochSpace(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	c, err := newTxnClient(t, tc.url, "worn", 0)
	if err != nil {
		t.Fatal(err)
	}
	// As if the producer had ended 32,765 transactions.
	st, err := tc.c.Bookkeeping.GetTxn(ctx, "worn")
	if err != nil {
		t.Fatal(err)
	}
	st.Epoch = 32765
	if _, err := tc.c.Bookkeeping.PutTxn(ctx, st); err != nil {
		t.Fatal(err)
	}
	c.epoch = 32765
	first := c.pid
	commit := func(parts ...int32) {
		t.Helper()
		if err := c.add("t", parts...); err != nil {
			t.Fatalf("AddPartitions at %d/%d: %v", c.pid, c.epoch, err)
		}
		if err := c.send("t", parts...); err != nil {
			t.Fatalf("produce at %d/%d: %v", c.pid, c.epoch, err)
		}
		if err := c.end(true); err != nil {
			t.Fatalf("EndTxn at %d/%d: %v", c.pid, c.epoch, err)
		}
	}
	commit(0)
	if c.pid != first || c.epoch != 32766 {
		t.Fatalf("after a commit at epoch 32765: %d/%d, want %d/32766", c.pid, c.epoch, first)
	}
	commit(0, 1)
	if c.pid == first || c.epoch != 0 {
		t.Fatalf("after a commit at epoch 32766: %d/%d, want a new producer id at epoch 0", c.pid, c.epoch)
	}
	// The replaced id is fenced: by the coordinator, and by the partition
	// (its last marker is at the last epoch).
	old := &txnClient{t: t, prod: c.prod, tid: "worn", pid: first, epoch: 32766, seq: map[int32]int32{}}
	wantReason(t, "AddPartitions of the replaced producer id", old.add("t", 0), connect.CodeFailedPrecondition, ingest.ReasonProducerFenced)
	if err := old.send("t", 0); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("a batch of the replaced producer id: %v, want FAILED_PRECONDITION", err)
	}
	commit(0)
	// Every transaction is visible to read_committed, and none is left
	// open: p0 holds three records and their markers, its LSO at its end.
	offs, next, lso := fetchOffsets(t, tc.url, "t", 0, true, false, 0)
	if fmt.Sprint(offs) != "[0 2 4]" || next != 6 || lso != 6 {
		t.Fatalf("read_committed of p0: records %v, next %d, LSO %d; want [0 2 4], 6, 6", offs, next, lso)
	}
	if e := ends(t, tc.url, "t"); e[0] != 6 || e[1] != 2 {
		t.Fatalf("ends %v, want [6 2]", e)
	}
}

// A transaction left open past its timeout is aborted by the sweeper: its
// partition gets the abort marker, and the producer's EndTxn answers
// TRANSACTION_TIMED_OUT. InitProducer naming the session resumes it at a
// new epoch (KIP-588); naming another producer id is refused, and once the
// resumed session exists the timed-out one is fenced.
func TestTransactionTimeoutAborts(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	c, err := newTxnClient(t, tc.url, "slow", 500)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.add("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.send("t", 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ends(t, tc.url, "t")[0] != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no abort marker 10 s after a 500 ms transaction timeout: end %d", ends(t, tc.url, "t")[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantReason(t, "EndTxn after the timeout's abort", c.end(true), connect.CodeFailedPrecondition, ingest.ReasonTxnTimedOut)
	wantReason(t, "AddPartitions after the timeout's abort", c.add("t", 0), connect.CodeFailedPrecondition, ingest.ReasonTxnTimedOut)
	resume := func(pid int64, epoch int32) (*connect.Response[sluicev1.InitProducerResponse], error) {
		return c.prod.InitProducer(ctx, connect.NewRequest(&sluicev1.InitProducerRequest{TransactionalId: "slow", TransactionTimeoutMs: 500,
			ProducerId: pid, ProducerEpoch: epoch}))
	}
	_, err = resume(c.pid+1, c.epoch)
	wantReason(t, "InitProducer resuming another producer id", err, connect.CodeFailedPrecondition, ingest.ReasonInvalidProducerIDMapping)
	resp, err := resume(c.pid, c.epoch)
	if err != nil {
		t.Fatalf("InitProducer resuming the timed-out session: %v", err)
	}
	if resp.Msg.ProducerId != c.pid || resp.Msg.ProducerEpoch != c.epoch+2 {
		t.Fatalf("resumed session %d/%d, want %d/%d (the timeout's bump, then the resume's)", resp.Msg.ProducerId, resp.Msg.ProducerEpoch, c.pid, c.epoch+2)
	}
	_, err = resume(c.pid, c.epoch)
	wantReason(t, "InitProducer resuming the timed-out session again", err, connect.CodeFailedPrecondition, ingest.ReasonProducerFenced)
	c.epoch = resp.Msg.ProducerEpoch
	clear(c.seq)
	if err := c.add("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.send("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.end(true); err != nil {
		t.Fatalf("a transaction of the resumed session: %v", err)
	}
	if offs, _, _ := fetchOffsets(t, tc.url, "t", 0, true, false, 0); fmt.Sprint(offs) != "[2]" {
		t.Fatalf("read_committed after the resumed session's commit: %v, want [2] (the timed-out record aborted)", offs)
	}
}

// An EndTxn naming next_partitions opens the producer's next transaction
// with them: its batches there are accepted without AddPartitionsToTxn, a
// partition not named still needs it, and the next commit marks them.
func TestEndTxnOpensTheNextTransaction(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 3})); err != nil {
		t.Fatal(err)
	}
	c, err := newTxnClient(t, tc.url, "next", 60_000)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.add("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.send("t", 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.prod.EndTxn(ctx, connect.NewRequest(&sluicev1.EndTxnRequest{Session: c.session(), Commit: true,
		NextPartitions: []*sluicev1.TxnTopic{{Topic: "t", Partitions: []int32{1, 7}}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "next_partitions[0].partitions[1]") {
		t.Fatalf("EndTxn naming a partition the topic lacks: %v, want INVALID_ARGUMENT naming next_partitions[0].partitions[1]", err)
	}
	_, err = c.prod.EndTxn(ctx, connect.NewRequest(&sluicev1.EndTxnRequest{Session: c.session(), Commit: true,
		NextPartitions: []*sluicev1.TxnTopic{{Topic: "nope", Partitions: []int32{1}}}}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("EndTxn naming a topic that does not exist: %v, want NOT_FOUND", err)
	}
	resp, err := c.prod.EndTxn(ctx, connect.NewRequest(&sluicev1.EndTxnRequest{Session: c.session(), Commit: true,
		NextPartitions: []*sluicev1.TxnTopic{{Topic: "t", Partitions: []int32{1}}}}))
	if err != nil {
		t.Fatal(err)
	}
	if n := resp.Msg.NextPartitions; len(n) != 1 || n[0].Topic != "t" || fmt.Sprint(n[0].Partitions) != "[1]" {
		t.Fatalf("EndTxn's next_partitions = %v, want t [1]", n)
	}
	c.epoch = resp.Msg.ProducerEpoch
	clear(c.seq)
	if err := c.send("t", 1); err != nil {
		t.Fatalf("a batch to the partition the EndTxn named, not added: %v", err)
	}
	wantReason(t, "a batch to a partition neither named nor added", c.send("t", 2), connect.CodeFailedPrecondition, ingest.ReasonInvalidTxnState)
	// The opened transaction is open: read_committed holds at its batch.
	lsoOf := func(p int32) int64 {
		cons := sluicev1connect.NewConsumerServiceClient(http.DefaultClient, tc.url)
		r, err := cons.Fetch(ctx, connect.NewRequest(&sluicev1.FetchRequest{Topic: "t", Partition: p, ReadCommitted: true}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg.LastStableOffset
	}
	if lso := lsoOf(1); lso != 0 {
		t.Fatalf("LSO of p1 with the next transaction's batch open = %d, want 0", lso)
	}
	if err := c.end(true); err != nil {
		t.Fatal(err)
	}
	if lso := lsoOf(1); lso != 2 {
		t.Fatalf("LSO of p1 after the commit = %d, want 2 (its record and marker)", lso)
	}
}

// fetchOffsets reads partition 0 of topic from offset with a Fetch and
// returns the offsets of the records, the next offset and the LSO.
func fetchOffsets(t *testing.T, url, topic string, offset int64, committed, batches bool, waitMS int32) (offs []int64, next, lso int64) {
	t.Helper()
	cons := sluicev1connect.NewConsumerServiceClient(http.DefaultClient, url)
	resp, err := cons.Fetch(context.Background(), connect.NewRequest(&sluicev1.FetchRequest{Topic: topic, Offset: offset, ReadCommitted: committed, RecordBatches: batches, MaxWaitMs: waitMS}))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Msg.Records {
		offs = append(offs, r.Offset)
	}
	for _, run := range resp.Msg.RecordBatches {
		for rest := run; len(rest) > 0; {
			b, r, err := record.Split(rest)
			if err != nil {
				t.Fatal(err)
			}
			rest = r
			if b.Attributes().Control() {
				t.Fatalf("a control batch at offset %d was delivered", b.BaseOffset())
			}
			for o := max(b.BaseOffset(), offset); o <= b.LastOffset(); o++ {
				offs = append(offs, o)
			}
		}
	}
	return offs, resp.Msg.NextOffset, resp.Msg.LastStableOffset
}

// read_committed shows records written outside transactions and those of
// committed ones, never an open or aborted transaction's, and holds at the
// last stable offset until the oldest open transaction ends; a long poll
// held there returns once it does. Markers are never delivered, in either
// isolation, as records or as batches.
func TestReadCommitted(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	prod := sluicev1connect.NewProducerServiceClient(http.DefaultClient, tc.url)
	plain := func() {
		t.Helper()
		p := int32(0)
		if _, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p, Records: []*sluicev1.Record{{Value: []byte("plain")}}})); err != nil {
			t.Fatal(err)
		}
	}
	a, err := newTxnClient(t, tc.url, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newTxnClient(t, tc.url, "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	plain() // 0
	if err := a.add("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := b.add("t", 0); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return a.send("t", 0) }, // 1
		func() error { return a.send("t", 0) }, // 2
		func() error { return b.send("t", 0) }, // 3
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	plain() // 4

	// check reads from offset 0 as a consumer does, on from each answer's
	// next offset until one brings nothing new.
	check := func(what string, committed bool, want []int64, wantNext, wantLSO int64) {
		t.Helper()
		for _, batches := range []bool{false, true} {
			var got []int64
			next, lso := int64(0), int64(0)
			for {
				offs, n, l := fetchOffsets(t, tc.url, "t", next, committed, batches, 0)
				got = append(got, offs...)
				if n == next && len(offs) == 0 {
					lso = l
					break
				}
				next = n
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || next != wantNext || lso != wantLSO {
				t.Fatalf("%s (batches %v): offsets %v next %d LSO %d; want %v next %d LSO %d", what, batches, got, next, lso, want, wantNext, wantLSO)
			}
		}
	}
	check("both open, read_committed", true, []int64{0}, 1, 1)
	stable := func() int64 {
		t.Helper()
		resp, err := admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "t"}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.Topic.Partitions[0].LastStableOffset
	}
	if got := stable(); got != 1 {
		t.Fatalf("DescribeTopic's last stable offset with both open: %d; want 1", got)
	}
	// A group's lag report: the end and the LSO against its committed
	// offset (none: from the log start).
	bk := tc.c.Bookkeeping
	if err := bk.Join(ctx, "g", bookkeeping.Member{ID: "m1", SessionTimeout: time.Minute, Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bk.Acquire(ctx, "g", "t", 0, "m1"); err != nil {
		t.Fatal(err)
	}
	groupLag := func(what string, wantEnd, wantLag, wantLSO, wantStableLag int64) {
		t.Helper()
		resp, err := admin.DescribeGroup(ctx, connect.NewRequest(&sluicev1.DescribeGroupRequest{Group: "g"}))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Msg.Partitions) != 1 {
			t.Fatalf("%s: DescribeGroup lists %d partitions; want 1", what, len(resp.Msg.Partitions))
		}
		gp := resp.Msg.Partitions[0]
		if gp.EndOffset != wantEnd || gp.Lag != wantLag || gp.LastStableOffset != wantLSO || gp.StableLag != wantStableLag {
			t.Fatalf("%s: DescribeGroup end %d lag %d LSO %d stable lag %d; want %d %d %d %d", what,
				gp.EndOffset, gp.Lag, gp.LastStableOffset, gp.StableLag, wantEnd, wantLag, wantLSO, wantStableLag)
		}
	}
	groupLag("both open", 5, 5, 1, 1)
	check("both open, read_uncommitted", false, []int64{0, 1, 2, 3, 4}, 5, 0)

	if err := a.end(false); err != nil { // abort marker at 5
		t.Fatal(err)
	}
	check("a aborted, b open", true, []int64{0}, 3, 3)

	// A long poll held at the LSO returns once b commits.
	type result struct {
		offs []int64
		took time.Duration
	}
	polled := make(chan result, 1)
	go func() {
		start := time.Now()
		offs, _, _ := fetchOffsets(t, tc.url, "t", 3, true, false, 10_000)
		polled <- result{offs, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond)
	if err := b.end(true); err != nil { // commit marker at 6
		t.Fatal(err)
	}
	r := <-polled
	if fmt.Sprint(r.offs) != "[3 4]" || r.took > 5*time.Second {
		t.Fatalf("long poll from the LSO: offsets %v after %v; want [3 4] soon after the commit", r.offs, r.took)
	}
	check("a aborted, b committed", true, []int64{0, 3, 4}, 7, 7)
	if got := stable(); got != 7 {
		t.Fatalf("DescribeTopic's last stable offset after both ended: %d; want 7", got)
	}
	groupLag("both ended", 7, 7, 7, 7)
	check("read_uncommitted after both ended", false, []int64{0, 1, 2, 3, 4}, 7, 0)
}

// Consumer offsets sent to a transaction are committed for the group when
// it commits, and dropped when it aborts; offsets of a partition the
// member does not hold at the epoch given are refused (LEASE_FENCED).
func TestTransactionOffsets(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	for _, name := range []string{"in", "out"} {
		if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: name, Partitions: 2})); err != nil {
			t.Fatal(err)
		}
	}
	// A member of group "copier" holding both partitions of "in" (the
	// group's bookkeeping, as a fetch copy's session would write it).
	bk := tc.c.Bookkeeping
	if err := bk.Join(ctx, "copier", bookkeeping.Member{ID: "m1", SessionTimeout: time.Minute, Topics: []string{"in"}}); err != nil {
		t.Fatal(err)
	}
	var epochs [2]int64
	for p := range epochs {
		e, err := bk.Acquire(ctx, "copier", "in", int32(p), "m1")
		if err != nil {
			t.Fatal(err)
		}
		epochs[p] = e
	}
	c, err := newTxnClient(t, tc.url, "copier-0", 0)
	if err != nil {
		t.Fatal(err)
	}
	send := func(member string, offsets ...*sluicev1.TxnPartitionOffset) error {
		_, err := c.prod.SendOffsetsToTxn(ctx, connect.NewRequest(&sluicev1.SendOffsetsToTxnRequest{
			Session: c.session(), Group: "copier", MemberId: member, Topic: "in", Offsets: offsets}))
		return err
	}
	committed := func(p int32) int64 {
		t.Helper()
		o, err := bk.FetchOffset(ctx, "copier", "in", p)
		if errors.Is(err, bookkeeping.ErrNotFound) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return o.Offset
	}

	// Committed with the output.
	if err := c.add("out", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.send("out", 0); err != nil {
		t.Fatal(err)
	}
	if err := send("m1", &sluicev1.TxnPartitionOffset{Partition: 0, Offset: 10, LeaseEpoch: epochs[0]}, &sluicev1.TxnPartitionOffset{Partition: 1, Offset: 20, LeaseEpoch: epochs[1]}); err != nil {
		t.Fatal(err)
	}
	if committed(0) != -1 {
		t.Fatalf("offset committed before the transaction: %d", committed(0))
	}
	if err := c.end(true); err != nil {
		t.Fatal(err)
	}
	if committed(0) != 10 || committed(1) != 20 {
		t.Fatalf("after the commit: offsets %d, %d; want 10, 20", committed(0), committed(1))
	}

	// Dropped with an abort.
	if err := send("m1", &sluicev1.TxnPartitionOffset{Partition: 0, Offset: 30, LeaseEpoch: epochs[0]}); err != nil {
		t.Fatal(err)
	}
	if err := c.end(false); err != nil {
		t.Fatal(err)
	}
	if committed(0) != 10 {
		t.Fatalf("after the abort: offset %d; want 10", committed(0))
	}

	// Fenced: another member, an old epoch.
	wantReason(t, "offsets of another member", send("m2", &sluicev1.TxnPartitionOffset{Partition: 0, Offset: 40, LeaseEpoch: epochs[0]}),
		connect.CodeFailedPrecondition, ingest.ReasonLeaseFenced)
	wantReason(t, "offsets at another lease epoch", send("m1", &sluicev1.TxnPartitionOffset{Partition: 0, Offset: 40, LeaseEpoch: epochs[0] + 1}),
		connect.CodeFailedPrecondition, ingest.ReasonLeaseFenced)
}

// A read_committed Fetch held at the last stable offset learns that the
// transaction holding it ended even when the marker went to a newer
// ledger than the one the reader last saw (a roll-over, or a new writer
// after a crash): the LSO comes from the tail, so a read that stops in an
// older ledger still asks the tail. Found by `sluice copy` under a kill -9
// of sluice dev: B's partition stayed at LSO 0 for good.
func TestReadCommittedLearnsTheLSOFromANewLedger(t *testing.T) {
	tc := startCluster(t, func(c *cluster.Config) { c.Ingest.Writer.RollAge = time.Second })
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	a, err := newTxnClient(t, tc.url, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.add("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := a.send("t", 0); err != nil { // offset 0, open
		t.Fatal(err)
	}
	// The reader sees the open transaction in the first ledger.
	if offs, next, lso := fetchOffsets(t, tc.url, "t", 0, true, false, 0); len(offs) != 0 || next != 0 || lso != 0 {
		t.Fatalf("read_committed with the transaction open: offsets %v next %d LSO %d; want none, 0, 0", offs, next, lso)
	}
	// The writer rolls over; the abort marker and a plain record go to
	// the new ledger.
	time.Sleep(1500 * time.Millisecond)
	prod := sluicev1connect.NewProducerServiceClient(http.DefaultClient, tc.url)
	p := int32(0)
	if _, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "t", Partition: &p, Records: []*sluicev1.Record{{Value: []byte("plain")}}})); err != nil {
		t.Fatal(err)
	}
	if err := a.end(false); err != nil {
		t.Fatal(err)
	}
	d, err := admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if pi := d.Msg.Topic.Partitions[0]; pi.EndOffset != 3 || pi.LastStableOffset != 3 {
		t.Fatalf("the writer reports end %d LSO %d; want 3 3 (record, plain record, marker)", pi.EndOffset, pi.LastStableOffset)
	}
	// The same reader, without waiting, as a client polling would: within
	// a second (not the chain cache's 30 s) it reads on past the aborted
	// record to the plain one.
	deadline := time.Now().Add(time.Second)
	for {
		var got []int64
		next, lso := int64(0), int64(0)
		for {
			offs, n, l := fetchOffsets(t, tc.url, "t", next, true, false, 0)
			got = append(got, offs...)
			if n == next {
				lso = l
				break
			}
			next = n
		}
		if fmt.Sprint(got) == "[1]" && next == 3 && lso == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read_committed after the abort in a new ledger: offsets %v next %d LSO %d; want [1] 3 3", got, next, lso)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CommitTxn stores a transaction's last batches and commits it in one call:
// read_committed readers see them at once. A retry of the decided call
// answers the same session and stores nothing twice. A batch to a partition
// not added fails the call and decides nothing (the transaction stays open
// at its epoch), and anything but the session's transactional batches is
// refused.
func TestCommitTxnStoresThenCommits(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	admin := sluicev1connect.NewAdminServiceClient(http.DefaultClient, tc.url)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "t", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	c, err := newTxnClient(t, tc.url, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.add("t", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.send("t", 0); err != nil { // offset 0
		t.Fatal(err)
	}
	req := &sluicev1.CommitTxnRequest{Session: c.session(), Produce: []*sluicev1.ProduceRequest{c.batches("t", 0)}} // offset 1
	first, err := c.prod.CommitTxn(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if first.Msg.ProducerEpoch != c.epoch+1 {
		t.Fatalf("CommitTxn answered epoch %d; want the bump to %d", first.Msg.ProducerEpoch, c.epoch+1)
	}
	again, err := c.prod.CommitTxn(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("a retry of the decided CommitTxn: %v; want its outcome", err)
	}
	if again.Msg.ProducerEpoch != first.Msg.ProducerEpoch || again.Msg.ProducerId != first.Msg.ProducerId {
		t.Fatalf("the retry answered %v; the call %v", again.Msg, first.Msg)
	}
	if offs, lso := readCommitted(t, tc.url, "t"); !slices.Equal(offs, []int64{0, 1}) || lso != 3 {
		t.Fatalf("read_committed after CommitTxn and its retry: offsets %v, LSO %d; want [0 1] and 3 (the marker at 2)", offs, lso)
	}

	c.epoch, c.pid = first.Msg.ProducerEpoch, cmp.Or(first.Msg.ProducerId, c.pid)
	clear(c.seq)
	if err := c.add("t", 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.prod.CommitTxn(ctx, connect.NewRequest(&sluicev1.CommitTxnRequest{Session: c.session(), Produce: []*sluicev1.ProduceRequest{c.batches("t", 1)}}))
	wantReason(t, "CommitTxn with a batch to a partition not added", err, connect.CodeFailedPrecondition, ingest.ReasonInvalidTxnState)
	if err := c.send("t", 0); err != nil {
		t.Fatalf("the transaction's epoch after a failed CommitTxn: %v; want it still open", err)
	}

	plain := int32(0)
	for name, bad := range map[string]*sluicev1.ProduceRequest{
		"records":                   {Topic: "t", Partition: &plain, Records: []*sluicev1.Record{{Value: []byte("v")}}},
		"a non-transactional batch": {Topic: "t", Batches: []*sluicev1.EncodedBatch{{Partition: 0, Data: plainBatch(t)}}},
	} {
		_, err := c.prod.CommitTxn(ctx, connect.NewRequest(&sluicev1.CommitTxnRequest{Session: c.session(), Produce: []*sluicev1.ProduceRequest{bad}}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("CommitTxn carrying %s: %v; want INVALID_ARGUMENT", name, err)
		}
	}
	if err := c.end(true); err != nil {
		t.Fatal(err)
	}
	if offs, lso := readCommitted(t, tc.url, "t"); !slices.Equal(offs, []int64{0, 1, 3}) || lso != 5 {
		t.Fatalf("read_committed at the end: offsets %v, LSO %d; want [0 1 3] (nothing of the refused calls) and 5", offs, lso)
	}
}

// readCommitted reads partition 0 of topic from offset 0 as a read_committed
// consumer does, on from each answer's next offset until one brings
// nothing new, and returns the offsets and the last answer's LSO.
func readCommitted(t *testing.T, url, topic string) (offs []int64, lso int64) {
	t.Helper()
	for next := int64(0); ; {
		got, n, l := fetchOffsets(t, url, topic, next, true, false, 0)
		offs, lso = append(offs, got...), l
		if n == next {
			return offs, lso
		}
		next = n
	}
}

// plainBatch is a batch of one record outside any producer session.
func plainBatch(t *testing.T) []byte {
	t.Helper()
	b, err := record.NewBuilder(record.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(&record.Record{Timestamp: 1, Value: []byte("plain")}); err != nil {
		t.Fatal(err)
	}
	data, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return data
}
