package sluice_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluicemq/sluice/pkg/gen/sluice/v1"
	"github.com/sluicemq/sluice/pkg/gen/sluice/v1/sluicev1connect"
	"github.com/sluicemq/sluice/pkg/record"
	"github.com/sluicemq/sluice/pkg/sluice"
)

// busyServer is a scripted ProducerService: it answers the first attempt
// of every batch RESOURCE_EXHAUSTED with a retry delay, and stores the
// retry. One topic "t" with one partition.
type busyServer struct {
	sluicev1connect.UnimplementedProducerServiceHandler
	sluicev1connect.UnimplementedAdminServiceHandler
	retryAfter time.Duration
	mu         sync.Mutex
	seen       map[int32]bool // base sequences refused once
	next       int64
}

func (s *busyServer) DescribeTopic(_ context.Context, req *connect.Request[sluicev1.DescribeTopicRequest]) (*connect.Response[sluicev1.DescribeTopicResponse], error) {
	if req.Msg.GetName() != "t" {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such topic"))
	}
	return connect.NewResponse(&sluicev1.DescribeTopicResponse{Topic: &sluicev1.TopicInfo{Name: "t", Partitions: []*sluicev1.PartitionInfo{{}}}}), nil
}

func (s *busyServer) ProduceStream(_ context.Context, st *connect.BidiStream[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse]) error {
	for {
		req, err := st.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		b := record.Batch(req.GetRequest().GetBatches()[0].GetData())
		out := &sluicev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId()}
		s.mu.Lock()
		if !s.seen[b.BaseSequence()] {
			s.seen[b.BaseSequence()] = true
			out.Error = &sluicev1.ProduceError{Code: int32(connect.CodeResourceExhausted), Message: "buffers full", RetryAfterMs: int32(s.retryAfter.Milliseconds())}
		} else {
			out.Response = &sluicev1.ProduceResponse{Results: []*sluicev1.ProduceResult{{Offset: s.next}}}
			s.next += int64(b.RecordCount())
		}
		s.mu.Unlock()
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

// fakeServer is a scripted server for the producer and admin APIs.
type fakeServer interface {
	sluicev1connect.ProducerServiceHandler
	sluicev1connect.AdminServiceHandler
}

// serveFake serves srv over h2c on a loopback port until the test ends
// (register producers' Close before, so it runs first).
func serveFake(t testing.TB, srv fakeServer) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(sluicev1connect.NewProducerServiceHandler(srv))
	mux.Handle(sluicev1connect.NewAdminServiceHandler(srv))
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: mux, Protocols: &protos}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); <-done })
	return ln.Addr().String()
}

// RESOURCE_EXHAUSTED is retried after the server's RetryInfo delay, which
// wins over a shorter backoff.
func TestResourceExhaustedWaitsRetryInfo(t *testing.T) {
	srv := &busyServer{retryAfter: 150 * time.Millisecond, seen: make(map[int32]bool)}
	addr := serveFake(t, srv)
	c, err := sluice.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var retried atomic.Int64
	p, err := c.NewProducer(sluice.WithLinger(0), sluice.WithRetryBackoff(time.Millisecond, 2*time.Millisecond),
		sluice.WithHooks(sluice.Hooks{OnBatchRetried: func(_ sluice.BatchInfo, err error) {
			if connect.CodeOf(err) == connect.CodeResourceExhausted {
				retried.Add(1)
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		if err := p.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Value: []byte("v")})
	if err != nil || r.Offset != 0 {
		t.Fatalf("produce: %+v, %v", r, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("retried after %v; the server asked for 150ms", d)
	}
	if retried.Load() != 1 {
		t.Fatalf("%d RESOURCE_EXHAUSTED retries; want 1", retried.Load())
	}
}

// slowServer stores the first batch it gets but never answers it (until
// the client gives up on the stream); later batches are checked for
// sequence continuity like the real server does, and answered.
type slowServer struct {
	busyServer
	held    atomic.Bool
	nextSeq atomic.Int32
	epochs  sync.Map // epochs seen
}

func (s *slowServer) ProduceStream(ctx context.Context, st *connect.BidiStream[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse]) error {
	for {
		req, err := st.Receive()
		if err != nil {
			return nil
		}
		b := record.Batch(req.GetRequest().GetBatches()[0].GetData())
		s.epochs.Store(b.ProducerEpoch(), true)
		out := &sluicev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId()}
		if b.BaseSequence() != s.nextSeq.Load() {
			out.Error = &sluicev1.ProduceError{Code: int32(connect.CodeFailedPrecondition), Message: "dedup: out of order sequence", Reason: "OUT_OF_ORDER_SEQUENCE"}
		} else {
			s.nextSeq.Add(b.RecordCount())
			s.mu.Lock()
			out.Response = &sluicev1.ProduceResponse{Results: []*sluicev1.ProduceResult{{Offset: s.next}}}
			s.next += int64(b.RecordCount())
			s.mu.Unlock()
			if !s.held.Swap(true) {
				<-ctx.Done() // stored, but the answer never comes
				return ctx.Err()
			}
		}
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

// A batch that passes its delivery timeout in flight fails although the
// server stored it; the stream, which answers nothing more, is reset once
// the batch stays unanswered for half the delivery timeout past its
// deadline. The next batch (sent on the stuck stream, then again on the
// new one) carries the next sequence as a probe: the server accepts it,
// which shows there is no hole, so the epoch is not bumped.
func TestTimedOutButStoredBatchNeedsNoEpochBump(t *testing.T) {
	srv := &slowServer{}
	c, err := sluice.NewClient(serveFake(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var bumps atomic.Int64
	p, err := c.NewProducer(sluice.WithLinger(0), sluice.WithDeliveryTimeout(2*time.Second),
		sluice.WithRetryBackoff(time.Millisecond, 5*time.Millisecond),
		sluice.WithHooks(sluice.Hooks{OnEpochBump: func(string, int32, int64, int16) { bumps.Add(1) }}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		if err := p.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Value: []byte("stored, unanswered")}); !errors.Is(err, sluice.ErrDeliveryTimeout) {
		t.Fatalf("first record: %v; want ErrDeliveryTimeout", err)
	}
	r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Value: []byte("probe")})
	if err != nil || r.Offset != 1 {
		t.Fatalf("probe: %+v, %v; want offset 1", r, err)
	}
	if bumps.Load() != 0 {
		t.Fatalf("%d epoch bumps; want none (no hole)", bumps.Load())
	}
	n := 0
	srv.epochs.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("server saw %d epochs", n)
	}
}

// lateServer serves topic "t" with two partitions. It stores every batch
// at once, but answers the first batch of partition 0 only after delay;
// the rest at once. It counts the streams opened.
type lateServer struct {
	busyServer
	delay   time.Duration
	streams atomic.Int32
	heldOne atomic.Bool
	offsets [2]atomic.Int64
	seqs    [2]atomic.Int32 // next expected sequence
}

func (s *lateServer) DescribeTopic(context.Context, *connect.Request[sluicev1.DescribeTopicRequest]) (*connect.Response[sluicev1.DescribeTopicResponse], error) {
	return connect.NewResponse(&sluicev1.DescribeTopicResponse{Topic: &sluicev1.TopicInfo{Name: "t", Partitions: []*sluicev1.PartitionInfo{{Partition: 0}, {Partition: 1}}}}), nil
}

func (s *lateServer) ProduceStream(ctx context.Context, st *connect.BidiStream[sluicev1.ProduceStreamRequest, sluicev1.ProduceStreamResponse]) error {
	s.streams.Add(1)
	var sendMu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	send := func(out *sluicev1.ProduceStreamResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return st.Send(out)
	}
	for {
		req, err := st.Receive()
		if err != nil {
			return nil
		}
		eb := req.GetRequest().GetBatches()[0]
		b := record.Batch(eb.GetData())
		part := eb.GetPartition()
		if b.BaseSequence() != s.seqs[part].Load() {
			// Sequences are checked as the real server does (one epoch:
			// these tests expect no bump).
			out := &sluicev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(),
				Error: &sluicev1.ProduceError{Code: int32(connect.CodeFailedPrecondition), Message: "dedup: out of order sequence", Reason: "OUT_OF_ORDER_SEQUENCE"}}
			if err := send(out); err != nil {
				return err
			}
			continue
		}
		s.seqs[part].Add(b.RecordCount())
		off := s.offsets[part].Add(int64(b.RecordCount())) - int64(b.RecordCount())
		out := &sluicev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(),
			Response: &sluicev1.ProduceResponse{Results: []*sluicev1.ProduceResult{{Offset: off}}}}
		if eb.GetPartition() == 0 && !s.heldOne.Swap(true) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-time.After(s.delay):
					_ = send(out)
				case <-ctx.Done():
				}
			}()
			continue
		}
		if err := send(out); err != nil {
			return err
		}
	}
}

// lateProducer returns a producer on srv (no linger, delivery timeout 300
// ms, opts) closed when the test ends, a context for it, and a count of
// its epoch bumps.
func lateProducer(t *testing.T, srv *lateServer, opts ...sluice.ProducerOption) (context.Context, *sluice.Producer, *atomic.Int64) {
	t.Helper()
	c, err := sluice.NewClient(serveFake(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	bumps := new(atomic.Int64)
	opts = append([]sluice.ProducerOption{sluice.WithLinger(0), sluice.WithDeliveryTimeout(300 * time.Millisecond),
		sluice.WithHooks(sluice.Hooks{OnEpochBump: func(string, int32, int64, int16) { bumps.Add(1) }})}, opts...)
	p, err := c.NewProducer(opts...)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(func() {
		if err := p.Close(ctx); err != nil {
			t.Error(err)
		}
		cancel()
		c.Close()
	})
	return ctx, p, bumps
}

// A batch that passes its delivery timeout in flight fails, but the
// stream stays up: the other partition's batches in flight on it are
// answered, its late answer is taken (stored: no hole, no epoch bump),
// and the partition goes on. (The stream was reset at every such expiry
// once; after an outage as long as the delivery timeout that kept the
// producer from ever catching up.)
func TestInFlightExpiryKeepsTheStream(t *testing.T) {
	srv := &lateServer{delay: 700 * time.Millisecond}
	ctx, p, bumps := lateProducer(t, srv)
	late := make(chan sluice.Result, 1)
	p.Produce(ctx, &sluice.Record{Topic: "t", Partition: 0, Value: []byte("answered late")}, func(r sluice.Result) { late <- r })
	// Partition 1 keeps producing across partition 0's expiry.
	for i := range 8 {
		r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Partition: 1, Value: []byte("other")})
		if err != nil || r.Offset != int64(i) {
			t.Fatalf("partition 1 record %d: %+v, %v", i, r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := <-late; !errors.Is(r.Err, sluice.ErrDeliveryTimeout) {
		t.Fatalf("late batch: %+v; want ErrDeliveryTimeout", r)
	}
	time.Sleep(srv.delay) // its answer arrives and frees its slot
	r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Partition: 0, Value: []byte("next")})
	if err != nil || r.Offset != 1 {
		t.Fatalf("next record of partition 0: %+v, %v; want offset 1", r, err)
	}
	if n := srv.streams.Load(); n != 1 {
		t.Fatalf("%d streams opened; want 1 (no reset)", n)
	}
	if bumps.Load() != 0 {
		t.Fatalf("%d epoch bumps; want none (the late batch was stored)", bumps.Load())
	}
}

// A batch that expires in its queue before it was ever sent leaves no hole
// in the sequence: batches are numbered when first sent, so the next one
// is accepted in the same epoch. (Numbered when sealed, the expired batch
// held a sequence the server never saw, and the partition had to bump its
// epoch and start over.)
func TestBatchExpiredUnsentLeavesNoHole(t *testing.T) {
	srv := &lateServer{delay: 700 * time.Millisecond}
	ctx, p, bumps := lateProducer(t, srv, sluice.WithMaxInFlightPerPartition(1))
	results := make(chan sluice.Result, 2)
	for _, v := range []string{"sent, answered late", "queued behind it, expires unsent"} {
		p.Produce(ctx, &sluice.Record{Topic: "t", Partition: 0, Value: []byte(v)}, func(r sluice.Result) { results <- r })
	}
	for range 2 {
		if r := <-results; !errors.Is(r.Err, sluice.ErrDeliveryTimeout) {
			t.Fatalf("%+v; want ErrDeliveryTimeout", r)
		}
	}
	time.Sleep(srv.delay) // the first one's answer frees the partition's slot
	r, err := p.ProduceSync(ctx, &sluice.Record{Topic: "t", Partition: 0, Value: []byte("next")})
	if err != nil || r.Offset != 1 {
		t.Fatalf("next record: %+v, %v; want offset 1", r, err)
	}
	if bumps.Load() != 0 {
		t.Fatalf("%d epoch bumps; want none (no hole)", bumps.Load())
	}
}
