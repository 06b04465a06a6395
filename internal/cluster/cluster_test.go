package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sluicemq/sluice/internal/apierr"
	"github.com/sluicemq/sluice/internal/quota"
	"github.com/sluicemq/sluice/pkg/catalog"
	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
	"github.com/sluicemq/sluice/services/ingest"
)

// h2c is the cleartext HTTP/2 client the tests call the cluster with.
var h2c = sharedPeers.HTTP

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a cluster on dir until the test ends (or stop is called).
func start(t *testing.T, dir string) (c *Cluster, stop func()) {
	t.Helper()
	return startWith(t, Config{Dir: dir, Addr: "127.0.0.1:0"})
}

// startWith runs a cluster configured by cfg until the test ends (or stop
// is called).
func startWith(t *testing.T, cfg Config) (c *Cluster, stop func()) {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cluster Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return c, stop
}

func clients(c *Cluster, opts ...connect.ClientOption) (sluicev1connect.AdminServiceClient, sluicev1connect.ProducerServiceClient) {
	url := "http://" + c.Addr()
	return sluicev1connect.NewAdminServiceClient(h2c, url, opts...), sluicev1connect.NewProducerServiceClient(h2c, url, opts...)
}

// Produce end to end: a topic is created, records go in over gRPC and
// Connect JSON (curl's way), offsets are dense per partition and returned in
// request order, the stored ledgers hold exactly those records, and after a
// restart on the same directory the next produce continues after them.
func TestProduceEndToEnd(t *testing.T) {
	dir := t.TempDir()
	c, stop := start(t, dir)
	admin, prod := clients(c, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "orders", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	var recs []*sluicev1.Record
	for i := range 5 {
		recs = append(recs, &sluicev1.Record{Value: fmt.Appendf(nil, "v%d", i)})
	}
	resp, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Partition: &p0, Records: recs}))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Msg.GetResults() {
		if r.GetPartition() != 0 || r.GetOffset() != int64(i) {
			t.Fatalf("result %d = %v", i, r)
		}
	}

	// Connect JSON over HTTP/1.1, as curl sends it.
	body := `{"topic":"orders","partition":0,"records":[{"key":"` + b64("k") + `","value":"` + b64("json") + `"}]}`
	hresp, err := http.Post("http://"+c.Addr()+"/sluice.v1.ProducerService/Produce", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	var jr struct {
		Results []struct {
			Partition int    `json:"partition"`
			Offset    string `json:"offset"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &jr); err != nil || hresp.StatusCode != 200 || len(jr.Results) != 1 || jr.Results[0].Offset != "5" {
		t.Fatalf("JSON produce: %d %s (%v)", hresp.StatusCode, raw, err)
	}

	// Bad input names the field.
	_, err = prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Partition: ptr(int32(7)), Records: recs}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "partition") {
		t.Fatalf("bad partition: %v", err)
	}
	_, err = prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "nope", Records: recs}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown topic: %v", err)
	}

	desc, err := admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "orders"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := desc.Msg.GetTopic().GetPartitions()[0]; p.GetOwnerId() != "ingest-1" || p.GetOwner() != c.Addr() || p.GetEndOffset() != 6 {
		t.Fatalf("partition 0 described as %v", p)
	}

	stop()
	c, _ = start(t, dir)
	_, prod = clients(c, connect.WithGRPC())
	resp, err = prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "orders", Partition: &p0, Records: recs[:1]}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Msg.GetResults()[0].GetOffset(); got != 6 {
		t.Fatalf("first offset after restart = %d; want 6", got)
	}

	// The ledgers of partition 0 hold offsets 0..6 in order.
	part, err := c.Catalog.GetPartition(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for _, ref := range part.Ledgers {
		m, err := c.Catalog.GetLedger(ctx, ref.ID)
		if err != nil {
			t.Fatal(err)
		}
		last := m.LastEntry
		if !m.State.Sealed() {
			r, err := c.Ledgers.OpenReader(ctx, ref.ID)
			if err != nil {
				t.Fatal(err)
			}
			if last, err = r.WaitLAC(ctx, -1); err != nil {
				t.Fatal(err)
			}
		}
		if last < 0 {
			continue
		}
		ents, err := c.Ledgers.ReadEntries(ctx, ref.ID, 0, last)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			for rest := e; len(rest) > 0; {
				b, r, err := record.Split(rest)
				if err != nil {
					t.Fatal(err)
				}
				if b.BaseOffset() != next {
					t.Fatalf("ledger %d: batch at %d; want %d", ref.ID, b.BaseOffset(), next)
				}
				next, rest = b.NextOffset(), r
			}
		}
	}
	if next != 7 {
		t.Fatalf("ledgers hold offsets up to %d; want 7", next)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func ptr[T any](v T) *T { return &v }

// Any copy accepts any produce: a partition owned by another copy is
// forwarded to it; a graceful stop hands the partition over at once (the
// next copy takes it without waiting for the lease to expire) and offsets
// continue where they were.
func TestForwardingAndHandOver(t *testing.T) {
	c, _ := startWith(t, Config{Dir: t.TempDir(), Addr: "127.0.0.1:0", ExtraIngest: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, prod := clients(c, connect.WithGRPC())
	prod2 := sluicev1connect.NewProducerServiceClient(h2c, "http://"+c.Extra[0].Addr(), connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "fwd", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	produce := func(p sluicev1connect.ProducerServiceClient, n int) []int64 {
		t.Helper()
		var recs []*sluicev1.Record
		for i := range n {
			recs = append(recs, &sluicev1.Record{Value: fmt.Appendf(nil, "r%d", i)})
		}
		var resp *connect.Response[sluicev1.ProduceResponse]
		var err error
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err = p.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "fwd", Partition: ptr(int32(0)), Records: recs}))
			if connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond) // ownership moving: retry, as clients do
		}
		if err != nil {
			t.Fatal(err)
		}
		var offs []int64
		for _, r := range resp.Msg.GetResults() {
			offs = append(offs, r.GetOffset())
		}
		return offs
	}
	// The extra copy takes partition 0 with the first produce it gets.
	waitOwnerLive(t, c, "ingest-2")
	if got := produce(prod2, 3); got[0] != 0 || got[2] != 2 {
		t.Fatalf("offsets via the owner: %v", got)
	}
	// The main copy forwards to it.
	if got := produce(prod, 2); got[0] != 3 || got[1] != 4 {
		t.Fatalf("offsets via forwarding: %v", got)
	}
	p, err := c.Catalog.GetPartition(ctx, "fwd", 0)
	if err != nil || p.Owner != "ingest-2" {
		t.Fatalf("partition 0 owner %q (%v); want ingest-2", p.Owner, err)
	}
	// The main copy does not write partition 0, and describes its exact
	// end anyway: it asks the owner (the catalog knows only that the open
	// tail starts at 0).
	desc, err := admin.DescribeTopic(ctx, connect.NewRequest(&sluicev1.DescribeTopicRequest{Name: "fwd"}))
	if err != nil {
		t.Fatal(err)
	}
	if d := desc.Msg.GetTopic().GetPartitions()[0]; d.GetEndOffset() != 5 || d.GetLastStableOffset() != 5 || d.GetEndOffsetLowerBound() || d.GetOwnerId() != "ingest-2" {
		t.Fatalf("partition 0 described by a non-owner: %v; want end 5, stable 5, exact, owner ingest-2", d)
	}
	// Graceful stop: hand-over, and the main copy takes over at once.
	if err := c.Extra[0].Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := produce(prod, 1); got[0] != 5 {
		t.Fatalf("offset after hand-over: %v; want 5", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("take-over after a graceful stop took %v", d)
	}
	p, err = c.Catalog.GetPartition(ctx, "fwd", 0)
	if err != nil || p.Owner != "ingest-1" || p.Epoch != 2 {
		t.Fatalf("partition 0 = owner %q epoch %d (%v); want ingest-1, epoch 2", p.Owner, p.Epoch, err)
	}
}

// Batches forwarded to a partition's owner keep their order and are
// pipelined: an idempotent producer streaming hundreds of one-record
// batches through a copy that does not own the partition has every one
// stored once, in produce order, with no sequence error.
func TestForwardingKeepsOrderPipelined(t *testing.T) {
	c, _ := startWith(t, Config{Dir: t.TempDir(), Addr: "127.0.0.1:0", ExtraIngest: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, _ := clients(c, connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "fwdp", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	waitOwnerLive(t, c, "ingest-2")
	prod2 := sluicev1connect.NewProducerServiceClient(h2c, "http://"+c.Extra[0].Addr(), connect.WithGRPC())
	waitUntil(t, 20*time.Second, func() bool { // the extra copy takes the partition with its first produce
		_, err := prod2.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "fwdp", Partition: ptr(int32(0)), Records: []*sluicev1.Record{{Value: []byte("first")}}}))
		return err == nil
	})
	part, err := c.Catalog.GetPartition(ctx, "fwdp", 0)
	if err != nil || part.Owner != "ingest-2" {
		t.Fatalf("owner %q (%v); want ingest-2", part.Owner, err)
	}
	first, ok := c.Extra[0].Ingest.EndOffset(part.TopicID, 0)
	if !ok {
		t.Fatal("the owner has no end offset for fwdp/0")
	}
	cl, err := sluice.NewClient(c.Addr()) // the main copy: every batch is forwarded
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := cl.NewProducer(sluice.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	var mu sync.Mutex
	offs := make([]int64, n)
	for i := range n {
		p.Produce(ctx, &sluice.Record{Topic: "fwdp", Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}, func(r sluice.Result) {
			mu.Lock()
			defer mu.Unlock()
			if r.Err != nil {
				t.Errorf("record %d: %v", i, r.Err)
			}
			offs[i] = r.Offset
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, o := range offs {
		if o != first+int64(i) {
			t.Fatalf("record %d at offset %d; want %d (stored once, in order)", i, o, first+int64(i))
		}
	}
}

// A copy that shuts down ends its open ProduceStreams with UNAVAILABLE
// after answering what they hold, instead of waiting for the producer to
// hang up (the server's shutdown would wait its whole timeout).
func TestShutdownEndsProduceStreams(t *testing.T) {
	const ingestShutdownWait = 10 * time.Second // rpcserver's default ShutdownTimeout
	c, _ := startWith(t, Config{Dir: t.TempDir(), Addr: "127.0.0.1:0", ExtraIngest: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, _ := clients(c, connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "drain", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	waitOwnerLive(t, c, "ingest-2")
	prod2 := sluicev1connect.NewProducerServiceClient(h2c, "http://"+c.Extra[0].Addr(), connect.WithGRPC())
	stream := prod2.ProduceStream(ctx)
	defer stream.CloseResponse()
	req := &sluicev1.ProduceStreamRequest{CorrelationId: 1, Request: &sluicev1.ProduceRequest{Topic: "drain", Records: []*sluicev1.Record{{Value: []byte("v")}}}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Receive(); err != nil || resp.GetError() != nil {
		t.Fatalf("first answer: %v, %v", resp, err)
	}
	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- c.Extra[0].Stop() }()
	// The producer keeps its stream open; the copy ends it.
	_, err := stream.Receive()
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("stream after the copy's shutdown: %v; want UNAVAILABLE", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= ingestShutdownWait {
		t.Fatalf("the copy took %v to stop with a producer connected; the stream held it for the server's shutdown timeout", d)
	}
}

func waitOwnerLive(t *testing.T, c *Cluster, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if o, err := c.Catalog.GetOwner(context.Background(), id); err == nil && o.LiveAt(time.Now()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("owner %s not registered", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ProduceStream pipelines: requests sent without waiting are answered in
// order, each with its correlation id, with offsets in send order.
func TestProduceStreamPipelines(t *testing.T) {
	c, _ := start(t, t.TempDir())
	admin, prod := clients(c, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "s", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	waitOwnerLive(t, c, "ingest-1")
	stream := prod.ProduceStream(ctx)
	const n = 200
	go func() {
		for i := range n {
			req := &sluicev1.ProduceStreamRequest{CorrelationId: uint64(1000 + i), Request: &sluicev1.ProduceRequest{
				Topic: "s", Records: []*sluicev1.Record{{Value: fmt.Appendf(nil, "m%d", i)}, {Value: []byte("second")}}}}
			if i == 7 {
				req.Request.Topic = "missing" // a failed request does not end the stream
			}
			if err := stream.Send(req); err != nil {
				t.Error(err)
				return
			}
		}
		_ = stream.CloseRequest()
	}()
	next := int64(0)
	for i := range n {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if resp.GetCorrelationId() != uint64(1000+i) {
			t.Fatalf("answer %d has correlation id %d", i, resp.GetCorrelationId())
		}
		if i == 7 {
			if resp.GetError().GetCode() != int32(connect.CodeNotFound) {
				t.Fatalf("answer 7 = %v; want NOT_FOUND", resp)
			}
			continue
		}
		res := resp.GetResponse().GetResults()
		if len(res) != 2 || res[0].GetOffset() != next || res[1].GetOffset() != next+1 {
			t.Fatalf("answer %d = %v; want offsets %d, %d", i, resp, next, next+1)
		}
		next += 2
	}
	if err := stream.CloseResponse(); err != nil {
		t.Fatal(err)
	}
}

// With any_order, every request is answered once with its correlation id,
// and the answers of each partition come in send order with dense offsets
// (whatever the order across partitions).
func TestProduceStreamAnswersInAnyOrder(t *testing.T) {
	c, _ := start(t, t.TempDir())
	admin, prod := clients(c, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const parts, n = 4, 400
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "u", Partitions: parts})); err != nil {
		t.Fatal(err)
	}
	waitOwnerLive(t, c, "ingest-1")
	stream := prod.ProduceStream(ctx)
	go func() {
		for i := range n {
			p := int32(i % parts)
			req := &sluicev1.ProduceStreamRequest{CorrelationId: uint64(i), AnyOrder: true, Request: &sluicev1.ProduceRequest{
				Topic: "u", Partition: &p, Records: []*sluicev1.Record{{Value: fmt.Appendf(nil, "m%d", i)}}}}
			if i == 9 {
				req.Request.Topic = "missing"
			}
			if err := stream.Send(req); err != nil {
				t.Error(err)
				return
			}
		}
		_ = stream.CloseRequest()
	}()
	seen := map[uint64]bool{}
	next := make([]int64, parts)
	lastIdx := make([]int, parts)
	for p := range lastIdx {
		lastIdx[p] = -1
	}
	for range n {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatalf("receive after %d answers: %v", len(seen), err)
		}
		id := resp.GetCorrelationId()
		if id >= n || seen[id] {
			t.Fatalf("answer for correlation id %d (seen before: %v)", id, seen[id])
		}
		seen[id] = true
		if id == 9 {
			if resp.GetError().GetCode() != int32(connect.CodeNotFound) {
				t.Fatalf("answer 9 = %v; want NOT_FOUND", resp)
			}
			continue
		}
		p := int(id) % parts
		res := resp.GetResponse().GetResults()
		if len(res) != 1 || res[0].GetPartition() != int32(p) || res[0].GetOffset() != next[p] || int(id) < lastIdx[p] {
			t.Fatalf("answer %d = %v; want partition %d offset %d after request %d", id, resp, p, next[p], lastIdx[p])
		}
		next[p]++
		lastIdx[p] = int(id)
	}
	if err := stream.CloseResponse(); err != nil {
		t.Fatal(err)
	}
}

// An idempotent producer's batches (encoded client-side, as the SDK does)
// are deduplicated: a retry returns the original offset and is not written
// again, also after the whole cluster restarted (the new writer rebuilds
// the producer state from the ledgers); a sequence gap is refused.
func TestIdempotentBatchesEndToEnd(t *testing.T) {
	dir := t.TempDir()
	c, stop := start(t, dir)
	admin, prod := clients(c, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "idem", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	waitOwnerLive(t, c, "ingest-1")
	batch := func(seq int32, n int) []byte {
		b, err := record.NewBuilder(record.BuilderOptions{Codec: record.CodecZstd, Producer: &record.Producer{ID: 77, BaseSequence: seq}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := b.Append(&record.Record{Value: fmt.Appendf(nil, "value %d", int(seq)+i), Timestamp: 1}); err != nil {
				t.Fatal(err)
			}
		}
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	send := func(p sluicev1connect.ProducerServiceClient, data []byte) (*sluicev1.ProduceResult, error) {
		resp, err := p.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "idem", Batches: []*sluicev1.EncodedBatch{{Partition: 0, Data: data}}}))
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetResults()[0], nil
	}
	if r, err := send(prod, batch(0, 4)); err != nil || r.GetOffset() != 0 || r.GetDuplicate() {
		t.Fatalf("first batch: %v, %v", r, err)
	}
	if r, err := send(prod, batch(4, 2)); err != nil || r.GetOffset() != 4 {
		t.Fatalf("second batch: %v, %v", r, err)
	}
	if r, err := send(prod, batch(4, 2)); err != nil || r.GetOffset() != 4 || !r.GetDuplicate() {
		t.Fatalf("retry: %v, %v; want duplicate at 4", r, err)
	}
	if _, err := send(prod, batch(9, 1)); connect.CodeOf(err) != connect.CodeFailedPrecondition || apierr.Reason(err) != ingest.ReasonOutOfOrderSequence {
		t.Fatalf("sequence gap: %v (reason %q); want FailedPrecondition, reason %s", err, apierr.Reason(err), ingest.ReasonOutOfOrderSequence)
	}
	stop()
	c, _ = start(t, dir)
	_, prod = clients(c, connect.WithGRPC())
	waitOwnerLive(t, c, "ingest-1")
	if r, err := send(prod, batch(4, 2)); err != nil || r.GetOffset() != 4 || !r.GetDuplicate() {
		t.Fatalf("retry after restart: %v, %v; want duplicate at 4", r, err)
	}
	if r, err := send(prod, batch(6, 1)); err != nil || r.GetOffset() != 6 || r.GetDuplicate() {
		t.Fatalf("next batch after restart: %v, %v; want 6", r, err)
	}
}

// Two ingest copies split a topic's partitions evenly by balancing alone;
// when one leaves, the other takes all of them.
func TestIngestCopiesBalance(t *testing.T) {
	c, _ := startWith(t, Config{Dir: t.TempDir(), Addr: "127.0.0.1:0", ExtraIngest: 1, Ingest: ingest.Config{BalanceInterval: 100 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, _ := clients(c, connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "bal", Partitions: 8})); err != nil {
		t.Fatal(err)
	}
	owned := func() map[string]int {
		page, err := c.Catalog.ListPartitions(ctx, "bal", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, p := range page.Items {
			n[p.Owner]++
		}
		return n
	}
	waitUntil(t, 20*time.Second, func() bool { n := owned(); return n["ingest-1"] == 4 && n["ingest-2"] == 4 })
	if err := c.Extra[0].Stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return owned()["ingest-1"] == 8 })
}

// slowAcquire delays every AcquireWriter: a slow catalog.
type slowAcquire struct {
	ingest.Catalog
	delay time.Duration
}

func (s slowAcquire) AcquireWriter(ctx context.Context, topic string, partition int, owner string) (catalog.Partition, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return catalog.Partition{}, ctx.Err()
	}
	return s.Catalog.AcquireWriter(ctx, topic, partition, owner)
}

// A balancing round that takes over many partitions from a slow catalog
// lasts longer than the owner TTL; the copy's heartbeats go on meanwhile,
// so its owner record never lapses and every takeover succeeds. (They ran
// on the balancing goroutine: a benchmark with 256 partitions lost its
// ingest copy's ownership after 10 s and stalled.)
func TestHeartbeatsGoOnDuringALongBalancingRound(t *testing.T) {
	const parts, delay = 24, 150 * time.Millisecond
	c, _ := startWith(t, Config{Dir: t.TempDir(), Addr: "127.0.0.1:0",
		Ingest:        ingest.Config{OwnerTTL: time.Second, HeartbeatInterval: 250 * time.Millisecond, BalanceInterval: 100 * time.Millisecond, OpenParallelism: 1},
		IngestCatalog: func(c ingest.Catalog) ingest.Catalog { return slowAcquire{c, delay} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitOwnerLive(t, c, "ingest-1")
	admin, _ := clients(c, connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "many", Partitions: parts})); err != nil {
		t.Fatal(err)
	}
	// One at a time, the round takes ≥ parts × delay = 3.6 s: over three
	// owner TTLs. The owner must stay live the whole time.
	deadline := time.Now().Add(40 * time.Second)
	for {
		owners, err := c.Catalog.ListLiveOwners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		live := false
		for _, o := range owners {
			live = live || o.ID == "ingest-1"
		}
		if !live {
			t.Fatal("ingest-1's owner record lapsed during the balancing round")
		}
		page, err := c.Catalog.ListPartitions(ctx, "many", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range page.Items {
			if p.Owner == "ingest-1" {
				n++
			}
		}
		if n == parts {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest-1 owns %d of %d partitions after 40 s", n, parts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A client over its byte-rate quota is slowed, not refused: the answer
// reports the throttle time and comes that much later.
func TestProduceQuotaThrottles(t *testing.T) {
	c, _ := startWith(t, Config{Dir: t.TempDir(), Addr: "127.0.0.1:0", Ingest: ingest.Config{
		Quota: quota.Config{Overrides: map[string]quota.Quota{"slow": {BytesPerSecond: 10_000, Burst: 10_000}}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, prod := clients(c, connect.WithGRPC())
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "q", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	waitOwnerLive(t, c, "ingest-1")
	send := func(client string) (*sluicev1.ProduceResponse, time.Duration) {
		req := connect.NewRequest(&sluicev1.ProduceRequest{Topic: "q", Records: []*sluicev1.Record{{Value: make([]byte, 15_000)}}})
		req.Header().Set("Sluice-Client-Id", client)
		start := time.Now()
		resp, err := prod.Produce(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg, time.Since(start)
	}
	if r, _ := send("fast"); r.GetThrottleTimeMs() != 0 {
		t.Fatalf("unthrottled client got throttle %d ms", r.GetThrottleTimeMs())
	}
	r, took := send("slow") // 15 kB against a 10 kB burst at 10 kB/s: 0.5 s in debt
	if r.GetThrottleTimeMs() < 400 || r.GetThrottleTimeMs() > 600 || took < 400*time.Millisecond {
		t.Fatalf("over-quota client: throttle %d ms, answered after %v; want about 500 ms", r.GetThrottleTimeMs(), took)
	}
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Every protocol a client may speak works on the one address: Connect
// (binary and JSON), gRPC, gRPC-web; and gRPC reflection lists the public
// services, so grpcurl and buf curl can call them without the protos.
func TestProduceOverEveryProtocol(t *testing.T) {
	c, _ := start(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, _ := clients(c)
	if _, err := admin.CreateTopic(ctx, connect.NewRequest(&sluicev1.CreateTopicRequest{Name: "proto", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	waitOwnerLive(t, c, "ingest-1")
	for i, opts := range [][]connect.ClientOption{
		{connect.WithGRPC()},
		{connect.WithGRPCWeb()},
		{}, // Connect, binary
		{connect.WithProtoJSON()},
		{connect.WithGRPCWeb(), connect.WithProtoJSON()},
	} {
		_, prod := clients(c, opts...)
		resp, err := prod.Produce(ctx, connect.NewRequest(&sluicev1.ProduceRequest{Topic: "proto", Records: []*sluicev1.Record{{Value: []byte("x")}}}))
		if err != nil {
			t.Fatalf("protocol %d: %v", i, err)
		}
		if got := resp.Msg.GetResults()[0].GetOffset(); got != int64(i) {
			t.Fatalf("protocol %d: offset %d", i, got)
		}
	}
	stream := grpcreflect.NewClient(h2c, "http://"+c.Addr(), connect.WithGRPC()).NewStream(ctx)
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = stream.Close()
	want := map[protoreflect.FullName]bool{"sluice.v1.ProducerService": false, "sluice.v1.AdminService": false}
	for _, n := range names {
		if _, ok := want[n]; ok {
			want[n] = true
		}
	}
	for n, found := range want {
		if !found {
			t.Errorf("reflection does not list %s (it lists %v)", n, names)
		}
	}
}
